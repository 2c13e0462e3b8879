/**
 * Schedules over the real test Redis and real BullMQ job schedulers (no worker: the runs they make
 * stay queued): creating one checks the pattern, the zone, the template and the rendered run; a
 * firing submits the template's run labelled with the schedule, unattended; the schedule outlives the
 * process that fires it (a new runner picks it up); deleting it stops the firings; a firing that the
 * tenant's limits refuse makes no run and says why on the schedule. Tenants see only their own.
 */
import { join } from 'node:path';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ApiDeps } from '../../src/api/api-deps';
import { loadTemplates } from '../../src/api/load-templates';
import { startScheduleRunner } from '../../src/api/schedule-runner';
import { checkCron } from '../../src/domain/schedule';
import { IdempotencyStore } from '../../src/queue/idempotency';
import { newRunId } from '../../src/queue/run-queue';
import { ScheduleStore } from '../../src/queue/schedule-store';
import { TenantQuota } from '../../src/queue/tenant-quota';
import { HeldSlots } from '../../src/queue/held-slots';
import { TOKENS, startApiFixture, type ApiFixture } from '../support/api-fixture';
import { consistently, eventually as waitFor, settled } from '../support/eventually';

jest.setTimeout(60_000);
const templates = loadTemplates(join(__dirname, '..', '..', 'templates'));

let f: ApiFixture;
let schedules: ScheduleStore;
let deps: ApiDeps;
const runners: Worker[] = [];
const conns: Redis[] = [];
const conn = (): Redis => {
  const c = f.redis.duplicate();
  conns.push(c);
  return c;
};
const logs: Array<{ msg: string; fields?: Record<string, unknown> }> = [];

beforeAll(async () => {
  const env = { CORRAL_SCHEDULE_MIN_INTERVAL_S: '1', CORRAL_TENANT_MAX_SCHEDULES: '4', CORRAL_TENANT_MAX_ACTIVE_RUNS: '1000', CORRAL_TENANT_SUBMITS_PER_MIN: '1000' };
  f = await startApiFixture({ env, deps: { templates } });
  // The schedule store needs the fixture's queue name and prefix: the app is built again with it.
  schedules = new ScheduleStore(f.redis, f.config.CORRAL_QUEUE, conn(), f.prefix);
  deps = {
    config: f.config, store: f.store, queue: f.queue, metrics: f.metrics, newRunId, clock: Date.now, policyNames: ['default'], templates, schedules,
    quota: new TenantQuota(f.redis, f.queue, f.prefix), held: new HeldSlots(f.redis, f.prefix), idempotency: new IdempotencyStore(f.redis, f.prefix),
  };
  await f.app.close();
  const { buildApp } = await import('../../src/api/build-app');
  const { TenantAuth } = await import('../../src/api/auth');
  const app = buildApp({ ...deps, auth: TenantAuth.fromSources({ tokens: `acme=${TOKENS.acme},globex=${TOKENS.globex}` }) });
  await app.ready();
  (f as { app: unknown }).app = app;
  const inject = async (method: string, url: string, o: { token?: string; body?: unknown } = {}) => {
    const res = await app.inject({ method: method as 'GET', url, headers: { authorization: `Bearer ${o.token ?? TOKENS.acme}`, ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}) }, ...(o.body !== undefined ? { payload: JSON.stringify(o.body) } : {}) });
    const body = JSON.parse(res.body || 'null') as Record<string, unknown>;
    return { status: res.statusCode, body, json: <T>() => body as T };
  };
  (f as { call: unknown }).call = inject;
});
afterAll(async () => {
  for (const r of runners) await r.close();
  for (const s of await schedules.list('acme')) await schedules.remove(s);
  for (const s of await schedules.list('globex')) await schedules.remove(s);
  await schedules.queue.obliterate({ force: true }).catch(() => undefined);
  await schedules.close();
  await f?.close();
  for (const c of conns) await c.quit().catch(() => undefined);
});

const runner = () => {
  const w = startScheduleRunner(deps, conn(), (msg, fields) => logs.push({ msg, fields }));
  runners.push(w);
  return w;
};
async function scheduledRuns(id: string): Promise<Array<{ id: string; task: string }>> {
  const page = (await f.call('GET', '/v1/runs?limit=200')).json<{ runs: Array<{ id: string; task: string; labels?: Record<string, string> }> }>();
  const out = [];
  for (const r of page.runs) {
    const jobs = await f.queue.getJob(r.id);
    if (JSON.stringify(jobs?.data ?? {}).includes(`"schedule":"${id}"`)) out.push(r);
  }
  return out;
}
function eventually<T>(fn: () => Promise<T>, ok: (v: T) => boolean, ms = 15_000): Promise<T> {
  return waitFor(fn, { what: 'the schedule to get there', until: ok, timeoutMs: ms, intervalMs: 250 });
}

test('the pattern is checked: fields, syntax, zone and the server\'s minimum interval', () => {
  expect(checkCron('0 9 * * 1', 'Europe/Berlin', 60)).toHaveLength(6);
  expect(() => checkCron('0 9 * *', 'UTC', 60)).toThrow(/has 4 fields/);
  expect(() => checkCron('61 * * * *', 'UTC', 60)).toThrow(/cron: "61 \* \* \* \*" is not a cron pattern/);
  expect(() => checkCron('0 9 * * 1', 'Mars/Olympus', 60)).toThrow(/timezone: "Mars\/Olympus" is not an IANA time zone/);
  expect(() => checkCron('*/10 * * * * *', 'UTC', 60)).toThrow(/fires every 10 s; this server allows schedules at most every 60 s/);
  expect(() => checkCron('* * * * *', 'UTC', 300)).toThrow(/fires every 60 s/);
});

test.each([
  [{ cron: 'nope', template: 'dependency-report' }, 'cron'],
  [{ cron: '0 9 * * 1', timezone: 'Nowhere/City', template: 'dependency-report' }, 'timezone'],
  [{ cron: '0 9 * * 1', template: 'no-such' }, 'template'],
  [{ cron: '0 9 * * 1', template: 'dependency-report', params: { packageDir: 'a b' } }, 'params.packageDir'],
  [{ cron: '0 9 * * 1', template: 'dependency-report', params: { other: 'x' } }, 'params.other'],
  [{ cron: '0 9 * * 1', template: 'dependency-report', approvals: true }, 'approvals'],
])('POST /v1/schedules %j is a 400 naming %s; nothing is scheduled', async (body, field) => {
  const before = (await schedules.queue.getJobSchedulers()).length;
  const r = await f.call('POST', '/v1/schedules', { body });
  expect(r.status).toBe(400);
  expect(JSON.stringify(r.json())).toContain(field);
  expect((await schedules.queue.getJobSchedulers()).length).toBe(before);
});

test('a schedule fires its template\'s run, unattended and labelled with it; a new runner picks it up after the first is gone; DELETE stops it', async () => {
  const r = await f.call('POST', '/v1/schedules', { body: { cron: '*/2 * * * * *', template: 'dependency-report', params: { packageDir: 'svc' }, name: 'nightly deps' } });
  expect(r.status).toBe(201);
  const s = r.json<{ id: string; next: string; runs: number }>();
  expect(s).toMatchObject({ runs: 0, next: expect.any(String) });
  // no runner yet: nothing fires, over a window in which the schedule (every 2 s) comes due at least once
  await consistently(() => scheduledRuns(s.id), { what: 'no run without a runner', holds: (x) => x.length === 0, forMs: 2500, intervalMs: 250 });

  const first = runner();
  const fired = await eventually(() => scheduledRuns(s.id), (x) => x.length >= 1);
  expect(fired.length).toBeGreaterThanOrEqual(1);
  expect(fired[0]!.task).toContain('`svc/package.json`');
  const job = await f.queue.getJob(fired[0]!.id);
  expect(job?.data.spec).toMatchObject({ approvals: false, labels: { schedule: s.id, template: 'dependency-report' } });
  await first.close(); // "the process stops"

  const countAtStop = (await scheduledRuns(s.id)).length;
  runner(); // "another process starts": the schedule is in Redis, not in the process
  const later = await eventually(() => scheduledRuns(s.id), (x) => x.length > countAtStop);
  expect(later.length).toBeGreaterThan(countAtStop);
  // The runner submits a firing's run, then counts it on the schedule: the count lands a moment later.
  const view = await eventually(async () => (await f.call('GET', `/v1/schedules/${s.id}`)).json<{ runs: number; lastRun: { id: string } }>(), (v) => v.runs >= 2);
  expect(view.runs).toBeGreaterThanOrEqual(2);
  // read after the view: the schedule goes on firing, and its last run was submitted before it was counted
  expect((await scheduledRuns(s.id)).map((x) => x.id)).toContain(view.lastRun.id);

  expect((await f.call('GET', `/v1/schedules/${s.id}`, { token: TOKENS.globex })).status).toBe(404);
  expect((await f.call('DELETE', `/v1/schedules/${s.id}`, { token: TOKENS.globex })).status).toBe(404);
  expect((await f.call('DELETE', `/v1/schedules/${s.id}`)).json()).toEqual({ id: s.id, deleted: true });
  // a firing taken just before the DELETE may still be submitted: wait until the count holds still, then
  // it must stay so over windows in which the schedule would have fired twice
  const atDelete = (await settled(async () => (await scheduledRuns(s.id)).length, { what: 'the runs of firings before the DELETE', quietMs: 2500, intervalMs: 250 }));
  await consistently(async () => (await scheduledRuns(s.id)).length, { what: 'no firing after the DELETE', holds: (n) => n === atDelete, forMs: 4500, intervalMs: 250 });
  expect((await f.call('GET', `/v1/schedules/${s.id}`)).status).toBe(404);
});

test('a firing the tenant\'s limits refuse makes no run and says why on the schedule', async () => {
  const r = await f.call('POST', '/v1/schedules', { body: { cron: '*/2 * * * * *', template: 'fix-failing-tests' } });
  const { id } = r.json<{ id: string }>();
  const saved = deps.config.CORRAL_TENANT_MAX_ACTIVE_RUNS;
  (deps.config as { CORRAL_TENANT_MAX_ACTIVE_RUNS: number }).CORRAL_TENANT_MAX_ACTIVE_RUNS = 1; // acme already has queued runs
  try {
    if (!runners.some((w) => w.isRunning())) runner();
    const view = await eventually(async () => (await f.call('GET', `/v1/schedules/${id}`)).json<{ lastError?: { message: string }; runs: number }>(), (v) => !!v.lastError);
    expect(view.lastError?.message).toMatch(/already has 1 queued or running runs \(CORRAL_TENANT_MAX_ACTIVE_RUNS\)/);
    expect(view.runs).toBe(0);
    expect(logs.some((l) => l.msg === 'schedule fired but made no run' && l.fields?.schedule === id)).toBe(true);
  } finally {
    (deps.config as { CORRAL_TENANT_MAX_ACTIVE_RUNS: number }).CORRAL_TENANT_MAX_ACTIVE_RUNS = saved;
    await f.call('DELETE', `/v1/schedules/${id}`);
  }
});

test('a tenant may hold CORRAL_TENANT_MAX_SCHEDULES schedules; the next is a 409; lists are per tenant', async () => {
  const made = [];
  for (let i = 0; i < 4; i++) made.push((await f.call('POST', '/v1/schedules', { body: { cron: '0 3 * * *', template: 'dependency-report' } })).status);
  expect(made).toEqual([201, 201, 201, 201]);
  const over = await f.call('POST', '/v1/schedules', { body: { cron: '0 3 * * *', template: 'dependency-report' } });
  expect(over.status).toBe(409);
  expect(JSON.stringify(over.json())).toContain('CORRAL_TENANT_MAX_SCHEDULES');
  expect((await f.call('GET', '/v1/schedules')).json<{ schedules: unknown[] }>().schedules).toHaveLength(4);
  expect((await f.call('GET', '/v1/schedules', { token: TOKENS.globex })).json<{ schedules: unknown[] }>().schedules).toHaveLength(0);
});
