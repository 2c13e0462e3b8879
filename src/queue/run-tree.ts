/**
 * Parent and child runs in Redis (sub-runs): which runs a run started, the suspended state of a run
 * that waits for them, and cancel requests that must reach a run no worker holds. Keys (beside the
 * RunStore's, same prefix):
 *   {p}:run:{id}:children     list: JSON {id, callId} of each sub-run, in start order
 *   {p}:run:{id}:suspension   string: the worker's suspension record (worker/suspension.ts), while it waits
 *   {p}:run:{id}              hash field `cancelRequested` ("1"): set by a cancel, read by the run's
 *                             worker at start and resume (a run waiting for sub-runs holds no worker)
 *                             hash field `parent` (JSON {runId, callId, depth}) on a child run
 *
 * cancelTree() cancels a run and everything below it: it marks each run, removes the child jobs still
 * queued (BullMQ then counts them as done for their parent) and asks workers to abort the running ones.
 * A waiting parent resumes when its last child ends and, seeing the mark, ends `cancelled` itself.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunStore, RunView } from './run-store';

const TTL_S = 14 * 24 * 3600;
/** A suspension record larger than this is refused (the conversation is compacted long before). */
export const MAX_SUSPENSION_BYTES = 16 * 1024 * 1024;

export interface ChildLink {
  id: string;
  callId: string;
}

export class RunTree {
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
  ) {}

  private key(runId: string): string {
    return `${this.prefix}:run:${runId}`;
  }

  /** Records the child runs of `parentId` (their run records exist already) and marks each child with its parent. */
  async addChildren(parentId: string, children: ReadonlyArray<ChildLink & { depth: number }>): Promise<void> {
    const m = this.redis.multi();
    for (const c of children) {
      m.rpush(`${this.key(parentId)}:children`, JSON.stringify({ id: c.id, callId: c.callId }));
      m.hset(this.key(c.id), 'parent', JSON.stringify({ runId: parentId, callId: c.callId, depth: c.depth }));
    }
    m.expire(`${this.key(parentId)}:children`, TTL_S);
    await m.exec();
  }

  async children(parentId: string): Promise<ChildLink[]> {
    const rows = await this.redis.lrange(`${this.key(parentId)}:children`, 0, 999);
    return rows.flatMap((r) => {
      try {
        const v = JSON.parse(r) as Partial<ChildLink>;
        return typeof v.id === 'string' && typeof v.callId === 'string' ? [{ id: v.id, callId: v.callId }] : [];
      } catch {
        return [];
      }
    });
  }

  /** Stores a run's suspension record (JSON text), fenced by the run's owner token when given. */
  async saveSuspension(runId: string, json: string, fence?: string): Promise<boolean> {
    if (Buffer.byteLength(json) > MAX_SUSPENSION_BYTES) throw new RangeError(`the suspension record is ${Buffer.byteLength(json)} bytes, over ${MAX_SUSPENSION_BYTES}`);
    if (fence === undefined) {
      await this.redis.set(`${this.key(runId)}:suspension`, json, 'EX', TTL_S);
      return true;
    }
    const script = `if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1`;
    return (await this.redis.eval(script, 2, this.key(runId), `${this.key(runId)}:suspension`, fence, json, TTL_S)) === 1;
  }

  async loadSuspension(runId: string): Promise<string | null> {
    return this.redis.get(`${this.key(runId)}:suspension`);
  }

  async clearSuspension(runId: string): Promise<void> {
    await this.redis.del(`${this.key(runId)}:suspension`);
  }

  async cancelRequested(runId: string): Promise<boolean> {
    return (await this.redis.hget(this.key(runId), 'cancelRequested')) === '1';
  }

  /**
   * Cancels `runId` and every run below it that has not ended. Queued child jobs are removed (and
   * their runs end `cancelled`); running ones get the cancel message their worker listens for.
   * Returns the ids asked to stop.
   */
  async cancelTree(store: RunStore, queue: Queue, runId: string, now: () => Date, depth = 0): Promise<string[]> {
    const stopped: string[] = [];
    await this.redis.hset(this.key(runId), 'cancelRequested', '1');
    if (depth < 16) {
      for (const c of await this.children(runId)) {
        const child = await store.get(c.id);
        if (!child || child.finishedAt) continue;
        stopped.push(...(await this.cancelTree(store, queue, c.id, now, depth + 1)));
        const job = await queue.getJob(c.id);
        if (job && ((await job.isWaiting()) || (await job.isDelayed()))) {
          try {
            await job.remove();
            await store.end(c.id, 'cancelled', 'its parent run was cancelled before it started', now());
            continue;
          } catch {
            // A worker took it meanwhile: it sees the mark at start, or gets the message below.
          }
        }
      }
    }
    await store.requestCancel(runId);
    stopped.push(runId);
    return stopped;
  }

  /** The child runs of a run as GET /v1/runs/:id shows them. */
  async childViews(store: RunStore, parentId: string): Promise<Array<Pick<RunView, 'id' | 'status' | 'task' | 'createdAt'> & Partial<RunView> & { callId: string }>> {
    const out = [];
    for (const c of await this.children(parentId)) {
      const v = await store.get(c.id);
      if (!v) continue;
      out.push({
        id: v.id, callId: c.callId, status: v.status, task: v.task.slice(0, 500), createdAt: v.createdAt,
        ...(v.startedAt ? { startedAt: v.startedAt } : {}), ...(v.finishedAt ? { finishedAt: v.finishedAt } : {}),
        ...(v.outcome ? { outcome: v.outcome } : {}), ...(v.reason ? { reason: v.reason } : {}), ...(v.usage ? { usage: v.usage } : {}),
      });
    }
    return out;
  }
}
