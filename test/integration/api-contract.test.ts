/**
 * The OpenAPI document against real answers (issue 14, defect 10). Every route is called over the
 * real test Redis, with requests chosen to reach each status the document gives it; each answer is
 * checked against the document: its status is documented for that route, its content type is one the
 * document names, and a JSON body validates against the documented schema (Ajv, JSON Schema 2020-12).
 * At the end every documented status of every route must have been seen. 503 comes from a second
 * app whose Redis does not answer; 405 from methods no route has.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { gzipSync } from 'node:zlib';
import Ajv2020 from 'ajv/dist/2020';
import { Redis } from 'ioredis';
import { Queue } from 'bullmq';
import { TenantAuth } from '../../src/api/auth';
import { buildApp, type ApiDeps } from '../../src/api/build-app';
import { loadTemplates } from '../../src/api/load-templates';
import { loadEnvironments } from '../../src/environments/load-environments';
import { IdempotencyStore } from '../../src/queue/idempotency';
import { RunSpec } from '../../src/domain/run-spec';
import { newRunId } from '../../src/queue/run-queue';
import { RunMetrics } from '../../src/queue/run-metrics';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { ScheduleStore } from '../../src/queue/schedule-store';
import { TenantQuota } from '../../src/queue/tenant-quota';
import { HeldSlots } from '../../src/queue/held-slots';
import { RedisUploadQuota, uploadCaps } from '../../src/queue/upload-quota';
import { WorkspaceUploads } from '../../src/workspaces/workspace-uploads';
import { TOKENS, injectJson, startApiFixture, type ApiFixture } from '../support/api-fixture';
import { makeTar } from '../support/make-tar';

jest.setTimeout(60_000);

type Doc = { paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { schema: unknown }> }> }>>; components: { schemas: Record<string, unknown> } };
type App = ReturnType<typeof buildApp>;
interface Answer { status: number; type: string; body: unknown; text: string }

const templates = loadTemplates(join(__dirname, '..', '..', 'templates'));
const TOKEN_LIST = `acme=${TOKENS.acme},globex=${TOKENS.globex}`;
let f: ApiFixture;
let app: App;
let dead: App;
let doc: Doc;
const conns: Redis[] = [];
const closers: Array<() => Promise<unknown>> = [];
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
/** "get /v1/runs/{id}" → statuses seen. */
const seen = new Map<string, Set<string>>();
const problems: string[] = [];

function operationOf(method: string, path: string): string | undefined {
  const p = path.split('?')[0]!;
  for (const template of Object.keys(doc.paths)) {
    const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`);
    if (re.test(p) && doc.paths[template]![method.toLowerCase()]) return `${method.toLowerCase()} ${template}`;
  }
  return undefined;
}

const validators = new Map<string, ReturnType<typeof ajv.compile>>();
function check(method: string, url: string, a: Answer): void {
  const op = operationOf(method, url);
  if (!op) {
    if (a.status !== 405 && a.status !== 404) problems.push(`${method} ${url}: no documented operation, and the answer was ${a.status}`);
    return;
  }
  const [m, template] = op.split(' ') as [string, string];
  const responses = doc.paths[template]![m]!.responses;
  const r = responses[String(a.status)];
  if (!seen.has(op)) seen.set(op, new Set());
  seen.get(op)!.add(String(a.status));
  if (!r) {
    problems.push(`${op}: answered ${a.status}, which is not documented (documented: ${Object.keys(responses).join(', ')}); body ${a.text.slice(0, 200)}`);
    return;
  }
  if (!r.content) return;
  const type = a.type.split(';')[0]!.trim();
  const c = Object.entries(r.content).find(([t]) => t.split(';')[0]!.trim() === type)?.[1];
  if (!c) {
    problems.push(`${op} ${a.status}: content type ${type} is not documented (documented: ${Object.keys(r.content).join(', ')})`);
    return;
  }
  if (type !== 'application/json') return;
  const key = `${op} ${a.status}`;
  if (!validators.has(key)) {
    const schema = JSON.parse(JSON.stringify(c.schema).replaceAll('"#/components/schemas/', '"doc#/components/schemas/')) as object;
    validators.set(key, ajv.compile(schema));
  }
  const v = validators.get(key)!;
  if (!v(a.body)) problems.push(`${op} ${a.status}: the body does not match the documented schema: ${ajv.errorsText(v.errors)}; body ${a.text.slice(0, 300)}`);
}

async function call(target: App, method: string, url: string, o: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {}): Promise<Answer> {
  const r = await injectJson(target, method, url, o);
  const a = { status: r.status, type: String(r.headers['content-type'] ?? ''), body: r.body, text: r.text };
  check(method, url, a);
  return a;
}

/** Ends a run in the store the way a worker does, with its files in the fixture's data dir. */
async function finished(id: string, tenant: string): Promise<void> {
  const dir = join(resolve(f.config.CORRAL_DATA_DIR), 'runs', id);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'events.jsonl'), '{"type":"run.started","seq":1}\n{"type":"run.finished","seq":2}\n');
  writeFileSync(join(dir, 'report.md'), `# Run ${id}\n`);
  writeFileSync(join(dir, 'workspace.tar'), Buffer.alloc(1024, 0));
  writeFileSync(join(dir, 'workspace.patch'), '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n');
  writeFileSync(join(dir, 'agent.bundle'), '# v2 git bundle\n');
  writeFileSync(join(dir, 'needs-review.jsonl'), '{"path":".github/workflows/ci.yml","rule":"ci","reason":"a CI definition"}\n');
  await f.store.create(id, RunSpec.parse({ task: 'finished run' }), new Date(f.clock.now), tenant);
  await f.store.update(id, {
    status: 'succeeded', outcome: 'succeeded', reason: 'done', finalAnswer: 'ok', startedAt: new Date(f.clock.now - 5000).toISOString(), finishedAt: new Date(f.clock.now).toISOString(),
    workerId: 'w-test', logPath: join(dir, 'events.jsonl'), reportPath: join(dir, 'report.md'),
    logSeal: { finalHash: 'a'.repeat(64), lines: 2 }, traceId: 'b'.repeat(32),
    usage: { llmCalls: 3, toolCalls: 2, inputTokens: 1500, outputTokens: 500, costUsd: 0.002, wallTimeMs: 4200 },
    artifacts: [{ name: 'workspace.tar', path: join(dir, 'workspace.tar'), bytes: 1024 }, { name: 'workspace.patch', path: join(dir, 'workspace.patch'), bytes: 33 }, { name: 'agent.bundle', path: join(dir, 'agent.bundle'), bytes: 16 }, { name: 'needs-review.jsonl', path: join(dir, 'needs-review.jsonl'), bytes: 74 }],
  });
}

function depsFor(redis: Redis, fx: ApiFixture, queue: Queue): ApiDeps {
  const conn = redis.duplicate();
  conn.on('error', () => undefined);
  conns.push(conn);
  return {
    config: fx.config, store: new RedisRunStore(redis, fx.prefix), queue, metrics: new RunMetrics(redis, fx.prefix), newRunId, clock: () => fx.clock.now,
    policyNames: ['default'], templates, environments: loadEnvironments(join(__dirname, '..', '..', 'environments'), fx.config), schedules: new ScheduleStore(redis, fx.config.CORRAL_QUEUE, conn, fx.prefix),
    quota: new TenantQuota(redis, queue, fx.prefix), held: new HeldSlots(redis, fx.prefix), idempotency: new IdempotencyStore(redis, fx.prefix),
    auth: TenantAuth.fromSources({ tokens: TOKEN_LIST }), operatorTenants: ['acme'], log: () => undefined,
    uploads: new WorkspaceUploads(join(fx.config.CORRAL_DATA_DIR, 'workspaces'), 3600, Date.now, undefined, new RedisUploadQuota(redis, uploadCaps(fx.config), fx.prefix)),
  };
}

beforeAll(async () => {
  f = await startApiFixture({ env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '5', CORRAL_TENANT_SUBMITS_PER_MIN: '1000', CORRAL_API_MAX_BODY_BYTES: '200000', CORRAL_SCHEDULE_MIN_INTERVAL_S: '60', CORRAL_TENANT_MAX_SCHEDULES: '1', CORRAL_TENANT_MAX_STREAMS: '1', CORRAL_TENANT_MAX_UPLOADS: '1', CORRAL_TENANT_UPLOAD_STORED_MB: '2' } });
  await f.app.close();
  app = buildApp(depsFor(f.redis, f, f.queue));
  await app.ready();
  closers.push(() => app.close());
  // The same app over a Redis that does not answer (a closed port; no offline queue): every route that
  // reads or writes run state answers 503.
  const deadRedis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
  deadRedis.on('error', () => undefined);
  const deadQueue = new Queue(`${f.config.CORRAL_QUEUE}-dead`, { connection: deadRedis });
  deadQueue.on('error', () => undefined);
  dead = buildApp(depsFor(deadRedis, f, deadQueue));
  await dead.ready();
  closers.push(() => dead.close(), () => deadQueue.close().catch(() => undefined), async () => deadRedis.disconnect());
  doc = JSON.parse((await app.inject({ method: 'GET', url: '/openapi.json' })).body) as Doc;
  ajv.addSchema({ $id: 'doc', components: doc.components });
  await call(app, 'GET', '/openapi.json', { token: null }); // and the document's own answer, checked against itself
});
afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  for (const c of conns) c.disconnect();
  await f?.close();
});

test('every route, every documented status: each answer is documented for its route and its body has the documented shape', async () => {
  const run = (body: Record<string, unknown> = {}) => ({ task: 'contract run', ...body });
  // runs
  const created = (await call(app, 'POST', '/v1/runs', { body: run(), headers: { 'idempotency-key': 'contract-1' } })).body as { id: string };
  await call(app, 'POST', '/v1/runs', { body: run(), headers: { 'idempotency-key': 'contract-1' } }); // 200: the same request again
  await call(app, 'POST', '/v1/runs', { body: run({ task: 'another' }), headers: { 'idempotency-key': 'contract-1' } }); // 409
  await call(app, 'POST', '/v1/runs', { body: { task: '' } }); // 400
  await call(app, 'POST', '/v1/runs', { body: run(), token: null }); // 401
  await call(app, 'POST', '/v1/runs', { body: 'task=x', headers: { 'content-type': 'text/plain' } }); // 415
  await call(app, 'POST', '/v1/runs', { body: run({ task: 'x'.repeat(250_000) }) }); // 413
  await call(app, 'POST', '/v1/runs?dryRun=true', { body: run() }); // 200: the plan
  await call(app, 'POST', '/v1/runs/plan', { body: run() }); // 200: the plan, its own schema
  await call(app, 'POST', '/v1/runs/plan', { body: run({ task: 'x'.repeat(250_000) }) }); // 413
  await call(app, 'POST', '/v1/runs/plan', { body: 'task=x', headers: { 'content-type': 'text/plain' } }); // 415
  await call(dead, 'POST', '/v1/runs/plan', { body: run({ replayOf: 'run_deadredis1' }) }); // 503: a replay's source is looked up
  for (let i = 0; i < 6; i++) await call(app, 'POST', '/v1/runs', { body: run(), token: TOKENS.globex }); // the sixth: 429
  const id = created.id;
  await call(app, 'GET', '/v1/runs');
  await call(app, 'GET', '/v1/runs?cursor=not-a-cursor'); // 400, from the query schema
  await call(app, 'GET', `/v1/runs/${id}`);
  await call(app, 'GET', '/v1/runs/run_nosuchrun1');
  await call(app, 'GET', '/v1/runs/not-a-run-id');
  await call(app, 'GET', `/v1/runs/${id}/events`);
  await call(app, 'GET', `/v1/runs/${id}/events?after=99999999999999999999999-0`);
  await call(app, 'GET', '/v1/runs/run_nosuchrun1/events');
  // 429: acme already holds its one live stream (CORRAL_TENANT_MAX_STREAMS=1) — here a slot taken directly.
  const elsewhere = new HeldSlots(f.redis, f.prefix);
  const caps = (n: number) => ({ perTenant: n, global: 100, perTenantVar: 'T', globalVar: 'G', retryAfterS: 1 });
  const acmeStream = await elsewhere.take('streams', 'acme', caps(1));
  await call(app, 'GET', `/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream' } });
  if (acmeStream.ok) await acmeStream.release();
  await call(app, 'POST', `/v1/runs/${id}/approvals/${'c'.repeat(150)}`, { body: { decision: 'approve' } }); // 400 naming callId, not Fastify's 414
  await call(app, 'POST', `/v1/runs/${id}/approvals/call_1`, { body: { decision: 'approve' } }); // 409: nothing pending
  await call(app, 'POST', '/v1/runs/run_nosuchrun1/approvals/call_1', { body: { decision: 'approve' } });
  await call(app, 'POST', `/v1/runs/${id}/approvals/call_1`, { body: 'x', headers: { 'content-type': 'text/plain' } });
  await call(app, 'POST', `/v1/runs/${id}/replay`); // 409: not finished
  await call(app, 'POST', '/v1/runs/run_nosuchrun1/replay');
  await call(app, 'POST', '/v1/runs/bad/replay');
  await call(app, 'POST', `/v1/runs/${id}/cancel`); // 200: cancelled before it started
  await call(app, 'POST', `/v1/runs/${id}/cancel`); // 409: ended
  await call(app, 'POST', '/v1/runs/run_nosuchrun1/cancel');
  await call(app, 'POST', '/v1/runs/bad/cancel');
  // The cancelled run has ended: its replay needs model turns (409); its files are not written (404).
  await call(app, 'POST', `/v1/runs/${id}/replay`);
  await call(app, 'GET', `/v1/runs/${id}/verify`); // 404: it ended before it ran, no log was sealed
  await call(app, 'GET', '/v1/runs/bad/verify');
  for (const file of ['report', 'logs', 'artifacts/workspace.tar', 'artifacts/patch', 'artifacts/agent.bundle', 'artifacts/needs-review.jsonl']) {
    await call(app, 'GET', `/v1/runs/${id}/${file}`);
    await call(app, 'GET', `/v1/runs/bad/${file}`);
  }
  // A run waiting for an approval: answered (200), answered again (409).
  const waiting = (await call(app, 'POST', '/v1/runs', { body: run({ approvals: true }) })).body as { id: string };
  await f.store.claim(waiting.id, 'token-contract'); // a worker took it: running, owned, its job no longer waiting
  await (await f.queue.getJob(waiting.id))?.remove();
  await call(app, 'GET', `/v1/runs/${waiting.id}/verify`); // 409: its log is still being written
  await f.store.setPending(waiting.id, { callId: 'call_p', tool: 'bash', args: { command: 'rm -r x' }, reason: 'needs a human', since: new Date().toISOString() });
  await call(app, 'POST', `/v1/runs/${waiting.id}/approvals/call_p`, { body: { decision: 'approve', by: 'contract' } });
  await call(app, 'POST', `/v1/runs/${waiting.id}/approvals/call_p`, { body: { decision: 'approve' } });
  await call(app, 'POST', `/v1/runs/${waiting.id}/cancel`); // 202: a running run is cancelled by its worker
  // A finished run with its files: each file is served; a replay is queued.
  const done = newRunId();
  await finished(done, 'acme');
  for (const file of ['report', 'logs', 'artifacts/workspace.tar', 'artifacts/patch', 'artifacts/agent.bundle', 'artifacts/needs-review.jsonl']) await call(app, 'GET', `/v1/runs/${done}/${file}`);
  // 200: the check's answer (this fixture's log is not a chained one: verified false, line 1 named)
  expect((await call(app, 'GET', `/v1/runs/${done}/verify`)).body).toMatchObject({ verified: false, firstBreak: { line: 1, problem: 'not-chained' } });
  await call(app, 'POST', `/v1/runs/${done}/replay`);
  const globexDone = newRunId();
  await finished(globexDone, 'globex');
  await call(app, 'POST', `/v1/runs/${globexDone}/replay`, { token: TOKENS.globex }); // 429: globex is at its active runs
  // environments, templates and schedules
  await call(app, 'GET', '/v1/environments');
  for (const p of ['/ui', '/ui/console.js', '/ui/console.css', '/ui/icon.svg']) await call(app, 'GET', p);
  await call(app, 'POST', '/v1/runs?dryRun=true', { body: { task: 'in node', environment: 'node' } });
  await call(app, 'POST', '/v1/runs', { body: { task: 'x', environment: 'no-such-env' } });
  await call(app, 'GET', '/v1/templates');
  await call(app, 'GET', `/v1/templates/${templates[0]!.name}`);
  await call(app, 'GET', '/v1/templates/no-such-template');
  await call(app, 'GET', '/v1/templates/Bad%20Name');
  await call(app, 'POST', '/v1/templates/no-such-template/runs', { body: {} });
  await call(app, 'POST', `/v1/templates/${templates[0]!.name}/runs`, { body: { params: { nope: 1 } } });
  await call(app, 'POST', `/v1/templates/${templates[0]!.name}/runs`, { body: 'x', headers: { 'content-type': 'text/plain' } });
  const tpl = `/v1/templates/${templates[0]!.name}/runs`;
  await call(app, 'POST', tpl, { body: { params: {} }, headers: { 'idempotency-key': 'contract-t' } }); // 201
  await call(app, 'POST', tpl, { body: { params: {} }, headers: { 'idempotency-key': 'contract-t' } }); // 200: a repeat
  await call(app, 'POST', tpl, { body: { params: { packageDir: 'other' } }, headers: { 'idempotency-key': 'contract-t' } }); // 409
  await call(app, 'POST', `${tpl}?dryRun=true`, { body: { params: {} } }); // 200: the plan
  const tplPlan = `/v1/templates/${templates[0]!.name}/plan`;
  await call(app, 'POST', tplPlan, { body: { params: {} } }); // 200
  await call(app, 'POST', tplPlan, { body: { params: { nope: 1 } } }); // 400
  await call(app, 'POST', '/v1/templates/no-such-template/plan', { body: {} }); // 404
  await call(app, 'POST', tplPlan, { body: 'x', headers: { 'content-type': 'text/plain' } }); // 415
  await call(app, 'POST', tpl, { body: { params: { packageDir: 'x'.repeat(250_000) } } }); // 413
  await call(app, 'POST', tpl, { body: { params: {} }, token: TOKENS.globex }); // 429
  const schedule = (await call(app, 'POST', '/v1/schedules', { body: { template: templates[0]!.name, cron: '0 6 * * 1', params: templates[0]!.examples?.[0]?.params ?? {} } })).body as { id: string };
  const scheduleBody = { template: templates[0]!.name, cron: '0 6 * * 1', params: {} };
  await call(app, 'POST', '/v1/schedules', { body: scheduleBody }); // 409: the tenant's one schedule exists
  await call(app, 'POST', '/v1/schedules', { body: { ...scheduleBody, params: { packageDir: 'x'.repeat(250_000) } } }); // 413
  await call(dead, 'POST', '/v1/schedules', { body: scheduleBody }); // 503
  await call(dead, 'POST', `/v1/runs/run_deadredis1/approvals/call_p`, { body: { decision: 'approve' } }); // 503
  await call(app, 'POST', '/v1/schedules', { body: { template: templates[0]!.name, cron: 'every day' } });
  await call(app, 'POST', '/v1/schedules', { body: { template: 'no-such-template', cron: '0 6 * * 1' } });
  await call(app, 'POST', '/v1/schedules', { body: 'x', headers: { 'content-type': 'text/plain' } });
  await call(app, 'GET', '/v1/schedules');
  await call(app, 'GET', `/v1/schedules/${schedule.id}`);
  const unknownSchedule = `${schedule.id.slice(0, -4)}0000`;
  await call(app, 'GET', `/v1/schedules/${unknownSchedule}`); // 404
  await call(dead, 'GET', `/v1/schedules/${unknownSchedule}`); // 503
  await call(dead, 'DELETE', `/v1/schedules/${unknownSchedule}`); // 503
  await call(app, 'GET', '/v1/schedules/bad id');
  await call(app, 'DELETE', `/v1/schedules/${schedule.id}`);
  await call(app, 'DELETE', `/v1/schedules/${schedule.id}`);
  await call(app, 'DELETE', '/v1/schedules/bad id');
  // workspaces
  const wsTar = await makeTar([{ name: 'src/app.py', body: 'print(1)\n' }]);
  const stored = (await call(app, 'PUT', '/v1/workspaces', { body: wsTar, headers: { 'content-type': 'application/x-tar' } })).body as { id: string }; // 201
  await call(app, 'GET', `/v1/workspaces/${stored.id}`); // 200: kept
  await call(app, 'GET', `/v1/workspaces/ws_${'0'.repeat(64)}`); // 404
  await call(app, 'PUT', '/v1/workspaces', { body: gzipSync(wsTar), headers: { 'content-type': 'application/gzip' } }); // 200: the same tar
  await call(app, 'PUT', '/v1/workspaces', { body: await makeTar([{ name: 'big.bin', body: Buffer.alloc(2100 * 1024) }]), headers: { 'content-type': 'application/x-tar' } }); // 413: over the kept-bytes cap alone
  const globexUpload = await elsewhere.take('uploads', 'globex', caps(1));
  await call(app, 'PUT', '/v1/workspaces', { body: wsTar, token: TOKENS.globex, headers: { 'content-type': 'application/x-tar' } }); // 429: globex's one upload is in flight
  if (globexUpload.ok) await globexUpload.release();
  elsewhere.close();
  await call(dead, 'PUT', '/v1/workspaces', { body: wsTar, headers: { 'content-type': 'application/x-tar' } }); // 503
  await call(dead, 'DELETE', `/v1/workspaces/${stored.id}`); // 503
  await call(app, 'DELETE', `/v1/workspaces/${stored.id}`); // 204
  await call(app, 'DELETE', `/v1/workspaces/${stored.id}`); // 404
  await call(app, 'PUT', '/v1/workspaces', { body: await makeTar([{ name: '../x', body: 'x' }]), headers: { 'content-type': 'application/x-tar' } }); // 400
  await call(app, 'PUT', '/v1/workspaces', { body: 'a tar', headers: { 'content-type': 'text/plain' } }); // 415
  await call(app, 'PUT', '/v1/workspaces', { body: {} }); // 415: JSON is not a tar
  await call(app, 'POST', '/v1/runs', { body: wsTar, headers: { 'content-type': 'application/x-tar' } }); // 415: a tar only where one is taken
  // operations
  await call(app, 'GET', '/healthz', { token: null });
  await call(app, 'GET', '/readyz', { token: null });
  await call(app, 'GET', '/metrics');
  await call(app, 'GET', '/docs', { token: null });
  // 401 on every route that needs a token, 503 on every route that needs Redis
  for (const [template, ops] of Object.entries(doc.paths)) {
    const url = template.replace('{id}', id).replace('{callId}', 'call_1').replace('{name}', templates[0]!.name).replace(/\{[^}]+\}/g, 'x');
    for (const [method, op] of Object.entries(ops)) {
      const body = method === 'post' ? {} : undefined;
      if (op.responses['401']) await call(app, method.toUpperCase(), url, { token: 'wrong-token-0123456789', body });
      if (op.responses['503']) await call(dead, method.toUpperCase(), url.replace(id, 'run_deadredis1').replace(/sch_[A-Za-z0-9]+/, 'sch_deadredis1'), { body: method === 'post' && template === '/v1/runs' ? run() : body });
    }
  }
  // methods no route has: 405 naming the ones it has
  const put = await call(app, 'PUT', `/v1/runs/${id}`);
  expect(put).toMatchObject({ status: 405, body: { error: { code: 'method_not_allowed' } } });

  expect(problems).toEqual([]);
  const unseen: string[] = [];
  for (const [template, ops] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(ops)) {
      for (const status of Object.keys(op.responses)) if (!seen.get(`${method} ${template}`)?.has(status)) unseen.push(`${method.toUpperCase()} ${template} ${status}`);
    }
  }
  expect(unseen).toEqual([]);
});
