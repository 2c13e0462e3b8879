/**
 * A worker's writes that matter (its claim of a run, the run's end), made durable: written, then
 * confirmed by the replicas (RunStore.durable). Unconfirmed — a failover is under way, or the new
 * primary has no replica yet — the write is made again (each is idempotent: the same claim, the same
 * end) until a replica confirms it, or `maxWaitMs` has passed: then the worker goes on with what the
 * primary said, and logs it, rather than hold a run forever.
 */
import { NotDurableError } from '../queue/durability';
import type { RunStore } from '../queue/run-store';

export interface DurablyOptions {
  store: Pick<RunStore, 'durable'>;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  runId: string;
  /** What is written, for the log ("claim", "end"). */
  what: string;
  maxWaitMs: number;
  clock?: () => number;
  /** Resolves after `ms` (tests pass a fake). */
  sleep?: (ms: number) => Promise<void>;
}

export async function durably<T>(write: () => Promise<T>, o: DurablyOptions): Promise<T> {
  const clock = o.clock ?? Date.now;
  const sleep = o.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const start = clock();
  for (let tries = 1; ; tries++) {
    try {
      const result = await o.store.durable(write);
      if (tries > 1) o.log('a replica confirmed the write', { runId: o.runId, what: o.what, tries, waitedMs: clock() - start });
      return result;
    } catch (err) {
      if (!(err instanceof NotDurableError)) throw err;
      if (clock() - start >= o.maxWaitMs) {
        o.log('no Redis replica confirmed the write in time: going on with the primary\'s answer (a failover now could take it back)', {
          level: 'warn', runId: o.runId, what: o.what, tries, waitedMs: clock() - start, error: err.message,
        });
        return err.result as T;
      }
      if (tries === 1) o.log('waiting for a Redis replica to confirm the write', { runId: o.runId, what: o.what, error: err.message });
      await sleep(Math.min(100 * tries, 1000));
    }
  }
}
