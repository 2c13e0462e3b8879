/**
 * Address rules for egress: which resolved addresses a sandbox may never reach (loopback, private,
 * link-local, CGNAT, metadata, multicast, reserved; IPv6 equivalents and IPv4-mapped/NAT64/6to4
 * forms), and recognition of IP literals in every spelling a URL parser or libc accepts
 * (decimal `2130706433`, octal `0177.0.0.1`, hex `0x7f.1`, shorthand `127.1`, IPv6 `[::1]`).
 */
import { BlockList, isIPv4, isIPv6 } from 'node:net';

const blocked = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12],
  ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24],
  ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const) blocked.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [
  ['::', 128], ['::1', 128], ['fc00::', 7], ['fe80::', 10], ['fec0::', 10], ['ff00::', 8], ['100::', 64], ['2001:db8::', 32],
  ['2001::', 32], ['fd00:ec2::', 32],
] as const) blocked.addSubnet(net, bits, 'ipv6');

/** The IPv4 address embedded in an IPv6 one (mapped ::ffff:a.b.c.d, compat, NAT64 64:ff9b::/96, 6to4 2002::/16), if any. */
function embeddedIPv4(v6: string): string | undefined {
  const m = /^(?:::ffff:(?:0:)?|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/i.exec(v6);
  if (m) return m[1];
  const words = expandIPv6(v6);
  if (!words) return undefined;
  const toV4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero5 = words.slice(0, 5).every((w) => w === 0);
  if (zero5 && (words[5] === 0xffff || words[5] === 0)) return toV4(words[6]!, words[7]!);
  if (words[0] === 0x64 && words[1] === 0xff9b && words.slice(2, 6).every((w) => w === 0)) return toV4(words[6]!, words[7]!);
  if (words[0] === 0x2002) return toV4(words[1]!, words[2]!);
  return undefined;
}

function expandIPv6(v6: string): number[] | undefined {
  let s = v6.toLowerCase().replace(/%.*$/, '');
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(s);
  if (v4) {
    const p = v4[1]!.split('.').map(Number);
    s = s.slice(0, -v4[1]!.length) + `${((p[0]! << 8) | p[1]!).toString(16)}:${((p[2]! << 8) | p[3]!).toString(16)}`;
  }
  const [head, tail] = s.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined ? (tail ? tail.split(':') : []) : [];
  const fill = tail !== undefined ? 8 - h.length - t.length : 0;
  const words = [...h, ...Array(fill).fill('0'), ...t].map((w) => parseInt(w, 16));
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined;
}

/** Default predicate: true for every address a sandbox must never reach. */
export function isForbiddenAddress(address: string): boolean {
  if (isIPv4(address)) return blocked.check(address, 'ipv4');
  if (isIPv6(address)) {
    // IPv4 embedded in IPv6 (mapped, NAT64, 6to4) is refused outright: a sandbox has no reason to use it.
    if (embeddedIPv4(address) !== undefined) return true;
    return blocked.check(address, 'ipv6');
  }
  return true; // not an address at all
}

/**
 * If `host` is an IP literal in any spelling, its canonical address (or '?' when it looks numeric but
 * is malformed); undefined for a host name. Follows the WHATWG URL rule: a host whose last label is
 * numeric (decimal, 0x-hex or 0-octal) is an IPv4 address.
 */
export function ipLiteral(host: string): string | undefined {
  const h = host.replace(/^\[|\]$/g, '');
  if (h.includes(':')) return isIPv6(h) ? h.toLowerCase() : '?';
  const labels = h.split('.');
  if (labels[labels.length - 1] === '') labels.pop();
  const last = labels[labels.length - 1] ?? '';
  if (!/^(0x[0-9a-f]*|[0-9]+)$/i.test(last)) return undefined;
  const nums = labels.map((l) => (/^0x[0-9a-f]*$/i.test(l) ? parseInt(l.slice(2) || '0', 16) : /^0[0-7]+$/.test(l) ? parseInt(l, 8) : /^[0-9]+$/.test(l) ? Number(l) : NaN));
  if (nums.some((n) => !Number.isFinite(n)) || nums.length > 4) return '?';
  const lastN = nums.pop()!;
  if (nums.some((n) => n > 255) || lastN >= 256 ** (4 - nums.length)) return '?';
  let value = lastN;
  nums.forEach((n, i) => (value += n * 256 ** (3 - i)));
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}
