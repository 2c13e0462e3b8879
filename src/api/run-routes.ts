/**
 * The run endpoints: submit, list, get (with budget use), events (JSON pages or SSE), approvals,
 * cancel, replay. Every one is scoped to the caller's tenant: a run of another tenant is answered
 * exactly like a run that does not exist.
 */
import { AUTH_OFF_PRINCIPAL, principalText } from '../domain/principal';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { admitSpec } from '../domain/admit-spec';
import type { BudgetName } from '../domain/events';
import { CorralError, InvalidInputError, NotFoundError } from '../domain/errors';
import { RunSpec } from '../domain/run-spec';
import type { RunView } from '../queue/run-store';
import type { ApiDeps } from './api-deps';
import { firstPage, streamEvents } from './event-stream';
import { limitReached, parseInput } from './http-errors';
import { failSubmitTrace, startSubmitTrace, traceUrl } from './submit-trace';
import { route, type RouteDoc } from './openapi';
import { runLinks } from './run-links';
import {
  isStreamId,
  ApprovalAnswered, ApprovalBody, ApprovalParams, CancelResult, ErrorBody, EventsPage, EventsQuery, IdempotencyKeyHeader,
  ListQuery, RunCreated, SubmitQuery, RunDetail, RunPageDoc, RunParams,
} from './schemas';
import { planRun, RunPlan } from './run-plan';
import { admission, admitBody, checkReplaySource, createRun, submitRun } from './submit-run';

const LIST_TASK_CHARS = 500;
/** What a 429 for a full stream cap suggests: streams end when their runs do. */
const STREAM_RETRY_S = 10;

const notFound = { description: 'no such run (or it belongs to another tenant)', schema: ErrorBody };
const badInput = { description: 'invalid input: every problem with its path', schema: ErrorBody };

/** The run if it exists and belongs to the caller's tenant; otherwise the same 404 as an unknown id. */
export async function ownRun(deps: ApiDeps, req: FastifyRequest, id: string): Promise<RunView> {
  const run = await deps.store.get(id);
  if (!run || run.tenant !== req.tenant) throw new NotFoundError(`no run with id ${id}`);
  return run;
}

export function registerRunRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  const idemHeader = 'idempotency-key';

  route(app, docs, {
    method: 'POST', url: '/v1/runs', tag: 'runs', summary: 'Submit a run',
    description: 'Validates the body (a RunSpec) completely before anything is queued; with `?dryRun=true` it stops there and answers 200 with the resolved plan (tools, done checks, egress, limits, budgets, policy, model), queueing nothing and calling no model — POST /v1/runs/plan does the same with an answer of its own schema (a generated client needs no narrowing). Send an `Idempotency-Key` header to make retries safe: the same key from the same tenant returns the run the first request created (200) for CORRAL_IDEMPOTENCY_TTL_S seconds; bodies are compared after validation (a spelled-out default is no difference), and a different body with the same key is a 409. Per-tenant limits (active runs, submissions per minute) answer 429 with `retry-after`.',
    headers: [{ name: 'Idempotency-Key', schema: IdempotencyKeyHeader, description: 'makes the submission safe to retry (see above)' }],
    body: RunSpec,
    query: SubmitQuery,
    responses: {
      201: { description: 'the run is queued', schema: RunCreated },
      200: { description: 'an earlier request with this Idempotency-Key created this run; with `dryRun=true`, the plan of the run (nothing queued, no model called)', schema: z.union([RunCreated, RunPlan]), headers: { 'idempotent-replayed': 'true (a repeat only)' } },
      400: badInput,
      409: { description: 'Idempotency-Key reused with a different body', schema: ErrorBody },
      413: { description: 'body larger than CORRAL_API_MAX_BODY_BYTES', schema: ErrorBody },
      429: { description: 'a per-tenant limit was hit (error.limit says which)', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } },
    },
  }, async (req, reply) => {
    // The submission's span (the caller's traceparent, if any, is its parent): the run's trace hangs below it.
    const t = startSubmitTrace(deps, req, '/v1/runs');
    try {
      const admitted = await t.phase('admission', () => admitBody(deps, req.body, req.tenant));
      const spec = admitted.spec;
      if (parseInput(SubmitQuery, req.query, 'query').dryRun === 'true') {
        t.end({ status: 200 });
        return reply.status(200).send(planRun(spec, deps.config, deps.environments, admitted));
      }
      const rawKey = req.headers[idemHeader];
      const key = rawKey === undefined ? undefined : parseInput(IdempotencyKeyHeader, Array.isArray(rawKey) ? rawKey.join(',') : rawKey, 'header Idempotency-Key');
      const r = await submitRun(deps, req.tenant, spec, key, t);
      t.end({ status: r.status, runId: r.body.id });
      if (r.body.idempotentReplay) void reply.header('idempotent-replayed', 'true');
      const url = traceUrl(deps, r.body.traceId);
      return reply.status(r.status).send({ ...r.body, ...(url ? { traceUrl: url } : {}) });
    } catch (err) {
      failSubmitTrace(t, err);
      throw err;
    }
  });

  route(app, docs, {
    method: 'POST', url: '/v1/runs/plan', tag: 'runs', summary: 'Check a run without submitting it: the plan the server would run (a dry run)',
    description: 'Every check a submission gets (POST /v1/runs), then the resolved plan: tools, done checks, the environment and its setup, egress, limits, budgets, policy, model, the workspace (an upload\'s id and size, a git remote), what the patch leaves out. Nothing is queued, no model is called, nothing counts against the tenant\'s limits. The same as POST /v1/runs?dryRun=true, with an answer of its own schema.',
    body: RunSpec,
    responses: { 200: { description: 'the run would be accepted: its plan', schema: RunPlan }, 400: badInput, 413: { description: 'body larger than CORRAL_API_MAX_BODY_BYTES', schema: ErrorBody } },
  }, async (req) => {
    const admitted = await admitBody(deps, req.body, req.tenant);
    return planRun(admitted.spec, deps.config, deps.environments, admitted);
  });

  route(app, docs, {
    method: 'GET', url: '/v1/runs', tag: 'runs', summary: 'List your runs, newest first',
    description: `Filter with \`status\` (comma-separated), page with \`limit\` and the \`next\` cursor. With a status filter a page may hold fewer than \`limit\` runs (at most 2000 runs are examined per page): follow \`next\` until it is null. Tasks are cut to ${LIST_TASK_CHARS} characters here (taskTruncated).`,
    query: ListQuery,
    responses: { 200: { description: 'one page', schema: RunPageDoc }, 400: badInput },
  }, async (req) => {
    const q = parseInput(ListQuery, req.query, 'query');
    const page = await deps.store.listPage({ tenant: req.tenant, limit: q.limit, ...(q.status ? { statuses: q.status } : {}), ...(q.cursor ? { cursor: q.cursor } : {}) });
    return {
      runs: page.runs.map((r) => ({
        ...r,
        ...(r.task.length > LIST_TASK_CHARS ? { task: r.task.slice(0, LIST_TASK_CHARS), taskTruncated: true } : {}),
        links: runLinks(r.id),
      })),
      next: page.next,
    };
  });

  route(app, docs, {
    method: 'GET', url: '/v1/runs/:id', tag: 'runs', summary: 'A run: status, reason, timestamps, budget use, pending approvals, what needs review and what was not exported, links',
    params: RunParams,
    responses: { 200: { description: 'the run', schema: RunDetail }, 400: badInput, 404: notFound },
  }, async (req) => {
    const { id } = parseInput(RunParams, req.params, 'path');
    const run = await ownRun(deps, req, id);
    const children = deps.tree ? await deps.tree.childViews(deps.store, id) : [];
    const url = traceUrl(deps, run.traceId);
    return { ...run, ...(url ? { traceUrl: url } : {}), budgets: await budgetUse(deps, run), ...(children.length ? { children: children.map((c) => ({ ...c, links: runLinks(c.id) })) } : {}), links: runLinks(id) };
  });

  route(app, docs, {
    method: 'GET', url: '/v1/runs/:id/events', tag: 'runs', summary: 'The run\'s events: JSON pages, or Server-Sent Events (history, then live) with Accept: text/event-stream',
    description: 'SSE: each message has `id` (the stream id; resume with ?after= or Last-Event-ID), `event` (the event type) and `data` (the RunEvent JSON). The stream ends after run.finished. A `: heartbeat` comment is sent every 15 s. Each open stream counts against CORRAL_TENANT_MAX_STREAMS and CORRAL_API_MAX_STREAMS (429 past either); a client that leaves 64 KiB unread for 30 s is disconnected and resumes with Last-Event-ID.',
    params: RunParams, query: EventsQuery,
    headers: [
      { name: 'Accept', schema: z.string(), description: '`text/event-stream` for Server-Sent Events; otherwise a JSON page' },
      { name: 'Last-Event-ID', schema: z.string().max(60), description: 'SSE only: the id of the last message received; the stream resumes after it (like ?after=)' },
    ],
    responses: {
      200: { description: 'a page of events (JSON), or the SSE stream (text/event-stream)', schema: EventsPage, also: { 'text/event-stream': undefined } },
      400: badInput, 404: notFound,
      429: { description: 'SSE: the tenant (CORRAL_TENANT_MAX_STREAMS) or the service (CORRAL_API_MAX_STREAMS) holds as many live streams as allowed; error.limit says which', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } },
    },
  }, async (req, reply) => {
    const { id } = parseInput(RunParams, req.params, 'path');
    let { after } = parseInput(EventsQuery, req.query, 'query');
    await ownRun(deps, req, id);
    if ((req.headers.accept ?? '').includes('text/event-stream')) {
      const last = req.headers['last-event-id'];
      if (after === '0' && typeof last === 'string' && last !== '') {
        if (!isStreamId(last)) throw new InvalidInputError(`header: last-event-id: must be an event id this stream sent (MS-SEQ), got "${last.slice(0, 60)}"`, 'last-event-id');
        after = last;
      }
      // The first page is read before a slot is taken and before the 200: a Redis that is away or failing
      // over is a 503 the client waits out, and a refused read leaves no slot behind (its release would
      // meet the same outage and the slot would stay held until its lease ran out).
      const first = await firstPage(deps.store, id, after);
      // A stream holds a slot (per tenant and service-wide) for as long as it is open.
      const slot = await deps.held.take('streams', req.tenant, {
        perTenant: deps.config.CORRAL_TENANT_MAX_STREAMS, perTenantVar: 'CORRAL_TENANT_MAX_STREAMS',
        global: deps.config.CORRAL_API_MAX_STREAMS, globalVar: 'CORRAL_API_MAX_STREAMS', retryAfterS: STREAM_RETRY_S,
      });
      if (!slot.ok) throw limitReached(slot);
      reply.hijack();
      try {
        await streamEvents(reply.raw, deps.store, deps.store.liveFeed(), id, after, {
          first, pollMs: deps.ssePollMs ?? 5000, heartbeatMs: deps.sseHeartbeatMs ?? 15_000,
          ...(deps.sseMaxBufferedBytes !== undefined ? { maxBufferedBytes: deps.sseMaxBufferedBytes } : {}),
          ...(deps.sseSlowReaderMs !== undefined ? { slowReaderMs: deps.sseSlowReaderMs } : {}),
        });
      } finally {
        await slot.release().catch(() => undefined); // unreleased, the lease runs out on its own
      }
      return;
    }
    const rows = await deps.store.readEvents(id, after);
    return { events: rows.map((r) => r.event), next: rows.at(-1)?.id ?? after };
  });

  route(app, docs, {
    method: 'POST', url: '/v1/runs/:id/approvals/:callId', tag: 'runs', summary: 'Answer a pending approval',
    params: ApprovalParams, body: ApprovalBody,
    responses: {
      200: { description: 'answered; the waiting run resumes', schema: ApprovalAnswered },
      400: badInput, 404: { description: 'no such run, or no such pending call', schema: ErrorBody },
      409: { description: 'already answered', schema: ErrorBody },
    },
  }, async (req) => {
    const { id, callId } = parseInput(ApprovalParams, req.params, 'path');
    const body = parseInput(ApprovalBody, req.body, 'body');
    await ownRun(deps, req, id);
    // Who answered is who authenticated; what the body says is only a note beside it.
    const principal = req.principal ?? AUTH_OFF_PRINCIPAL;
    const note = body.note ?? body.by;
    const by = principalText(principal);
    await deps.store.answer(id, callId, { approved: body.decision === 'approve', by, principal, ...(note ? { note } : {}) });
    return { id, callId, decision: body.decision, by, principal, ...(note ? { note } : {}) };
  });

  route(app, docs, {
    method: 'POST', url: '/v1/runs/:id/cancel', tag: 'runs', summary: 'Cancel a queued or running run',
    description: 'A queued run is removed from the queue (200, cancelled). A running run is aborted on its worker (202, cancelling): the command in the sandbox is killed and the container removed within seconds; the run then ends `cancelled`. The cancel reaches its sub-runs too: queued ones are removed, running ones aborted; a run waiting for its sub-runs ends `cancelled` once they have.',
    params: RunParams,
    responses: {
      200: { description: 'it was still queued: removed', schema: CancelResult },
      202: { description: 'it is running: the cancel was sent to its worker', schema: CancelResult },
      400: badInput, 404: notFound, 409: { description: 'the run already ended', schema: ErrorBody },
    },
  }, async (req, reply) => {
    const { id } = parseInput(RunParams, req.params, 'path');
    const run = await ownRun(deps, req, id);
    if (run.finishedAt) throw new CorralError('conflict', `run ${id} already ended (${run.status})`);
    const job = await deps.queue.getJob(id);
    if (job && ((await job.isWaiting()) || (await job.isDelayed()))) {
      await job.remove();
      await deps.store.end(id, 'cancelled', 'cancelled before it started', new Date(deps.clock()));
      await deps.quota.releaseActive(run.tenant, id);
      return reply.status(200).send({ id, status: 'cancelled' });
    }
    // Its sub-runs too (a run waiting for them is held by no worker: it ends when they have).
    if (deps.tree) await deps.tree.cancelTree(deps.store, deps.queue, id, () => new Date(deps.clock()));
    else await deps.store.requestCancel(id);
    return reply.status(202).send({ id, status: 'cancelling' });
  });

  route(app, docs, {
    method: 'POST', url: '/v1/runs/:id/replay', tag: 'runs', summary: 'Run a finished run again with its recorded model turns (no model is called)',
    params: RunParams,
    responses: {
      201: { description: 'the replay is queued', schema: RunCreated },
      400: badInput, 404: notFound, 409: { description: 'the run has not finished', schema: ErrorBody },
      429: { description: 'a per-tenant limit was hit', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } },
    },
  }, async (req, reply) => {
    const { id } = parseInput(RunParams, req.params, 'path');
    const run = await ownRun(deps, req, id);
    if (!run.finishedAt) throw new CorralError('conflict', `run ${id} has not finished (${run.status}); only a finished run can be replayed`);
    const spec = await deps.store.getSpec(id);
    if (!spec) throw new NotFoundError(`the spec of run ${id} is not stored (it was not submitted through this API, or it expired)`);
    const replayOf = spec.replayOf ?? id;
    // Admitted again: the server's policies and maxima may have changed since the run was submitted.
    await admitSpec(spec, admission(deps, `the spec of run ${id}: `, req.tenant));
    await checkReplaySource(deps, replayOf);
    const newId = deps.newRunId();
    await createRun(deps, req.tenant, newId, { ...spec, replayOf });
    return reply.status(201).send({ id: newId, status: 'queued', links: runLinks(newId), replayOf });
  });
}

type BudgetUse = Partial<Record<BudgetName, { used: number; limit: number; percent: number }>>;

/** Use of each budget against its limit: the final usage once the run ended, else what its worker counted so far. */
async function budgetUse(deps: ApiDeps, run: RunView): Promise<BudgetUse | undefined> {
  const spec = await deps.store.getSpec(run.id);
  if (!spec) return undefined;
  const u = run.usage ?? (await deps.metrics.liveUsage(run.id)) ?? { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };
  const wallMs = run.usage ? run.usage.wallTimeMs : run.startedAt ? deps.clock() - Date.parse(run.startedAt) : 0;
  const used: Record<BudgetName, number> = {
    llmCalls: u.llmCalls, toolCalls: u.toolCalls, tokens: u.inputTokens + u.outputTokens,
    wallTimeS: Math.round(wallMs / 100) / 10, costUsd: Math.round(u.costUsd * 1e6) / 1e6,
  };
  const out: BudgetUse = {};
  for (const b of Object.keys(used) as BudgetName[]) {
    const limit = spec.budgets[b];
    out[b] = { used: used[b], limit, percent: limit > 0 ? Math.round((used[b] / limit) * 100) : 0 };
  }
  return out;
}
