/**
 * Per-tenant submission limits, kept in Redis so every API instance enforces the same numbers:
 *   - submissions per minute: a sliding 60 s log of accepted submissions (one Lua call, atomic);
 *   - active runs (queued, running, awaiting approval): a set of the tenant's unfinished run ids,
 *     pruned when checked — a member counts until its run record says it finished, or its job in
 *     this queue is gone, completed or failed (a worker that died leaves a stalled, failed job).
 * Keys (under the store prefix, per queue, so deployments sharing a Redis do not share limits):
 *   {p}:q:{queue}:tenant:{t}:submits   sorted set: accepted submissions by time
 *   {p}:q:{queue}:tenant:{t}:active    sorted set: run id → time it was claimed
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

export type QuotaVerdict = { ok: true } | { ok: false; limit: 'submits_per_minute' | 'active_runs'; max: number; retryAfterS: number; message: string };

/** Removes entries older than the window, and adds one entry unless the window already holds `max`. */
const TAKE_SUBMIT = `
local key, now, window, max, member = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
if redis.call('ZCARD', key) >= max then
  local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2])}
end
redis.call('ZADD', key, now, member)
redis.call('PEXPIRE', key, window)
return {1, 0}
`;

const WINDOW_MS = 60_000;
/** A claimed id whose run record does not exist yet is a submission in flight: it counts this long. */
const CLAIM_GRACE_MS = 60_000;
/** What the 429 for too many active runs suggests: runs end on their own; ask again shortly. */
const ACTIVE_RETRY_S = 10;

export class TenantQuota {
  constructor(
    private readonly redis: Redis,
    private readonly queue: Queue,
    private readonly prefix = 'corral',
  ) {}

  private key(tenant: string, what: 'submits' | 'active'): string {
    return `${this.prefix}:q:${this.queue.name}:tenant:${tenant}:${what}`;
  }

  /** Counts one submission against `perMinute`; refused when the last 60 s already hold that many. */
  async takeSubmit(tenant: string, perMinute: number, runId: string, now: number): Promise<QuotaVerdict> {
    const [ok, oldest] = (await this.redis.eval(TAKE_SUBMIT, 1, this.key(tenant, 'submits'), now, WINDOW_MS, perMinute, `${now}:${runId}`)) as [number, number];
    if (ok === 1) return { ok: true };
    const retryAfterS = Math.max(1, Math.ceil((oldest + WINDOW_MS - now) / 1000));
    return {
      ok: false, limit: 'submits_per_minute', max: perMinute, retryAfterS,
      message: `tenant "${tenant}" may submit at most ${perMinute} runs per minute (CORRAL_TENANT_SUBMITS_PER_MIN); try again in ${retryAfterS} s`,
    };
  }

  /** Gives back a submission slot (the submission failed after it was counted). */
  async returnSubmit(tenant: string, runId: string): Promise<void> {
    const key = this.key(tenant, 'submits');
    const members = await this.redis.zrange(key, 0, '-1');
    const mine = members.filter((m) => m.endsWith(`:${runId}`));
    if (mine.length) await this.redis.zrem(key, ...mine);
  }

  /**
   * Claims an active-run slot for `runId`; refused when the tenant already has `max` unfinished runs.
   * `isFinished(id)` says whether a run record exists and has ended (null: no record).
   */
  async claimActive(tenant: string, runId: string, max: number, now: number, isFinished: (id: string) => Promise<boolean | null>): Promise<QuotaVerdict> {
    const key = this.key(tenant, 'active');
    await this.prune(key, now, isFinished);
    const [[, added], [, count]] = (await this.redis.multi().zadd(key, 'NX', now, runId).zcard(key).exec()) as [[unknown, number], [unknown, number]];
    if (count <= max) return { ok: true };
    if (added) await this.redis.zrem(key, runId);
    return {
      ok: false, limit: 'active_runs', max, retryAfterS: ACTIVE_RETRY_S,
      message: `tenant "${tenant}" already has ${max} queued or running runs (CORRAL_TENANT_MAX_ACTIVE_RUNS); wait for one to finish or cancel one`,
    };
  }

  async releaseActive(tenant: string, runId: string): Promise<void> {
    await this.redis.zrem(this.key(tenant, 'active'), runId);
  }

  /** How many unfinished runs the tenant has (after pruning). */
  async activeCount(tenant: string, now: number, isFinished: (id: string) => Promise<boolean | null>): Promise<number> {
    const key = this.key(tenant, 'active');
    await this.prune(key, now, isFinished);
    return this.redis.zcard(key);
  }

  private async prune(key: string, now: number, isFinished: (id: string) => Promise<boolean | null>): Promise<void> {
    const rows = await this.redis.zrange(key, 0, '-1', 'WITHSCORES');
    const members: Array<{ id: string; claimedAt: number }> = [];
    for (let i = 0; i < rows.length; i += 2) members.push({ id: rows[i]!, claimedAt: Number(rows[i + 1]) });
    // All lookups at once: commands sent together on one connection travel as one pipeline.
    const verdicts = await Promise.all(members.map(async ({ id, claimedAt }) => {
      const finished = await isFinished(id);
      if (finished === true) return true;
      if (now - claimedAt <= CLAIM_GRACE_MS) return false;
      if (finished === null) return true;
      // The record says unfinished: believe the queue when it says the job is over or gone.
      const state = await this.queue.getJobState(id);
      return state === 'completed' || state === 'failed' || state === 'unknown';
    }));
    const done = members.filter((_, i) => verdicts[i]).map((m) => m.id);
    if (done.length) await this.redis.zrem(key, ...done);
  }
}
