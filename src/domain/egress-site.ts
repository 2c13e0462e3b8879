/**
 * The operator's egress site settings, parsed: an upstream proxy the per-run egress proxies chain
 * through (CORRAL_EGRESS_UPSTREAM_PROXY), the names that bypass it (CORRAL_EGRESS_NO_PROXY), and the
 * internal hosts whose names may resolve to private or special-purpose addresses
 * (CORRAL_EGRESS_INTERNAL_HOSTS and its file). Only config.ts feeds these; a tenant's RunSpec never
 * reaches them. Pure: parsing and matching, no I/O.
 */
import { BlockList, isIP } from 'node:net';
import { ipLiteral, MAX_NAME_LENGTH } from './egress-rules';

/** An HTTP proxy reached with CONNECT (and absolute-form requests for plain HTTP). */
export interface UpstreamProxy {
  host: string;
  port: number;
  /** The Proxy-Authorization value (`Basic …`), or null without credentials. Never logged or shown. */
  authorization: string | null;
}

/** One CORRAL_EGRESS_NO_PROXY entry: everything, a name and its subdomains, or an address range. */
export type NoProxyRule = { kind: 'all' } | { kind: 'domain'; name: string; port: number | null } | { kind: 'cidr'; cidr: string };

/** A name the operator allows to resolve into the given ranges (CIDRs; a bare address is a /32 or /128). */
export interface InternalHost {
  name: string;
  ranges: string[];
}

/** The site settings a run's egress proxy gets (a plain object: it crosses the proxy's pipe). */
export interface EgressSite {
  upstream: UpstreamProxy | null;
  noProxy: NoProxyRule[];
  internal: InternalHost[];
}

export const NO_SITE: EgressSite = { upstream: null, noProxy: [], internal: [] };

const HOST_LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

function hostNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > MAX_NAME_LENGTH) return `must be 1–${MAX_NAME_LENGTH} characters`;
  if (ipLiteral(name) !== undefined) return 'is an IP address, not a host name';
  if (!name.split('.').every((l) => HOST_LABEL.test(l))) return 'is not a valid host name';
  if (!name.includes('.')) return 'is a single-label name (give the full name the sandbox asks for)';
  if (name === 'localhost' || name.endsWith('.localhost')) return 'names this machine';
  return null;
}

/** `http://[user:pass@]host:port` → the upstream proxy, or what is wrong with it (never echoing the credentials). */
export function parseUpstreamProxy(raw: string): UpstreamProxy | string {
  let u: URL;
  try {
    u = new URL(raw.trim());
  } catch {
    return 'is not a URL (expected http://[user:pass@]host:port)';
  }
  if (u.protocol !== 'http:') return `must be an http:// URL (the proxy is spoken to in plain HTTP with CONNECT), not ${u.protocol}//`;
  if (u.port === '') return 'must name its port (http://host:port)';
  if ((u.pathname !== '/' && u.pathname !== '') || u.search || u.hash) return 'must be only http://[user:pass@]host:port, without a path or query';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  if (!host) return 'must name a host';
  let authorization: string | null = null;
  if (u.username || u.password) {
    let user: string;
    let pass: string;
    try {
      user = decodeURIComponent(u.username);
      pass = decodeURIComponent(u.password);
    } catch {
      return 'has credentials that are not valid percent-encoding';
    }
    if (user.includes(':')) return 'has a user name containing ":" (percent-encode it as %3A)';
    authorization = `Basic ${Buffer.from(`${user}:${pass}`, 'utf8').toString('base64')}`;
  }
  return { host, port: Number(u.port), authorization };
}

/**
 * NO_PROXY as curl reads it: comma- or space-separated; `*` = everything; `name` or `.name` = the
 * name and every name under it (optionally `:port`); `a.b.c.d[/n]` or an IPv6 address or range =
 * connections whose resolved address is in it.
 */
export function parseNoProxy(raw: string): NoProxyRule[] | string {
  const out: NoProxyRule[] = [];
  for (const item of raw.split(/[\s,]+/).map((s) => s.trim().toLowerCase()).filter(Boolean)) {
    if (item === '*') {
      out.push({ kind: 'all' });
      continue;
    }
    const cidr = cidrOf(item);
    if (cidr !== null) {
      if (typeof cidr !== 'string' || cidr.startsWith('!')) return `"${item}": ${typeof cidr === 'string' ? cidr.slice(1) : 'is not an address range'}`;
      out.push({ kind: 'cidr', cidr });
      continue;
    }
    const m = /^\.?(\*\.)?([^:]+?)\.?(?::(\d{1,5}))?$/.exec(item);
    const name = m?.[2] ?? '';
    if (!m || !name.split('.').every((l) => HOST_LABEL.test(l))) return `"${item}" is not a host name, "*", or an address range`;
    const port = m[3] !== undefined ? Number(m[3]) : null;
    if (port !== null && (port < 1 || port > 65535)) return `"${item}": the port must be 1–65535`;
    out.push({ kind: 'domain', name, port });
  }
  return out;
}

/** An item as a CIDR: null when it is no address at all, "!why" when it is a malformed range. */
function cidrOf(item: string): string | null {
  const [addr, bits, extra] = item.replace(/^\[|\]$/g, '').split('/');
  if (extra !== undefined || !addr) return null;
  const family = isIP(addr);
  if (family === 0) return null;
  const max = family === 4 ? 32 : 128;
  if (bits === undefined) return `${addr}/${max}`;
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) return `!the prefix length after "/" must be 0–${max}`;
  return `${addr}/${Number(bits)}`;
}

function blockOf(cidrs: readonly string[]): BlockList {
  const list = new BlockList();
  for (const c of cidrs) {
    const [net, bits] = c.split('/') as [string, string];
    list.addSubnet(net, Number(bits), isIP(net) === 6 ? 'ipv6' : 'ipv4');
  }
  return list;
}

function inList(list: BlockList, address: string): boolean {
  const fam = isIP(address);
  return fam !== 0 && list.check(address, fam === 6 ? 'ipv6' : 'ipv4');
}

/** A compiled NO_PROXY: whether a connection to host:port (resolved to `addresses`, if known) goes direct. */
export function noProxyMatcher(rules: readonly NoProxyRule[]): (host: string, port: number, addresses: readonly string[]) => boolean {
  const cidrs = rules.flatMap((r) => (r.kind === 'cidr' ? [r.cidr] : []));
  const list = blockOf(cidrs);
  const all = rules.some((r) => r.kind === 'all');
  const domains = rules.flatMap((r) => (r.kind === 'domain' ? [r] : []));
  return (host, port, addresses) => {
    if (all) return true;
    if (domains.some((d) => (host === d.name || host.endsWith(`.${d.name}`)) && (d.port === null || d.port === port))) return true;
    return cidrs.length > 0 && addresses.some((a) => inList(list, a));
  };
}

/**
 * CORRAL_EGRESS_INTERNAL_HOSTS (and the file's lines): `name=range` entries separated by commas or
 * new lines, `#` starts a comment; a range is a CIDR or one address; a name may appear more than once
 * (its ranges add up). Exact names only (no wildcards): each exception is one host the operator runs.
 */
export function parseInternalHosts(text: string): InternalHost[] | string {
  const byName = new Map<string, string[]>();
  const items = text.split('\n').map((l) => l.replace(/#.*$/, '')).join(',').split(',').map((s) => s.trim()).filter(Boolean);
  for (const item of items) {
    const eq = item.indexOf('=');
    if (eq === -1) return `"${item}": expected name=address or name=cidr`;
    const name = item.slice(0, eq).trim().toLowerCase().replace(/\.$/, '');
    const range = item.slice(eq + 1).trim();
    const problem = hostNameProblem(name);
    if (problem) return `"${item}": the name ${problem}`;
    const cidr = cidrOf(range.toLowerCase());
    if (cidr === null || cidr.startsWith('!')) return `"${item}": "${range}" is not an address or CIDR range${cidr ? ` (${cidr.slice(1)})` : ''}`;
    const [net, bits] = cidr.split('/') as [string, string];
    const min = isIP(net) === 4 ? 8 : 32;
    if (Number(bits) < min) return `"${item}": /${bits} is wider than /${min}; name the mirror's own addresses or subnet`;
    byName.set(name, [...(byName.get(name) ?? []), cidr]);
  }
  return [...byName].map(([name, ranges]) => ({ name, ranges }));
}

/** A compiled list of internal hosts: the range that lets `host` connect to `address`, or null. */
export function internalMatcher(hosts: readonly InternalHost[]): { names: ReadonlySet<string>; rangeFor: (host: string, address: string) => string | null } {
  const compiled = new Map(hosts.map((h) => [h.name, h.ranges.map((r) => ({ r, list: blockOf([r]) }))]));
  return {
    names: new Set(compiled.keys()),
    rangeFor: (host, address) => compiled.get(host)?.find((c) => inList(c.list, address))?.r ?? null,
  };
}
