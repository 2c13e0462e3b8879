/**
 * /metrics in the Prometheus text exposition format (0.0.4), written by hand: run counts by status
 * (from the run records), queue depth (BullMQ job counts), and the counters and histograms workers
 * aggregate in Redis (run duration, sandbox acquire time, tool calls by decision, model use).
 */
import { RUN_OUTCOMES } from '../domain/events';
import { RUN_DURATION_BUCKETS_S, SANDBOX_ACQUIRE_BUCKETS_S } from '../queue/run-metrics';
import { RUN_STATUSES } from './schemas';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export interface MetricsInput {
  queue: string;
  statusCounts: Record<string, number>;
  /** Queue depth: every tenant's jobs, so only in the operators' view. */
  jobCounts?: Record<string, number>;
  /** Set when the numbers are one tenant's (a tenant's token); absent: every tenant's. */
  tenant?: string;
  /** The aggregate hash from RunMetrics.read(). */
  aggregates: Record<string, number>;
}

const labelValue = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const labels = (l: Record<string, string>) => {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${labelValue(v)}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
};
const num = (n: number | undefined) => (n === undefined || Number.isNaN(n) ? '0' : Number.isInteger(n) ? String(n) : String(Number(n.toPrecision(12))));

export function renderMetrics(m: MetricsInput): string {
  const out: string[] = [];
  const head = (name: string, type: string, help: string) => out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  const a = m.aggregates;

  if (m.tenant) out.push(`# corral metrics of tenant ${m.tenant.replace(/[^A-Za-z0-9_.-]/g, '?')} only`);
  head('corral_runs', 'gauge', 'Runs by status: queued, running and awaiting ones now; ended ones since the counts began.');
  for (const s of RUN_STATUSES) out.push(`corral_runs${labels({ status: s })} ${num(m.statusCounts[s] ?? 0)}`);

  if (m.jobCounts) {
    head('corral_queue_jobs', 'gauge', 'Jobs in the BullMQ run queue by state (waiting = queue depth).');
    for (const [state, n] of Object.entries(m.jobCounts).sort()) out.push(`corral_queue_jobs${labels({ queue: m.queue, state })} ${num(n)}`);
  }

  head('corral_runs_finished_total', 'counter', 'Runs that ended, by outcome.');
  for (const o of RUN_OUTCOMES) out.push(`corral_runs_finished_total${labels({ outcome: o })} ${num(a[`runs_finished:${o}`])}`);

  head('corral_run_duration_seconds', 'histogram', 'Wall time of finished runs, by outcome.');
  for (const o of RUN_OUTCOMES) {
    if (!a[`run_duration:${o}:count`]) continue;
    histogram(out, 'corral_run_duration_seconds', { outcome: o }, RUN_DURATION_BUCKETS_S, a, `run_duration:${o}`);
  }

  head('corral_sandbox_acquire_seconds', 'histogram', 'Time to create, start and seed a run\'s sandbox.');
  histogram(out, 'corral_sandbox_acquire_seconds', {}, SANDBOX_ACQUIRE_BUCKETS_S, a, 'sandbox_acquire');

  head('corral_tool_calls_total', 'counter', 'Tool calls by the gate\'s decision and who made it (policy rules, the risk classifier, a human approval); refused = unknown tool or bad arguments, never gated.');
  const toolKeys = Object.keys(a).filter((k) => k.startsWith('tool_calls:')).sort();
  for (const d of ['allow', 'deny']) for (const by of ['policy', 'classifier', 'approval']) if (!toolKeys.includes(`tool_calls:${d}:${by}`)) toolKeys.push(`tool_calls:${d}:${by}`);
  for (const k of toolKeys.sort()) {
    const [, decision, by] = k.split(':');
    out.push(`corral_tool_calls_total${labels({ decision: decision!, by: by! })} ${num(a[k])}`);
  }

  head('corral_model_calls_total', 'counter', 'Model calls made by runs (agent turns).');
  out.push(`corral_model_calls_total ${num(a.model_calls)}`);
  head('corral_model_tokens_total', 'counter', 'Tokens of agent turns, by kind.');
  out.push(`corral_model_tokens_total${labels({ kind: 'input' })} ${num(a['model_tokens:input'])}`);
  out.push(`corral_model_tokens_total${labels({ kind: 'output' })} ${num(a['model_tokens:output'])}`);
  head('corral_model_cost_usd_total', 'counter', 'Estimated model cost of agent turns, USD.');
  out.push(`corral_model_cost_usd_total ${num(a.cost_usd)}`);
  return `${out.join('\n')}\n`;
}

function histogram(out: string[], name: string, l: Record<string, string>, bounds: readonly number[], a: Record<string, number>, field: string): void {
  for (const le of bounds) out.push(`${name}_bucket${labels({ ...l, le: String(le) })} ${num(a[`${field}:bucket:${le}`])}`);
  out.push(`${name}_bucket${labels({ ...l, le: '+Inf' })} ${num(a[`${field}:bucket:+Inf`])}`);
  out.push(`${name}_sum${labels(l)} ${num(a[`${field}:sum`])}`);
  out.push(`${name}_count${labels(l)} ${num(a[`${field}:count`])}`);
}
