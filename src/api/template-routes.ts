/**
 * The template library over HTTP: list the templates, show one, and submit a run from one with
 * parameters. A run made from a template is admitted exactly like a POST /v1/runs body (the rendered
 * spec passes every submission check) and carries the label `template: NAME`.
 *
 *   GET  /v1/templates                     { templates: [{ name, description, params, examples }] }
 *   GET  /v1/templates/:name               one template, with its task text
 *   POST /v1/templates/:name/runs          { params: { k: v }, workspace? } (+ Idempotency-Key, ?dryRun=true) → as POST /v1/runs
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { NotFoundError } from '../domain/errors';
import { describeTemplate, renderTemplate, TEMPLATE_NAME, type RunTemplate } from '../domain/run-template';
import type { ApiDeps } from './api-deps';
import { parseInput } from './http-errors';
import { route, type RouteDoc } from './openapi';
import { planRun, RunPlan } from './run-plan';
import { ErrorBody, IdempotencyKeyHeader, RunCreated, SubmitQuery } from './schemas';
import { admitBody, submitRun } from './submit-run';
import { failSubmitTrace, startSubmitTrace, traceUrl } from './submit-trace';

const TemplateParamDoc = z.object({ name: z.string(), description: z.string(), default: z.string().optional(), pattern: z.string().optional() });
const TemplateSummary = z.object({ name: z.string(), description: z.string(), params: z.array(TemplateParamDoc), examples: z.array(z.record(z.string(), z.string())) });
const TemplateList = z.object({ templates: z.array(TemplateSummary) });
const TemplateDetail = TemplateSummary.extend({ task: z.string(), spec: z.record(z.string(), z.unknown()) });
const TemplateParams = z.object({ name: z.string().regex(TEMPLATE_NAME, 'a template name: lower case letters, digits and -') });
export const TemplateRunBody = z.strictObject({
  params: z.record(z.string().max(64), z.string()).default({}).meta({ description: 'a value for each parameter without a default (one line of text, at most 200 characters)' }),
  workspace: z.unknown().optional().meta({ description: 'the run\'s workspace, as in a RunSpec (files, tarBase64); replaces the template\'s' }),
});

const notFound = { description: 'no template of that name', schema: ErrorBody };
const badInput = { description: 'invalid input: every problem with its path', schema: ErrorBody };

export function registerTemplateRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  const templates = new Map<string, RunTemplate>((deps.templates ?? []).map((t) => [t.name, t]));
  const find = (name: string): RunTemplate => {
    const t = templates.get(name);
    if (!t) throw new NotFoundError(`no template named ${name} (this server has: ${[...templates.keys()].join(', ') || 'none'})`);
    return t;
  };

  route(app, docs, {
    method: 'GET', url: '/v1/templates', tag: 'templates', redis: false, summary: 'The run templates this server loaded (CORRAL_TEMPLATES_DIR)',
    responses: { 200: { description: 'every template, by name', schema: TemplateList } },
  }, async () => ({ templates: [...templates.values()].map(describeTemplate) }));

  route(app, docs, {
    method: 'GET', url: '/v1/templates/:name', tag: 'templates', redis: false, summary: 'One template, with its task text and spec',
    params: TemplateParams,
    responses: { 200: { description: 'the template', schema: TemplateDetail }, 400: badInput, 404: notFound },
  }, async (req) => {
    const t = find(parseInput(TemplateParams, req.params, 'path').name);
    return { ...describeTemplate(t), task: t.task, spec: t.spec };
  });

  route(app, docs, {
    method: 'POST', url: '/v1/templates/:name/plan', tag: 'templates', summary: 'Check a run made from a template without submitting it: its plan',
    description: 'As POST /v1/templates/{name}/runs?dryRun=true, with an answer of its own schema: the plan (nothing queued, no model called).',
    params: TemplateParams,
    body: TemplateRunBody,
    // A template's run never names a replay: nothing here reaches Redis.
    redis: false,
    responses: { 200: { description: 'the run would be accepted: its plan', schema: RunPlan }, 400: badInput, 404: notFound },
  }, async (req) => {
    const t = find(parseInput(TemplateParams, req.params, 'path').name);
    const body = parseInput(TemplateRunBody, req.body, 'body');
    const rendered = renderTemplate(t, body.params);
    const admitted = await admitBody(deps, body.workspace === undefined ? rendered : { ...rendered, workspace: body.workspace }, req.tenant);
    return planRun(admitted.spec, deps.config, deps.environments, admitted);
  });

  route(app, docs, {
    method: 'POST', url: '/v1/templates/:name/runs', tag: 'templates', summary: 'Submit a run made from a template',
    description: 'Fills the template\'s `{{param}}` placeholders with `params` (defaults for the rest) and submits the result exactly as POST /v1/runs would, labelled `template: NAME`. `Idempotency-Key` and `?dryRun=true` work as there.',
    params: TemplateParams,
    query: SubmitQuery,
    headers: [{ name: 'Idempotency-Key', schema: IdempotencyKeyHeader, description: 'makes the submission safe to retry' }],
    body: TemplateRunBody,
    responses: {
      201: { description: 'the run is queued', schema: RunCreated },
      200: { description: 'a repeat of an earlier request with this Idempotency-Key, or with `dryRun=true` the plan', schema: z.union([RunCreated, RunPlan]), headers: { 'idempotent-replayed': 'true (a repeat only)' } },
      400: badInput,
      404: notFound,
      409: { description: 'Idempotency-Key reused with a different body', schema: ErrorBody },
      413: { description: 'body larger than CORRAL_API_MAX_BODY_BYTES', schema: ErrorBody },
      429: { description: 'a per-tenant limit was hit (error.limit says which)', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } },
    },
  }, async (req, reply) => {
    const tr = startSubmitTrace(deps, req, '/v1/templates/:name/runs');
    try {
      const t = find(parseInput(TemplateParams, req.params, 'path').name);
      const body = parseInput(TemplateRunBody, req.body, 'body');
      const rendered = renderTemplate(t, body.params);
      const admitted = await tr.phase('admission', () => admitBody(deps, body.workspace === undefined ? rendered : { ...rendered, workspace: body.workspace }, req.tenant));
      const spec = admitted.spec;
      if (parseInput(SubmitQuery, req.query, 'query').dryRun === 'true') {
        tr.end({ status: 200 });
        return reply.status(200).send(planRun(spec, deps.config, deps.environments, admitted));
      }
      const rawKey = req.headers['idempotency-key'];
      const key = rawKey === undefined ? undefined : parseInput(IdempotencyKeyHeader, Array.isArray(rawKey) ? rawKey.join(',') : rawKey, 'header Idempotency-Key');
      const r = await submitRun(deps, req.tenant, spec, key, tr);
      tr.end({ status: r.status, runId: r.body.id });
      if (r.body.idempotentReplay) void reply.header('idempotent-replayed', 'true');
      const url = traceUrl(deps, r.body.traceId);
      return reply.status(r.status).send({ ...r.body, ...(url ? { traceUrl: url } : {}) });
    } catch (err) {
      failSubmitTrace(tr, err);
      throw err;
    }
  });
}
