/**
 * Where a proxied request wants to go, read strictly from fields llhttp has already parsed (the
 * request target and the Host header): a CONNECT authority `host:port`, a plain-HTTP absolute-form
 * URL, a Host header. An authority is accepted only in one canonical spelling — a host name of
 * letters, digits, `-`, `_` and dots, or a bracketed IPv6 literal, then an optional decimal port —
 * and a URL only when the WHATWG URL parser reads the same host and port from it. Anything else
 * (userinfo, percent-encoding, backslashes, a query before the path) is refused, so the name that
 * is checked is the name that is connected to and the one the upstream sees.
 */
import { ipLiteral, MAX_NAME_LENGTH } from '../domain/egress-rules';

export interface Target {
  /** Lower case, as written (an IP literal keeps its spelling; the caller refuses it). */
  host: string;
  port: number;
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

const HOST_CHARS = /^[a-z0-9_.-]+$/;
const MAX_AUTHORITY = MAX_NAME_LENGTH + 8;

/** `host[:port]` in canonical form; `defaultPort` when the port is absent (null: a port is required). */
export function parseAuthority(raw: string, defaultPort: number | null): Parsed<Target> {
  if (raw.length > MAX_AUTHORITY) return { ok: false, reason: `the target is longer than ${MAX_AUTHORITY} characters (${raw.length})` };
  const s = raw.toLowerCase();
  let host: string;
  let portText: string | undefined;
  if (s.startsWith('[')) {
    const end = s.indexOf(']');
    if (end < 0) return { ok: false, reason: 'an IPv6 literal without "]"' };
    host = s.slice(0, end + 1);
    const rest = s.slice(end + 1);
    if (rest !== '' && !rest.startsWith(':')) return { ok: false, reason: 'junk after an IPv6 literal' };
    portText = rest === '' ? undefined : rest.slice(1);
  } else {
    const colon = s.indexOf(':');
    host = colon < 0 ? s : s.slice(0, colon);
    portText = colon < 0 ? undefined : s.slice(colon + 1);
    if (!HOST_CHARS.test(host)) return { ok: false, reason: 'the host name has characters other than letters, digits, "-", "_" and "."' };
  }
  let port: number;
  if (portText === undefined) {
    if (defaultPort === null) return { ok: false, reason: 'the target has no port (CONNECT needs host:port)' };
    port = defaultPort;
  } else {
    if (!/^[0-9]{1,5}$/.test(portText)) return { ok: false, reason: 'the port is not a decimal number' };
    port = Number(portText);
    if (port < 1 || port > 65535) return { ok: false, reason: `port ${port} is out of range` };
  }
  if (host === '') return { ok: false, reason: 'no host' };
  return { ok: true, value: { host, port } };
}

/**
 * A plain-HTTP request target: absolute-form `http://authority[/path][?query]`, where the authority
 * ends at the first `/`, `?` or `#` (RFC 3986) and must parse canonically, and `new URL()` must read
 * the same host and port. Returns the target and the path to send upstream.
 */
export function parseAbsoluteTarget(raw: string): Parsed<Target & { path: string }> {
  if (raw.length < 7 || raw.slice(0, 7).toLowerCase() !== 'http://') {
    return { ok: false, reason: raw.startsWith('/') ? 'an origin-form target (this is a proxy: send the absolute URL, or CONNECT for https)' : 'only absolute http:// URLs (or CONNECT for https) go through this proxy' };
  }
  const rest = raw.slice(7);
  let end = rest.length;
  for (const d of ['/', '?', '#']) {
    const i = rest.indexOf(d);
    if (i >= 0 && i < end) end = i;
  }
  const authority = parseAuthority(rest.slice(0, end), 80);
  if (!authority.ok) return authority;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'the URL does not parse' };
  }
  const urlPort = url.port === '' ? 80 : Number(url.port);
  const { host, port } = authority.value;
  // An IP literal in any spelling is refused by name later (WHATWG URL would rewrite 2130706433 first).
  if (ipLiteral(host) !== undefined) return { ok: true, value: { host, port, path: '/' } };
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'credentials in the URL' };
  if (url.hostname !== host || urlPort !== port) return { ok: false, reason: `the URL's host is ambiguous (read as ${host}:${port} and as ${url.hostname}:${urlPort})` };
  if (url.hash !== '') return { ok: false, reason: 'a fragment in the request target' };
  return { ok: true, value: { host, port, path: `${url.pathname}${url.search}` } };
}

/** The value of the one Host header, from rawHeaders; an error for none or more than one. */
export function singleHost(rawHeaders: readonly string[]): Parsed<string> {
  const values: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === 'host') values.push(rawHeaders[i + 1] ?? '');
  if (values.length === 0) return { ok: false, reason: 'no Host header' };
  if (values.length > 1) return { ok: false, reason: `${values.length} Host headers` };
  return { ok: true, value: values[0]! };
}

/** How many times header `name` (lower case) occurs in rawHeaders. */
export function headerCount(rawHeaders: readonly string[], name: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) n += 1;
  return n;
}

/** "name" or "name:port" for messages, bounded so a 15,000-character target never lands in a log whole. */
export function shown(host: string, max = 200): string {
  return host.length <= max ? host : `${host.slice(0, max)}…(${host.length} chars)`;
}
