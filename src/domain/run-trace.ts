/**
 * The tracing ports: what the worker and the API ask of OpenTelemetry, so neither imports the SDK
 * (telemetry/ implements them; with traces off the no-op ones below stand in). A run is one trace:
 * its span's parent is the submit span the job carried (W3C traceparent), so the trace reads from
 * the submit to the run's end. Spans carry no task text, file content, tool output or secret: only
 * names, counts, decisions and times (the task text only when the operator opts in).
 */
import type { RunEvent } from './events';
import type { Model } from './model';

/** `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, not all-zero ids (W3C Trace Context, version 00). */
export const TRACEPARENT = /^00-(?!0{32})([0-9a-f]{32})-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** The trace id of a well-formed traceparent, else undefined. */
export function traceIdOf(traceparent: string | undefined): string | undefined {
  return traceparent === undefined ? undefined : TRACEPARENT.exec(traceparent)?.[1];
}

export interface RunTraceStart {
  runId: string;
  tenant: string;
  attempt: number;
  /** The job's W3C trace context (the API's submit span, a producer's, or a parent run's delegate call). */
  traceparent?: string;
  tracestate?: string;
  /** When the job was put on the queue (ms): the queue-wait span runs from here to `startedAt`. */
  queuedAt?: number;
  startedAt: number;
  /** A run resumed after its sub-runs (a later leg of the same run). */
  resumed: boolean;
  task: string;
  parentRunId?: string;
  /** The tools the server offers: a call naming another (the model's own text) is shown as `_OTHER`. */
  toolNames?: readonly string[];
}

export interface RunEnd {
  outcome: string;
  errorCode?: string;
  /** The run gave up its slot to wait for sub-runs; a later leg goes on in the same trace. */
  suspended?: boolean;
}

export interface RunTrace {
  /** The run's trace id (from the job's traceparent when this worker does not trace); undefined: none. */
  readonly traceId: string | undefined;
  /** An event sink: spans for what the events describe (sandbox, setup, tool calls and their gate decisions, execs, egress, artifacts, the end). */
  readonly sink: (e: RunEvent) => void;
  /** A live span around one phase of the run (admission, …). */
  phase<T>(name: string, work: () => Promise<T>): Promise<T>;
  /** The model with a span per call (GenAI semantic conventions). */
  model(m: Model, requestModel: string): Model;
  /** The trace context a sub-run started by `callId` carries (its job's traceparent). */
  traceparentFor(callId: string): string | undefined;
  /** Ends every open span and the run's own. */
  end(e: RunEnd): void;
}

export interface RunTracing {
  startRun(s: RunTraceStart): RunTrace;
}

export interface SubmitTrace {
  /** What the job carries: the submit span's context (or the caller's, when this API does not trace). */
  readonly traceparent: string | undefined;
  readonly traceId: string | undefined;
  phase<T>(name: string, work: () => Promise<T>): Promise<T>;
  end(o: { status: number; runId?: string; error?: string }): void;
}

export interface SubmitTracing {
  /** A span for one submission; `incoming`: the request's traceparent/tracestate headers (checked here). */
  startSubmit(incoming: { traceparent?: string | undefined; tracestate?: string | undefined }, attrs: { tenant: string; route: string }): SubmitTrace;
}

/** A run that is not traced: it keeps the trace id its job carried, and nothing else. */
export function untracedRun(s: Pick<RunTraceStart, 'traceparent'>): RunTrace {
  const traceparent = traceIdOf(s.traceparent) ? s.traceparent : undefined;
  return {
    traceId: traceIdOf(traceparent),
    sink: () => undefined,
    phase: (_name, work) => work(),
    model: (m) => m,
    traceparentFor: () => traceparent,
    end: () => undefined,
  };
}

/** Submissions that are not traced: a caller's well-formed traceparent still reaches the run. */
export const UNTRACED_SUBMITS: SubmitTracing = {
  startSubmit(incoming) {
    const traceparent = traceIdOf(incoming.traceparent) ? incoming.traceparent : undefined;
    return { traceparent, traceId: traceIdOf(traceparent), phase: (_n, work) => work(), end: () => undefined };
  },
};
