/**
 * EventRecorder: the one `emit` a run is given. It stamps each event with the run id, a sequence
 * number (1, 2, 3 …) and an ISO timestamp from the injected clock, keeps every stamped event in
 * memory (the report is built from them) and fans it out to the sinks. A failing sink — one that
 * throws, or returns a promise that rejects — never stops the other sinks or the run: its error is
 * collected in `sinkErrors`.
 *
 * Volume is bounded whatever produces the events: past `maxEvents` events or `maxBytes` bytes of
 * JSON, one `log.truncated` marker is recorded and later events are only counted by type — except
 * the few that close a run (sandbox removal, artifacts, egress totals, the end itself), which are
 * kept within a small reserve. Before `run.finished` a final marker gives the counts. Dropped events
 * take no sequence number, so the kept log has no gaps. The same bound holds for the JSONL file, the
 * Redis stream and memory, since every sink sees only what is kept.
 */
import type { Emit, RunEvent, RunEventBody } from '../domain/events';

export type EventSink = (event: RunEvent) => void;

export interface EventRecorderOptions {
  runId: string;
  now: () => Date;
  sinks: EventSink[];
  /** Events kept at most (default 20,000). */
  maxEvents?: number;
  /** Bytes of JSON kept at most (default 16 MiB). */
  maxBytes?: number;
  /**
   * The events an earlier leg of the run recorded (a run resumed after waiting for sub-runs): they
   * are kept for the report, numbering goes on after them and they count toward the caps. Counts of
   * events an earlier leg dropped after a cap are not carried over (its log.truncated marker is).
   */
  prior?: readonly RunEvent[];
}

/** Kept after truncation (within RESERVE_BYTES): they close the run and its report. */
const CLOSING = new Set<RunEventBody['type']>(['sandbox.removed', 'artifact', 'workspace.changes', 'egress.proxy', 'egress.stats', 'budget.exceeded', 'done.check']);
const RESERVE_BYTES = 1024 * 1024;

export class EventRecorder {
  readonly runId: string;
  /** Errors thrown (or rejected) by sinks, each naming the sink index and the event it failed on. */
  readonly sinkErrors: Error[] = [];
  private readonly now: () => Date;
  private readonly sinks: EventSink[];
  private readonly recorded: RunEvent[] = [];
  private readonly maxEvents: number;
  private readonly maxBytes: number;
  private seq = 0;
  private bytes = 0;
  private reserveUsed = 0;
  private truncated = false;
  private readonly dropped: Record<string, number> = {};
  private droppedBytes = 0;

  constructor(opts: EventRecorderOptions) {
    this.runId = opts.runId;
    this.now = opts.now;
    this.sinks = [...opts.sinks];
    this.maxEvents = opts.maxEvents ?? 20_000;
    this.maxBytes = opts.maxBytes ?? 16 * 1024 * 1024;
    for (const e of opts.prior ?? []) {
      this.recorded.push(Object.freeze({ ...e }));
      this.seq = Math.max(this.seq, e.seq);
      this.bytes += Buffer.byteLength(JSON.stringify(e));
      if (e.type === 'log.truncated') this.truncated = true;
    }
  }

  readonly emit: Emit = (body: RunEventBody): void => {
    const size = Buffer.byteLength(JSON.stringify(body)) + 80;
    if (!this.truncated && (this.seq + 1 > this.maxEvents - 1 || this.bytes + size > this.maxBytes - 1024)) {
      this.truncated = true;
      const why = this.seq + 1 > this.maxEvents - 1 ? `${this.maxEvents.toLocaleString('en-US')} events (CORRAL_LOG_MAX_EVENTS)` : `${this.maxBytes.toLocaleString('en-US')} bytes (CORRAL_LOG_MAX_BYTES)`;
      this.record(this.marker(`the log reached its cap of ${why}; later events are counted, not kept, except the run's end`, false));
    }
    if (this.truncated && body.type !== 'run.finished') {
      if (CLOSING.has(body.type) && this.reserveUsed + size <= RESERVE_BYTES) this.reserveUsed += size;
      else {
        this.dropped[body.type] = (this.dropped[body.type] ?? 0) + 1;
        this.droppedBytes += size;
        return;
      }
    }
    if (this.truncated && body.type === 'run.finished') this.record(this.marker(`the log was truncated: ${this.droppedTotal().toLocaleString('en-US')} events were not kept`, true));
    this.record(body, size);
  };

  /** Every event kept so far, stamped, in order. */
  events(): readonly RunEvent[] {
    return this.recorded;
  }

  /** Whether a cap was reached, and how many events of each type were not kept. */
  truncation(): { truncated: boolean; dropped: Readonly<Record<string, number>>; droppedBytes: number } {
    return { truncated: this.truncated, dropped: { ...this.dropped }, droppedBytes: this.droppedBytes };
  }

  private droppedTotal(): number {
    return Object.values(this.dropped).reduce((a, b) => a + b, 0);
  }

  private marker(reason: string, final: boolean): RunEventBody {
    return { type: 'log.truncated', reason, maxEvents: this.maxEvents, maxBytes: this.maxBytes, final, dropped: { ...this.dropped }, droppedBytes: this.droppedBytes };
  }

  /** `size`: the body's JSON bytes plus room for the stamp (measured once in emit). */
  private record(body: RunEventBody, size = Buffer.byteLength(JSON.stringify(body)) + 80): void {
    this.seq += 1;
    const stamp = { runId: this.runId, seq: this.seq, ts: this.now().toISOString() };
    // Stamp first for a readable log line; stamp again last so a body can never override it.
    const event = Object.freeze(Object.assign({}, stamp, body, stamp)) as RunEvent;
    this.bytes += size;
    this.recorded.push(event);
    this.sinks.forEach((sink, index) => {
      try {
        const result: unknown = sink(event);
        if (isThenable(result)) result.then(undefined, (err: unknown) => this.recordSinkError(err, index, event));
      } catch (err) {
        this.recordSinkError(err, index, event);
      }
    });
  }

  private recordSinkError(err: unknown, index: number, event: RunEvent): void {
    if (this.sinkErrors.length >= 100) return;
    const message = err instanceof Error ? err.message : String(err);
    this.sinkErrors.push(new Error(`sink ${index} failed on seq ${event.seq} (${event.type}): ${message}`, { cause: err }));
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}
