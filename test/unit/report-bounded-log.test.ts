/**
 * Bounded event volume: the recorder keeps at most maxEvents / maxBytes, marks the cut once with
 * log.truncated, keeps the run's closing events and its end, counts what it dropped, and the JSONL
 * file stays within the byte cap; the report shows the counts, the egress aggregates, the proxy's
 * failure and the distinct wildcard names.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunEventBody } from '../../src/domain/events';
import { EventRecorder } from '../../src/report/event-recorder';
import { JsonlSink, readJsonl } from '../../src/report/jsonl-sink';
import { buildReport } from '../../src/report/report-markdown';

const now = () => new Date('2025-03-01T10:00:00.000Z');
const egress = (i: number): RunEventBody => ({ type: 'egress', callId: 'call_1', host: `x${'y'.repeat(300)}${i}`, port: 443, method: 'CONNECT', decision: 'deny', reason: 'invalid name', code: 'invalid_name' });
const finished: RunEventBody = { type: 'run.finished', outcome: 'succeeded', finalAnswer: 'done', reason: 'the model gave its final answer', usage: { llmCalls: 1, toolCalls: 1, inputTokens: 1, outputTokens: 1, costUsd: 0, wallTimeMs: 1 } };

let dir: string;
beforeAll(() => (dir = mkdtempSync(join(tmpdir(), 'corral-bounded-'))));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test('a count cap: one marker, nothing more but the closing events, a final marker with the counts, no seq gaps', () => {
  const rec = new EventRecorder({ runId: 'run_x', now, sinks: [], maxEvents: 50 });
  for (let i = 0; i < 10_000; i++) rec.emit(egress(i));
  rec.emit({ type: 'sandbox.removed', containerId: 'c1' });
  rec.emit(finished);
  const ev = rec.events();
  expect(ev.length).toBeLessThanOrEqual(53);
  expect(ev.map((e) => e.seq)).toEqual(ev.map((_, i) => i + 1));
  const markers = ev.filter((e) => e.type === 'log.truncated');
  expect(markers.map((m) => m.type === 'log.truncated' && m.final)).toEqual([false, true]);
  expect(ev.slice(-3).map((e) => e.type)).toEqual(['sandbox.removed', 'log.truncated', 'run.finished']);
  const final = markers[1]!;
  if (final.type !== 'log.truncated') throw new Error('no marker');
  const kept = ev.filter((e) => e.type === 'egress').length;
  expect(kept).toBeGreaterThan(40);
  expect(final.dropped).toEqual({ egress: 10_000 - kept });
  expect(rec.truncation()).toMatchObject({ truncated: true, dropped: { egress: 10_000 - kept } });
});

test('a byte cap bounds the JSONL file, whatever the events carry', async () => {
  const path = join(dir, 'events.jsonl');
  const sink = new JsonlSink(path, { genesis: '0'.repeat(64) });
  const rec = new EventRecorder({ runId: 'run_y', now, sinks: [sink.write], maxBytes: 256 * 1024 });
  for (let i = 0; i < 20_000; i++) rec.emit(egress(i));
  rec.emit(finished);
  expect(await sink.close()).toBeUndefined();
  // The chain's two hashes add 160 bytes a line to what the recorder counts.
  expect(statSync(path).size).toBeLessThan(256 * 1024 + 160 * sink.lines + 4096);
  const back = readJsonl(path);
  expect(back[0]!.type).toBe('egress');
  expect(back.at(-1)!.type).toBe('run.finished');
  expect(back.filter((e) => e.type === 'log.truncated')).toHaveLength(2);
});

test('under the caps nothing is marked', () => {
  const rec = new EventRecorder({ runId: 'run_z', now, sinks: [] });
  for (let i = 0; i < 100; i++) rec.emit(egress(i));
  rec.emit(finished);
  expect(rec.events().some((e) => e.type === 'log.truncated')).toBe(false);
});

test('the report shows truncation counts, aggregates, a proxy failure and distinct wildcard names', () => {
  const rec = new EventRecorder({ runId: 'run_r', now, sinks: [], maxEvents: 30 });
  rec.emit({ type: 'egress.proxy', state: 'started', detail: 'egress proxy process 42 as uid 65534 gid 65534 groups [65534], no_new_privs, heap ≤ 64 MB, ≤ 576 open files', pid: 42 });
  for (let i = 0; i < 5; i++) rec.emit(egress(i));
  rec.emit({ type: 'egress.aggregate', callId: 'call_1', method: 'CONNECT', decision: 'deny', code: 'invalid_target', count: 11_995, sample: 'xxxx', reason: 'denied 11,995 more × CONNECT to malformed targets (e.g. xxxx)' });
  for (let i = 0; i < 100; i++) rec.emit(egress(i));
  rec.emit({ type: 'egress.proxy', state: 'failed', detail: 'the egress proxy process was killed by SIGKILL; this run has no egress from now on' });
  rec.emit({
    type: 'egress.stats', connections: 12_000, requests: 0, allowed: 3, denied: 11_997, bytesOut: 180_000_000, bytesIn: 10, peakConnections: 256,
    byCode: { invalid_target: 11_995, wildcard_rate: 2, allowed: 3 }, wildcardNames: { '*.wild.test': 25 }, wildcardRefused: 2, resolutions: 25,
  });
  rec.emit(finished);
  const md = buildReport(rec.events());
  expect(md).toMatch(/⚠ \*\*The log was truncated:\*\* the log reached its cap of 30 events \(CORRAL\\_LOG\\_MAX\\_EVENTS\)[^\n]*\. (\d+) events \([\d.]+ MB\) were not kept: `egress` ×\1\./);
  expect(md).toContain('⚠ **The egress proxy failed:** the egress proxy process was killed by SIGKILL; this run has no egress from now on');
  expect(md).toContain('| 11,995 | `CONNECT` | **deny** | `invalid_target` | `xxxx` | `call_1` |');
  expect(md).toContain('**Totals:** 12,000 connections (at most 256 at once), 3 allowed, 11,997 denied; 171.7 MB sent');
  expect(md).toContain('**Denied by reason:** `invalid_target` ×11,995, `wildcard_rate` ×2.');
  expect(md).toContain('⚠ **Distinct names under wildcards** (each new name is a DNS query that can carry data out — an exfiltration signal): `*.wild.test` 25; 2 more refused');
});
