/**
 * Operations endpoints: /healthz (the process answers and Redis is reachable), /readyz (every
 * dependency check main.ts gave us answers in time: Redis, and Docker where this process runs a
 * worker), /metrics (Prometheus text), /openapi.json and /docs. Only /metrics needs a token.
 */
import type { FastifyInstance } from 'fastify';
import type { ApiDeps } from './api-deps';
import { renderDocsPage } from './docs-page';
import { openApiDocument, route, type RouteDoc } from './openapi';
import { PROMETHEUS_CONTENT_TYPE, renderMetrics, type CapsInput } from './prometheus';
import { ErrorBody, Health, OpenApiDoc, Ready } from './schemas';

const CHECK_TIMEOUT_MS = 3000;

async function timed(check: () => Promise<unknown>): Promise<{ ok: boolean; ms: number; error?: string }> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer in ${CHECK_TIMEOUT_MS} ms`)), CHECK_TIMEOUT_MS);
      }),
    ]);
    return { ok: true, ms: Date.now() - t0 };
  } catch (err) {
    return { ok: false, ms: Date.now() - t0, error: (err as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/** What tenants hold and what the caps are: one tenant's view, or (tenant undefined) every tenant's with the service's totals. */
async function capsState(deps: ApiDeps, tenant: string | undefined): Promise<CapsInput> {
  const c = deps.config;
  const [streams, uploads, refusals] = await Promise.all([deps.held.held('streams', tenant), deps.held.held('uploads', tenant), deps.held.refusals(tenant)]);
  const held: CapsInput['held'] = [
    { resource: 'streams', byTenant: streams.byTenant, ...(tenant === undefined ? { total: streams.total } : {}), perTenantMax: c.CORRAL_TENANT_MAX_STREAMS, globalMax: c.CORRAL_API_MAX_STREAMS },
    { resource: 'uploads', byTenant: uploads.byTenant, ...(tenant === undefined ? { total: uploads.total } : {}), perTenantMax: c.CORRAL_TENANT_MAX_UPLOADS, globalMax: c.CORRAL_API_MAX_UPLOADS },
  ];
  if (!deps.uploadQuota) return { held, refusals };
  const mb = 1024 * 1024;
  const q = await deps.uploadQuota.state(tenant === undefined ? (deps.auth?.tenants() ?? ['default']) : [tenant]);
  const storedAll = Object.fromEntries(Object.entries(q.stored).filter(([t]) => t !== '*'));
  return {
    held, refusals,
    uploads: {
      stored: tenant === undefined ? storedAll : { [tenant]: q.stored[tenant] ?? 0 },
      ...(tenant === undefined ? { storedTotal: q.stored['*'] ?? 0 } : {}),
      window: q.window,
      storedPerTenantMax: c.CORRAL_TENANT_UPLOAD_STORED_MB * mb, storedGlobalMax: c.CORRAL_API_UPLOAD_STORED_MB * mb, windowPerTenantMax: c.CORRAL_TENANT_UPLOAD_MB_PER_HOUR * mb,
    },
  };
}

export function registerOpsRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  route(app, docs, {
    method: 'GET', url: '/healthz', tag: 'operations', public: true, summary: 'Liveness: the process answers and reaches Redis',
    responses: { 200: { description: 'alive', schema: Health }, 503: { description: 'Redis does not answer', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } } },
  }, async () => {
    await deps.store.ping();
    return { ok: true };
  });

  route(app, docs, {
    method: 'GET', url: '/readyz', tag: 'operations', public: true,
    summary: 'Readiness: Redis answers, and Docker answers where this process runs a worker',
    description: `Each check must answer within ${CHECK_TIMEOUT_MS} ms. \`workers\` (workers connected to the queue) is information, not a check.`,
    responses: { 200: { description: 'every check passed', schema: Ready }, 503: { description: 'a check failed (see checks)', schema: Ready } },
  }, async (_req, reply) => {
    const checks: Record<string, { ok: boolean; ms: number; error?: string }> = {};
    const all = { redis: () => deps.store.ping(), ...deps.readyChecks };
    await Promise.all(Object.entries(all).map(async ([name, check]) => {
      checks[name] = await timed(check);
    }));
    const ok = Object.values(checks).every((c) => c.ok);
    const workers = checks.redis?.ok ? await deps.queue.getWorkersCount().catch(() => undefined) : undefined;
    return reply.status(ok ? 200 : 503).send({ ok, checks, ...(workers !== undefined ? { workers } : {}) });
  });

  route(app, docs, {
    method: 'GET', url: '/metrics', tag: 'operations', summary: 'Prometheus metrics (the caller\'s tenant; every tenant for operators)',
    description: 'A tenant\'s token sees its own runs only: corral_runs{status}, corral_runs_finished_total{outcome}, corral_run_duration_seconds{outcome} (histogram), corral_sandbox_acquire_seconds (histogram), corral_tool_calls_total{decision,by}, corral_model_calls_total, corral_model_tokens_total{kind}, corral_model_cost_usd_total, and what it holds against its caps: corral_held{resource,tenant} (live streams, uploads in flight) with corral_held_max{resource,scope}, corral_cap_refusals_total{cap}, corral_upload_stored_bytes{tenant}, corral_upload_hour_bytes{tenant} and their _max. A token of a tenant named in CORRAL_OPERATOR_TENANTS (or any request when auth is off) sees every tenant\'s totals, corral_queue_jobs{state} this API process\'s corral_http_responses_total{method,route,status_class} (route = the route\'s template, `unmatched` for unknown paths) and the service-wide corral_held_service{resource} and corral_upload_stored_bytes_service. Numbers from workers are aggregated in Redis as they happen (no scan of run records), so any API instance serves them.',
    responses: { 200: { description: 'text exposition format 0.0.4', contentType: PROMETHEUS_CONTENT_TYPE }, 401: { description: 'no valid token', schema: ErrorBody } },
  }, async (req, reply) => {
    const all = !deps.auth?.enabled || (deps.operatorTenants ?? []).includes(req.tenant);
    const tenant = all ? undefined : req.tenant;
    const [statusCounts, jobCounts, aggregates, caps] = await Promise.all([
      deps.store.statusCounts(tenant), all ? deps.queue.getJobCounts() : Promise.resolve(undefined), deps.metrics.read(tenant), capsState(deps, tenant),
    ]);
    // This process's HTTP answers are every tenant's: operators only, like the queue depth.
    const http = all && deps.httpCounts ? deps.httpCounts.snapshot() : undefined;
    return reply.type(PROMETHEUS_CONTENT_TYPE).send(await renderMetrics({ queue: deps.queue.name, statusCounts, ...(jobCounts ? { jobCounts } : {}), aggregates, caps, ...(tenant ? { tenant } : {}), ...(http ? { http } : {}) }));
  });

  const document = () => openApiDocument(docs, { version: deps.version ?? '0.1.0', authEnabled: !!deps.auth?.enabled });

  route(app, docs, {
    method: 'GET', url: '/openapi.json', tag: 'operations', public: true, redis: false, summary: 'This API as an OpenAPI 3.1 document',
    responses: { 200: { description: 'the document', schema: OpenApiDoc } },
  }, async () => document());

  route(app, docs, {
    method: 'GET', url: '/docs', tag: 'operations', public: true, redis: false, summary: 'This API as a readable HTML page (no scripts, no CDN)',
    responses: { 200: { description: 'the page', contentType: 'text/html; charset=utf-8' } },
  }, async (_req, reply) => reply.type('text/html; charset=utf-8').send(renderDocsPage(document())));
}
