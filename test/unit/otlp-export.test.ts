/**
 * The process tracer end to end on loopback: the real OpenTelemetry SDK and OTLP/HTTP exporters
 * (protobuf and JSON) to a receiver that decodes with the official .proto definitions. A collector
 * that is down or never answers costs counted spans, never a caller's time: ending a span returns at
 * once, the queue stays bounded, and every span is counted exported or dropped.
 */
import { loadConfig, tracingSettings, type TracingSettings } from '../../src/config';
import { startTracing, type Tracing } from '../../src/telemetry/tracer';
import { CorralTracing } from '../../src/telemetry/corral-tracing';
import { startOtlpReceiver, type OtlpReceiver } from '../support/otlp-receiver';
import { eventually } from '../support/eventually';

const TOKEN = 'otlp-token-7f3a9c';
const settingsFor = (url: string, over: Record<string, string> = {}): TracingSettings => tracingSettings(loadConfig({
  OTEL_EXPORTER_OTLP_ENDPOINT: url, OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${TOKEN}`, OTEL_BSP_SCHEDULE_DELAY: '50',
  OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=test', OTEL_SERVICE_NAME: 'corral-unit', ...over,
}))!;

let receiver: OtlpReceiver | undefined;
let tracing: Tracing | undefined;
afterEach(async () => {
  if (receiver) receiver.mode = 'ok';
  await tracing?.shutdown().catch(() => undefined);
  await receiver?.close();
  tracing = undefined;
  receiver = undefined;
});

test('off unless an endpoint is set; OTEL_SDK_DISABLED and exporter none turn it off; grpc is refused with what to use', () => {
  expect(tracingSettings(loadConfig({}))).toBeNull();
  expect(tracingSettings(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }))).toBeNull();
  expect(tracingSettings(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_TRACES_EXPORTER: 'none' }))).toBeNull();
  expect(tracingSettings(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318/' }))!.url).toBe('http://127.0.0.1:4318/v1/traces');
  expect(tracingSettings(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:1', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:9/x' }))!.url).toBe('http://127.0.0.1:9/x');
  expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' })).toThrow(/OTLP\/HTTP only.*http\/protobuf/);
  expect(() => loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' })).toThrow(/OTEL_EXPORTER_OTLP_ENDPOINT/);
  expect(() => loadConfig({ OTEL_EXPORTER_OTLP_HEADERS: 'novalue' })).toThrow(/not key=value/);
  expect(() => loadConfig({ OTEL_TRACES_EXPORTER: 'zipkin' })).toThrow(/unsupported exporter/);
  expect(() => loadConfig({ CORRAL_TRACE_URL_TEMPLATE: 'https://jaeger.example/trace/' })).toThrow(/\{traceId\}/);
});

for (const protocol of ['http/protobuf', 'http/json'] as const) {
  test(`${protocol}: a submit span below the caller's traceparent reaches the receiver with the resource and the collector's header`, async () => {
    receiver = await startOtlpReceiver();
    tracing = startTracing(settingsFor(receiver.url, { OTEL_EXPORTER_OTLP_PROTOCOL: protocol }), { role: 'api', instance: 'h1', version: '0.1.0' });
    const caller = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
    const sub = new CorralTracing(tracing).startSubmit({ traceparent: caller }, { tenant: 'acme', route: '/v1/runs' });
    await sub.phase('admission', async () => 1);
    sub.end({ status: 201, runId: 'run_x' });
    expect(sub.traceId).toBe('4bf92f3577b34da6a3ce929d0e0e4736');
    expect(sub.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    await tracing.flush();
    const spans = await eventually(() => receiver!.spans, { what: 'two spans', until: (s) => s.length === 2 });
    const submit = spans.find((s) => s.name === 'corral.submit')!;
    expect(submit).toMatchObject({ traceId: sub.traceId, parentSpanId: '00f067aa0ba902b7', kind: 2 });
    expect(submit.spanId).toBe(sub.traceparent!.split('-')[2]);
    expect(submit.attributes).toMatchObject({ 'http.response.status_code': 201, 'corral.run.id': 'run_x', 'corral.tenant': 'acme' });
    expect(submit.resource).toMatchObject({ 'service.name': 'corral-unit', 'service.instance.id': 'api:h1', 'deployment.environment': 'test' });
    expect(spans.find((s) => s.name === 'corral.admission')!.parentSpanId).toBe(submit.spanId);
    expect(receiver.requests[0]!.headers.authorization).toBe(`Bearer ${TOKEN}`);
    expect(receiver.requests[0]!.contentType).toBe(protocol === 'http/json' ? 'application/json' : 'application/x-protobuf');
    expect(tracing.counts()).toMatchObject({ exported: 2, droppedQueueFull: 0, droppedExportFailed: 0, pending: 0 });
  });
}

test('a malformed or all-zero traceparent starts a trace of its own', async () => {
  receiver = await startOtlpReceiver();
  tracing = startTracing(settingsFor(receiver.url), { role: 'api', instance: 'h1', version: '0.1.0' });
  for (const bad of ['00-00000000000000000000000000000000-00f067aa0ba902b7-01', '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01', 'garbage', 'x'.repeat(5000)]) {
    const sub = new CorralTracing(tracing).startSubmit({ traceparent: bad }, { tenant: 't', route: '/v1/runs' });
    sub.end({ status: 201 });
    expect(sub.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(sub.traceId).not.toBe('4bf92f3577b34da6a3ce929d0e0e4736');
  }
  await tracing.flush();
  const spans = await eventually(() => receiver!.spans, { what: 'four spans', until: (s) => s.length === 4 });
  expect(spans.every((s) => s.parentSpanId === '')).toBe(true);
});

test('a collector that is down: spans are counted export_failed, nothing waits for it', async () => {
  receiver = await startOtlpReceiver('down');
  tracing = startTracing(settingsFor(receiver.url, { OTEL_EXPORTER_OTLP_TIMEOUT: '2000' }), { role: 'worker', instance: 'w', version: '0.1.0' });
  for (let i = 0; i < 10; i++) tracing.tracer.startSpan(`s${i}`).end();
  const counts = await eventually(() => tracing!.counts(), { what: 'ten spans counted as failed', until: (c) => c.droppedExportFailed === 10, timeoutMs: 40_000 });
  expect(counts).toMatchObject({ exported: 0, droppedQueueFull: 0, pending: 0 });
  expect(receiver.requests.length).toBeGreaterThan(0);
});

test('a collector that never answers: the queue stays bounded, what does not fit is counted queue_full, and ending spans never blocks', async () => {
  receiver = await startOtlpReceiver('hang');
  tracing = startTracing(settingsFor(receiver.url, { OTEL_BSP_MAX_QUEUE_SIZE: '20', OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '5', OTEL_BSP_EXPORT_TIMEOUT: '1000', OTEL_EXPORTER_OTLP_TIMEOUT: '1000' }), { role: 'worker', instance: 'w', version: '0.1.0' });
  // All 200 spans end in one synchronous loop: nothing in it can wait for the network.
  for (let i = 0; i < 200; i++) tracing.tracer.startSpan(`s${i}`).end();
  expect(tracing.counts().pending).toBeLessThanOrEqual(20);
  expect(tracing.counts().droppedQueueFull).toBeGreaterThanOrEqual(180);
  await eventually(() => receiver!.requests.length, { what: 'the exporter to try the collector', until: (n) => n > 0 });
  const c = await eventually(() => tracing!.counts(), { what: 'every span counted', until: (x) => x.pending === 0 && x.droppedQueueFull + x.droppedExportFailed === 200, timeoutMs: 40_000 });
  expect(c.exported).toBe(0);
});
