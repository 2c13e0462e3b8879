/**
 * Upload quotas in Redis (the UploadLedger port of domain/upload-ledger.ts), the same numbers for
 * every API process, each step one Lua call (atomic):
 *   - bytes received per tenant per hour: a leaky bucket that drains at cap/hour, charged as the
 *     bytes arrive (a flood is stopped mid-stream, not after it);
 *   - bytes kept per tenant and for the whole service: an upload reserves its clean tar's bytes as
 *     they are written (a pending entry with an expiry, so an API that dies mid-upload frees them),
 *     keeps them under its id once stored until it expires (its TTL, refreshed on every use) or is
 *     deleted. Every upload counts at least MIN_CHARGE against both caps (bounds the file count).
 * Keys (under the store prefix):
 *   {p}:uploads:window:{t}        hash: level (bytes), at (ms)
 *   {p}:uploads:stored            sorted set: "{t}/{id or pending ref}" → expiry (ms)
 *   {p}:uploads:stored:bytes      hash: same members → bytes
 *   {p}:uploads:stored:totals     hash: tenant → bytes kept, "*" → every tenant's
 * Times are Redis's clock (no skew between API hosts).
 */
import type { Redis } from 'ioredis';
import type { LedgerVerdict, UploadLedger } from '../domain/upload-ledger';
import { countRefusal } from './held-slots';

/** What every upload counts at least, against the hourly and the stored cap. */
export const MIN_CHARGE = 1024 * 1024;
const HOUR_MS = 3600_000;
/** A pending reservation lives this long past the request's own time bound. */
const PENDING_SLACK_MS = 60_000;
/** What a 429 for a full stored cap suggests (space frees when an upload expires or is deleted). */
const STORED_RETRY_S = 60;

const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Drops expired members (at most 500 per call) from the set, their bytes from the totals. */
const PRUNE = `local function prune(prefix, now)
  local S, B, T = prefix .. ':uploads:stored', prefix .. ':uploads:stored:bytes', prefix .. ':uploads:stored:totals'
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', S, '-inf', now, 'LIMIT', 0, 500)) do
    local b = tonumber(redis.call('HGET', B, m) or '0')
    local t = string.sub(m, 1, string.find(m, '/', 1, true) - 1)
    redis.call('HINCRBY', T, t, -b)
    redis.call('HINCRBY', T, '*', -b)
    redis.call('HDEL', B, m)
    redis.call('ZREM', S, m)
  end
end
local function put(prefix, t, m, bytes, expiry)
  local S, B, T = prefix .. ':uploads:stored', prefix .. ':uploads:stored:bytes', prefix .. ':uploads:stored:totals'
  local old = tonumber(redis.call('HGET', B, t .. '/' .. m) or '0')
  redis.call('HSET', B, t .. '/' .. m, bytes)
  redis.call('HINCRBY', T, t, bytes - old)
  redis.call('HINCRBY', T, '*', bytes - old)
  redis.call('ZADD', S, expiry, t .. '/' .. m)
end
local function drop(prefix, t, m)
  local S, B, T = prefix .. ':uploads:stored', prefix .. ':uploads:stored:bytes', prefix .. ':uploads:stored:totals'
  local b = redis.call('HGET', B, t .. '/' .. m)
  if not b then return end
  redis.call('HINCRBY', T, t, -tonumber(b))
  redis.call('HINCRBY', T, '*', -tonumber(b))
  redis.call('HDEL', B, t .. '/' .. m)
  redis.call('ZREM', S, t .. '/' .. m)
end
`;

/** ARGV: prefix, tenant, bytes, cap, windowMs → {0} or {1, retryAfterMs}. */
const CHARGE = `${NOW}
local K = ARGV[1] .. ':uploads:window:' .. ARGV[2]
local bytes, cap, window = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local level = tonumber(redis.call('HGET', K, 'level') or '0')
local at = tonumber(redis.call('HGET', K, 'at') or now)
level = math.max(0, level - (now - at) * cap / window)
if level + bytes > cap then
  return {1, math.ceil((level + bytes - cap) * window / cap)}
end
level = level + bytes
redis.call('HSET', K, 'level', level, 'at', now)
redis.call('PEXPIRE', K, math.ceil(level * window / cap) + 1000)
return {0, 0}
`;

/** ARGV: prefix, tenant, ref, bytes, holdMs, tenantCap, globalCap → 0 ok, 1 over the tenant's cap, 2 over the service's, 3 larger than the tenant's cap alone. */
const RESERVE = `${NOW}${PRUNE}
local prefix, t, ref, bytes = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local tenantCap, globalCap = tonumber(ARGV[6]), tonumber(ARGV[7])
prune(prefix, now)
if bytes > tenantCap then return 3 end
local T = prefix .. ':uploads:stored:totals'
local old = tonumber(redis.call('HGET', prefix .. ':uploads:stored:bytes', t .. '/' .. ref) or '0')
if tonumber(redis.call('HGET', T, t) or '0') - old + bytes > tenantCap then return 1 end
if tonumber(redis.call('HGET', T, '*') or '0') - old + bytes > globalCap then return 2 end
put(prefix, t, ref, bytes, now + tonumber(ARGV[5]))
return 0
`;

/** ARGV: prefix, tenant, ref, id, bytes, ttlMs: the pending entry becomes the stored upload's (counted once however often it is uploaded). */
const COMMIT = `${NOW}${PRUNE}
drop(ARGV[1], ARGV[2], ARGV[3])
put(ARGV[1], ARGV[2], ARGV[4], tonumber(ARGV[5]), now + tonumber(ARGV[6]))
return 0
`;

/** ARGV: prefix, tenant, member. */
const DROP = `${PRUNE}
drop(ARGV[1], ARGV[2], ARGV[3])
return 0
`;

/** ARGV: prefix, tenant, id, ttlMs: a kept upload's expiry moves to now + ttl (nothing when it is not counted). */
const TOUCH = `${NOW}
local S = ARGV[1] .. ':uploads:stored'
redis.call('ZADD', S, 'XX', now + tonumber(ARGV[4]), ARGV[2] .. '/' .. ARGV[3])
return 0
`;

/** ARGV: prefix, tenant or '' → {stored totals as a flat list, window levels as a flat list}. */
const STATE = `${NOW}${PRUNE}
prune(ARGV[1], now)
local totals = redis.call('HGETALL', ARGV[1] .. ':uploads:stored:totals')
return totals
`;

export interface UploadCapsConfig {
  bytesPerHour: number;
  storedPerTenant: number;
  storedGlobal: number;
}

/** The caps from the configuration. */
export function uploadCaps(c: { CORRAL_TENANT_UPLOAD_MB_PER_HOUR: number; CORRAL_TENANT_UPLOAD_STORED_MB: number; CORRAL_API_UPLOAD_STORED_MB: number }): UploadCapsConfig {
  const mb = 1024 * 1024;
  return { bytesPerHour: c.CORRAL_TENANT_UPLOAD_MB_PER_HOUR * mb, storedPerTenant: c.CORRAL_TENANT_UPLOAD_STORED_MB * mb, storedGlobal: c.CORRAL_API_UPLOAD_STORED_MB * mb };
}

export class RedisUploadQuota implements UploadLedger {
  constructor(
    private readonly redis: Redis,
    private readonly caps: UploadCapsConfig,
    private readonly prefix = 'corral',
  ) {}

  async charge(tenant: string, bytes: number): Promise<LedgerVerdict> {
    const [over, retryMs] = (await this.redis.eval(CHARGE, 0, this.prefix, tenant, bytes, this.caps.bytesPerHour, HOUR_MS)) as [number, number];
    if (over === 0) return { ok: true };
    await countRefusal(this.redis, this.prefix, 'upload_bytes_per_hour', tenant);
    const retryAfterS = Math.max(1, Math.ceil(retryMs / 1000));
    const mb = Math.round(this.caps.bytesPerHour / 1024 / 1024);
    return {
      ok: false, status: 429, limit: 'upload_bytes_per_hour', max: this.caps.bytesPerHour, retryAfterS,
      message: `tenant "${tenant}" may upload at most ${mb} MiB per hour (CORRAL_TENANT_UPLOAD_MB_PER_HOUR; every upload counts at least 1 MiB); try again in ${retryAfterS} s`,
    };
  }

  async reserve(tenant: string, ref: string, bytes: number, holdMs: number): Promise<LedgerVerdict> {
    const charged = Math.max(bytes, MIN_CHARGE);
    const r = (await this.redis.eval(RESERVE, 0, this.prefix, tenant, ref, charged, holdMs + PENDING_SLACK_MS, this.caps.storedPerTenant, this.caps.storedGlobal)) as number;
    if (r === 0) return { ok: true };
    await countRefusal(this.redis, this.prefix, r === 2 ? 'upload_stored_global' : 'upload_stored_per_tenant', tenant);
    const mb = (n: number) => Math.round(n / 1024 / 1024);
    if (r === 3) {
      return {
        ok: false, status: 413, limit: 'upload_stored_per_tenant', max: this.caps.storedPerTenant, retryAfterS: STORED_RETRY_S,
        message: `this upload alone passes tenant "${tenant}"'s ${mb(this.caps.storedPerTenant)} MiB of kept uploads (CORRAL_TENANT_UPLOAD_STORED_MB)`,
      };
    }
    if (r === 1) {
      return {
        ok: false, status: 429, limit: 'upload_stored_per_tenant', max: this.caps.storedPerTenant, retryAfterS: STORED_RETRY_S,
        message: `tenant "${tenant}" keeps ${mb(this.caps.storedPerTenant)} MiB of uploads already (CORRAL_TENANT_UPLOAD_STORED_MB; each counts at least 1 MiB until it expires): delete one (DELETE /v1/workspaces/ID) or wait for one to expire`,
      };
    }
    return {
      ok: false, status: 429, limit: 'upload_stored_global', max: this.caps.storedGlobal, retryAfterS: STORED_RETRY_S,
      message: `the service keeps ${mb(this.caps.storedGlobal)} MiB of uploads for all tenants already (CORRAL_API_UPLOAD_STORED_MB); try again in ${STORED_RETRY_S} s`,
    };
  }

  async commit(tenant: string, ref: string, id: string, bytes: number, ttlMs: number): Promise<void> {
    await this.redis.eval(COMMIT, 0, this.prefix, tenant, ref, id, Math.max(bytes, MIN_CHARGE), ttlMs);
  }

  async abandon(tenant: string, ref: string): Promise<void> {
    await this.redis.eval(DROP, 0, this.prefix, tenant, ref);
  }

  async touch(tenant: string, id: string, ttlMs: number): Promise<void> {
    await this.redis.eval(TOUCH, 0, this.prefix, tenant, id, ttlMs);
  }

  async remove(tenant: string, id: string): Promise<void> {
    await this.redis.eval(DROP, 0, this.prefix, tenant, id);
  }

  /** Bytes kept per tenant ("*" = every tenant's), after dropping what expired; and the hourly level per tenant asked for. */
  async state(tenants: readonly string[]): Promise<{ stored: Record<string, number>; window: Record<string, number> }> {
    const flat = (await this.redis.eval(STATE, 0, this.prefix)) as string[];
    const stored: Record<string, number> = {};
    for (let i = 0; i < flat.length; i += 2) stored[flat[i]!] = Math.max(0, Number(flat[i + 1]));
    const window: Record<string, number> = {};
    await Promise.all(tenants.map(async (t) => {
      const [level, at] = await this.redis.hmget(`${this.prefix}:uploads:window:${t}`, 'level', 'at');
      const [s] = await this.redis.time();
      const now = Number(s) * 1000;
      window[t] = level === null ? 0 : Math.max(0, Math.round(Number(level) - ((now - Number(at)) * this.caps.bytesPerHour) / HOUR_MS));
    }));
    return { stored, window };
  }
}
