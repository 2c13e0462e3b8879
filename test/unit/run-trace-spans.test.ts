/**
 * One run's trace made from its events (the SDK's in-memory exporter; the OTLP path is
 * otlp-export.test.ts and the real run run-trace-audit.test.ts): what a span may carry is an
 * allowlist — a refused connection's host name (a name can carry data out), a tool's arguments, a
 * model-written reason or the task never appear; the task only when the operator opts in. A run that
 * ends with calls still open closes them; late events after the end are ignored; the untraced run
 * keeps the job's trace id and makes nothing.
 */
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan } from '@opentelemetry/sdk-trace';
import type { RunEvent } from '../../src/domain/events';
import { untracedRun } from '../../src/domain/run-trace';
import { OtelRunTrace } from '../../src/telemetry/run-trace';

const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
const tracer = provider.getTracer('test');
afterEach(() => exporter.reset());

const T0 = Date.parse('2026-12-07T10:00:00.000Z');
let seq = 0;
const ev = (e: Record<string, unknown>, atMs: number): RunEvent => ({ runId: 'run_1', seq: ++seq, ts: new Date(T0 + atMs).toISOString(), ...e }) as unknown as RunEvent;
const SECRET_HOST = 'aGVsbG8tc2VjcmV0.exfil.example';
const strings = (spans: ReadableSpan[]) => spans.flatMap((s) => [s.name, ...Object.entries(s.attributes).flatMap(([k, v]) => [k, String(v)]), ...s.events.flatMap((e) => [e.name, ...Object.values(e.attributes ?? {}).map(String)])]);

function start(taskText = false, traceparent?: string) {
  return new OtelRunTrace({ runId: 'run_1', tenant: 'acme', attempt: 1, startedAt: T0, queuedAt: T0 - 500, resumed: false, task: 'TASK-MARK do things', ...(traceparent ? { traceparent } : {}) }, { tracer, taskText, now: () => T0 + 9000 });
}

test('a denied connection shows no host, arguments and reasons stay out, the task only on opt-in', async () => {
  const t = start();
  t.sink(ev({ type: 'run.started', workerId: 'w', task: 'TASK-MARK do things', policy: 'default', approvals: true, model: 'gpt-x (openai)', budgets: { maxTurns: 10 } }, 10));
  t.sink(ev({ type: 'tool.call', callId: 'c1', tool: 'bash', args: { command: 'curl ARG-MARK' } }, 100));
  t.sink(ev({ type: 'policy.decision', callId: 'c1', tool: 'bash', verdict: { decision: 'allow', static: { decision: 'allow', rule: 'r1', reason: 'REASON-MARK' } } }, 110));
  t.sink(ev({ type: 'egress', callId: 'c1', host: SECRET_HOST, port: 443, method: 'CONNECT', decision: 'deny', reason: `not allowed: ${SECRET_HOST}`, code: 'not_allowed' }, 150));
  t.sink(ev({ type: 'egress', callId: 'c1', host: 'pypi.org', port: 443, method: 'CONNECT', decision: 'allow', reason: 'listed' }, 160));
  t.sink(ev({ type: 'tool.result', callId: 'c1', tool: 'bash', ok: true, blocked: false, summary: 'OUT-MARK', output: 'OUT-MARK', ms: 100, exec: { exitCode: 0, timedOut: false, oomKilled: false, truncated: false, stdoutBytes: 8, stderrBytes: 0, durationMs: 90 } }, 200));
  t.end({ outcome: 'succeeded' });
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  const all = strings(spans).join('\n');
  for (const m of ['TASK-MARK', 'ARG-MARK', 'REASON-MARK', 'OUT-MARK', SECRET_HOST]) expect({ m, found: all.includes(m) }).toEqual({ m, found: false });
  const egress = spans.filter((s) => s.name === 'corral.egress').map((s) => s.attributes);
  expect(egress).toEqual([
    expect.objectContaining({ 'corral.egress.decision': 'deny', 'corral.egress.code': 'not_allowed', 'server.port': 443 }),
    expect.objectContaining({ 'corral.egress.decision': 'allow', 'server.address': 'pypi.org' }),
  ]);
  expect(egress[0]).not.toHaveProperty('server.address');
  const call = spans.find((s) => s.name === 'execute_tool bash')!;
  expect(spans.filter((s) => s.parentSpanContext?.spanId === call.spanContext().spanId).map((s) => s.name).sort()).toEqual(['corral.egress', 'corral.egress', 'corral.exec']);
  expect(spans.find((s) => s.name === 'corral.queue_wait')).toBeDefined();

  exporter.reset();
  const opted = start(true);
  opted.end({ outcome: 'succeeded' });
  await provider.forceFlush();
  expect(exporter.getFinishedSpans().find((s) => s.name === 'corral.run')!.attributes['corral.task']).toBe('TASK-MARK do things');
});

test('model- or sandbox-chosen words never become span names or attributes: an unknown tool\'s name, a made-up HTTP method', async () => {
  const t = new OtelRunTrace({ runId: 'run_1', tenant: 'acme', attempt: 1, startedAt: T0, resumed: false, task: 't', toolNames: ['bash', 'read_file'] }, { tracer, taskText: false, now: () => T0 + 9000 });
  const leak = 'AKIAQ7XW2ZRTPLMNB3VC';
  t.sink(ev({ type: 'tool.call', callId: 'c1', tool: leak, args: {} }, 100));
  t.sink(ev({ type: 'tool.result', callId: 'c1', tool: leak, ok: false, blocked: false, summary: `unknown tool "${leak}"`, ms: 1 }, 110));
  t.sink(ev({ type: 'tool.call', callId: 'c2', tool: 'bash', args: {} }, 120));
  t.sink(ev({ type: 'egress', callId: 'c2', host: 'x.test', port: 80, method: leak.slice(0, 16), decision: 'deny', reason: 'bad request line', code: 'bad_request' }, 130));
  t.sink(ev({ type: 'egress', callId: 'c2', host: 'ok.test', port: 443, method: 'CONNECT', decision: 'allow', reason: 'listed' }, 140));
  t.end({ outcome: 'succeeded' });
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  expect(strings(spans).filter((x) => x.includes(leak.slice(0, 8)))).toEqual([]);
  expect(spans.map((s) => s.name)).toEqual(expect.arrayContaining(['execute_tool _OTHER', 'execute_tool bash']));
  expect(spans.find((s) => s.name === 'execute_tool _OTHER')!.attributes).toMatchObject({ 'gen_ai.tool.name': '_OTHER', 'corral.tool.unknown': true });
  expect(spans.filter((s) => s.name === 'corral.egress').map((s) => s.attributes['http.request.method'])).toEqual(['_OTHER', 'CONNECT']);
});

test('an end with a call still open or an approval pending closes them; events after the end are ignored', async () => {
  const t = start(false, '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  t.sink(ev({ type: 'tool.call', callId: 'c9', tool: 'bash', args: {} }, 100));
  t.sink(ev({ type: 'approval.pending', callId: 'c9', tool: 'bash', args: {}, reason: 'x', risk: 'medium' }, 120));
  t.end({ outcome: 'cancelled' });
  t.sink(ev({ type: 'tool.call', callId: 'late', tool: 'bash', args: {} }, 9500));
  t.end({ outcome: 'error' });
  await provider.forceFlush();
  const spans = exporter.getFinishedSpans();
  expect(spans.map((s) => s.name).sort()).toEqual(['corral.approval', 'corral.queue_wait', 'corral.run', 'execute_tool bash']);
  expect(t.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  const run = spans.find((s) => s.name === 'corral.run')!;
  expect(run.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
  expect(run.attributes['corral.run.outcome']).toBe('cancelled');
  expect(t.traceparentFor('c9')).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
});

test('untraced: the job\'s trace id is kept and handed to sub-runs; a malformed one is dropped', () => {
  const good = untracedRun({ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
  expect(good.traceId).toBe('0af7651916cd43dd8448eb211c80319c');
  expect(good.traceparentFor('c1')).toBe('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01');
  expect(untracedRun({ traceparent: '00-00000000000000000000000000000000-b7ad6b7169203331-01' }).traceId).toBeUndefined();
  expect(untracedRun({}).traceId).toBeUndefined();
});
