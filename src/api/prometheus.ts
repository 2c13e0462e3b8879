/**
 * /metrics in the Prometheus text exposition format (0.0.4), written by prom-client from one scrape's
 * numbers: run counts by status (kept incrementally in Redis), queue depth (BullMQ job counts), and
 * the counters and histograms workers aggregate in Redis (run duration, sandbox acquire time, tool
 * calls by decision, model use). A registry per scrape: the values are Redis's, not this process's.
 * The histograms arrive already bucketed, which prom-client's Histogram cannot take, so they are
 * registered as metrics whose samples we give (prom-client still names, escapes and formats them).
 */
import { Counter, Gauge, Registry, type Metric } from 'prom-client';
import { RUN_OUTCOMES, RUN_STATUSES } from '../domain/events';
import { RUN_DURATION_BUCKETS_S, SANDBOX_ACQUIRE_BUCKETS_S } from '../queue/run-metrics';
import type { HttpCount } from './http-counts';

export const PROMETHEUS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

export interface MetricsInput {
  queue: string;
  statusCounts: Record<string, number>;
  /** Queue depth: every tenant's jobs, so only in the operators' view. */
  jobCounts?: Record<string, number>;
  /** Set when the numbers are one tenant's (a tenant's token); absent: every tenant's. */
  tenant?: string;
  /** The aggregate hash from RunMetrics.read(). */
  aggregates: Record<string, number>;
  /** This API process's answers by route and status class (operators' view only). */
  http?: HttpCount[];
}

/** A float sum in Redis (1.9000000000000001) as the number it stands for; absent or NaN → 0. */
const num = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? 0 : Number.isInteger(n) ? n : Number(n.toPrecision(12)));

interface Sample { labels: Record<string, string>; value: number; metricName: string }

export async function renderMetrics(m: MetricsInput): Promise<string> {
  const reg = new Registry();
  const registers = [reg];
  const a = m.aggregates;

  const runs = new Gauge({ name: 'corral_runs', help: 'Runs by status: queued, running and awaiting ones now; ended ones since the counts began.', labelNames: ['status'], registers });
  for (const s of RUN_STATUSES) runs.set({ status: s }, num(m.statusCounts[s] ?? 0));

  if (m.jobCounts) {
    const jobs = new Gauge({ name: 'corral_queue_jobs', help: 'Jobs in the BullMQ run queue by state (waiting = queue depth).', labelNames: ['queue', 'state'], registers });
    for (const [state, n] of Object.entries(m.jobCounts).sort()) jobs.set({ queue: m.queue, state }, num(n));
  }

  const finished = new Counter({ name: 'corral_runs_finished_total', help: 'Runs that ended, by outcome.', labelNames: ['outcome'], registers });
  for (const o of RUN_OUTCOMES) finished.inc({ outcome: o }, num(a[`runs_finished:${o}`]));

  histogram(reg, 'corral_run_duration_seconds', 'Wall time of finished runs, by outcome.', RUN_DURATION_BUCKETS_S,
    RUN_OUTCOMES.filter((o) => a[`run_duration:${o}:count`]).map((o) => ({ labels: { outcome: o }, field: `run_duration:${o}` })), a);
  histogram(reg, 'corral_sandbox_acquire_seconds', 'Time to create, start and seed a run\'s sandbox.', SANDBOX_ACQUIRE_BUCKETS_S, [{ labels: {}, field: 'sandbox_acquire' }], a);

  const tools = new Counter({ name: 'corral_tool_calls_total', help: 'Tool calls by the gate\'s decision and who made it (policy rules, the risk classifier, a human approval); refused = unknown tool or bad arguments, never gated.', labelNames: ['decision', 'by'], registers });
  const toolKeys = new Set(Object.keys(a).filter((k) => k.startsWith('tool_calls:')));
  for (const d of ['allow', 'deny']) for (const by of ['policy', 'classifier', 'approval']) toolKeys.add(`tool_calls:${d}:${by}`);
  for (const k of [...toolKeys].sort()) {
    const [, decision = '', by = ''] = k.split(':');
    tools.inc({ decision, by }, num(a[k]));
  }

  new Counter({ name: 'corral_model_calls_total', help: 'Model calls made by runs (agent turns).', registers }).inc(num(a.model_calls));
  const tokens = new Counter({ name: 'corral_model_tokens_total', help: 'Tokens of agent turns, by kind.', labelNames: ['kind'], registers });
  tokens.inc({ kind: 'input' }, num(a['model_tokens:input']));
  tokens.inc({ kind: 'output' }, num(a['model_tokens:output']));
  new Counter({ name: 'corral_model_cost_usd_total', help: 'Estimated model cost of agent turns, USD.', registers }).inc(num(a.cost_usd));

  if (m.http) {
    const http = new Counter({ name: 'corral_http_responses_total', help: 'HTTP answers of this API process, by method, route template and status class.', labelNames: ['method', 'route', 'status_class'], registers });
    for (const c of m.http) http.inc({ method: c.method, route: c.route, status_class: c.statusClass }, c.count);
  }

  const text = await reg.metrics();
  return m.tenant ? `# corral metrics of tenant ${m.tenant.replace(/[^A-Za-z0-9_.-]/g, '?')} only\n${text}` : text;
}

/** A histogram whose cumulative buckets, sum and count come from the aggregate hash (`FIELD:bucket:LE`, `FIELD:sum`, `FIELD:count`). */
function histogram(reg: Registry, name: string, help: string, bounds: readonly number[], series: Array<{ labels: Record<string, string>; field: string }>, a: Record<string, number>): void {
  const values: Sample[] = [];
  for (const { labels, field } of series) {
    for (const le of [...bounds.map(String), '+Inf']) values.push({ labels: { ...labels, le }, value: num(a[`${field}:bucket:${le}`]), metricName: `${name}_bucket` });
    values.push({ labels, value: num(a[`${field}:sum`]), metricName: `${name}_sum` });
    values.push({ labels, value: num(a[`${field}:count`]), metricName: `${name}_count` });
  }
  reg.registerMetric({ name, help, type: 'histogram', get: () => Promise.resolve({ name, help, type: 'histogram', values, aggregator: 'sum' }) } as unknown as Metric);
}
