/**
 * A worker's sandbox slots: at most `size` runs execute at once (CORRAL_CONCURRENCY). A run that
 * waits for a human parks: it gives its slot back while it waits (its sandbox and its place in the
 * process are kept) and takes a slot again, ahead of every new run, once the answer is in.
 *
 * `parked` counts leases that gave their slot back and have not taken one again; the worker keeps
 * that many extra queue consumers running (start-worker.ts), so a parked run frees its slot for the
 * queue — other tenants' runs start — without the worker taking more jobs than it has slots for.
 */
import { CancelledError } from '../domain/errors';

export interface SlotLease {
  /** True while this lease holds a slot. */
  readonly held: boolean;
  /** Takes a slot (a new run: after every waiting resumed run). */
  acquire(signal?: AbortSignal): Promise<void>;
  /** Gives the slot back while the run waits for a human. */
  park(): void;
  /** Takes a slot again after a park, ahead of new runs. */
  unpark(signal?: AbortSignal): Promise<void>;
  /** Gives the slot back for good (the job ended); safe to call in any state. */
  release(): void;
}

interface Waiter {
  resume: boolean;
  grant: () => void;
}

export class WorkerSlots {
  private free: number;
  private readonly waiters: Waiter[] = [];
  private parkedCount = 0;

  constructor(
    readonly size: number,
    /** Called with the number of parked leases whenever it changes. */
    private readonly onParked: (parked: number) => void = () => undefined,
  ) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`slots: size must be a positive integer, not ${size}`);
    this.free = size;
  }

  get parked(): number {
    return this.parkedCount;
  }
  get inUse(): number {
    return this.size - this.free;
  }
  get waiting(): number {
    return this.waiters.length;
  }

  lease(): SlotLease {
    let state: 'none' | 'held' | 'parked' | 'waiting' = 'none';
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the lease's methods act on these slots
    const self = this;
    return {
      get held() {
        return state === 'held';
      },
      async acquire(signal) {
        if (state !== 'none') throw new Error(`slot lease: acquire in state ${state}`);
        state = 'waiting';
        try {
          await self.take(false, signal);
          state = 'held';
        } catch (err) {
          state = 'none';
          throw err;
        }
      },
      park() {
        if (state !== 'held') return;
        state = 'parked';
        self.parkedCount += 1;
        self.give();
        self.onParked(self.parkedCount);
      },
      async unpark(signal) {
        if (state !== 'parked') return;
        try {
          await self.take(true, signal);
          state = 'held';
        } finally {
          // Taken again, or given up (cancelled while waiting): either way no longer parked.
          if (state !== 'held') state = 'none';
          self.parkedCount -= 1;
          self.onParked(self.parkedCount);
        }
      },
      release() {
        if (state === 'held') self.give();
        else if (state === 'parked') {
          self.parkedCount -= 1;
          self.onParked(self.parkedCount);
        }
        state = 'none';
      },
    };
  }

  private take(resume: boolean, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(new CancelledError('the run was cancelled while it waited for a slot'));
    // Resumed runs first; a new run takes a free slot only when no resumed run waits for one.
    if (this.free > 0 && (resume || !this.waiters.some((w) => w.resume))) {
      this.free -= 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        resume,
        grant: () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.waiters.indexOf(w);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(new CancelledError('the run was cancelled while it waited for a slot'));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      // Resumed runs queue ahead of new runs, each group in arrival order.
      const at = resume ? this.waiters.findIndex((x) => !x.resume) : -1;
      if (at >= 0) this.waiters.splice(at, 0, w);
      else this.waiters.push(w);
    });
  }

  private give(): void {
    const next = this.waiters.shift();
    if (next) next.grant();
    else this.free += 1;
  }
}
