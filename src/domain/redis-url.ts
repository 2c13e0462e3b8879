/**
 * REDIS_URL, read once: where corral's Redis is and how to reach it. Two forms —
 *   redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB][?OPTIONS]                          one Redis
 *   redis[s]+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER_NAME[?db=N&OPTIONS]   Sentinel
 * In the Sentinel form the hosts are the sentinels (port 26379 when left out), MASTER_NAME is the
 * master group they watch, and USER:PASSWORD (percent-encoded) are the data nodes' credentials; the
 * sentinels' own are options. OPTIONS (either form; the sentinel* ones only with Sentinel):
 *   db=N                 the database number (the Sentinel form's only way to name one)
 *   tls=true|false       TLS to the data nodes (on with rediss / rediss+sentinel)
 *   tlsCaFile=PATH       a PEM file of CAs the data nodes' (and sentinels') certificates must chain to
 *   tlsServername=NAME   the name the data nodes' certificate must carry (default: the address dialled)
 *   sentinelTls=true|false         TLS to the sentinels (on with rediss+sentinel)
 *   sentinelUsername=U, sentinelPassword=P   the sentinels' ACL user and password
 * Pure: the parse never touches the network or a file; errors name the part that is wrong.
 */
import { InvalidInputError } from './errors';

export interface RedisNode {
  host: string;
  port: number;
}

export interface RedisTls {
  /** A PEM file of trusted CAs (read by the connection factory); absent: the system's CAs. */
  caFile?: string;
  /** The certificate name to check; absent: the host dialled. */
  servername?: string;
}

interface Credentials {
  username?: string;
  password?: string;
}

export type RedisTarget =
  | ({ kind: 'standalone'; node: RedisNode; db: number; tls?: RedisTls } & Credentials)
  | ({
    kind: 'sentinel'; sentinels: RedisNode[]; masterName: string; db: number; tls?: RedisTls;
    sentinelUsername?: string; sentinelPassword?: string; sentinelTls?: RedisTls;
  } & Credentials);

export const REDIS_URL_FORMS = 'redis://[USER:PASSWORD@]HOST[:PORT][/DB] or redis+sentinel://HOST:PORT[,HOST:PORT…]/MASTER_NAME[?db=N] (rediss… for TLS)';

const OPTIONS = ['db', 'tls', 'tlsCaFile', 'tlsServername', 'sentinelTls', 'sentinelUsername', 'sentinelPassword'] as const;
type OptionName = (typeof OPTIONS)[number];

function fail(message: string): never {
  throw new InvalidInputError(`REDIS_URL: ${message}`, 'REDIS_URL');
}

function decode(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return fail(`${what} is not valid percent-encoding`);
  }
}

/** HOST[:PORT] or [IPv6][:PORT]; `what` names it in errors ("sentinel 2", "the host"). */
function parseNode(text: string, defaultPort: number, what: string): RedisNode {
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([^:[\]]*))(?::([^:]*))?$/.exec(text);
  if (!m) return fail(`${what} "${text}" is not HOST:PORT (an IPv6 address goes in brackets: [::1]:26379)`);
  const host = m[1] ?? m[2] ?? '';
  if (!host) return fail(`${what} "${text}" has no host`);
  if (!/^[A-Za-z0-9.:_-]+$/.test(host)) return fail(`${what} "${text}": "${host}" is not a host name or address`);
  if (m[3] === undefined) return { host, port: defaultPort };
  const port = /^[0-9]{1,5}$/.test(m[3]) ? Number(m[3]) : NaN;
  if (!(port >= 1 && port <= 65535)) return fail(`${what} "${text}": the port "${m[3]}" is not a number from 1 to 65535`);
  return { host, port };
}

function parseBool(value: string, name: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  return fail(`option ${name}=${value}: use true or false`);
}

function parseDb(value: string, where: string): number {
  if (!/^[0-9]{1,9}$/.test(value)) return fail(`${where} "${value}" is not a database number (0, 1, 2 …)`);
  return Number(value);
}

/** Parses REDIS_URL; an InvalidInputError (field REDIS_URL) names the part that is wrong. */
export function parseRedisUrl(url: string): RedisTarget {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(?:([^@/?#]*)@)?([^/?#]*)(\/[^?#]*)?(?:\?([^#]*))?(#.*)?$/.exec(url.trim());
  // Echoed only when it holds no "@" (a password may sit before one in a URL this parse cannot split).
  if (!m) return fail(`${url.includes('@') ? 'the value' : `"${url}"`} is not a URL of the form ${REDIS_URL_FORMS}`);
  const [, schemeRaw = '', userinfo, hostsText = '', path = '', query = '', fragment] = m;
  const scheme = schemeRaw.toLowerCase();
  if (!['redis', 'rediss', 'redis+sentinel', 'rediss+sentinel'].includes(scheme)) {
    return fail(`the scheme "${scheme}:" is not one corral knows: use redis://, rediss:// (TLS), redis+sentinel:// or rediss+sentinel:// (TLS)`);
  }
  if (fragment) return fail('a #fragment means nothing here; remove it');
  const sentinel = scheme.endsWith('+sentinel');
  const secure = scheme.startsWith('rediss');

  const creds: Credentials = {};
  if (userinfo !== undefined && userinfo !== '') {
    const colon = userinfo.indexOf(':');
    const user = decode(colon < 0 ? userinfo : userinfo.slice(0, colon), 'the user name');
    const password = colon < 0 ? undefined : decode(userinfo.slice(colon + 1), 'the password');
    // As ioredis reads it: USER@ alone is a user name; :PASSWORD@ is a password for the default user.
    if (user) creds.username = user;
    if (password) creds.password = password;
  }

  const opts: Partial<Record<OptionName, string>> = {};
  for (const pair of query.split('&').filter(Boolean)) {
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq), 'an option name');
    const value = eq < 0 ? '' : decode(pair.slice(eq + 1), `option ${name}`);
    if (!(OPTIONS as readonly string[]).includes(name)) {
      return fail(`unknown option "${name}" (known: ${OPTIONS.filter((o) => sentinel || !o.startsWith('sentinel')).join(', ')})`);
    }
    if (name.startsWith('sentinel') && !sentinel) return fail(`option ${name} belongs to the Sentinel form (redis+sentinel://…)`);
    if (opts[name as OptionName] !== undefined) return fail(`option ${name} is given twice`);
    if (value === '') return fail(`option ${name} has no value`);
    opts[name as OptionName] = value;
  }
  const tlsOn = opts.tls !== undefined ? parseBool(opts.tls, 'tls') : secure;
  const sentinelTlsOn = sentinel && (opts.sentinelTls !== undefined ? parseBool(opts.sentinelTls, 'sentinelTls') : secure);
  if (opts.tlsServername && !tlsOn) return fail('option tlsServername needs TLS to the data nodes: use rediss://… (or tls=true)');
  if (opts.tlsCaFile && !tlsOn && !sentinelTlsOn) return fail('option tlsCaFile needs TLS: use rediss://… (or tls=true / sentinelTls=true)');
  const tls: RedisTls = { ...(opts.tlsCaFile ? { caFile: opts.tlsCaFile } : {}), ...(opts.tlsServername ? { servername: opts.tlsServername } : {}) };

  if (!sentinel) {
    if (hostsText.includes(',')) return fail(`${scheme}:// names one Redis; for several sentinels use redis+sentinel://HOST:PORT,HOST:PORT/MASTER_NAME`);
    const node = parseNode(hostsText, 6379, 'the host');
    const dbPath = path.replace(/^\//, '');
    if (dbPath && opts.db) return fail(`the database is named twice (path /${dbPath} and db=${opts.db})`);
    const db = dbPath ? parseDb(dbPath, 'the path (the database number)') : opts.db ? parseDb(opts.db, 'option db') : 0;
    return { kind: 'standalone', node, db, ...creds, ...(tlsOn ? { tls } : {}) };
  }

  if (!hostsText) return fail(`no sentinel named: ${scheme}://HOST:PORT[,HOST:PORT…]/MASTER_NAME`);
  const sentinels = hostsText.split(',').map((h, i) => parseNode(h.trim(), 26379, `sentinel ${i + 1}`));
  const seen = new Set<string>();
  for (const s of sentinels) {
    const k = `${s.host}:${s.port}`;
    if (seen.has(k)) fail(`sentinel ${k} is named twice`);
    seen.add(k);
  }
  const name = decode(path.replace(/^\//, ''), 'the master name');
  if (!name) return fail(`the master name is missing: ${scheme}://${hostsText}/MASTER_NAME (the name the sentinels monitor, e.g. "mymaster")`);
  if (name.includes('/')) return fail(`the path "/${name}" is the master name and has no "/"; the database goes in ?db=N`);
  if (!/^[A-Za-z0-9._-]{1,128}$/.test(name)) return fail(`the master name "${name}" may hold only letters, digits, . _ - (at most 128)`);
  return {
    kind: 'sentinel', sentinels, masterName: name, db: opts.db ? parseDb(opts.db, 'option db') : 0, ...creds,
    ...(tlsOn ? { tls } : {}),
    ...(opts.sentinelUsername ? { sentinelUsername: opts.sentinelUsername } : {}),
    ...(opts.sentinelPassword ? { sentinelPassword: opts.sentinelPassword } : {}),
    ...(sentinelTlsOn ? { sentinelTls: { ...(opts.tlsCaFile ? { caFile: opts.tlsCaFile } : {}) } } : {}),
  };
}

/** The URL with its passwords replaced by "***" (for logs and error messages). */
export function redactRedisUrl(url: string): string {
  return url
    .replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)([^@/?#]*)@/, (_all, scheme: string, userinfo: string) => {
      const colon = userinfo.indexOf(':');
      return `${scheme}${colon < 0 ? '***' : `${userinfo.slice(0, colon)}:***`}@`;
    })
    .replace(/([?&]sentinelPassword=)[^&#]*/g, '$1***');
}

/** One line naming where the target is, without secrets ("Sentinel master mymaster via 10.0.0.1:26379,… (db 0, TLS)"). */
export function describeRedisTarget(t: RedisTarget): string {
  // No user name either: redis://SECRET@host (a password where the user goes) is a common slip.
  const extras = [`db ${t.db}`, ...(t.tls ? ['TLS'] : []), ...(t.username || t.password ? ['with credentials'] : [])];
  if (t.kind === 'standalone') return `Redis at ${t.node.host}:${t.node.port} (${extras.join(', ')})`;
  const via = t.sentinels.map((s) => `${s.host}:${s.port}`).join(',');
  return `Sentinel master "${t.masterName}" via ${via} (${[...extras, ...(t.sentinelTls ? ['sentinels over TLS'] : [])].join(', ')})`;
}

/** The same REDIS_URL naming database `db` instead (the path of redis://, ?db= of the Sentinel form). */
export function redisUrlWithDb(url: string, db: number): string {
  const t = parseRedisUrl(url);
  const [head = '', query] = url.split('?', 2) as [string, string | undefined];
  const params = (query ?? '').split('&').filter((p) => p && !p.startsWith('db='));
  if (t.kind === 'sentinel') return `${head}?${[...params, `db=${db}`].join('&')}`;
  const base = head.replace(/^([A-Za-z+]+:\/\/[^/]*)(\/.*)?$/, '$1');
  return `${base}/${db}${params.length ? `?${params.join('&')}` : ''}`;
}
