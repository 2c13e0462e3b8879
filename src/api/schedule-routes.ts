/**
 * Schedules over HTTP: a template run on a cron pattern, unattended. Creating one checks everything
 * a run of it would need (the template exists, its parameters render, the rendered spec passes every
 * submission check) so a schedule cannot fail the same way at every firing; each firing is then
 * submitted by the schedule runner (schedule-runner.ts) with the tenant's limits.
 *
 *   POST   /v1/schedules        { cron, timezone?, template, params?, name? } → 201 the schedule
 *   GET    /v1/schedules        your schedules, with their next firing and last run
 *   GET    /v1/schedules/:id
 *   DELETE /v1/schedules/:id    → 200 { id, deleted: true }
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CorralError, NotFoundError } from '../domain/errors';
import { renderTemplate, type RunTemplate } from '../domain/run-template';
import { checkCron, ScheduleBody, type Schedule } from '../domain/schedule';
import type { ScheduleStore } from '../queue/schedule-store';
import type { ApiDeps } from './api-deps';
import { parseInput } from './http-errors';
import { route, type RouteDoc } from './openapi';
import { ErrorBody } from './schemas';
import { checkSpec } from './submit-run';

const ScheduleView = z.object({
  id: z.string(), tenant: z.string(), name: z.string().optional(), cron: z.string(), timezone: z.string(), template: z.string(),
  params: z.record(z.string(), z.string()), createdAt: z.string(), runs: z.number(),
  next: z.string().optional().meta({ description: 'the next firing (ISO time)' }),
  lastRun: z.object({ id: z.string(), at: z.string() }).optional(),
  lastError: z.object({ message: z.string(), at: z.string() }).optional().meta({ description: 'why the latest firing made no run (e.g. a tenant limit)' }),
});
const ScheduleList = z.object({ schedules: z.array(ScheduleView) });
const ScheduleParams = z.object({ id: z.string().regex(/^sch_[0-9a-f-]{36}$/, 'a schedule id (sch_…)') });
const badInput = { description: 'invalid input: every problem with its path', schema: ErrorBody };
const notFound = { description: 'no such schedule (or it belongs to another tenant)', schema: ErrorBody };

/** The body a firing of this schedule submits: the template rendered, unattended, labelled with the schedule. */
export function scheduledBody(t: RunTemplate, s: Pick<Schedule, 'id' | 'params'>): Record<string, unknown> {
  const body = renderTemplate(t, s.params);
  return { ...body, approvals: false, labels: { ...(body.labels as Record<string, string>), schedule: s.id } };
}

export function registerScheduleRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  const store = deps.schedules;
  if (!store) return;
  const templates = new Map((deps.templates ?? []).map((t) => [t.name, t]));
  const own = async (req: FastifyRequest): Promise<Schedule> => {
    const { id } = parseInput(ScheduleParams, req.params, 'path');
    const s = await store.get(id);
    if (!s || s.tenant !== req.tenant) throw new NotFoundError(`no schedule with id ${id}`);
    return s;
  };

  route(app, docs, {
    method: 'POST', url: '/v1/schedules', tag: 'schedules', summary: 'Run a template on a cron pattern, unattended',
    description: 'The template, its parameters and the rendered run are checked now, as a submission would be; every firing then submits that run (approvals off: asks are refused) labelled `schedule: ID`, within the tenant\'s limits. A firing the limits refuse makes no run and is recorded as `lastError`. Schedules live in Redis: they survive restarts of every process.',
    body: ScheduleBody,
    responses: {
      201: { description: 'the schedule', schema: ScheduleView },
      400: badInput,
      409: { description: 'the tenant has CORRAL_TENANT_MAX_SCHEDULES schedules already', schema: ErrorBody },
      413: { description: 'body larger than CORRAL_API_MAX_BODY_BYTES', schema: ErrorBody },
    },
  }, async (req, reply) => {
    const body = parseInput(ScheduleBody, req.body, 'body');
    checkCron(body.cron, body.timezone, deps.config.CORRAL_SCHEDULE_MIN_INTERVAL_S);
    const t = templates.get(body.template);
    if (!t) throw new CorralError('invalid_input', `body: template: no template named ${body.template} (this server has: ${[...templates.keys()].join(', ') || 'none'})`, { field: 'template' });
    const id = `sch_${randomUUID()}`;
    await checkSpec(deps, scheduledBody(t, { id, params: body.params }), req.tenant);
    const max = deps.config.CORRAL_TENANT_MAX_SCHEDULES;
    if ((await store.count(req.tenant)) >= max) throw new CorralError('conflict', `tenant ${req.tenant} has ${max} schedules, the most this server allows (CORRAL_TENANT_MAX_SCHEDULES); delete one first`);
    const s: Schedule = { ...body, id, tenant: req.tenant, createdAt: new Date(deps.clock()).toISOString(), runs: 0 };
    await store.create(s);
    return reply.status(201).send((await store.get(id)) ?? s);
  });

  route(app, docs, {
    method: 'GET', url: '/v1/schedules', tag: 'schedules', summary: 'Your schedules, oldest first, with their next firing and last run',
    responses: { 200: { description: 'every schedule of the tenant', schema: ScheduleList } },
  }, async (req) => ({ schedules: await store.list(req.tenant) }));

  route(app, docs, {
    method: 'GET', url: '/v1/schedules/:id', tag: 'schedules', summary: 'One schedule',
    params: ScheduleParams,
    responses: { 200: { description: 'the schedule', schema: ScheduleView }, 400: badInput, 404: notFound },
  }, async (req) => own(req));

  route(app, docs, {
    method: 'DELETE', url: '/v1/schedules/:id', tag: 'schedules', summary: 'Delete a schedule (runs it made are untouched)',
    params: ScheduleParams,
    responses: { 200: { description: 'deleted', schema: z.object({ id: z.string(), deleted: z.literal(true) }) }, 400: badInput, 404: notFound },
  }, async (req) => {
    const s = await own(req);
    await store.remove(s);
    return { id: s.id, deleted: true as const };
  });
}

export type { ScheduleStore };
