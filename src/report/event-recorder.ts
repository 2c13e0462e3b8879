/**
 * EventRecorder: the one `emit` a run is given. It stamps each event with the run id, a sequence
 * number (1, 2, 3 …) and an ISO timestamp from the injected clock, keeps every stamped event in
 * memory (the report is built from them) and fans it out to the sinks. A failing sink — one that
 * throws, or returns a promise that rejects — never stops the other sinks or the run: its error is
 * collected in `sinkErrors`.
 */
import type { Emit, RunEvent, RunEventBody } from '../domain/events';

export type EventSink = (event: RunEvent) => void;

export interface EventRecorderOptions {
  runId: string;
  now: () => Date;
  sinks: EventSink[];
}

export class EventRecorder {
  readonly runId: string;
  /** Errors thrown (or rejected) by sinks, each naming the sink index and the event it failed on. */
  readonly sinkErrors: Error[] = [];
  private readonly now: () => Date;
  private readonly sinks: EventSink[];
  private readonly recorded: RunEvent[] = [];
  private seq = 0;

  constructor(opts: EventRecorderOptions) {
    this.runId = opts.runId;
    this.now = opts.now;
    this.sinks = [...opts.sinks];
  }

  readonly emit: Emit = (body: RunEventBody): void => {
    this.seq += 1;
    const stamp = { runId: this.runId, seq: this.seq, ts: this.now().toISOString() };
    // Stamp first for a readable log line; stamp again last so a body can never override it.
    const event = Object.freeze(Object.assign({}, stamp, body, stamp)) as RunEvent;
    this.recorded.push(event);
    this.sinks.forEach((sink, index) => {
      try {
        const result: unknown = sink(event);
        if (isThenable(result)) result.then(undefined, (err: unknown) => this.recordSinkError(err, index, event));
      } catch (err) {
        this.recordSinkError(err, index, event);
      }
    });
  };

  /** Every event emitted so far, stamped, in order. */
  events(): readonly RunEvent[] {
    return this.recorded;
  }

  private recordSinkError(err: unknown, index: number, event: RunEvent): void {
    const message = err instanceof Error ? err.message : String(err);
    this.sinkErrors.push(new Error(`sink ${index} failed on seq ${event.seq} (${event.type}): ${message}`, { cause: err }));
  }
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof v === 'object' && v !== null && typeof (v as { then?: unknown }).then === 'function';
}
