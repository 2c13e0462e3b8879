/**
 * Tracing's cost, beside tracing off, in the same process and the same minutes: two corral servers
 * (API + worker each, own queue and data dir) on one Redis and one scripted model server, one with
 * OTEL_EXPORTER_OTLP_ENDPOINT at an OTLP/HTTP receiver on loopback, one without. Runs of a task with
 * `tools` bash calls alternate between the two (off, on, off, on …), one at a time, so drift in the
 * host's load hits both alike. Reported per side: a run's wall time (submit → finishedAt, p50/p95)
 * and the process CPU it took (mean, ms: both servers share the process, and only one runs at a time),
 * and for the traced side the spans a run made and the OTLP bytes per span the receiver got.
 * `BENCH_STAGES=tracing npm run bench` (BENCH_TRACE_RUNS, default 12 per side; BENCH_TRACE_TOOLS, 3).
 */
import { apiRequest } from '../test/support/api-request';
import { eventually } from '../test/support/eventually';
import { startHarness } from '../test/support/corral-harness';
import { loadAgent, loadTask } from '../test/support/load-agent';
import { startOtlpReceiver } from '../test/support/otlp-receiver';
import { note, round, stats, type P50P95 } from './stats';

export interface TracingBench {
  runs_per_side: number;
  tools_per_run: number;
  off: { run_ms: P50P95; cpu_ms_mean: number };
  on: { run_ms: P50P95; cpu_ms_mean: number; spans_per_run: number; otlp_bytes_per_span: number };
  overhead: { run_ms_p50: number; cpu_ms_mean: number };
}

export async function benchTracing(o: { redisUrl: string; runs: number; tools: number }): Promise<TracingBench> {
  // Bodies are decoded after the measurement: the receiver shares this process, its work is not tracing's cost.
  const receiver = await startOtlpReceiver('ok', { lazy: true });
  const otlp = receiver.url;
  const sent = () => ({ bytes: receiver.requests.reduce((a, r) => a + r.bytes, 0), spans: receiver.spans.length });
  // Two whole corral servers as the tests start them (API + worker, the worker through its own docker gate).
  const harness = (name: string, env: Record<string, string>) => startHarness(`bench-trace-${name}`, { chat: loadAgent() }, { REDIS_URL: o.redisUrl, ...env });
  const offH = await harness('off', {});
  const onH = await harness('on', { OTEL_EXPORTER_OTLP_ENDPOINT: otlp, OTEL_BSP_SCHEDULE_DELAY: '200' });
  const sides = { off: { url: offH.url, ms: [] as number[], cpu: [] as number[] }, on: { url: onH.url, ms: [] as number[], cpu: [] as number[] } };
  const traced = new Set<string>();
  const oneRun = async (url: string): Promise<{ ms: number; cpu: number }> => {
    const cpu0 = process.cpuUsage();
    const t0 = Date.now();
    const r = await apiRequest<{ id: string; traceId?: string }>(url, 'POST', '/v1/runs', { task: loadTask(o.tools, 'tracing bench'), approvals: false });
    if (r.status !== 201) throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
    const run = await eventually(async () => (await apiRequest<Record<string, unknown>>(url, 'GET', `/v1/runs/${r.body.id}`)).body, {
      what: 'the run to end', until: (x) => !!x.finishedAt, timeoutMs: 120_000, intervalMs: 20,
    });
    if (run.status !== 'succeeded') throw new Error(`run ${r.body.id}: ${String(run.status)} ${String(run.reason)}`);
    const cpu = process.cpuUsage(cpu0);
    if (r.body.traceId) traced.add(r.body.traceId);
    return { ms: Date.parse(run.finishedAt as string) - t0, cpu: (cpu.user + cpu.system) / 1000 };
  };
  let onClosed = false;
  try {
    await oneRun(offH.url); // warm-up, both sides (images, pools, JIT)
    await oneRun(onH.url);
    traced.clear();
    for (let i = 0; i < o.runs; i++) {
      for (const side of i % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
        const m = await oneRun(sides[side].url);
        sides[side].ms.push(m.ms);
        sides[side].cpu.push(m.cpu);
      }
      note(`tracing: ${i + 1}/${o.runs} pairs`);
    }
    await onH.close(); // its tracer flushes what is queued
    onClosed = true;
    const mean = (xs: number[]) => round(xs.reduce((x, y) => x + y, 0) / xs.length);
    receiver.decodeNow();
    const spans = receiver.spans.filter((sp) => traced.has(sp.traceId)).length;
    const total = sent();
    const offStats = { run_ms: stats(sides.off.ms), cpu_ms_mean: mean(sides.off.cpu) };
    const onStats = { run_ms: stats(sides.on.ms), cpu_ms_mean: mean(sides.on.cpu), spans_per_run: round(spans / o.runs), otlp_bytes_per_span: round(total.bytes / Math.max(1, total.spans), 0) };
    return {
      runs_per_side: o.runs, tools_per_run: o.tools, off: offStats, on: onStats,
      overhead: { run_ms_p50: round(onStats.run_ms.p50 - offStats.run_ms.p50), cpu_ms_mean: round(onStats.cpu_ms_mean - offStats.cpu_ms_mean) },
    };
  } finally {
    await offH.close();
    if (!onClosed) await onH.close();
    await receiver.close();
  }
}
