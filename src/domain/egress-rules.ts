/**
 * Egress name rules shared by the submit-time schema (run-spec.ts), the worker and the proxy: what an
 * allowlist entry may be (`name`, `*.suffix`, either with `:port`), which names are never allowed
 * (IP literals in any spelling, `localhost`, single labels, private-use and special-use domains), the
 * syntax of a host name (≤ 253 characters, labels of 1–63), and how a name and port match an entry.
 * Pure: no I/O.
 */
import { isIP } from 'node:net';

export const MAX_NAME_LENGTH = 253;
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * Domains whose names point inside a host or a private network, or never on the public internet:
 * RFC 6761 / IANA special-use names and the private-use names of RFC 6762 appendix G. An entry equal
 * to one of them or under one of them is refused.
 */
export const FORBIDDEN_DOMAINS: readonly string[] = [
  'localhost', 'localdomain', 'local', 'internal', 'intranet', 'private', 'corp', 'home', 'lan',
  'home.arpa', 'in-addr.arpa', 'ip6.arpa', 'invalid', 'onion', 'alt',
];

/** A parsed allowlist entry. */
export interface EgressEntry {
  /** The exact name, or the suffix after `*.` for a wildcard. */
  name: string;
  wildcard: boolean;
  /** The one port the entry allows; null = 443 for CONNECT and 80 for plain HTTP. */
  port: number | null;
  /** The entry as written after normalisation (lower case, no trailing dot). */
  text: string;
}

/**
 * If `host` is an IP literal in any spelling, its canonical address (or '?' when it looks numeric but
 * is malformed); undefined for a host name. Follows the WHATWG URL rule: a host whose last label is
 * numeric (decimal, 0x-hex or 0-octal) is an IPv4 address; anything with a colon is IPv6.
 */
export function ipLiteral(host: string): string | undefined {
  const h = host.replace(/^\[|\]$/g, '');
  if (h.includes(':')) return isIPv6Literal(h) ? h.toLowerCase() : '?';
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

function isIPv6Literal(h: string): boolean {
  return isIP(h) === 6;
}

/** Why `name` (lower case, no trailing dot) is not a host name a sandbox may use; null when it is one. */
export function nameProblem(name: string): string | null {
  if (name.length === 0) return 'is empty';
  if (name.length > MAX_NAME_LENGTH) return `is longer than ${MAX_NAME_LENGTH} characters (${name.length})`;
  const literal = ipLiteral(name);
  if (literal !== undefined) return literal === '?' ? 'looks like a malformed IP address' : `is an IP address literal${literal !== name ? ` (= ${literal})` : ''}; only host names are allowed`;
  const labels = name.split('.');
  if (!labels.every((l) => LABEL.test(l))) return 'is not a valid host name (labels of 1–63 letters, digits, "-" or "_")';
  if (labels.length < 2) return 'is a single-label name (it would resolve through search domains to a local host)';
  const domain = FORBIDDEN_DOMAINS.find((d) => name === d || name.endsWith(`.${d}`));
  if (domain) return `is under ".${domain}", which names hosts on this machine or a private network`;
  return null;
}

/**
 * Parses one allowlist entry: `name`, `*.suffix`, optionally `:port`. Returns the entry or a message
 * saying what is wrong with it (the caller names the entry). Never `*` alone, never a wildcard over
 * a public suffix (`wildcardProblem`).
 */
export function parseEgressEntry(raw: string, wildcardProblem: (suffix: string) => string | null = () => null, operatorInternal: (name: string) => boolean = () => false): EgressEntry | string {
  const s = raw.trim().toLowerCase();
  let host = s;
  let port: number | null = null;
  const colon = s.lastIndexOf(':');
  if (colon !== -1 && !s.startsWith('[')) {
    const p = s.slice(colon + 1);
    if (!/^[0-9]{1,5}$/.test(p) || Number(p) < 1 || Number(p) > 65535) return `"${raw}": the port after ":" must be a number from 1 to 65535`;
    if (s.indexOf(':') !== colon) return `"${raw}" is an IPv6 address literal; only host names are allowed`;
    host = s.slice(0, colon);
    port = Number(p);
  }
  if (s.startsWith('[')) return `"${raw}" is an IPv6 address literal; only host names are allowed`;
  host = host.replace(/\.$/, '');
  const wildcard = host.startsWith('*.');
  const name = wildcard ? host.slice(2) : host;
  if (host === '*' || (host.includes('*') && !wildcard) || name.includes('*')) return `"${raw}": only exact names or a leading "*." are allowed, never "*" alone`;
  if (wildcard && name.length > 0 && ipLiteral(name) === undefined) {
    const w = wildcardProblem(name);
    if (w) return `"${raw}": ${w}`;
  }
  // An exact name the operator listed as an internal host (CORRAL_EGRESS_INTERNAL_HOSTS) may sit under a private-use domain.
  const problem = !wildcard && operatorInternal(name) ? null : nameProblem(name);
  if (problem) return `"${raw}" ${problem}`;
  return { name, wildcard, port, text: `${wildcard ? '*.' : ''}${name}${port === null ? '' : `:${port}`}` };
}

/** Whether `name` matches `entry` by name alone (a wildcard never matches its apex). */
export function nameMatches(name: string, entry: EgressEntry): boolean {
  return entry.wildcard ? name.endsWith(`.${entry.name}`) : name === entry.name;
}

/** Whether `port` is allowed by `entry` for a CONNECT tunnel or a plain HTTP request. */
export function portMatches(port: number, entry: EgressEntry, kind: 'connect' | 'http'): boolean {
  return entry.port === null ? port === (kind === 'connect' ? 443 : 80) : port === entry.port;
}

/** Whether an allowlist (entries as written) lets a request to `url` through: https as a CONNECT, http as a plain request. */
export function allowsUrl(list: readonly string[], url: URL): boolean {
  const https = url.protocol === 'https:';
  const port = url.port ? Number(url.port) : https ? 443 : 80;
  const host = url.hostname.replace(/\.$/, '').toLowerCase();
  return list.some((text) => {
    const e = parseEgressEntry(text);
    return typeof e !== 'string' && nameMatches(host, e) && portMatches(port, e, https ? 'connect' : 'http');
  });
}
