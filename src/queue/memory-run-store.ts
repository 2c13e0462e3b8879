/**
 * The run store in one process's memory: the same contract as RedisRunStore (test/support/
 * run-store-contract.ts runs one set of tests against both), for API tests that need no Redis and
 * for embedding corral's run state in a single process. Records are kept as the same flat string
 * maps and read through the same codec (run-store.ts), so what one store refuses the other refuses.
 * Fencing mirrors the Redis scripts; the queue's job locks (which live in BullMQ) are asked of
 * `lockOf`. Finished runs' records and logs expire after FINISHED_TTL_S of the store's clock.
 */
import { EventEmitter } from 'node:events';
import { CorralError, NotFoundError, codeForOutcome, type ErrorCode } from '../domain/errors';
import type { LiveDelta, RunEvent, RunOutcome, RunStatus } from '../domain/events';
import type { RunSpec } from '../domain/run-spec';
import {
  DEFAULT_TENANT, EVENTS_MAXLEN, FINISHED_TTL_S, LIST_SCAN_MAX, decodeCursor, encodeCursor, fieldsOfUpdate, recordOfSpec, specOfRecord, viewOfRecord,
  type AppendOutcome, type ApprovalAnswer, type EndGuard, type ListQuery, type LiveFeed, type LiveRow, type PendingApproval, type RunPage, type RunStore, type RunUpdate, type RunView,
} from './run-store';

interface Entry { id: string; field: 'e' | 'd'; value: string }

export interface MemoryRunStoreOptions {
  /** The token holding a job lock key (as BullMQ's lock would); absent: a claim with a lockKey never lands. */
  lockOf?: (lockKey: string) => string | undefined;
  clock?: () => number;
  eventsMaxLen?: number;
}

export class MemoryRunStore implements RunStore {
  private readonly records = new Map<string, Map<string, string>>();
  private readonly expiresAt = new Map<string, number>();
  private readonly logs = new Map<string, Entry[]>();
  private readonly byTime = new Map<string, number>();
  private readonly byTenant = new Map<string, Map<string, number>>();
  private readonly counts = new Map<string, Map<string, number>>();
  private readonly parked = new Map<string, Map<string, number>>();
  private readonly answers = new Map<string, ApprovalAnswer>();
  private readonly events = new EventEmitter();
  private lastMs = 0;
  private seq = 0;
  private readonly clock: () => number;
  private readonly eventsMaxLen: number;

  constructor(private readonly o: MemoryRunStoreOptions = {}) {
    this.clock = o.clock ?? Date.now;
    this.eventsMaxLen = o.eventsMaxLen ?? EVENTS_MAXLEN;
    this.events.setMaxListeners(0);
  }

  /** The record, unless it expired (then it and its log are gone, as Redis would have them). */
  private rec(runId: string): Map<string, string> | undefined {
    const at = this.expiresAt.get(runId);
    if (at !== undefined && at <= this.clock()) {
      this.records.delete(runId);
      this.logs.delete(runId);
      this.expiresAt.delete(runId);
    }
    return this.records.get(runId);
  }

  private setStatus(r: Map<string, string>, status: RunStatus): void {
    const old = r.get('status');
    if (old === status) return;
    const tenant = r.get('tenant') ?? DEFAULT_TENANT;
    for (const scope of ['*', tenant]) {
      let c = this.counts.get(scope);
      if (!c) this.counts.set(scope, (c = new Map()));
      if (old) c.set(old, (c.get(old) ?? 0) - 1);
      c.set(status, (c.get(status) ?? 0) + 1);
    }
    r.set('status', status);
  }

  private owns(r: Map<string, string>, fence: string | undefined): boolean {
    return fence === undefined || r.get('owner') === fence;
  }

  async create(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant = DEFAULT_TENANT): Promise<void> {
    if (this.rec(runId)) return;
    const r = new Map(Object.entries(recordOfSpec(spec, now, tenant)));
    this.records.set(runId, r);
    this.setStatus(r, 'queued');
    this.byTime.set(runId, now.getTime());
    let t = this.byTenant.get(tenant);
    if (!t) this.byTenant.set(tenant, (t = new Map()));
    t.set(runId, now.getTime());
  }

  async ensure(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant = DEFAULT_TENANT): Promise<void> {
    if (!this.rec(runId)) await this.create(runId, spec, now, tenant);
  }

  async tenantOf(runId: string): Promise<string | null> {
    const r = this.rec(runId);
    return r?.get('status') ? (r.get('tenant') ?? DEFAULT_TENANT) : null;
  }

  async claim(runId: string, owner: string, lockKey?: string): Promise<boolean> {
    if (lockKey !== undefined && this.o.lockOf?.(lockKey) !== owner) return false;
    const r = this.rec(runId);
    if (r?.has('finishedAt')) return false;
    // As HSET on a missing hash: the claim makes a record holding only the owner (no status: not a run).
    const rr = r ?? new Map<string, string>();
    if (!r) this.records.set(runId, rr);
    rr.set('owner', owner);
    return true;
  }

  async update(runId: string, u: RunUpdate, fence?: string): Promise<boolean> {
    const fields = fieldsOfUpdate(u);
    if (!Object.keys(fields).length && !u.status) return true;
    const r = this.rec(runId);
    if (!r || !this.owns(r, fence)) return false;
    if (fields.finishedAt !== undefined && r.has('finishedAt') && r.get('finishedAt') !== fields.finishedAt) return false;
    if (u.status) this.setStatus(r, u.status);
    for (const [k, v] of Object.entries(fields)) r.set(k, v);
    return true;
  }

  async durable<T>(write: () => Promise<T>): Promise<T> {
    return write();
  }

  async end(runId: string, outcome: RunOutcome, reason: string, at: Date, guard?: EndGuard, code?: ErrorCode): Promise<boolean> {
    const r = this.rec(runId);
    if (!r || r.has('finishedAt')) return false;
    if (guard === 'unclaimed' && r.has('owner')) return false;
    if (typeof guard === 'object') {
      if (guard.lockKey === undefined ? r.get('owner') !== guard.fence : this.o.lockOf?.(guard.lockKey) !== guard.fence) return false;
      r.set('owner', guard.fence);
    }
    this.setStatus(r, outcome);
    r.set('outcome', outcome).set('reason', reason).set('finishedAt', at.toISOString());
    if (outcome !== 'succeeded') r.set('errorCode', codeForOutcome(outcome, code));
    await this.expireFinished(runId);
    return true;
  }

  async expireFinished(runId: string): Promise<void> {
    if (this.rec(runId)) this.expiresAt.set(runId, this.clock() + FINISHED_TTL_S * 1000);
  }

  async get(runId: string): Promise<RunView | null> {
    const r = this.rec(runId);
    return r ? viewOfRecord(runId, Object.fromEntries(r)) : null;
  }

  async getSpec(runId: string): Promise<RunSpec | null> {
    return specOfRecord(runId, this.rec(runId)?.get('spec'));
  }

  /** Ids of an index, newest first (ties: the larger id first, as ZREVRANGE orders them). */
  private newestFirst(index: Map<string, number>): Array<{ id: string; score: number }> {
    return [...index].map(([id, score]) => ({ id, score })).sort((a, b) => b.score - a.score || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
  }

  async list(limit: number): Promise<RunView[]> {
    const views = await Promise.all(this.newestFirst(this.byTime).slice(0, limit).map((r) => this.get(r.id)));
    return views.filter((v): v is RunView => v !== null);
  }

  async listPage(q: ListQuery): Promise<RunPage> {
    const index = this.byTenant.get(q.tenant) ?? new Map<string, number>();
    const order = this.newestFirst(index);
    let start = 0;
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      const rank = order.findIndex((r) => r.id === c.id);
      start = rank >= 0 ? rank + 1 : order.filter((r) => r.score >= c.score).length;
    }
    const want = new Set<string>(q.statuses ?? []);
    const runs: RunView[] = [];
    let examined = 0;
    let last: { id: string; score: number } | null = null;
    while (runs.length < q.limit && examined < LIST_SCAN_MAX) {
      const r = order[start];
      if (!r) return { runs, next: null };
      examined += 1;
      last = r;
      const v = await this.get(r.id);
      if (!v) {
        index.delete(r.id); // an expired record leaves the index as it is met
        order.splice(start, 1);
        continue;
      }
      start += 1;
      if (!want.size || want.has(v.status)) runs.push(v);
    }
    return { runs, next: order[start] && last ? encodeCursor(last) : null };
  }

  async statusCounts(tenant?: string): Promise<Record<string, number>> {
    return Object.fromEntries([...(this.counts.get(tenant ?? '*') ?? [])].map(([k, v]) => [k, Math.max(0, v)]));
  }

  async countDockerWait(runId: string): Promise<number> {
    let r = this.rec(runId);
    if (!r) this.records.set(runId, (r = new Map()));
    const n = Number(r.get('dockerWaits') ?? 0) + 1;
    r.set('dockerWaits', String(n));
    return n;
  }

  private nextId(): string {
    const ms = Math.max(this.clock(), this.lastMs);
    this.seq = ms === this.lastMs ? this.seq + 1 : 0;
    this.lastMs = ms;
    return `${ms}-${this.seq}`;
  }

  private append(runId: string, field: 'e' | 'd', value: string, fence?: string): boolean {
    if (fence !== undefined) {
      const r = this.rec(runId);
      if (!r || r.get('owner') !== fence) return false;
    }
    let log = this.logs.get(runId);
    if (!log) this.logs.set(runId, (log = []));
    log.push({ id: this.nextId(), field, value });
    if (log.length > this.eventsMaxLen) log.splice(0, log.length - this.eventsMaxLen);
    this.events.emit(`log:${runId}`);
    return true;
  }

  async appendEvent(e: RunEvent, fence?: string): Promise<boolean> {
    return this.append(e.runId, 'e', JSON.stringify(e), fence);
  }

  async appendDelta(d: LiveDelta, fence?: string): Promise<boolean> {
    return this.append(d.runId, 'd', JSON.stringify(d), fence);
  }

  async appendInOrder(e: RunEvent, fence: string, base: number): Promise<AppendOutcome> {
    const r = this.rec(e.runId);
    if (!r || r.get('owner') !== fence) return { kind: 'stale' };
    const last = r.get('lastSeqOwner') === fence ? Number(r.get('lastSeq')) : base;
    if (e.seq <= last) return { kind: 'duplicate' };
    if (e.seq > last + 1) return { kind: 'gap', last };
    r.set('lastSeq', String(e.seq)).set('lastSeqOwner', fence);
    this.append(e.runId, 'e', JSON.stringify(e), fence);
    return { kind: 'appended' };
  }

  async readLive(runId: string, after = '0', count = 500): Promise<Array<{ id: string; event?: RunEvent; delta?: LiveDelta }>> {
    this.rec(runId);
    const log = this.logs.get(runId) ?? [];
    return log.filter((x) => after === '0' || later(x.id, after)).slice(0, count)
      .map((x) => (x.field === 'd' ? { id: x.id, delta: JSON.parse(x.value) as LiveDelta } : { id: x.id, event: JSON.parse(x.value) as RunEvent }));
  }

  async readEvents(runId: string, after = '0', count = 500): Promise<Array<{ id: string; event: RunEvent }>> {
    this.rec(runId);
    const log = this.logs.get(runId) ?? [];
    return log.filter((x) => x.field === 'e' && (after === '0' || later(x.id, after))).slice(0, count).map((x) => ({ id: x.id, event: JSON.parse(x.value) as RunEvent }));
  }

  liveFeed(): LiveFeed {
    return {
      next: (runId, after, timeoutMs, signal) => new Promise<LiveRow[]>((resolve) => {
        const rows = () => (this.logs.get(runId) ?? []).filter((x) => after === '0' || later(x.id, after)).slice(0, 100)
          .map((x) => (x.field === 'd' ? { id: x.id, delta: JSON.parse(x.value) as LiveDelta } : { id: x.id, event: JSON.parse(x.value) as RunEvent }));
        const now = rows();
        if (now.length || signal?.aborted) return resolve(now);
        const done = (out: LiveRow[]) => {
          clearTimeout(timer);
          this.events.off(`log:${runId}`, onGrow);
          signal?.removeEventListener('abort', stop);
          resolve(out);
        };
        const onGrow = () => done(rows());
        const stop = () => done([]);
        const timer = setTimeout(stop, Math.max(1, timeoutMs));
        this.events.on(`log:${runId}`, onGrow);
        signal?.addEventListener('abort', stop, { once: true });
      }),
    };
  }

  async setPending(runId: string, p: PendingApproval, fence?: string): Promise<boolean> {
    const r = this.rec(runId);
    if (!r || !this.owns(r, fence) || !r.has('status') || r.has('finishedAt')) return false;
    r.set(`pending:${p.callId}`, JSON.stringify(p));
    this.setStatus(r, 'awaiting_approval');
    return true;
  }

  async clearPending(runId: string, callId: string, fence?: string): Promise<boolean> {
    const r = this.rec(runId);
    if (!r) return fence === undefined;
    if (!this.owns(r, fence)) return false;
    r.delete(`pending:${callId}`);
    if (r.has('finishedAt')) return true;
    if (![...r.keys()].some((k) => k.startsWith('pending:'))) this.setStatus(r, 'running');
    return true;
  }

  async answer(runId: string, callId: string, a: ApprovalAnswer): Promise<void> {
    const r = this.rec(runId);
    if (!r?.has(`pending:${callId}`)) {
      if (r?.has(`answered:${callId}`)) throw new CorralError('conflict', `call ${callId} of run ${runId} was already answered`);
      if (!r?.has('status')) throw new NotFoundError(`no run with id ${runId}`);
      throw new NotFoundError(`run ${runId} has no pending approval for call ${callId}`);
    }
    if (r.has(`answered:${callId}`)) throw new CorralError('conflict', `call ${callId} of run ${runId} was already answered`);
    r.set(`answered:${callId}`, JSON.stringify(a));
    this.answers.set(`${runId}/${callId}`, a);
    this.events.emit(`answer:${runId}/${callId}`);
  }

  async waitAnswer(runId: string, callId: string, timeoutMs: number, signal?: AbortSignal): Promise<ApprovalAnswer | null> {
    const key = `${runId}/${callId}`;
    const take = () => {
      const a = this.answers.get(key);
      if (a) this.answers.delete(key); // BLPOP takes it: one waiter gets one answer
      return a;
    };
    const now = take();
    if (now) return now;
    if (signal?.aborted) throw abortReason(signal);
    return new Promise<ApprovalAnswer | null>((resolve, reject) => {
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        this.events.off(`answer:${key}`, onAnswer);
        signal?.removeEventListener('abort', onAbort);
        fn();
      };
      const onAnswer = () => {
        const a = take();
        if (a) finish(() => resolve(a));
      };
      const onAbort = () => finish(() => reject(abortReason(signal!)));
      const timer = setTimeout(() => finish(() => resolve(null)), Math.max(0, timeoutMs));
      this.events.on(`answer:${key}`, onAnswer);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async reserveParking(tenant: string, runId: string, untilMs: number, cap: number, nowMs: number): Promise<boolean> {
    let p = this.parked.get(tenant);
    if (!p) this.parked.set(tenant, (p = new Map()));
    for (const [id, until] of p) if (until <= nowMs) p.delete(id);
    if (!p.has(runId) && p.size >= cap) return false;
    p.set(runId, untilMs);
    return true;
  }

  async releaseParking(tenant: string, runId: string): Promise<void> {
    this.parked.get(tenant)?.delete(runId);
  }

  async parkedCount(tenant: string, nowMs: number): Promise<number> {
    return [...(this.parked.get(tenant) ?? new Map<string, number>()).values()].filter((until) => until > nowMs).length;
  }

  /** Cancel requests go to these listeners (the Redis store publishes them to the workers instead). */
  onCancel(fn: (runId: string) => void): () => void {
    this.events.on('cancel', fn);
    return () => this.events.off('cancel', fn);
  }

  async requestCancel(runId: string): Promise<void> {
    this.events.emit('cancel', runId);
  }

  async ping(): Promise<void> {}
}

/** Whether stream id `a` ("ms-seq") comes after `b`. */
function later(a: string, b: string): boolean {
  const [am = 0, as = 0] = a.split('-').map(Number);
  const [bm = 0, bs = 0] = b.split('-').map(Number);
  return am > bm || (am === bm && as > bs);
}

function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new CorralError('cancelled', 'the run was cancelled');
}
