/**
 * The forbidden-address table and the allowlist rules: every range of the table refuses its first
 * and last address and names itself (or a block that holds it); global addresses pass; the host's own
 * interface addresses are refused; IP literals in every spelling, localhost, single labels and
 * private-use domains are refused as allowlist entries, and a wildcard under a public suffix too.
 */
import { BlockList, isIP } from 'node:net';
import { networkInterfaces } from 'node:os';
import { ipLiteral, nameMatches, parseEgressEntry, portMatches, type EgressEntry } from '../../src/domain/egress-rules';
import { EgressPattern } from '../../src/domain/run-spec';
import { FORBIDDEN_RANGES, forbiddenRange, forbiddenRangeChecker, hostAddressRanges, isForbiddenAddress } from '../../src/sandbox/egress-address';

/** First and last address of a CIDR block, as strings. */
function bounds(cidr: string): [string, string] {
  const [net, bitsText] = cidr.split('/') as [string, string];
  const bits = Number(bitsText);
  if (isIP(net) === 4) {
    const n = net.split('.').reduce((a, p) => a * 256 + Number(p), 0);
    const size = 2 ** (32 - bits);
    const toIp = (v: number) => [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
    return [toIp(n), toIp(n + size - 1)];
  }
  const words = expand(net);
  const first = [...words];
  const last = [...words];
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    const mask = keep === 16 ? 0xffff : keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
    first[i] = words[i]! & mask;
    last[i] = (words[i]! & mask) | (~mask & 0xffff);
  }
  return [first.map((w) => w.toString(16)).join(':'), last.map((w) => w.toString(16)).join(':')];
}

function expand(v6: string): number[] {
  const [h, t] = v6.split('::') as [string, string | undefined];
  const head = h ? h.split(':') : [];
  const tail = t !== undefined && t !== '' ? t.split(':') : [];
  const fill = t !== undefined ? 8 - head.length - tail.length : 0;
  return [...head, ...Array(fill).fill('0'), ...tail].map((x) => parseInt(x, 16));
}

describe('the forbidden-range table', () => {
  test.each(FORBIDDEN_RANGES.map((r) => [r.cidr, r.name]))('%s (%s): its first and last address are refused', (cidr) => {
    for (const a of bounds(cidr)) {
      const hit = forbiddenRange(a);
      expect(hit).not.toBeNull();
      // The block named holds the address (the first match may be a more specific entry of the table).
      const [net, bits] = hit!.cidr.split('/') as [string, string];
      const list = new BlockList();
      list.addSubnet(net, Number(bits), isIP(net) === 6 ? 'ipv6' : 'ipv4');
      expect(list.check(a, isIP(a) === 6 ? 'ipv6' : 'ipv4')).toBe(true);
    }
  });

  test.each([
    ['::ffff:127.0.0.1', 'IPv4-mapped'], ['::ffff:7f00:1', 'IPv4-mapped'], ['::ffff:8.8.8.8', 'IPv4-mapped'],
    ['::ffff:0:8.8.8.8', 'IPv4-translated'], ['64:ff9b::808:808', 'NAT64 (IPv4-IPv6 translation)'], ['64:ff9b:1::a00:1', 'NAT64 (local-use IPv4/IPv6 translation)'],
    ['2002:7f00:1::', '6to4'], ['2001:0:4136:e378::1', 'Teredo'], ['169.254.169.254', 'link-local (cloud metadata)'], ['fd00:ec2::254', 'unique-local'],
    ['::1', 'loopback'], ['::', 'unspecified'], ['::127.0.0.1', 'IPv4-compatible (deprecated)'], ['100.100.100.200', 'shared address space (CGNAT)'],
  ])('%s is refused as %s', (a, name) => expect(forbiddenRange(a)?.name).toBe(name));

  test.each(['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700::1111', '2a00:1450:4001::1', '2001:4860:4860::8888'])('%s (global unicast) is allowed', (a) => {
    expect(isForbiddenAddress(a)).toBe(false);
  });

  test.each(['fe80::1%eth0', 'example.test', '', '1.2.3'])('%j is not a plain address and is refused', (a) => expect(isForbiddenAddress(a)).toBe(true));

  test('every address of this host\'s own interfaces is refused, naming the interface', () => {
    const own = Object.entries(networkInterfaces()).flatMap(([n, l]) => (l ?? []).map((i) => [n, i.address] as const));
    expect(own.length).toBeGreaterThan(0);
    const check = forbiddenRangeChecker(hostAddressRanges());
    for (const [, address] of own) expect(check(address)).not.toBeNull();
    // A host address outside every special block (a public one on a real host) is named as the host's own.
    const fake = forbiddenRangeChecker([{ cidr: '8.8.4.4/32', name: 'this host\'s own address (eth9)' }]);
    expect(fake('8.8.4.4')?.name).toBe('this host\'s own address (eth9)');
    expect(fake('8.8.8.8')).toBeNull();
  });

  test('an exemption lets exactly the listed address through', () => {
    const check = forbiddenRangeChecker([], ['127.0.0.1']);
    expect(check('127.0.0.1')).toBeNull();
    expect(check('127.0.0.2')?.name).toBe('loopback');
    expect(check('::ffff:127.0.0.1')?.name).toBe('IPv4-mapped');
  });
});

describe('ipLiteral: every spelling of an IP address is recognised', () => {
  test.each([
    ['127.0.0.1', '127.0.0.1'], ['2130706433', '127.0.0.1'], ['0177.0.0.1', '127.0.0.1'], ['0x7f000001', '127.0.0.1'], ['0x7f.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'], ['169.254.169.254', '169.254.169.254'], ['[::1]', '::1'], ['::ffff:127.0.0.1', '::ffff:127.0.0.1'], ['1.2.3.4.', '1.2.3.4'],
    ['0251.0376.0251.0376', '169.254.169.254'], ['2852039166', '169.254.169.254'],
  ])('%s = %s', (host, canonical) => expect(ipLiteral(host)).toBe(canonical));
  test('names are not literals; malformed numbers are', () => {
    expect(ipLiteral('example.com')).toBeUndefined();
    expect(ipLiteral('1a.example')).toBeUndefined();
    expect(ipLiteral('999.1.1.1')).toBe('?');
  });
});

describe('egress allowlist entries (RunSpec egress.allow)', () => {
  const refusal = (s: string) => {
    const r = EgressPattern.safeParse(s);
    return r.success ? null : r.error.issues[0]!.message;
  };
  test.each([
    ['127.0.0.1', /IP address literal/], ['2130706433', /IP address literal \(= 127\.0\.0\.1\)/], ['0x7f.1', /IP address literal/], ['0177.0.0.1', /IP address literal/],
    ['127.1', /IP address literal/], ['169.254.169.254', /IP address literal/], ['[::1]', /IPv6 address literal/], ['::1', /IPv6 address literal|port/],
    ['[::ffff:127.0.0.1]:443', /IPv6 address literal/], ['10.0.0.1:8080', /IP address literal/], ['localhost', /single-label/], ['localhost:8080', /single-label/],
    ['api.localhost', /under "\.localhost"/], ['metadata.google.internal', /under "\.internal"/], ['printer.local', /under "\.local"/], ['router.home.arpa', /home\.arpa/],
    ['1.0.0.127.in-addr.arpa', /in-addr\.arpa/], ['metadata', /single-label/], ['redis', /single-label/], ['*', /never "\*" alone/], ['*.com', /public suffix/],
    ['*.co.uk', /public suffix/], ['a*.example.org', /only exact names/], ['pypi.org:0', /port/], ['pypi.org:65536', /port/], ['pypi.org:http', /port/],
    [`${'a'.repeat(64)}.example.org`, /not a valid host name/], [`${'a.'.repeat(127)}org`, /longer than 253/], ['exa mple.org', /not a valid host name/],
  ])('%s is refused', (entry, why) => expect(refusal(entry)).toMatch(why));

  test.each([['PyPI.org', 'pypi.org'], ['pypi.org.', 'pypi.org'], ['*.pythonhosted.org', '*.pythonhosted.org'], ['api.example.org:8443', 'api.example.org:8443'], ['allowed.test', 'allowed.test']])(
    '%s is kept as %s', (entry, kept) => expect(EgressPattern.parse(entry)).toBe(kept));

  test('matching: exact names, wildcards never their apex, ports 443/80 unless the entry names one', () => {
    const e = (s: string) => parseEgressEntry(s) as EgressEntry;
    expect(nameMatches('a.example.org', e('*.example.org'))).toBe(true);
    expect(nameMatches('example.org', e('*.example.org'))).toBe(false);
    expect(nameMatches('aexample.org', e('*.example.org'))).toBe(false);
    expect(portMatches(443, e('pypi.org'), 'connect')).toBe(true);
    expect(portMatches(80, e('pypi.org'), 'connect')).toBe(false);
    expect(portMatches(80, e('pypi.org'), 'http')).toBe(true);
    expect(portMatches(8443, e('api.example.org:8443'), 'connect')).toBe(true);
    expect(portMatches(443, e('api.example.org:8443'), 'connect')).toBe(false);
  });
});
