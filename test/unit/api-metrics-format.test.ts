/** The Prometheus text format of /metrics, from aggregates shaped like the ones workers write. */
import { HttpCounts } from '../../src/api/http-counts';
import { renderMetrics } from '../../src/api/prometheus';
import { MemoryRunStore } from '../../src/queue/memory-run-store';
import { injectJson } from '../support/api-fixture';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';

const input = {
  queue: 'runs',
  statusCounts: { queued: 2, running: 1, succeeded: 5 },
  jobCounts: { waiting: 2, active: 1, completed: 5, failed: 0 },
  aggregates: {
    'runs_finished:succeeded': 5,
    'run_duration:succeeded:bucket:5': 3, 'run_duration:succeeded:bucket:10': 5, 'run_duration:succeeded:bucket:30': 5,
    'run_duration:succeeded:bucket:60': 5, 'run_duration:succeeded:bucket:120': 5, 'run_duration:succeeded:bucket:300': 5,
    'run_duration:succeeded:bucket:600': 5, 'run_duration:succeeded:bucket:1800': 5, 'run_duration:succeeded:bucket:3600': 5,
    'run_duration:succeeded:bucket:7200': 5, 'run_duration:succeeded:bucket:+Inf': 5,
    'run_duration:succeeded:sum': 21.5, 'run_duration:succeeded:count': 5,
    'sandbox_acquire:bucket:0.5': 4, 'sandbox_acquire:bucket:+Inf': 5, 'sandbox_acquire:sum': 1.9000000000000001, 'sandbox_acquire:count': 5,
    'tool_calls:allow:policy': 7, 'tool_calls:deny:classifier': 1, 'tool_calls:refused:none': 2,
    model_calls: 12, 'model_tokens:input': 1000, 'model_tokens:output': 200, cost_usd: 0.0123,
  },
};
let text: string;
let lines: string[];
let samples: Map<string, string>;
beforeAll(async () => {
  text = await renderMetrics(input);
  lines = text.trimEnd().split('\n').filter((l) => l !== '');
  samples = new Map(lines.filter((l) => !l.startsWith('#')).map((l) => [l.slice(0, l.lastIndexOf(' ')), l.slice(l.lastIndexOf(' ') + 1)]));
});

test('every sample line is name{labels} value, and every metric has HELP and TYPE first', () => {
  const declared = new Set<string>();
  for (const l of lines) {
    if (l.startsWith('# TYPE ')) declared.add(l.split(' ')[2]!);
    else if (!l.startsWith('# HELP ')) {
      expect(l).toMatch(/^[a-z_]+(\{([a-z_]+="[^"]*",?)+\})? -?[0-9.e+-]+$/);
      const name = l.split(/[{ ]/)[0]!.replace(/_(bucket|sum|count)$/, '');
      expect({ l, declared: declared.has(name) || declared.has(l.split(/[{ ]/)[0]!) }).toEqual({ l, declared: true });
    }
  }
  expect(text.endsWith('\n')).toBe(true);
});

test('runs by status include every status (0 when none), queue depth by state', () => {
  expect(samples.get('corral_runs{status="queued"}')).toBe('2');
  expect(samples.get('corral_runs{status="awaiting_approval"}')).toBe('0');
  expect(samples.get('corral_runs{status="timed_out"}')).toBe('0');
  expect(samples.get('corral_queue_jobs{queue="runs",state="waiting"}')).toBe('2');
});

test('histograms are cumulative with +Inf, _sum and _count; missing buckets are 0', () => {
  expect(samples.get('corral_run_duration_seconds_bucket{outcome="succeeded",le="1"}')).toBe('0');
  expect(samples.get('corral_run_duration_seconds_bucket{outcome="succeeded",le="5"}')).toBe('3');
  expect(samples.get('corral_run_duration_seconds_bucket{outcome="succeeded",le="+Inf"}')).toBe('5');
  expect(samples.get('corral_run_duration_seconds_count{outcome="succeeded"}')).toBe('5');
  expect(samples.get('corral_run_duration_seconds_sum{outcome="succeeded"}')).toBe('21.5');
  expect([...samples.keys()].some((k) => k.includes('outcome="failed"') && k.startsWith('corral_run_duration'))).toBe(false);
  expect(samples.get('corral_sandbox_acquire_seconds_bucket{le="0.05"}')).toBe('0');
  expect(samples.get('corral_sandbox_acquire_seconds_sum')).toBe('1.9');
  expect(samples.get('corral_sandbox_acquire_seconds_count')).toBe('5');
});

test('tool calls by decision and decider; finished runs by outcome; model use', () => {
  expect(samples.get('corral_tool_calls_total{decision="allow",by="policy"}')).toBe('7');
  expect(samples.get('corral_tool_calls_total{decision="allow",by="approval"}')).toBe('0');
  expect(samples.get('corral_tool_calls_total{decision="deny",by="classifier"}')).toBe('1');
  expect(samples.get('corral_tool_calls_total{decision="refused",by="none"}')).toBe('2');
  expect(samples.get('corral_runs_finished_total{outcome="succeeded"}')).toBe('5');
  expect(samples.get('corral_runs_finished_total{outcome="cancelled"}')).toBe('0');
  expect(samples.get('corral_model_tokens_total{kind="output"}')).toBe('200');
  expect(samples.get('corral_model_cost_usd_total')).toBe('0.0123');
});

test('label values are escaped (a queue name with a quote, a backslash and a newline); a tenant view says whose', async () => {
  const t = await renderMetrics({ ...input, queue: 'q"\\x\ny', tenant: 'acme' });
  expect(t).toContain('corral_queue_jobs{queue="q\\"\\\\x\\ny",state="waiting"} 2');
  expect(t.startsWith('# corral metrics of tenant acme only\n# HELP corral_runs ')).toBe(true);
});

test('HTTP answers are counted by method, route template and status class, and shown to operators', async () => {
  const counts = new HttpCounts();
  const app = offlineApp({ store: new MemoryRunStore(), httpCounts: counts });
  const token = OFFLINE_TOKENS.acme;
  await injectJson(app, 'GET', '/v1/runs/run_nosuchrun1', { token });
  await injectJson(app, 'GET', '/v1/runs/run_nosuchrun2', { token });
  await injectJson(app, 'GET', '/v1/runs?limit=2', { token });
  await injectJson(app, 'GET', '/v1/runs?limit=9999', { token });
  await injectJson(app, 'GET', '/v1/no/such/path', { token });
  await injectJson(app, 'GET', '/v1/runs', { token: null });
  await app.close();
  expect(counts.snapshot()).toEqual([
    { method: 'GET', route: '/v1/runs', statusClass: '2xx', count: 1 },
    { method: 'GET', route: '/v1/runs', statusClass: '4xx', count: 2 }, // a bad limit, and no token (401)
    { method: 'GET', route: '/v1/runs/:id', statusClass: '4xx', count: 2 },
    { method: 'GET', route: 'unmatched', statusClass: '4xx', count: 1 },
  ]);
  const shown = await renderMetrics({ ...input, http: counts.snapshot() });
  expect(shown).toContain('# TYPE corral_http_responses_total counter');
  expect(shown).toContain('corral_http_responses_total{method="GET",route="/v1/runs/:id",status_class="4xx"} 2');
  // A run id never becomes a label.
  expect(shown).not.toContain('run_nosuchrun');
});
