/**
 * The OpenAPI 3.1 document, generated from the same zod schemas the routes parse with. Each route is
 * registered through `route()`, which records its RouteDoc; `openApiDocument()` turns the records
 * into paths (parameters from the params/query schemas, the JSON body, every response), so a route
 * cannot exist undocumented. Run endpoints need a bearer token when auth is on; `public` ones never.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { RunSpec } from '../domain/run-spec';
import { ErrorBody } from './schemas';

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  /** Default application/json when a schema is given. */
  contentType?: string;
  /** Other content types the same status may come as (the SSE form of the events route). */
  also?: Record<string, z.ZodType | undefined>;
  headers?: Record<string, string>;
}

export interface RouteDoc {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Fastify style: /v1/runs/:id */
  url: string;
  summary: string;
  description?: string;
  tag: 'runs' | 'artifacts' | 'workspaces' | 'environments' | 'templates' | 'schedules' | 'operations';
  /** No bearer token needed, even when auth is on. */
  public?: boolean;
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: Array<{ name: string; schema: z.ZodType; description: string }>;
  body?: z.ZodType;
  /** A body that is not JSON (streamed to the handler): its content types. */
  rawBody?: { contentTypes: string[]; description: string };
  /** false: the route never touches Redis, so it never answers 503 for it. */
  redis?: boolean;
  responses: Record<number, ResponseDoc>;
}

/** Statuses every route may answer, added to each route's document. */
const UNAUTHORIZED = { description: 'no valid bearer token (only when auth is on)', schema: ErrorBody };
const UNAVAILABLE = { description: 'Redis does not answer; try again (retry-after)', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } };
const UNSUPPORTED = { description: 'the body is not JSON (send Content-Type: application/json)', schema: ErrorBody };

type Handler = (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;

/** Registers a route and records its documentation. */
export function route(app: FastifyInstance, docs: RouteDoc[], doc: RouteDoc, handler: Handler): void {
  docs.push(doc);
  app.route({ method: doc.method, url: doc.url, config: { public: doc.public ?? false }, handler });
}

/** Descriptions of the RunSpec fields (the schema's own doc comments do not reach JSON Schema). */
const RUN_SPEC_DOCS: Record<string, string> = {
  task: 'What to do: plain text, or Markdown with `# Task`, `# Allowed tools`, `# Cannot do`, `# Done means` sections. Control characters are kept; NUL is refused. At most 50 000 characters.',
  contract: 'The same task contract as JSON; when present it wins over sections in `task`.',
  workspace: '`files`: inline files {relative path: UTF-8 content} (paths: no `..`, no absolute paths, no control characters). `tarBase64`: an uncompressed tar, base64; checked at submit (regular files, directories and symbolic links that stay inside the workspace; no hard links, no absolute or `..` names, size and entry caps). `id`: an upload (PUT /v1/workspaces). `git`: a remote the worker clones.',
  patch: 'What workspace.patch leaves out: `gitignore` (default true) honours the workspace\'s .gitignore files and .git/info/exclude as they were at the start; `exclude` adds gitignore patterns (root-based, strongest; `!pattern` brings a path back). Changes left out are in workspace.tar and counted in the run\'s `workspace.ignoredChanges`.',
  policy: 'Name of a policy loaded by the server (policies/*.yaml).',
  approvals: 'true: calls the policy sends to "ask" wait for a human (POST …/approvals/{callId}); false: they are refused.',
  egress: '`allow`: host names or `*.suffix`, optionally `:port` (default 443 for HTTPS, 80 for HTTP), the sandbox may reach through its egress proxy; never IP literals, `localhost` or private-use domains; empty = no network.',
  limits: 'Sandbox resources (memoryMb, cpus, pids, workspaceMb, execTimeoutS), each within the server maximum.',
  budgets: 'llmCalls, toolCalls, tokens, wallTimeS, costUsd: the run stops when one runs out.',
  memory: 'Notes shared by runs with the same key (per tenant).',
  replayOf: 'Re-run with the recorded model turns of this finished run of yours.',
  model: 'Overrides the server\'s model for this run.',
  labels: 'Free-form labels {name: value}, returned with the run (GET /v1/runs/{id} and the list).',
};

function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const s = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  delete s.$schema;
  return s;
}

function runSpecSchema(): Record<string, unknown> {
  const s = jsonSchema(RunSpec);
  const props = s.properties as Record<string, Record<string, unknown>>;
  for (const [k, d] of Object.entries(RUN_SPEC_DOCS)) if (props[k]) props[k].description = d;
  return s;
}

function parameters(where: 'path' | 'query', schema: z.ZodObject | undefined): unknown[] {
  if (!schema) return [];
  const s = jsonSchema(schema);
  const required = new Set((s.required as string[] | undefined) ?? []);
  return Object.entries((s.properties ?? {}) as Record<string, Record<string, unknown>>).map(([name, p]) => {
    const { description, ...rest } = p;
    return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

function bodyRef(schema: z.ZodType): Record<string, unknown> {
  if (schema === RunSpec) return { $ref: '#/components/schemas/RunSpec' };
  if (schema === ErrorBody) return { $ref: '#/components/schemas/Error' };
  return jsonSchema(schema);
}

export function openApiDocument(docs: readonly RouteDoc[], info: { version: string; authEnabled: boolean }): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const d of docs) {
    const path = d.url.replace(/:([A-Za-z]+)/g, '{$1}');
    const responses: Record<string, unknown> = {};
    const all: Record<number, ResponseDoc> = { ...d.responses };
    if (!d.public) all[401] ??= UNAUTHORIZED;
    if (d.redis !== false) all[503] ??= UNAVAILABLE;
    if (d.body) all[415] ??= UNSUPPORTED;
    if (d.rawBody) all[415] ??= { description: `the body is not one of ${d.rawBody.contentTypes.join(', ')}`, schema: ErrorBody };
    for (const [status, r] of Object.entries(all)) {
      const content: Record<string, unknown> = {};
      if (r.schema || r.contentType) content[r.contentType ?? 'application/json'] = { schema: r.schema ? bodyRef(r.schema) : { type: 'string' } };
      for (const [type, schema] of Object.entries(r.also ?? {})) content[type] = { schema: schema ? bodyRef(schema) : { type: 'string' } };
      responses[status] = {
        description: r.description,
        ...(r.headers ? { headers: Object.fromEntries(Object.entries(r.headers).map(([h, desc]) => [h, { description: desc, schema: { type: 'string' } }])) } : {}),
        ...(Object.keys(content).length ? { content } : {}),
      };
    }
    paths[path] ??= {};
    paths[path][d.method.toLowerCase()] = {
      tags: [d.tag],
      summary: d.summary,
      ...(d.description ? { description: d.description } : {}),
      operationId: `${d.method.toLowerCase()}${path.replace(/[{}]/g, '').split(/[/._-]/).filter(Boolean).map((w) => w[0]!.toUpperCase() + w.slice(1)).join('')}`,
      ...(d.public ? { security: [] } : {}),
      parameters: [
        ...parameters('path', d.params),
        ...parameters('query', d.query),
        ...(d.headers ?? []).map((h) => ({ name: h.name, in: 'header', required: false, description: h.description, schema: jsonSchema(h.schema) })),
      ],
      ...(d.body ? { requestBody: { required: true, content: { 'application/json': { schema: bodyRef(d.body) } } } } : {}),
      ...(d.rawBody ? { requestBody: { required: true, description: d.rawBody.description, content: Object.fromEntries(d.rawBody.contentTypes.map((t) => [t, { schema: { type: 'string', contentMediaType: t } }])) } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'corral',
      version: info.version,
      description: 'Runs AI-agent tasks in per-run Docker sandboxes behind a policy gate. Errors are JSON `{"error":{"code","message","field"?,"issues"?}}`. '
        + (info.authEnabled ? 'Every run endpoint needs `Authorization: Bearer <token>`; runs belong to the token\'s tenant.' : 'Auth is OFF on this server: every request is tenant "default".'),
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'a token from CORRAL_API_TOKENS / CORRAL_API_TOKENS_FILE' } },
      schemas: { RunSpec: runSpecSchema(), Error: jsonSchema(ErrorBody) },
    },
    security: [{ bearer: [] }],
    tags: [
      { name: 'runs', description: 'submit, list, follow, answer and cancel runs' },
      { name: 'artifacts', description: 'what a run left: report, log, workspace' },
      { name: 'workspaces', description: 'upload a large workspace once (a tar), name it in runs' },
      { name: 'environments', description: 'what a run\'s sandbox starts from: image, setup phase, cache' },
      { name: 'templates', description: 'run templates: a library of tasks with parameters' },
      { name: 'schedules', description: 'template runs on a cron pattern, unattended' },
      { name: 'operations', description: 'health, readiness, metrics, this document' },
    ],
    paths,
  };
}
