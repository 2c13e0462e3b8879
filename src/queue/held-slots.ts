/**
 * Resources a tenant holds for a while through the API — live event streams, uploads in flight —
 * counted in Redis so every API process enforces the same numbers: a per-tenant cap and a global
 * cap (the whole service), both checked and taken in one Lua call (atomic: a burst of a thousand
 * requests cannot all pass a check made before any of them is counted).
 *
 * A slot is a lease: it carries an expiry that its process renews while it holds it (every third of
 * the lease), so the slots of an API process that died free themselves within one lease. Keys
 * (under the store prefix):
 *   {p}:held:{kind}:tenant:{t}   sorted set: holder → lease expiry (ms)
 *   {p}:held:{kind}:all          sorted set: "{t}/{holder}" → lease expiry (ms)
 * Refusals of every cap are counted ({p}:caps:refused hash: "{cap}" and "{cap}:{t}"; countRefusal).
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

export type HeldKind = 'streams' | 'uploads';

export interface HeldCaps {
  perTenant: number;
  global: number;
  /** The configuration variables that set them (named in a refusal). */
  perTenantVar: string;
  globalVar: string;
  /** What a refusal suggests waiting (seconds). */
  retryAfterS: number;
}

export type HeldVerdict =
  | { ok: true; release: () => Promise<void> }
  | { ok: false; limit: `${HeldKind}_per_tenant` | `${HeldKind}_global`; max: number; retryAfterS: number; message: string };

/** Redis's clock in ms (every process's leases are timed by one clock, whatever the hosts' skew). */
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`;

/** Drops expired leases from both sets; refuses when either is full (1 = tenant, 2 = global); else adds to both. */
const TAKE = `${NOW}
local expiry, perTenant, global = now + tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= perTenant then return 1 end
if redis.call('ZCARD', KEYS[2]) >= global then return 2 end
redis.call('ZADD', KEYS[1], expiry, ARGV[4])
redis.call('ZADD', KEYS[2], expiry, ARGV[5])
redis.call('PEXPIREAT', KEYS[1], expiry)
redis.call('PEXPIREAT', KEYS[2], expiry)
return 0
`;

/** KEYS = pairs of (set, member in ARGV order): each present member's expiry one lease (ARGV[1]) from now. */
const RENEW = `${NOW}
local expiry = now + tonumber(ARGV[1])
for i, k in ipairs(KEYS) do
  redis.call('ZADD', k, 'XX', expiry, ARGV[i + 1])
  redis.call('PEXPIREAT', k, expiry)
end
return 0
`;

/** The members of KEYS[1] whose lease has not run out. */
const LIVE = `${NOW}
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
`;

const WHAT: Record<HeldKind, string> = { streams: 'live event streams', uploads: 'uploads in flight' };

/** Counts one refusal of `cap` (for /metrics): service-wide and the tenant's. Never fails the request. */
export async function countRefusal(redis: Redis, prefix: string, cap: string, tenant: string): Promise<void> {
  await redis.multi().hincrby(`${prefix}:caps:refused`, cap, 1).hincrby(`${prefix}:caps:refused`, `${cap}:${tenant}`, 1).exec().catch(() => undefined);
}

/** The refusal of a full cap: which one, its size, and a message naming its variable. */
export function heldRefusal(kind: HeldKind, scope: 'per_tenant' | 'global', tenant: string, caps: HeldCaps): HeldVerdict {
  return scope === 'per_tenant'
    ? { ok: false, limit: `${kind}_per_tenant`, max: caps.perTenant, retryAfterS: caps.retryAfterS, message: `tenant "${tenant}" already holds ${caps.perTenant} ${WHAT[kind]} (${caps.perTenantVar}); close one or try again in ${caps.retryAfterS} s` }
    : { ok: false, limit: `${kind}_global`, max: caps.global, retryAfterS: caps.retryAfterS, message: `the service already holds ${caps.global} ${WHAT[kind]} for all tenants (${caps.globalVar}); try again in ${caps.retryAfterS} s` };
}

export class HeldSlots {
  /** This process's leases: member → its keys, renewed together. */
  private readonly mine = new Map<string, { kind: HeldKind; tenant: string }>();
  private readonly timer: NodeJS.Timeout;
  /** Unique per process: a holder name never collides with another process's. */
  private readonly processTag = randomBytes(6).toString('hex');
  private seq = 0;

  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
    private readonly leaseMs = 30_000,
  ) {
    this.timer = setInterval(() => void this.renew().catch(() => undefined), Math.max(50, Math.floor(leaseMs / 3)));
    this.timer.unref();
  }

  private tenantKey(kind: HeldKind, tenant: string): string {
    return `${this.prefix}:held:${kind}:tenant:${tenant}`;
  }

  private allKey(kind: HeldKind): string {
    return `${this.prefix}:held:${kind}:all`;
  }

  /** Takes a slot of `kind` for `tenant`, or says which cap is full. */
  async take(kind: HeldKind, tenant: string, caps: HeldCaps): Promise<HeldVerdict> {
    const holder = `${this.processTag}.${++this.seq}`;
    const r = (await this.redis.eval(TAKE, 2, this.tenantKey(kind, tenant), this.allKey(kind), this.leaseMs, caps.perTenant, caps.global, holder, `${tenant}/${holder}`)) as number;
    if (r === 0) {
      this.mine.set(holder, { kind, tenant });
      let released = false;
      return {
        ok: true,
        release: async () => {
          if (released) return;
          released = true;
          this.mine.delete(holder);
          await this.redis.multi().zrem(this.tenantKey(kind, tenant), holder).zrem(this.allKey(kind), `${tenant}/${holder}`).exec();
        },
      };
    }
    const scope = r === 1 ? 'per_tenant' : 'global';
    await countRefusal(this.redis, this.prefix, `${kind}_${scope}`, tenant);
    return heldRefusal(kind, scope, tenant, caps);
  }

  /** Pushes the expiry of every lease this process holds one lease ahead. */
  async renew(): Promise<void> {
    if (this.mine.size === 0) return;
    const keys: string[] = [];
    const members: string[] = [];
    for (const [holder, { kind, tenant }] of this.mine) {
      keys.push(this.tenantKey(kind, tenant), this.allKey(kind));
      members.push(holder, `${tenant}/${holder}`);
    }
    // One call per few hundred leases (a script's arguments stay small).
    for (let i = 0; i < keys.length; i += 512) {
      await this.redis.eval(RENEW, keys.slice(i, i + 512).length, ...keys.slice(i, i + 512), this.leaseMs, ...members.slice(i, i + 512));
    }
  }

  /** Slots held now: the tenant's (or, without one, every tenant's by name) and the whole service's. */
  async held(kind: HeldKind, tenant?: string): Promise<{ byTenant: Record<string, number>; total: number }> {
    const members = (await this.redis.eval(LIVE, 1, this.allKey(kind))) as string[];
    const byTenant: Record<string, number> = tenant === undefined ? {} : { [tenant]: 0 };
    for (const m of members) {
      const t = m.slice(0, m.lastIndexOf('/'));
      if (tenant === undefined || t === tenant) byTenant[t] = (byTenant[t] ?? 0) + 1;
    }
    return { byTenant, total: members.length };
  }

  /** Refusals counted so far by cap name (every cap of issue 38, uploads' quotas too): every tenant's, or one tenant's. */
  async refusals(tenant?: string): Promise<Record<string, number>> {
    const h = await this.redis.hgetall(`${this.prefix}:caps:refused`);
    const out: Record<string, number> = {};
    for (const [k, v] of Object.entries(h)) {
      const [cap, t] = k.split(':');
      if (tenant === undefined ? t === undefined : t === tenant) out[cap!] = Number(v);
    }
    return out;
  }

  /** Counts a refusal of another cap (the upload size checks), for /metrics. */
  async countRefusal(cap: string, tenant: string): Promise<void> {
    await countRefusal(this.redis, this.prefix, cap, tenant);
  }

  /** Stops renewing (the leases run out on their own unless released). */
  close(): void {
    clearInterval(this.timer);
  }
}
