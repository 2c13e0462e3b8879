/**
 * The REST API (Fastify + zod). buildApp(deps) returns the app; it never listens by itself.
 *
 *   POST /v1/runs                          RunSpec body (+ Idempotency-Key) → 201 { id, status, links } (200 for a repeat)
 *   GET  /v1/runs?status=&limit=&cursor=   your runs, newest first, one page + next cursor
 *   GET  /v1/runs/:id                      status, reason, timestamps, budget use, pending approvals, links
 *   GET  /v1/runs/:id/events?after=ID      events as JSON pages; with Accept: text/event-stream, SSE (history, then live)
 *   GET  /v1/runs/:id/report | /logs | /artifacts/workspace.tar | /artifacts/patch
 *   POST /v1/runs/:id/approvals/:callId    { decision: "approve" | "deny", by? } → resumes the run
 *   POST /v1/runs/:id/cancel               cancels a queued or running run
 *   POST /v1/runs/:id/replay               re-runs a finished run with its recorded model turns → 201 { id }
 *   POST /v1/runs?dryRun=true              the same checks, then the resolved plan (200); nothing queued
 *   GET  /v1/templates[/:name]             the run templates; POST /v1/templates/:name/runs { params } submits one
 *   POST /v1/schedules, GET /v1/schedules[/:id], DELETE /v1/schedules/:id   template runs on a cron pattern
 *   PUT  /v1/workspaces                    a tar (plain or gzip), streamed and checked → { id } for runs to name
 *   GET  /healthz  /readyz  /metrics  /openapi.json  /docs
 *
 * Auth: with tokens configured every route but /healthz, /readyz, /openapi.json and /docs needs
 * `Authorization: Bearer <token>` (401 otherwise); the token's tenant owns the runs it creates and
 * sees only those (404 for any other). With auth off the Host header must name this API (421) and a
 * state change must not come from another origin (403): origin-guard.ts. Errors are JSON, see http-errors.ts.
 */
import { createServer } from 'node:http';
import Fastify, { type FastifyInstance } from 'fastify';
import type { ApiDeps } from './api-deps';
import { TenantAuth } from './auth';
import { HttpError, sendError } from './http-errors';
import type { RouteDoc } from './openapi';
import { registerOpsRoutes } from './ops-routes';
import { registerRunFileRoutes } from './run-files';
import { registerVerifyRoute } from './log-verify';
import { registerRunRoutes } from './run-routes';
import { checkSpec } from './submit-run';
import { registerScheduleRoutes } from './schedule-routes';
import { registerTemplateRoutes } from './template-routes';
import { registerEnvironmentRoutes } from './environment-routes';
import { registerConsoleRoutes } from '../console/console-routes';
import { registerWorkspaceRoutes, TAR_TYPES } from './workspace-routes';
import { checkTemplateExamples } from './load-templates';
import { registerRequestGuards } from './request-guards';
import { registerOriginGuard } from './origin-guard';

export type { ApiDeps } from './api-deps';

import type { Principal } from '../domain/principal';
import { HttpCounts } from './http-counts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Served without a token even when auth is on. */
    public?: boolean;
  }
  interface FastifyRequest {
    /** The caller's tenant (the default tenant when auth is off). */
    tenant: string;
    /** Who the caller is as authenticated (a tenant's named token; the operator when auth is off). */
    principal: Principal | null;
  }
}

const UNAUTHORIZED: Record<'missing' | 'malformed' | 'invalid', string> = {
  missing: 'this server needs a bearer token: send Authorization: Bearer <token>',
  malformed: 'the Authorization header must be "Bearer <token>"',
  invalid: 'the bearer token is not valid',
};

export interface CorralApp extends FastifyInstance {
  /** The documentation of every route registered through route() (what /openapi.json shows). */
  routeDocs: readonly RouteDoc[];
  /** Every route Fastify knows ("GET /v1/runs"), to check that none escaped the documentation. */
  registeredRoutes: readonly string[];
}

/** A Fastify route URL (/v1/runs/:id) as a pattern for concrete paths. */
function routePattern(url: string): RegExp {
  return new RegExp(`^${url.split('/').map((seg) => (seg.startsWith(':') ? '[^/]+' : seg.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/')}/?$`);
}

export function buildApp(given: ApiDeps): CorralApp {
  const deps: ApiDeps = { ...given, httpCounts: given.httpCounts ?? new HttpCounts() };
  // Path parameters up to 2 KiB reach our schemas (which refuse what is too long with a 400 naming
  // the parameter) instead of Fastify's own 414.
  // Node checks request timeouts every connectionsCheckingInterval (30 s by default): a second here, so
  // a request that takes too long is ended close to its bound.
  // Headers: at most 16 KiB (Node's bound, stated here) within CORRAL_API_HEADERS_TIMEOUT_S.
  const requestTimeout = deps.config.CORRAL_API_REQUEST_TIMEOUT_S * 1000;
  const headersTimeout = Math.min(requestTimeout, deps.config.CORRAL_API_HEADERS_TIMEOUT_S * 1000);
  const app = Fastify({
    logger: false, bodyLimit: deps.config.CORRAL_API_MAX_BODY_BYTES, routerOptions: { maxParamLength: 2048 },
    serverFactory: (handler) => createServer({ requestTimeout, headersTimeout, maxHeaderSize: 16 * 1024, connectionsCheckingInterval: Math.min(1000, headersTimeout) }, handler),
  });
  const auth = deps.auth ?? TenantAuth.off();
  const http = deps.httpCounts!;
  // Every answer is counted by route template and status class (/metrics: corral_http_responses_total).
  app.addHook('onResponse', async (req, reply) => {
    http.record(req.method, req.routeOptions.url, reply.statusCode);
  });
  const log = deps.log ?? ((msg: string, fields?: Record<string, unknown>) => process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), msg, ...fields })}\n`));
  // Refuse before dying (heap), and bodies that trickle (request-guards.ts).
  registerRequestGuards(app, {
    minBodyBytesPerS: deps.config.CORRAL_API_MIN_BODY_BYTES_PER_S, heapRefusePercent: deps.config.CORRAL_API_HEAP_REFUSE_PERCENT,
    maxBufferedBytes: deps.config.CORRAL_API_MAX_BUFFERED_MB * 1024 * 1024,
    ...(deps.bodyWindowMs !== undefined ? { bodyWindowMs: deps.bodyWindowMs } : {}),
  }, log);

  // Every 5xx is logged with its cause (the answer itself names only a reference).
  app.setErrorHandler((err, req, reply) => {
    const sent = sendError(reply, err);
    if (reply.statusCode >= 500) {
      log('API request failed', { level: 'error', status: reply.statusCode, reference: String(req.id), method: req.method, route: req.routeOptions.url ?? req.url.split('?')[0], name: (err as Error).name, error: String((err as Error).message ?? err).slice(0, 2000) });
    }
    return sent;
  });
  // A path this API has, asked with another method: 405 with the methods it has (Allow); else 404.
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allow = [...new Set(docs.filter((d) => routePattern(d.url).test(path)).flatMap((d) => (d.method === 'GET' ? ['GET', 'HEAD'] : [d.method])))];
    if (allow.length) {
      void reply.status(405).header('allow', allow.join(', ')).send({ error: { code: 'method_not_allowed', message: `${req.method} is not supported on ${path}; it supports ${allow.join(', ')}` } });
      return;
    }
    void reply.status(404).send({ error: { code: 'not_found', message: `no route ${req.method} ${path}` } });
  });

  // Bodies are JSON only: any other content type is a 415 (Fastify would otherwise take text/plain as a string).
  app.removeAllContentTypeParsers();

  // JSON bodies must be valid UTF-8: a bad byte is a 400, never silently U+FFFD.
  const jsonParser = app.getDefaultJsonParser('error', 'error');
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      done(new HttpError(400, 'invalid_input', 'the request body is not valid UTF-8'), undefined);
      return;
    }
    // Fastify types a body parser as either callback-style or promise-returning; the default JSON
    // parser calls `done`, but a promise, if one comes back, must reach `done` too.
    const parsed: unknown = jsonParser(req, text, done);
    if (parsed instanceof Promise) parsed.then((v: unknown) => done(null, v), (err: Error) => done(err, undefined));
  });
  // A tar is streamed to the one route that takes it (never buffered); anywhere else it is a 415.
  app.addContentTypeParser([...TAR_TYPES], (req, payload, done) => {
    if (req.routeOptions.url === '/v1/workspaces') done(null, payload);
    else done(Object.assign(new Error('not JSON'), { statusCode: 415 }), undefined);
  });

  // Pages the operator visits: no DNS rebinding (Host), no cross-site state changes (origin-guard.ts).
  registerOriginGuard(app, { authOff: !auth.enabled, allowedHosts: deps.config.CORRAL_API_ALLOWED_HOSTS, listenHost: deps.config.CORRAL_API_HOST }, log);

  app.decorateRequest('tenant', '');
  // Set by the onRequest hook for every route that needs a token (null on public routes).
  app.decorateRequest('principal', null);
  app.addHook('onRequest', async (req) => {
    // A path with no route is a 401 without a token too (404 or 405 with one).
    if (req.routeOptions.config?.public) return;
    const r = auth.authenticate(req.headers.authorization);
    if (!r.ok) throw new HttpError(401, 'unauthorized', UNAUTHORIZED[r.reason], { 'www-authenticate': 'Bearer realm="corral"' });
    req.tenant = r.tenant;
    req.principal = r.principal;
  });

  const docs: RouteDoc[] = [];
  const registered: string[] = [];
  app.addHook('onRoute', (r) => {
    for (const m of [r.method].flat()) if (m !== 'HEAD') registered.push(`${m} ${r.url}`);
  });
  registerRunRoutes(app, deps, docs);
  registerRunFileRoutes(app, deps, docs);
  registerVerifyRoute(app, deps, docs);
  registerTemplateRoutes(app, deps, docs);
  registerEnvironmentRoutes(app, deps, docs);
  registerScheduleRoutes(app, deps, docs);
  registerWorkspaceRoutes(app, deps, docs);
  registerOpsRoutes(app, deps, docs);
  registerConsoleRoutes(app, docs);
  // A template whose examples would be refused stops start-up (listen() and inject() both wait for ready).
  app.addHook('onReady', async () => checkTemplateExamples(deps.templates ?? [], (body) => checkSpec(deps, body, 'default')));
  return Object.assign(app, { routeDocs: docs, registeredRoutes: registered });
}
