/**
 * The end of a run's log: before run.finished is written, every queued line must be on disk; a log
 * that could not be written whole (a full disk, an I/O error) turns the run's end into `error` with
 * code log_failed — a run is never `succeeded` with a cut-off log. Then run.finished, then the file is
 * synced and closed, and the log's seal (final hash, line count, the operator key's signature) is
 * what the run record and the report keep. Failures of the other, live sinks (the Redis stream, the
 * metrics) are logged: they do not make the durable record incomplete.
 */
import type { ErrorCode } from '../domain/errors';
import type { Emit, RunOutcome, RunUsage } from '../domain/events';
import type { LogSeal } from '../queue/run-store';
import type { EventRecorder } from '../report/event-recorder';
import type { JsonlSink } from '../report/jsonl-sink';
import type { LogSigner } from '../report/log-signature';

export interface RunEnd {
  outcome: RunOutcome;
  reason: string;
  finalAnswer: string | null;
  usage: RunUsage;
  errorCode: ErrorCode;
}

export async function finishLog(o: {
  jsonl: JsonlSink;
  recorder: EventRecorder;
  emit: Emit;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  runId: string;
  end: RunEnd;
  signer?: LogSigner | undefined;
}): Promise<{ end: RunEnd; seal: LogSeal; record: { logSeal: LogSeal } }> {
  let end = o.end;
  await o.jsonl.flush();
  const sinkErrors = o.recorder.sinkErrors;
  for (const err of sinkErrors.slice(0, 5)) o.log('an event sink failed', { runId: o.runId, error: err.message });
  const failed = (why: string): RunEnd => ({
    ...end, outcome: 'error', errorCode: 'log_failed',
    reason: `the run's log could not be written whole (${why}); the run had ended ${end.outcome}: ${end.reason}`,
  });
  const before = o.jsonl.failure;
  if (before) end = failed(before);
  o.emit({ type: 'run.finished', outcome: end.outcome, finalAnswer: end.finalAnswer, reason: end.reason, usage: end.usage });
  const after = await o.jsonl.close();
  if (after && !before) end = failed(after);
  if (after) o.log('the run\'s log is incomplete', { runId: o.runId, error: after });
  const seal: LogSeal = {
    finalHash: o.jsonl.lastHash, lines: o.jsonl.lines,
    ...(o.signer ? { signature: o.signer.sign(o.runId, o.jsonl.lines, o.jsonl.lastHash) } : {}),
    ...(after ? { incomplete: after.slice(0, 2000) } : {}),
  };
  return { end, seal, record: { logSeal: seal } };
}
