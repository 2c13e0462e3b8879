/**
 * The run store on Redis (the ports and the record codec are in run-store.ts): one hash per run, one
 * stream of RunEvents per run, and one list per pending approval that the waiting worker blocks on.
 * Keys (all under the store's prefix, default "corral"):
 *   {p}:run:{id}             hash: status, task, times, worker, outcome, answer, report paths, pending:{callId}
 *   {p}:run:{id}:events      stream: field "e" = RunEvent JSON; field "d" = LiveDelta JSON (live only)
 *   {p}:run:{id}:answer:{callId}  list: the approval answer (the waiter BLPOPs it)
 *   {p}:runs                 sorted set: run ids by creation time
 *   {p}:tenant:{t}:runs      sorted set: one tenant's run ids by creation time (GET /v1/runs)
 *   {p}:counts, {p}:tenant:{t}:counts  hashes: runs by status now (moved in the same script as the status)
 *   {p}:tenant:{t}:parked    sorted set: the tenant's parked runs by the time their park ends
 *   {p}:cancel               pub/sub channel: run ids to cancel
 */
import type { Redis } from 'ioredis';
import { CorralError, NotFoundError, codeForOutcome, type ErrorCode } from '../domain/errors';
import type { LiveDelta, RunEvent, RunOutcome } from '../domain/events';
import type { RunSpec } from '../domain/run-spec';
import { Durability, type DurabilityPolicy } from './durability';
import {
  ANSWER_TTL_S, Answer, DEFAULT_TENANT, EVENTS_MAXLEN, FINISHED_TTL_S, LIST_SCAN_MAX, decodeCursor, encodeCursor, fieldsOfUpdate, recordOfSpec, specOfRecord, viewOfRecord,
  type AppendOutcome, type ApprovalAnswer, type EndGuard, type ListQuery, type LiveFeed, type PendingApproval, type RunPage, type RunStore, type RunUpdate, type RunView,
} from './run-store';
import { RedisStreamHub } from './stream-hub';

/**
 * Every status change goes through this (inside the script that makes it): the run's new status,
 * and the live counts by status — all tenants ({p}:counts) and the run's tenant ({p}:tenant:{t}:counts)
 * — moved from the old status to the new in the same atomic step, so /metrics reads two small hashes
 * instead of scanning run records. PREFIX is the store's key prefix.
 */
const SET_STATUS = `local function setStatus(k, new, prefix)
  local old = redis.call('HGET', k, 'status')
  if old == new then return end
  local t = redis.call('HGET', k, 'tenant') or 'default'
  if old then
    redis.call('HINCRBY', prefix .. ':counts', old, -1)
    redis.call('HINCRBY', prefix .. ':tenant:' .. t .. ':counts', old, -1)
  end
  redis.call('HINCRBY', prefix .. ':counts', new, 1)
  redis.call('HINCRBY', prefix .. ':tenant:' .. t .. ':counts', new, 1)
  redis.call('HSET', k, 'status', new)
end
`;
/**
 * A new run record and its two list indexes in one step, so a record never exists without them:
 * KEYS = record, all runs, the tenant's runs; ARGV[1] = prefix, ARGV[2] = createdAt (ms),
 * ARGV[3] = run id, ARGV[4..] = fields (status is set to queued). Never over an existing one.
 */
const CREATE = `${SET_STATUS}
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
setStatus(KEYS[1], 'queued', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
return 1`;
/**
 * Updates an existing run (never a different end over a recorded one): ARGV[1] = fence ('' = none; else only while the run's owner is it),
 * ARGV[2] = prefix, ARGV[3] = new status ('' = unchanged), ARGV[4..] = other fields.
 */
const FENCED_HSET = `${SET_STATUS}
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
for i = 4, #ARGV - 1, 2 do
  if ARGV[i] == 'finishedAt' then
    local had = redis.call('HGET', KEYS[1], 'finishedAt')
    if had and had ~= ARGV[i + 1] then return 0 end
  end
end
if ARGV[3] ~= '' then setStatus(KEYS[1], ARGV[3], ARGV[2]) end
if #ARGV > 3 then redis.call('HSET', KEYS[1], unpack(ARGV, 4)) end
return 1`;
/** XADD (field ARGV[4], default "e") only while the run's owner is ARGV[1]. */
const FENCED_XADD = `if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', ARGV[4] or 'e', ARGV[3])
return 1`;
/**
 * XADD of event ARGV[3] (seq ARGV[4]) only while ARGV[1] owns the run and right after its
 * predecessor: the last seq this owner appended (or ARGV[5], the seq before its first event) must be
 * seq - 1. Returns 1 appended, 2 duplicate, 0 stale, or {'gap', last}.
 */
const ORDERED_XADD = `if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
local seq = tonumber(ARGV[4])
local last = tonumber(ARGV[5])
if redis.call('HGET', KEYS[1], 'lastSeqOwner') == ARGV[1] then last = tonumber(redis.call('HGET', KEYS[1], 'lastSeq')) end
if seq <= last then return 2 end
if seq > last + 1 then return {'gap', last} end
redis.call('HSET', KEYS[1], 'lastSeq', seq, 'lastSeqOwner', ARGV[1])
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[3])
return 1`;
/**
 * Claims the run for ARGV[1]: only while the job's lock (KEYS[2], when given) holds that token, and
 * never once the run has ended.
 */
const FENCED_CLAIM = `if KEYS[2] and redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 0 end
redis.call('HSET', KEYS[1], 'owner', ARGV[1])
return 1`;
/**
 * An end recorded from outside the run loop: never over a recorded end; ARGV[1] = '' (no guard),
 * 'unclaimed' (only while no owner), 'owner' (only while ARGV[2] owns the run) or 'lock' (only while
 * the job's lock KEYS[2] holds ARGV[2]; the run is claimed for it in the same step).
 */
const GUARDED_END = `${SET_STATUS}
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 0 end
local owner = redis.call('HGET', KEYS[1], 'owner')
if ARGV[1] == 'unclaimed' and owner then return 0 end
if ARGV[1] == 'owner' and owner ~= ARGV[2] then return 0 end
if ARGV[1] == 'lock' then
  if redis.call('GET', KEYS[2]) ~= ARGV[2] then return 0 end
  redis.call('HSET', KEYS[1], 'owner', ARGV[2])
end
setStatus(KEYS[1], ARGV[3], ARGV[6])
redis.call('HSET', KEYS[1], 'outcome', ARGV[3], 'reason', ARGV[4], 'finishedAt', ARGV[5])
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'errorCode', ARGV[7]) end
return 1`;
/** Sets a pending call (ARGV[2] = field, ARGV[3] = JSON) while ARGV[1] owns the run ('' = no fence) and it has not ended. */
const FENCED_SET_PENDING = `${SET_STATUS}
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 or redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
setStatus(KEYS[1], 'awaiting_approval', ARGV[4])
return 1`;
/** Removes a pending call while ARGV[1] owns the run; the status goes back to running when none is left. */
const FENCED_CLEAR_PENDING = `${SET_STATUS}
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], ARGV[2])
if redis.call('HEXISTS', KEYS[1], 'finishedAt') == 1 then return 1 end
for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(k, 1, 8) == 'pending:' then return 1 end
end
if redis.call('EXISTS', KEYS[1]) == 1 then setStatus(KEYS[1], 'running', ARGV[3]) end
return 1`;
/** Parks ARGV[1] until ARGV[2] unless the tenant has ARGV[3] parked runs (entries past ARGV[4] dropped first). */
const RESERVE_PARKING = `redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[4])
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
redis.call('PEXPIREAT', KEYS[1], last[2])
return 1`;
/** Stream pages readEvents scans at most to fill one page of events past live deltas. */
const MAX_SCANS = 50;

export interface RedisRunStoreOptions {
  /** How many replicas confirm the writes that matter (durable()); none by default. */
  durability?: DurabilityPolicy;
  /**
   * Opens a connection of its own for a blocking read (a stream waiter's XREAD BLOCK, an approval
   * waiter's BLPOP), closed by disconnect() when done; default: a duplicate of the store's.
   */
  blocking?: (what: 'stream' | 'answer') => Redis;
}

export class RedisRunStore implements RunStore {
  readonly cancelChannel: string;
  private hub: RedisStreamHub | undefined;
  private hubConn: Redis | undefined;
  private readonly durability: Durability | undefined;

  /** `eventsMaxLen`: the stream's length cap (the recorder's CORRAL_LOG_MAX_EVENTS bounds it first). */
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
    private readonly eventsMaxLen = EVENTS_MAXLEN,
    o: RedisRunStoreOptions = {},
  ) {
    this.cancelChannel = `${prefix}:cancel`;
    this.durability = o.durability && o.durability.replicas > 0 ? new Durability(redis, o.durability) : undefined;
    this.blocking = o.blocking ?? ((what) => redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: what === 'stream' ? 1 : null, ...(what === 'stream' ? { connectionName: `${prefix}:live-feed` } : {}) }));
  }
  private readonly blocking: (what: 'stream' | 'answer') => Redis;

  /** Runs `write` (on this store's connection) and confirms it with the replicas (queue/durability.ts). */
  async durable<T>(write: () => Promise<T>): Promise<T> {
    return this.durability ? this.durability.confirm(write) : write();
  }

  private key(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }
  private eventsKey(runId: string): string {
    return `${this.key(runId)}:events`;
  }
  private answerKey(runId: string, callId: string): string {
    return `${this.key(runId)}:answer:${callId}`;
  }

  private tenantRunsKey(tenant: string): string {
    return `${this.prefix}:tenant:${tenant}:runs`;
  }

  /** Records a new queued run of `tenant` (the API calls this before enqueueing). */
  async create(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant = DEFAULT_TENANT): Promise<void> {
    const fields = recordOfSpec(spec, now, tenant);
    await this.redis.eval(CREATE, 3, this.key(runId), `${this.prefix}:runs`, this.tenantRunsKey(tenant), this.prefix, now.getTime(), runId, ...Object.entries(fields).flat());
  }

  /** The tenant a run belongs to; null when there is no such run. */
  async tenantOf(runId: string): Promise<string | null> {
    const [status, tenant] = await this.redis.hmget(this.key(runId), 'status', 'tenant');
    return status ? (tenant ?? DEFAULT_TENANT) : null;
  }

  /** For jobs that other producers put straight on the queue: create the record if there is none. */
  async ensure(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant = DEFAULT_TENANT): Promise<void> {
    if (!(await this.redis.exists(this.key(runId)))) await this.create(runId, spec, now, tenant);
  }

  /**
   * Makes `owner` (a worker's job lock token) the only writer of the run from now on: later fenced
   * writes with another token are discarded. A run started again after its worker died is claimed by
   * the new attempt, so the old worker's late writes (if it was only partitioned) cannot land.
   * The claim itself is fenced by the job's lock: it lands only while `lockKey` (BullMQ's lock of the
   * job) holds `owner`, and never on a run that has ended. False: not claimed (another attempt holds
   * the job, or the run is over).
   */
  async claim(runId: string, owner: string, lockKey?: string): Promise<boolean> {
    return (await this.redis.eval(FENCED_CLAIM, lockKey ? 2 : 1, this.key(runId), ...(lockKey ? [lockKey] : []), owner)) === 1;
  }

  /** Updates the run (an existing record only); with `fence`, only while that token owns it (false: discarded). */
  async update(runId: string, u: RunUpdate, fence?: string): Promise<boolean> {
    const flat = Object.entries(fieldsOfUpdate(u)).flat();
    if (!flat.length && !u.status) return true;
    return (await this.redis.eval(FENCED_HSET, 1, this.key(runId), fence ?? '', this.prefix, u.status ?? '', ...flat)) === 1;
  }

  /**
   * Records an end that no run loop reported (a malformed job, a dead worker, a cancel before the
   * start): status and outcome, the reason, finishedAt; then the finished run's expiry. Never over an
   * end already recorded. `guard` (EndGuard): 'unclaimed' — only while no worker has claimed the run
   * (a cancel before the start must not overwrite a run a worker just took); a token — only while that
   * token owns the run; a token and the job's lock key — only while this attempt holds the job.
   * False: nothing written. `code`: what broke, for an `error` end (see codeForOutcome).
   */
  async end(runId: string, outcome: RunOutcome, reason: string, at: Date, guard?: EndGuard, code?: ErrorCode): Promise<boolean> {
    const lockKey = typeof guard === 'object' ? guard.lockKey : undefined;
    const mode = guard === undefined ? '' : guard === 'unclaimed' ? 'unclaimed' : lockKey !== undefined ? 'lock' : 'owner';
    const fence = typeof guard === 'object' ? guard.fence : '';
    const errorCode = outcome === 'succeeded' ? '' : codeForOutcome(outcome, code);
    const keys = lockKey !== undefined ? [this.key(runId), lockKey] : [this.key(runId)];
    const ok = (await this.redis.eval(GUARDED_END, keys.length, ...keys, mode, fence, outcome, reason, at.toISOString(), this.prefix, errorCode)) === 1;
    if (ok) await this.expireFinished(runId);
    return ok;
  }

  /** Sets the expiry of a finished run's keys. */
  async expireFinished(runId: string): Promise<void> {
    await this.redis.multi().expire(this.key(runId), FINISHED_TTL_S).expire(this.eventsKey(runId), FINISHED_TTL_S).exec();
  }

  async get(runId: string): Promise<RunView | null> {
    return viewOfRecord(runId, await this.redis.hgetall(this.key(runId)));
  }

  async getSpec(runId: string): Promise<RunSpec | null> {
    return specOfRecord(runId, await this.redis.hget(this.key(runId), 'spec'));
  }

  /** Most recent runs first (all tenants). */
  async list(limit: number): Promise<RunView[]> {
    const ids = await this.redis.zrevrange(`${this.prefix}:runs`, 0, limit - 1);
    const views = await Promise.all(ids.map((id) => this.get(id)));
    return views.filter((v): v is RunView => v !== null);
  }

  /**
   * One page of a tenant's runs, newest first, optionally only those in `statuses`. The cursor names
   * the last run examined (id and creation time), so runs created meanwhile never shift a page.
   * Runs whose records expired are dropped from the tenant's index as they are met.
   */
  async listPage(q: ListQuery): Promise<RunPage> {
    const key = this.tenantRunsKey(q.tenant);
    let start = 0;
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      const rank = await this.redis.zrevrank(key, c.id);
      // The cursor's run expired: resume after every run at least as new as it.
      start = rank !== null ? rank + 1 : await this.redis.zcount(key, c.score, '+inf');
    }
    const want = new Set<string>(q.statuses ?? []);
    const runs: RunView[] = [];
    let examined = 0;
    let last: { id: string; score: number } | null = null;
    while (runs.length < q.limit && examined < LIST_SCAN_MAX) {
      const batch = want.size ? Math.min(200, LIST_SCAN_MAX - examined) : q.limit - runs.length;
      const rows = await this.redis.zrevrange(key, start, start + batch - 1, 'WITHSCORES');
      if (rows.length === 0) return { runs, next: null };
      const page: Array<{ id: string; score: number }> = [];
      for (let i = 0; i < rows.length; i += 2) page.push({ id: rows[i]!, score: Number(rows[i + 1]) });
      const views = await Promise.all(page.map((r) => this.get(r.id)));
      const gone: string[] = [];
      let consumed = 0;
      for (const [i, r] of page.entries()) {
        const v = views[i];
        consumed += 1;
        examined += 1;
        last = r;
        if (!v) gone.push(r.id);
        else if (!want.size || want.has(v.status)) runs.push(v);
        if (runs.length >= q.limit) break;
      }
      if (gone.length) await this.redis.zrem(key, ...gone);
      start += consumed - gone.length;
    }
    // Full page or scan cap reached: there is a next page only if the index goes on after `last`.
    const more = (await this.redis.zrevrange(key, start, start)).length > 0;
    return { runs, next: more && last ? encodeCursor(last) : null };
  }

  /**
   * How many runs are in each status now — all tenants, or one — from the counts every status change
   * keeps (see SET_STATUS). Ended statuses count every run that ended since the counts began (records
   * expire; the counts do not go down for that).
   */
  async statusCounts(tenant?: string): Promise<Record<string, number>> {
    const h = await this.redis.hgetall(tenant === undefined ? `${this.prefix}:counts` : `${this.tenantRunsKey(tenant).replace(/:runs$/, ':counts')}`);
    return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Math.max(0, Number(v))]));
  }

  /** Appends to the run's event stream; with `fence`, only while that token owns the run. */
  async appendEvent(e: RunEvent, fence?: string): Promise<boolean> {
    if (fence === undefined) {
      await this.redis.xadd(this.eventsKey(e.runId), 'MAXLEN', '~', this.eventsMaxLen, '*', 'e', JSON.stringify(e));
      return true;
    }
    return (await this.redis.eval(FENCED_XADD, 2, this.key(e.runId), this.eventsKey(e.runId), fence, this.eventsMaxLen, JSON.stringify(e))) === 1;
  }

  async appendInOrder(e: RunEvent, fence: string, base: number): Promise<AppendOutcome> {
    const r = (await this.redis.eval(ORDERED_XADD, 2, this.key(e.runId), this.eventsKey(e.runId), fence, this.eventsMaxLen, JSON.stringify(e), e.seq, base)) as number | [string, number];
    if (Array.isArray(r)) return { kind: 'gap', last: Number(r[1]) };
    return { kind: r === 1 ? 'appended' : r === 2 ? 'duplicate' : 'stale' };
  }

  /**
   * Events after the given stream id ("0" = from the start); returns each with its stream id for
   * resuming. Live deltas on the stream are skipped (they are not part of the run's history).
   */
  async readEvents(runId: string, after = '0', count = 500): Promise<Array<{ id: string; event: RunEvent }>> {
    const out: Array<{ id: string; event: RunEvent }> = [];
    let cursor = after;
    for (let scan = 0; scan < MAX_SCANS && out.length < count; scan++) {
      const rows = await this.readLive(runId, cursor, count - out.length);
      if (rows.length === 0) break;
      for (const r of rows) if (r.event) out.push({ id: r.id, event: r.event });
      cursor = rows.at(-1)!.id;
    }
    return out;
  }

  /** Events and live deltas after the given stream id, in stream order (for SSE). */
  async readLive(runId: string, after = '0', count = 500): Promise<Array<{ id: string; event?: RunEvent; delta?: LiveDelta }>> {
    // Nothing comes after the largest id a stream can have (and Redis refuses an exclusive start there).
    if (after === '18446744073709551615-18446744073709551615') return [];
    const start = after === '0' ? '-' : `(${after}`;
    const rows = await this.redis.xrange(this.eventsKey(runId), start, '+', 'COUNT', count);
    return rows.map(([id, fields]) => (fields[0] === 'd' ? { id, delta: JSON.parse(fields[1] ?? 'null') as LiveDelta } : { id, event: JSON.parse(fields[1] ?? 'null') as RunEvent }));
  }

  /**
   * Appends a live delta to the run's stream (field "d"); with `fence`, only while that token owns the
   * run. The stream's length cap leaves room for every delta a run may publish, so deltas never push
   * the run's events out of the stream.
   */
  async appendDelta(d: LiveDelta, fence?: string): Promise<boolean> {
    if (fence === undefined) {
      await this.redis.xadd(this.eventsKey(d.runId), 'MAXLEN', '~', this.eventsMaxLen, '*', 'd', JSON.stringify(d));
      return true;
    }
    return (await this.redis.eval(FENCED_XADD, 2, this.key(d.runId), this.eventsKey(d.runId), fence, this.eventsMaxLen, JSON.stringify(d), 'd')) === 1;
  }

  /**
   * Shows a call waiting for a human (status awaiting_approval); with `fence`, only while that token
   * owns the run. False: discarded (another attempt owns the run, or it has ended).
   */
  async setPending(runId: string, p: PendingApproval, fence?: string): Promise<boolean> {
    return (await this.redis.eval(FENCED_SET_PENDING, 1, this.key(runId), fence ?? '', `pending:${p.callId}`, JSON.stringify(p), this.prefix)) === 1;
  }

  /** Removes a pending call (status back to running when none is left); with `fence`, only while that token owns the run. */
  async clearPending(runId: string, callId: string, fence?: string): Promise<boolean> {
    return (await this.redis.eval(FENCED_CLEAR_PENDING, 1, this.key(runId), fence ?? '', `pending:${callId}`, this.prefix)) === 1;
  }

  /**
   * Counts a run of `tenant` as parked (waiting for a human without a worker slot) until `untilMs`,
   * unless the tenant already has `cap` parked runs. Entries past their time drop out on their own,
   * so a worker that died while a run was parked does not hold the tenant's cap. True: parked.
   */
  async reserveParking(tenant: string, runId: string, untilMs: number, cap: number, nowMs: number): Promise<boolean> {
    return (await this.redis.eval(RESERVE_PARKING, 1, this.parkedKey(tenant), runId, untilMs, cap, nowMs)) === 1;
  }

  async releaseParking(tenant: string, runId: string): Promise<void> {
    await this.redis.zrem(this.parkedKey(tenant), runId);
  }

  /** How many runs of `tenant` are parked now. */
  async parkedCount(tenant: string, nowMs: number): Promise<number> {
    return this.redis.zcount(this.parkedKey(tenant), `(${nowMs}`, '+inf');
  }

  private parkedKey(tenant: string): string {
    return `${this.prefix}:tenant:${tenant}:parked`;
  }

  /**
   * Answers a pending approval. NotFoundError when the run or the call is unknown or not pending;
   * a conflict when it was already answered.
   */
  async answer(runId: string, callId: string, a: ApprovalAnswer): Promise<void> {
    const pending = await this.redis.hget(this.key(runId), `pending:${callId}`);
    if (pending === null) {
      if (await this.redis.hexists(this.key(runId), `answered:${callId}`)) {
        throw new CorralError('conflict', `call ${callId} of run ${runId} was already answered`);
      }
      if (!(await this.redis.exists(this.key(runId)))) throw new NotFoundError(`no run with id ${runId}`);
      throw new NotFoundError(`run ${runId} has no pending approval for call ${callId}`);
    }
    const first = await this.redis.hsetnx(this.key(runId), `answered:${callId}`, JSON.stringify(a));
    if (!first) throw new CorralError('conflict', `call ${callId} of run ${runId} was already answered`);
    await this.redis.multi().rpush(this.answerKey(runId, callId), JSON.stringify(a)).expire(this.answerKey(runId, callId), ANSWER_TTL_S).exec();
  }

  /**
   * Waits for an answer to a pending approval, on its own connection (BLPOP blocks it). Resolves null
   * when timeoutMs passes; rejects with the abort reason when `signal` aborts.
   */
  async waitAnswer(runId: string, callId: string, timeoutMs: number, signal?: AbortSignal): Promise<ApprovalAnswer | null> {
    const conn = this.blocking('answer');
    conn.on('error', () => undefined); // the wait's own failure is what the caller sees
    const deadline = Date.now() + timeoutMs;
    try {
      while (!signal?.aborted) {
        const left = deadline - Date.now();
        if (left <= 0) return null;
        const r = await conn.blpop(this.answerKey(runId, callId), Math.min(1, Math.max(0.05, left / 1000)));
        if (r) return Answer.parse(JSON.parse(r[1]));
      }
      throw signal.reason instanceof Error ? signal.reason : new CorralError('cancelled', 'the run was cancelled');
    } finally {
      conn.disconnect();
    }
  }

  /**
   * The process's one shared reader of live rows (stream-hub.ts): a blocking connection of its own,
   * made on first use, for every SSE subscriber of this store. closeLive() ends it.
   */
  liveFeed(): LiveFeed {
    if (!this.hub) {
      this.hubConn = this.blocking('stream');
      this.hubConn.on('error', () => undefined); // the subscribers see the failed read
      this.hub = new RedisStreamHub(this.hubConn, this.redis, (runId) => this.eventsKey(runId), this.prefix);
    }
    return this.hub;
  }

  /** Subscribers waiting on the live feed now, and on how many runs. */
  liveStats(): { subscribers: number; runs: number } {
    return this.hub?.stats() ?? { subscribers: 0, runs: 0 };
  }

  /** Ends the live feed (every wait returns empty) and its connection. */
  async closeLive(): Promise<void> {
    await this.hub?.close();
    this.hubConn?.disconnect();
    this.hub = undefined;
    this.hubConn = undefined;
  }

  /** Counts one more time a worker found the Docker engine down for this run; returns the count. */
  async countDockerWait(runId: string): Promise<number> {
    return this.redis.hincrby(this.key(runId), 'dockerWaits', 1);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async requestCancel(runId: string): Promise<void> {
    await this.redis.publish(this.cancelChannel, runId);
  }
}
