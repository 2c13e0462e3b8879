/**
 * The REST API (Fastify + zod). buildApp(deps) returns the app; it never listens by itself.
 *
 *   POST /v1/runs                          RunSpec body → 201 { id, status, links }
 *   GET  /v1/runs?limit=N                  recent runs
 *   GET  /v1/runs/:id                      status, pending approvals, final answer, report path
 *   GET  /v1/runs/:id/events?after=ID      the run's events as JSON; with Accept: text/event-stream, SSE until it ends
 *   GET  /v1/runs/:id/report               report.md (when this host can read it)
 *   POST /v1/runs/:id/approvals/:callId    { decision: "approve" | "deny", by? } → resumes the run
 *   POST /v1/runs/:id/cancel               cancels a queued or running run
 *   POST /v1/runs/:id/replay               re-runs a finished run with its recorded model turns → 201 { id }
 *   GET  /healthz                          Redis reachable
 *
 * Errors are JSON `{ error: { code, message, field? } }`: 400 names the offending field, 404 for an
 * unknown run, 409 for an approval already answered.
 */
import Fastify, { type FastifyInstance, type FastifyReply } from 'fastify';
import { readFile } from 'node:fs/promises';
import type { Queue } from 'bullmq';
import { z } from 'zod';
import type { Config } from '../config';
import { CorralError, InvalidInputError, NotFoundError, describeZodIssues } from '../domain/errors';
import { RunSpec } from '../domain/run-spec';
import { contractForSpec } from '../domain/task-contract';
import { TOOLS } from '../tools/registry';
import { enqueueRun } from '../queue/run-queue';
import type { RunStore } from '../queue/run-store';
import { resolveLimits } from '../sandbox/limits';
import { streamEvents } from './event-stream';

export interface ApiDeps {
  config: Config;
  store: RunStore;
  queue: Queue;
  newRunId: () => string;
  clock: () => number;
  /** Names of the loaded policies; a run naming another is refused with 400. */
  policyNames: readonly string[];
  /** Milliseconds between polls of the event stream for SSE clients. */
  ssePollMs?: number;
}

const ApprovalBody = z
  .object({ decision: z.enum(['approve', 'deny']), by: z.string().min(1).max(200).optional() })
  .strict();
const RunParams = z.object({ id: z.string().regex(/^run_[A-Za-z0-9_-]{6,64}$/, 'is not a run id') });
const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });
const EventsQuery = z.object({ after: z.string().regex(/^\d+-\d+$|^0$/, 'must be a stream id from a previous page').default('0') });

function parse<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const { message, field } = describeZodIssues(r.error.issues);
  throw new InvalidInputError(`${where}: ${message}`, field);
}

const STATUS: Record<string, number> = { invalid_input: 400, not_found: 404, conflict: 409, limit_exceeded: 400, cancelled: 409 };

export function buildApp(deps: ApiDeps): FastifyInstance {
  const app = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 });

  app.setErrorHandler((err, _req, reply) => sendError(reply, err));
  app.setNotFoundHandler((req, reply) => {
    void reply.status(404).send({ error: { code: 'not_found', message: `no route ${req.method} ${req.url}` } });
  });

  app.get('/healthz', async () => {
    await deps.store.ping();
    return { ok: true };
  });

  app.post('/v1/runs', async (req, reply) => {
    const spec = parse(RunSpec, req.body, 'body');
    resolveLimits(spec.limits, deps.config);
    if (!deps.policyNames.includes(spec.policy)) {
      throw new InvalidInputError(`body: policy: unknown policy "${spec.policy}" (this server has: ${deps.policyNames.join(', ')})`, 'policy');
    }
    contractForSpec(spec, TOOLS.map((t) => t.name));
    if (spec.replayOf && !(await deps.store.get(spec.replayOf))) throw new InvalidInputError(`body: replayOf: no run with id ${spec.replayOf}`, 'replayOf');
    return reply.status(201).send(await submit(spec));
  });

  const submit = async (spec: RunSpec) => {
    const id = deps.newRunId();
    await deps.store.create(id, spec, new Date(deps.clock()));
    await enqueueRun(deps.queue, id, spec);
    return { id, status: 'queued', links: links(id) };
  };

  app.post('/v1/runs/:id/replay', async (req, reply) => {
    const { id } = parse(RunParams, req.params, 'path');
    const run = await deps.store.get(id);
    if (!run) throw new NotFoundError(`no run with id ${id}`);
    if (!run.finishedAt) throw new CorralError('conflict', `run ${id} has not finished (${run.status}); only a finished run can be replayed`);
    const spec = await deps.store.getSpec(id);
    if (!spec) throw new NotFoundError(`the spec of run ${id} is not stored (it was not submitted through this API, or it expired)`);
    return reply.status(201).send({ ...(await submit({ ...spec, replayOf: spec.replayOf ?? id })), replayOf: spec.replayOf ?? id });
  });

  app.get('/v1/runs', async (req) => {
    const { limit } = parse(ListQuery, req.query, 'query');
    return { runs: await deps.store.list(limit) };
  });

  app.get('/v1/runs/:id', async (req) => {
    const { id } = parse(RunParams, req.params, 'path');
    const run = await deps.store.get(id);
    if (!run) throw new NotFoundError(`no run with id ${id}`);
    return { ...run, links: links(id) };
  });

  app.get('/v1/runs/:id/events', async (req, reply) => {
    const { id } = parse(RunParams, req.params, 'path');
    const { after } = parse(EventsQuery, req.query, 'query');
    if (!(await deps.store.get(id))) throw new NotFoundError(`no run with id ${id}`);
    if ((req.headers.accept ?? '').includes('text/event-stream')) {
      reply.hijack();
      await streamEvents(reply.raw, req.raw, deps.store, id, after, deps.ssePollMs ?? 250);
      return;
    }
    const rows = await deps.store.readEvents(id, after);
    return { events: rows.map((r) => r.event), next: rows.at(-1)?.id ?? after };
  });

  app.get('/v1/runs/:id/report', async (req, reply) => {
    const { id } = parse(RunParams, req.params, 'path');
    const run = await deps.store.get(id);
    if (!run) throw new NotFoundError(`no run with id ${id}`);
    if (!run.finishedAt || !run.reportPath) throw new NotFoundError(`run ${id} has no report yet (status ${run.status})`);
    let text: string;
    try {
      text = await readFile(run.reportPath, 'utf8');
    } catch {
      throw new NotFoundError(`the report of run ${id} is at ${run.reportPath} on worker ${run.workerId ?? '?'}, which this API cannot read`);
    }
    return reply.type('text/markdown; charset=utf-8').send(text);
  });

  app.post('/v1/runs/:id/approvals/:callId', async (req) => {
    const { id } = parse(RunParams, req.params, 'path');
    const callId = String((req.params as { callId?: string }).callId ?? '');
    const body = parse(ApprovalBody, req.body, 'body');
    const by = body.by ?? 'api';
    await deps.store.answer(id, callId, { approved: body.decision === 'approve', by });
    return { id, callId, decision: body.decision, by };
  });

  app.post('/v1/runs/:id/cancel', async (req, reply) => {
    const { id } = parse(RunParams, req.params, 'path');
    const run = await deps.store.get(id);
    if (!run) throw new NotFoundError(`no run with id ${id}`);
    if (run.finishedAt) throw new CorralError('conflict', `run ${id} already ended (${run.status})`);
    const job = await deps.queue.getJob(id);
    if (job && (await job.isWaiting() || await job.isDelayed())) {
      await job.remove();
      const at = new Date(deps.clock()).toISOString();
      await deps.store.update(id, { status: 'cancelled', outcome: 'cancelled', reason: 'cancelled before it started', finishedAt: at });
      return reply.status(200).send({ id, status: 'cancelled' });
    }
    await deps.store.requestCancel(id);
    return reply.status(202).send({ id, status: 'cancelling' });
  });

  return app;
}

function links(id: string) {
  return { self: `/v1/runs/${id}`, events: `/v1/runs/${id}/events`, report: `/v1/runs/${id}/report` };
}

function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof CorralError) {
    const field = err instanceof InvalidInputError ? err.field : undefined;
    return reply.status(STATUS[err.code] ?? 500).send({ error: { code: err.code, message: err.message, ...(field ? { field } : {}) } });
  }
  const e = err as { statusCode?: number; code?: string; message?: string };
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    // Fastify's own client errors: bad JSON, wrong content type, body too large.
    return reply.status(e.statusCode).send({ error: { code: 'invalid_input', message: e.message ?? 'bad request', ...(e.code ? { detail: e.code } : {}) } });
  }
  return reply.status(500).send({ error: { code: 'internal', message: e.message ?? 'internal error' } });
}
