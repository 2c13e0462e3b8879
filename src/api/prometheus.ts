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
  /** What tenants hold now through the API and its caps (the caller's tenant only, or every tenant's). */
  caps?: CapsInput;
}

export interface CapsInput {
  /** Live streams and uploads in flight: per tenant, the service's total (operators only), the caps. */
  held: Array<{ resource: 'streams' | 'uploads'; byTenant: Record<string, number>; total?: number; perTenantMax: number; globalMax: number }>;
  /** Refusals by cap name (streams_per_tenant, upload_bytes_per_hour …) since the counts began. */
  refusals: Record<string, number>;
  /** Upload bytes kept per tenant (and the service's, operators only), bytes in the hourly bucket per tenant, and the caps. */
  uploads?: { stored: Record<string, number>; storedTotal?: number; window: Record<string, number>; storedPerTenantMax: number; storedGlobalMax: number; windowPerTenantMax: number };
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

  if (m.tenant === undefined) {
    new Counter({ name: 'corral_trace_spans_exported_total', help: 'Spans the API and worker processes delivered to the OTLP collector.', registers }).inc(num(a['trace_spans:exported']));
    const dropped = new Counter({ name: 'corral_trace_spans_dropped_total', help: 'Spans not delivered: the bounded export queue was full (queue_full) or the collector did not take a batch (export_failed).', labelNames: ['reason'], registers });
    for (const reason of ['queue_full', 'export_failed']) dropped.inc({ reason }, num(a[`trace_spans:dropped:${reason}`]));
  }

  if (m.http) {
    const http = new Counter({ name: 'corral_http_responses_total', help: 'HTTP answers of this API process, by method, route template and status class.', labelNames: ['method', 'route', 'status_class'], registers });
    for (const c of m.http) http.inc({ method: c.method, route: c.route, status_class: c.statusClass }, c.count);
  }
  if (m.caps) capsMetrics(m.caps, registers);

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

/** The per-tenant and service-wide caps of issue 38: what is held, the caps, the refusals, the upload quotas. */
function capsMetrics(c: CapsInput, registers: Registry[]): void {
  const held = new Gauge({ name: 'corral_held', help: 'Live event streams and uploads in flight held now, by tenant.', labelNames: ['resource', 'tenant'], registers });
  // The service's totals are the operators' view only (a tenant's shows nothing of the others).
  const service = c.held.some((h) => h.total !== undefined) ? new Gauge({ name: 'corral_held_service', help: 'Live event streams and uploads in flight held now on the whole service (every tenant).', labelNames: ['resource'], registers }) : undefined;
  const max = new Gauge({ name: 'corral_held_max', help: 'The caps: per tenant (CORRAL_TENANT_MAX_STREAMS, CORRAL_TENANT_MAX_UPLOADS) and service-wide (CORRAL_API_MAX_STREAMS, CORRAL_API_MAX_UPLOADS).', labelNames: ['resource', 'scope'], registers });
  for (const h of c.held) {
    for (const [t, n] of Object.entries(h.byTenant).sort()) held.set({ resource: h.resource, tenant: t }, n);
    if (h.total !== undefined) service?.set({ resource: h.resource }, h.total);
    max.set({ resource: h.resource, scope: 'tenant' }, h.perTenantMax);
    max.set({ resource: h.resource, scope: 'service' }, h.globalMax);
  }
  const refused = new Counter({ name: 'corral_cap_refusals_total', help: 'Requests refused because a cap was full (429/413), by cap.', labelNames: ['cap'], registers });
  for (const cap of ['streams_per_tenant', 'streams_global', 'uploads_per_tenant', 'uploads_global', 'upload_bytes_per_hour', 'upload_stored_per_tenant', 'upload_stored_global']) refused.inc({ cap }, num(c.refusals[cap] ?? 0));
  const u = c.uploads;
  if (!u) return;
  const stored = new Gauge({ name: 'corral_upload_stored_bytes', help: 'Bytes of uploaded workspaces kept, by tenant (each upload counts at least 1 MiB).', labelNames: ['tenant'], registers });
  for (const [t, n] of Object.entries(u.stored).sort()) stored.set({ tenant: t }, n);
  if (u.storedTotal !== undefined) new Gauge({ name: 'corral_upload_stored_bytes_service', help: 'Bytes of uploaded workspaces kept, every tenant together.', registers }).set(u.storedTotal);
  const storedMax = new Gauge({ name: 'corral_upload_stored_bytes_max', help: 'Caps on kept upload bytes: per tenant (CORRAL_TENANT_UPLOAD_STORED_MB) and service-wide (CORRAL_API_UPLOAD_STORED_MB).', labelNames: ['scope'], registers });
  storedMax.set({ scope: 'tenant' }, u.storedPerTenantMax);
  storedMax.set({ scope: 'service' }, u.storedGlobalMax);
  const window = new Gauge({ name: 'corral_upload_hour_bytes', help: 'Upload bytes in the tenant\'s hourly bucket now (it drains at the cap per hour).', labelNames: ['tenant'], registers });
  for (const [t, n] of Object.entries(u.window).sort()) window.set({ tenant: t }, n);
  new Gauge({ name: 'corral_upload_hour_bytes_max', help: 'Upload bytes a tenant may send per hour (CORRAL_TENANT_UPLOAD_MB_PER_HOUR).', registers }).set(u.windowPerTenantMax);
}
