/**
 * Load: a burst of runs through the REST API of one in-process API onto 3 `corral worker` child
 * processes (concurrency 2 each, one queue), with a scripted model making 3 bash calls per run.
 * Every run must end succeeded exactly once (one run.started and one run.finished in its log, on one
 * of the three workers, its job completed on the first attempt), the work must reach all three
 * workers, no container of the queue may be left, the Redis keys left must be the expected retained
 * ones (run keys with a TTL, BullMQ's completed jobs and bookkeeping), and worker RSS stays bounded.
 * Also: the same job put on the queue twice, and again after it finished, runs once.
 * N = 30 here (CORRAL_LOAD_RUNS overrides); `npm run bench` runs the 200-run version.
 */
import { Queue } from 'bullmq';
import Docker from 'dockerode';
import { Redis } from 'ioredis';
import { RunSpec } from '../../src/domain/run-spec';
import { RUN_JOB_NAME, RUN_JOB_OPTIONS, newRunId } from '../../src/queue/run-queue';
import { consistently, eventually } from '../support/eventually';
import { startFakeDecisionsServer, type FakeServer } from '../support/fake-decisions-server';
import { loadAgent, loadAnswer, loadTask } from '../support/load-agent';
import { TENANT_ACTIVE, auditRedis, auditRuns, containersOfQueue, summariseRedis, waitFinished } from '../support/load-audit';
import { startRssSampler, type RssSampler } from '../support/load-rss';
import { startLoadStack, type LoadStack } from '../support/load-stack';

jest.setTimeout(150_000);

const RUNS = Number(process.env.CORRAL_LOAD_RUNS ?? 30);
const TOOLS = 3;
const WORKERS = ['load-w1', 'load-w2', 'load-w3'];
const RSS_LIMIT_MB = 400;
/** The burst comes from one tenant: lift the per-tenant limits (10 active runs, 60 submits/min by default). */
const LOAD_QUOTAS = { CORRAL_TENANT_MAX_ACTIVE_RUNS: '100000', CORRAL_TENANT_SUBMITS_PER_MIN: '100000' };

const docker = new Docker();
let fake: FakeServer;
let stack: LoadStack;
let redis: Redis;
let queue: Queue;
let queueConn: Redis;
let rss: RssSampler;

beforeAll(async () => {
  fake = await startFakeDecisionsServer({ chat: loadAgent() });
  stack = await startLoadStack({
    redisUrl: process.env.REDIS_URL!, modelBaseURL: fake.baseURL, name: 'load',
    // A busy reaper on every worker: it must never touch another worker's live run.
    env: { CORRAL_REAP_INTERVAL_S: '2', CORRAL_REAP_GRACE_S: '0', ...LOAD_QUOTAS },
  });
  rss = startRssSampler(200);
  await Promise.all(WORKERS.map(async (id) => rss.track(id, (await stack.startWorker(id, 2)).pid)));
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  queueConn = redis.duplicate({ maxRetriesPerRequest: null });
  queue = new Queue(stack.queue, { connection: queueConn });
});

afterAll(async () => {
  rss?.stop();
  await stack?.close();
  if (stack) {
    const left = await containersOfQueue(docker, stack.queue);
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  }
  await queue?.close();
  queueConn?.disconnect(); // a connection passed to BullMQ is not closed by it
  redis?.disconnect();
  await fake?.close();
});

/** The queue's sandboxes once every one is gone (each run removes its own at its end). */
function noContainersLeft(): Promise<Docker.ContainerInfo[]> {
  return eventually(() => containersOfQueue(docker, stack.queue), { what: "no sandbox of this queue left on the engine", until: (l) => l.length === 0, timeoutMs: 15_000, intervalMs: 250 });
}

test(`a burst of ${RUNS} runs onto 3 workers: each succeeds exactly once, spread over all, nothing left, RSS bounded`, async () => {
  const t0 = Date.now();
  const posted = await Promise.all(Array.from({ length: RUNS }, (_, i) => stack.request<{ id: string }>('POST', '/v1/runs', { task: loadTask(TOOLS, `run ${i}`) })));
  expect(posted.map((p) => p.status)).toEqual(posted.map(() => 201));
  const ids = posted.map((p) => p.body.id);
  expect(new Set(ids).size).toBe(RUNS);

  expect(await waitFinished(redis, ids, 120_000, 250, { queue, workers: stack.workers })).toEqual([]);
  const wallMs = Date.now() - t0;

  for (const id of ids) {
    const { body } = await stack.request<Record<string, unknown>>('GET', `/v1/runs/${id}`);
    expect({ id, status: body.status, finalAnswer: body.finalAnswer }).toEqual({ id, status: 'succeeded', finalAnswer: loadAnswer(TOOLS) });
    expect((body.usage as { toolCalls: number }).toolCalls).toBe(TOOLS);
  }

  const audit = await auditRuns({ ids, dataDir: stack.dataDir, queue, redis, workers: stack.workers });
  expect(audit.notOnce).toEqual([]);
  for (const id of WORKERS) expect(audit.perWorker[id]).toBeGreaterThan(0);
  expect(Object.values(audit.perWorker).reduce((a, b) => a + b, 0)).toBe(RUNS);

  expect(await noContainersLeft()).toEqual([]);

  const keys = await auditRedis(redis, { queue: stack.queue, runIds: ids });
  expect(keys.runKeysWithoutTtl).toEqual([]);
  expect(keys.unexpected).toEqual([]);
  // Every run's record and event stream is there, with a TTL (retention), until it expires.
  expect(keys.retained['run record/stream/usage (TTL hash)']?.length).toBe(RUNS);
  expect(keys.retained['run record/stream/usage (TTL :events)']?.length).toBe(RUNS);
  expect(keys.retained['BullMQ completed job hash (removeOnComplete retention)']?.length).toBe(RUNS);

  // The tenant's active-run set still names the finished runs; the next submission prunes them.
  const activeKey = `corral:q:${stack.queue}:tenant:default:active`;
  if (keys.retained[TENANT_ACTIVE]) {
    const next = await stack.request<{ id: string }>('POST', '/v1/runs', { task: loadTask(0, 'prunes the active set') });
    expect(next.status).toBe(201);
    expect(await redis.zrange(activeKey, 0, '-1')).toEqual([next.body.id]);
    expect(await waitFinished(redis, [next.body.id], 60_000)).toEqual([]);
  }

  const peaks = rss.peaks();
  process.stdout.write(`load: ${RUNS} runs × ${TOOLS} tool calls on 3 workers in ${wallMs} ms; per worker ${JSON.stringify(audit.perWorker)}; `
    + `worker RSS peak MB ${JSON.stringify(peaks)} (${rss.samples()} samples); Redis ${JSON.stringify(summariseRedis(keys))}\n`);
  for (const id of WORKERS) {
    expect(peaks[id]).toBeGreaterThan(0);
    expect(peaks[id]).toBeLessThan(RSS_LIMIT_MB);
  }
});

test('the same job put on the queue twice, and again after it finished, is one run', async () => {
  const id = newRunId();
  const data = { runId: id, spec: RunSpec.parse({ task: loadTask(1, 'delivered twice') }) };
  const [a, b] = await Promise.all([
    queue.add(RUN_JOB_NAME, data, { ...RUN_JOB_OPTIONS, jobId: id }),
    queue.add(RUN_JOB_NAME, data, { ...RUN_JOB_OPTIONS, jobId: id }),
  ]);
  expect([a.id, b.id]).toEqual([id, id]);
  expect(await waitFinished(redis, [id], 60_000, 250, { queue, workers: stack.workers })).toEqual([]);
  // A late redelivery of a finished job (within the completed-job retention) is ignored by BullMQ.
  await queue.add(RUN_JOB_NAME, data, { ...RUN_JOB_OPTIONS, jobId: id });
  // Nothing happens: the job stays completed, once, and nothing is queued or taken — watched for 2 s,
  // longer than a worker takes to pick up a waiting job here.
  await consistently(async () => ({ state: await queue.getJobState(id), waiting: await queue.getWaitingCount(), active: await queue.getActiveCount() }), {
    what: 'the redelivered finished job to stay completed with nothing queued or active',
    holds: (v) => v.state === 'completed' && v.waiting === 0 && v.active === 0,
    forMs: 2000,
  });

  const audit = await auditRuns({ ids: [id], dataDir: stack.dataDir, queue, redis, workers: stack.workers });
  expect(audit.notOnce).toEqual([]);
  expect(audit.runs[0]).toMatchObject({ started: 1, finished: 1, jobState: 'completed', attemptsMade: 1, finishedLogs: 1 });
  expect(await noContainersLeft()).toEqual([]);
});

/* Idempotency-Key on POST /v1/runs under concurrent duplicates: one run, one job. */
test('two identical POSTs with the same Idempotency-Key are one run', async () => {
  const before = await queue.count();
  const body = { task: loadTask(1, 'idempotent') };
  const key = `load-${Date.now()}`;
  const [r1, r2] = await Promise.all([0, 1].map(() => stack.request<{ id: string; idempotentReplay?: boolean }>('POST', '/v1/runs', body, { 'idempotency-key': key })));
  expect([r1!.status, r2!.status].sort()).toEqual([200, 201]);
  expect(r1!.body.id).toBe(r2!.body.id);
  const id = r1!.body.id;
  expect(await waitFinished(redis, [id], 60_000, 250, { queue, workers: stack.workers })).toEqual([]);
  const audit = await auditRuns({ ids: [id], dataDir: stack.dataDir, queue, redis, workers: stack.workers });
  expect(audit.notOnce).toEqual([]);
  const jobs = await queue.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed']);
  expect(jobs.filter((j) => (j.data as { spec?: { task?: string } }).spec?.task === body.task).map((j) => j.id)).toEqual([id]);
  expect(await queue.count()).toBe(before); // count() is waiting+delayed+…: nothing extra queued
});

test('the workers reached the engine only through the docker gate, which refused nothing they asked for', () => {
  expect(stack.gate).toBeDefined();
  expect(stack.env.DOCKER_HOST).toBe(stack.gate!.dockerHost);
  expect(stack.gate!.refused()).toEqual([]);
});
