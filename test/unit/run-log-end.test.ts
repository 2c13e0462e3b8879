/**
 * Issue 40, defect 2: a run whose durable log could not be written whole never ends `succeeded`.
 * The log is a real file on a real failing device: /dev/full (every write fails with ENOSPC, as a
 * full disk does), and a path whose directory is a file (ENOTDIR). finishLog turns the end into
 * `error` / `log_failed` naming why and how many lines are missing, and the seal says the log is
 * incomplete; a log that was written whole keeps the run's own end.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunEvent, RunUsage } from '../../src/domain/events';
import { EventRecorder } from '../../src/report/event-recorder';
import { JsonlSink } from '../../src/report/jsonl-sink';
import { logGenesis, verifyChain } from '../../src/report/log-chain';
import { finishLog, type RunEnd } from '../../src/worker/run-log-end';

const usage: RunUsage = { llmCalls: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1, costUsd: 0, wallTimeMs: 5 };
const END: RunEnd = { outcome: 'succeeded', reason: 'done', finalAnswer: 'ok', usage, errorCode: 'internal' };
const GENESIS = logGenesis('run_log', { task: 't' });

function runWith(path: string) {
  const jsonl = new JsonlSink(path, { genesis: GENESIS });
  const recorder = new EventRecorder({ runId: 'run_log', now: () => new Date('2026-12-07T10:00:00Z'), sinks: [jsonl.write] });
  recorder.emit({ type: 'model.request', turn: 1, messages: 1 } as never);
  recorder.emit({ type: 'sandbox.removed', containerId: 'c1' });
  const logs: string[] = [];
  return { jsonl, recorder, logs, finish: () => finishLog({ jsonl, recorder, emit: recorder.emit, log: (m) => logs.push(m), runId: 'run_log', end: END }) };
}

let dir: string;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'corral-logend-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('a full disk (/dev/full): the run ends error / log_failed, the seal says the log is incomplete', async () => {
  const r = runWith('/dev/full');
  const out = await r.finish();
  expect(out.end).toMatchObject({ outcome: 'error', errorCode: 'log_failed', reason: expect.stringMatching(/could not be written whole \(.*ENOSPC.*lines are not in the file\); the run had ended succeeded: done/) });
  expect(out.seal).toMatchObject({ lines: 3, incomplete: expect.stringContaining('ENOSPC') });
  expect(r.logs).toContain('the run\'s log is incomplete');
  // the run.finished line (sealed, not written) says error too
  expect((r.recorder.events().at(-1) as RunEvent & { outcome: string }).outcome).toBe('error');
});

test('a log whose directory cannot be made (ENOTDIR): the same', async () => {
  writeFileSync(join(dir, 'runs'), 'a file where the run directory should be');
  const out = await runWith(join(dir, 'runs', 'run_log', 'events.jsonl')).finish();
  expect(out.end).toMatchObject({ outcome: 'error', errorCode: 'log_failed', reason: expect.stringContaining('ENOTDIR') });
});

test('a log written whole keeps the run\'s end, and its seal is the file\'s chain end', async () => {
  const path = join(dir, 'events.jsonl');
  const out = await runWith(path).finish();
  expect(out.end).toEqual(END);
  expect(out.seal).not.toHaveProperty('incomplete');
  const report = verifyChain(readFileSync(path), GENESIS, { finalHash: out.seal.finalHash, lines: out.seal.lines });
  expect(report).toMatchObject({ ok: true, lines: 3 });
});
