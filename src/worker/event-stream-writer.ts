/**
 * A run's events onto its Redis log (the stream SSE watchers read), in order and without holes. One
 * append is in flight at a time (appendInOrder checks the event's predecessor is on the log); when
 * a failover lost the primary's last appends, the store answers `gap` and the lost events are
 * appended again from the run's own record of them (the recorder keeps every event), then the event
 * that found the gap. A watcher may see an event twice (it read it from the old primary, and it is
 * appended again on the new one: same seq), never a hole. Writes after another attempt claimed the
 * run are discarded (`onStale`).
 */
import type { RunEvent } from '../domain/events';
import type { RunStore } from '../queue/run-store';

export interface EventStreamWriterOptions {
  store: Pick<RunStore, 'appendInOrder'>;
  /** This attempt's job lock token (it owns the run). */
  fence: string;
  /** The seq before this attempt's first event (a resumed run's earlier events are on the log already). */
  base: number;
  /** Every event of the run so far, in seq order (the recorder's). */
  events: () => readonly RunEvent[];
  onStale: (e: RunEvent) => void;
  onError: (err: Error, e: RunEvent) => void;
  /** Told how many events were appended again after a failover lost them. */
  onRefill?: (from: number, to: number) => void;
}

export class EventStreamWriter {
  private tail: Promise<void> = Promise.resolve();

  constructor(private readonly o: EventStreamWriterOptions) {}

  /** Queues `e`; the promise settles (never rejects) once it is on the log, discarded, or failed. */
  push(e: RunEvent): Promise<void> {
    this.tail = this.tail.then(() => this.write(e)).catch((err: Error) => this.o.onError(err, e));
    return this.tail;
  }

  private async write(e: RunEvent): Promise<void> {
    // Each round either appends, or refills a hole that ends before e: the hole shrinks every round.
    for (let round = 0; round < 4; round++) {
      const r = await this.o.store.appendInOrder(e, this.o.fence, this.o.base);
      if (r.kind === 'stale') return this.o.onStale(e);
      if (r.kind !== 'gap') return;
      const lost = this.o.events().filter((x) => x.seq > r.last && x.seq < e.seq);
      this.o.onRefill?.(r.last + 1, e.seq - 1);
      for (const x of lost) {
        const again = await this.o.store.appendInOrder(x, this.o.fence, this.o.base);
        if (again.kind === 'stale') return this.o.onStale(e);
        if (again.kind === 'gap') break;
      }
    }
    throw new Error(`event ${e.seq} (${e.type}) could not be appended after the events before it`);
  }
}
