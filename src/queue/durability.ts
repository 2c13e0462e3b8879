/**
 * Writes that must survive a failover. Redis replicates asynchronously: a primary can acknowledge a
 * write and die before any replica has it, and Sentinel then promotes a replica without it. For the
 * few writes corral makes promises on (a run's record and job before the API answers 201, a worker's
 * claim before a run starts, a run's end), `confirm` runs the write and then `WAIT replicas timeout`
 * on the same connection, and throws NotDurableError unless that many replicas acknowledged it — on
 * the same connection session: ioredis re-sends unanswered commands after a reconnect, and a WAIT
 * sent on a fresh connection (to a new primary, with nothing written on it yet) would count nothing
 * and succeed at once, so a reconnect between the write and the WAIT's answer is a failure too.
 * With `replicas` 0 the write simply runs.
 */
import type { Redis } from 'ioredis';
import { StoreUnavailableError } from '../domain/errors';

export interface DurabilityPolicy {
  /** Replicas that must acknowledge a write that matters (0: none; no WAIT). */
  replicas: number;
  /** The WAIT's timeout (ms). */
  timeoutMs: number;
}

/** The write ran (and `result` is what it returned) but was not confirmed by enough replicas: a failover may take it back. */
export class NotDurableError extends StoreUnavailableError {
  constructor(message: string, readonly result: unknown, options?: { cause?: unknown }) {
    super(message, options);
  }
}

export class Durability {
  private session = 0;

  constructor(private readonly conn: Redis, readonly policy: DurabilityPolicy) {
    conn.on('ready', () => {
      this.session += 1;
    });
  }

  get enabled(): boolean {
    return this.policy.replicas > 0;
  }

  /** Runs `write` (which must write on this connection), then waits for the replicas; NotDurableError when they do not confirm it. */
  async confirm<T>(write: () => Promise<T>): Promise<T> {
    if (!this.enabled) return write();
    const session = this.session;
    const ready = this.conn.status === 'ready';
    const result = await write();
    let acked: number;
    try {
      acked = await this.conn.wait(this.policy.replicas, this.policy.timeoutMs);
    } catch (err) {
      throw new NotDurableError(`Redis did not confirm the write (WAIT failed: ${(err as Error).message})`, result, { cause: err });
    }
    if (!ready || session !== this.session) {
      throw new NotDurableError('the Redis connection changed while the write was confirmed (a failover or a reconnect): it may not have reached the current primary\'s replicas', result);
    }
    if (acked < this.policy.replicas) {
      throw new NotDurableError(`only ${acked} of ${this.policy.replicas} Redis replica(s) confirmed the write within ${this.policy.timeoutMs} ms`, result);
    }
    return result;
  }
}
