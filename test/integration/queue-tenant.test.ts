/**
 * The queue contract names the tenant: a job another producer puts straight on the queue with
 * `data.tenant` is that tenant's run — its token sees it through the API, another tenant's gets 404
 * — and one without a tenant is `default`'s, said in its log and the worker's. A job cannot move an
 * existing run to another tenant, and a malformed tenant is refused naming the field. Real Redis,
 * real worker, real sandboxes; auth on with two tenants.
 */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { RUN_JOB_NAME, RUN_JOB_OPTIONS } from '../../src/queue/run-queue';
import { apiRequest } from '../support/api-request';
import { eventually } from '../support/eventually';
import { finalTurn, scriptedAgent } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';

jest.setTimeout(120_000);

const TOKENS = { acme: 'acme-queue-token-0123456789', globex: 'globex-queue-token-0123456789' };
const as = (t: keyof typeof TOKENS) => ({ authorization: `Bearer ${TOKENS[t]}` });
let h: Harness;
let conn: Redis;
let queue: Queue;
let store: RedisRunStore;

beforeAll(async () => {
  h = await startHarness('queue-tenant', { chat: scriptedAgent({ 'QUEUE-TENANT': () => finalTurn('done by the producer run') }) }, {
    CORRAL_API_TOKENS: `acme=${TOKENS.acme},globex=${TOKENS.globex}`,
  });
  conn = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  queue = new Queue(h.config.CORRAL_QUEUE, { connection: conn });
  store = new RedisRunStore(conn);
});
afterAll(async () => {
  await queue?.close();
  await conn?.quit();
  await h?.close();
});

const settled = async (id: string) => eventually(async () => {
  const s = await (await queue.getJob(id))!.getState();
  if (s !== 'completed' && s !== 'failed') throw new Error(`job ${id} is ${s}`);
  return s;
}, { what: `job ${id} to settle`, timeoutMs: 60_000 });

test('a job naming its tenant is that tenant\'s run; without one it is default\'s, and says so', async () => {
  const tag = Date.now().toString(36);
  const named = `run_qtacme${tag}`;
  const bare = `run_qtbare${tag}`;
  await queue.add(RUN_JOB_NAME, { runId: named, tenant: 'acme', spec: { task: 'QUEUE-TENANT: from another producer' } }, { ...RUN_JOB_OPTIONS, jobId: named });
  await queue.add(RUN_JOB_NAME, { runId: bare, spec: { task: 'QUEUE-TENANT: no tenant named' } }, { ...RUN_JOB_OPTIONS, jobId: bare });
  for (const id of [named, bare]) expect({ id, state: await settled(id), reason: (await queue.getJob(id))!.failedReason }).toEqual({ id, state: 'completed', reason: undefined });

  const mine = await apiRequest<Record<string, unknown>>(h.url, 'GET', `/v1/runs/${named}`, undefined, as('acme'));
  expect(mine).toMatchObject({ status: 200, body: { tenant: 'acme', status: 'succeeded' } });
  expect((await apiRequest(h.url, 'GET', `/v1/runs/${named}`, undefined, as('globex'))).status).toBe(404);
  const list = await apiRequest<{ runs: Array<{ id: string }> }>(h.url, 'GET', '/v1/runs?limit=50', undefined, as('acme'));
  expect(list.body.runs.map((r) => r.id)).toContain(named);
  expect((await apiRequest<string>(h.url, 'GET', `/v1/runs/${named}/report`, undefined, as('acme'))).body).toContain('succeeded');

  // No tenant: default's — no token sees it, and the run's own log and the worker's log say why.
  for (const t of ['acme', 'globex'] as const) expect((await apiRequest(h.url, 'GET', `/v1/runs/${bare}`, undefined, as(t))).status).toBe(404);
  expect(await store.tenantOf(bare)).toBe('default');
  const started = (await store.readEvents(bare)).map((r) => r.event).find((e) => e.type === 'run.started') as { note?: string };
  expect(started.note).toMatch(/without a tenant: the run is tenant "default"'s/);
  expect(h.logs.some((l) => l.msg.includes('names no tenant') && l.fields?.runId === bare)).toBe(true);
});

test('a job cannot move a run to another tenant; a malformed tenant is refused naming the field', async () => {
  const tag = Date.now().toString(36);
  // A run acme owns (its record exists, as after a submission through the API); a producer's job
  // for that id claiming globex is refused, and the run stays acme's.
  const moved = `run_qtmove${tag}`;
  await store.create(moved, { task: 'QUEUE-TENANT: acme\'s record' }, new Date(), 'acme');
  await queue.add(RUN_JOB_NAME, { runId: moved, tenant: 'globex', spec: { task: 'QUEUE-TENANT: claim it' } }, { ...RUN_JOB_OPTIONS, jobId: moved });
  expect(await settled(moved)).toBe('failed');
  expect((await queue.getJob(moved))!.failedReason).toMatch(/tenant "globex" is not the tenant of run run_qtmove\S+ \("acme"\)/);
  expect(await store.tenantOf(moved)).toBe('acme');

  const bad = `run_qtbadt${tag}`;
  await queue.add(RUN_JOB_NAME, { runId: bad, tenant: '../acme', spec: { task: 'QUEUE-TENANT: bad tenant' } }, { ...RUN_JOB_OPTIONS, jobId: bad });
  expect(await settled(bad)).toBe('failed');
  expect((await queue.getJob(bad))!.failedReason).toMatch(/malformed job data: tenant: must be a tenant name/);
});
