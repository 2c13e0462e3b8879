/** EventRecorder: stamps run id, seq and ts; fans out to every sink; a failing sink is recorded, never fatal. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunEvent, RunEventBody } from '../../src/domain/events';
import { EventRecorder } from '../../src/report/event-recorder';
import { JsonlSink, readJsonl } from '../../src/report/jsonl-sink';

function clock(startIso = '2025-03-01T10:00:00.000Z', stepMs = 250): () => Date {
  let t = Date.parse(startIso) - stepMs;
  return () => new Date((t += stepMs));
}

const removed = (id: string): RunEventBody => ({ type: 'sandbox.removed', containerId: id });

describe('EventRecorder', () => {
  it('stamps runId, seq 1,2,3… and ts from the injected clock, keeps events in order and fans out', () => {
    const a: RunEvent[] = [];
    const b: RunEvent[] = [];
    const rec = new EventRecorder({ runId: 'run-7', now: clock(), sinks: [(e) => a.push(e), (e) => b.push(e)] });
    const { emit } = rec; // bound: usable detached, as the run loop receives it
    emit(removed('x'));
    emit({ type: 'artifact', name: 'patch', path: 'p/workspace.patch', bytes: 10 });
    emit(removed('y'));
    expect(rec.events().map((e) => [e.runId, e.seq, e.ts, e.type])).toEqual([
      ['run-7', 1, '2025-03-01T10:00:00.000Z', 'sandbox.removed'],
      ['run-7', 2, '2025-03-01T10:00:00.250Z', 'artifact'],
      ['run-7', 3, '2025-03-01T10:00:00.500Z', 'sandbox.removed'],
    ]);
    expect(rec.events()[1]).toMatchObject({ name: 'patch', path: 'p/workspace.patch', bytes: 10 });
    expect(a).toEqual(rec.events());
    expect(b).toEqual(rec.events());
    expect(rec.sinkErrors).toEqual([]);
  });

  it('a body cannot override the stamp', () => {
    const rec = new EventRecorder({ runId: 'run-1', now: clock(), sinks: [] });
    rec.emit({ ...removed('x'), runId: 'other', seq: 99, ts: 'never' } as unknown as RunEventBody);
    expect(rec.events()[0]).toMatchObject({ runId: 'run-1', seq: 1, ts: '2025-03-01T10:00:00.000Z' });
  });

  it('a throwing sink does not stop the sinks after it or the run, and its error is recorded', () => {
    const after: number[] = [];
    let calls = 0;
    const rec = new EventRecorder({
      runId: 'run-2',
      now: clock(),
      sinks: [
        () => {
          calls += 1;
          if (calls === 2) throw new Error('disk full');
        },
        (e) => after.push(e.seq),
      ],
    });
    expect(() => {
      rec.emit(removed('a'));
      rec.emit({ type: 'artifact', name: 'tar', path: 'w.tar', bytes: 1 });
      rec.emit(removed('c'));
    }).not.toThrow();
    expect(after).toEqual([1, 2, 3]);
    expect(calls).toBe(3);
    expect(rec.events()).toHaveLength(3);
    expect(rec.sinkErrors).toHaveLength(1);
    expect(rec.sinkErrors[0]!.message).toBe('sink 0 failed on seq 2 (artifact): disk full');
    expect((rec.sinkErrors[0]!.cause as Error).message).toBe('disk full');
  });

  it('a thrown non-Error is recorded as an Error too', () => {
    const rec = new EventRecorder({
      runId: 'run-3',
      now: clock(),
      sinks: [
        () => {
          throw 'nope';
        },
      ],
    });
    rec.emit(removed('a'));
    expect(rec.sinkErrors[0]).toBeInstanceOf(Error);
    expect(rec.sinkErrors[0]!.message).toMatch(/seq 1 .*nope/);
  });

  it('an async sink that rejects is recorded instead of becoming an unhandled rejection', async () => {
    const seen: number[] = [];
    const rec = new EventRecorder({
      runId: 'run-4',
      now: clock(),
      sinks: [async () => Promise.reject(new Error('redis down')), (e) => seen.push(e.seq)],
    });
    rec.emit(removed('a'));
    expect(seen).toEqual([1]);
    await new Promise((r) => setImmediate(r));
    expect(rec.sinkErrors.map((e) => e.message)).toEqual(['sink 0 failed on seq 1 (sandbox.removed): redis down']);
  });

  it('with a JsonlSink the log on disk equals the recorded events', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-report-recorder-'));
    try {
      const sink = new JsonlSink(join(dir, 'log', 'events.jsonl'), { genesis: '0'.repeat(64) });
      const rec = new EventRecorder({ runId: 'run-5', now: clock(), sinks: [sink.write] });
      rec.emit({ type: 'tool.call', callId: 'c1', tool: 'bash', args: { command: 'ls -la' } });
      rec.emit({ type: 'tool.result', callId: 'c1', tool: 'bash', ok: true, blocked: false, summary: 'exit 0 in 5 ms', ms: 6 });
      await sink.close();
      expect(readJsonl(sink.path)).toEqual(rec.events());
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
