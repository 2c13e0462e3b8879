/**
 * Ends a worker records before or outside its run loop (issue 40, defects 6 and 7), on the real test
 * Redis with the queue's job lock as BullMQ keeps it: a refused job, a run that cannot resume and a
 * job that failed outside processRun record their end only while their attempt still holds the job
 * (never over a run another attempt took), and a Redis outage while loading a resume stays
 * store_unavailable — it is not turned into bad input.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { LocalArtifactStore } from '../../src/artifacts/local-artifact-store';
import { loadConfig } from '../../src/config';
import { CorralError } from '../../src/domain/errors';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { RunTree } from '../../src/queue/run-tree';
import { processRun, type RunProcessorDeps } from '../../src/worker/run-processor';
import { recordEnded, startWorker, type RunningWorker } from '../../src/worker/start-worker';
import { eventually } from '../support/eventually';

let redis: Redis;
let dataDir: string;
let n = 0;
const notReached = (what: string) => () => {
  throw new Error(`${what} must not be reached by this test`);
};

beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  dataDir = mkdtempSync(join(tmpdir(), 'corral-fenced-'));
});
afterAll(async () => {
  await redis.quit();
  rmSync(dataDir, { recursive: true, force: true });
});

function subject(tree?: RunTree) {
  const prefix = `fenced-${process.pid}-${Date.now().toString(36)}-${n++}`;
  const store = new RedisRunStore(redis, prefix);
  const logged: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
  const deps = {
    config: loadConfig({ REDIS_URL: process.env.REDIS_URL!, CORRAL_DATA_DIR: dataDir }),
    sandboxes: { acquire: notReached('a sandbox') },
    store,
    modelFor: notReached('a model'),
    policyNames: ['default'],
    gateFor: notReached('a gate'),
    workerId: 'worker-test',
    clock: Date.now,
    log: (msg: string, fields?: Record<string, unknown>) => logged.push({ msg, ...(fields ? { fields } : {}) }),
    artifacts: new LocalArtifactStore(dataDir),
    memory: { describe: () => '', read: notReached('memory'), append: notReached('memory'), maxBytes: 0 },
    ...(tree ? { tree } : {}),
  } as unknown as RunProcessorDeps;
  return { prefix, store, deps, logged };
}

const lockKey = (id: string) => `fenced:bull:q:${id}:lock`;

describe('an attempt that lost its job writes no end over the attempt that holds it (defect 7)', () => {
  test('a refusal at admission (recordRefused)', async () => {
    const { store, deps } = subject();
    const id = `run_refused${n}`;
    await store.create(id, { task: 'x' }, new Date());
    await redis.set(lockKey(id), 'token-B', 'PX', 30_000);
    expect(await store.claim(id, 'token-B', lockKey(id))).toBe(true);
    const stale = processRun({ runId: id, spec: { task: 'x', policy: 'no-such-policy' } }, new AbortController().signal, deps, { attempt: 1, crashedBefore: false, fence: 'token-A', lockKey: lockKey(id) });
    await expect(stale).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('unknown policy') });
    expect((await store.get(id))!.finishedAt).toBeUndefined();
    // The attempt that holds the job is refused the same way, and that end lands.
    const holder = processRun({ runId: id, spec: { task: 'x', policy: 'no-such-policy' } }, new AbortController().signal, deps, { attempt: 2, crashedBefore: false, fence: 'token-B', lockKey: lockKey(id) });
    await expect(holder).rejects.toMatchObject({ code: 'invalid_input' });
    expect(await store.get(id)).toMatchObject({ status: 'error', errorCode: 'invalid_input', reason: expect.stringContaining('not admitted') });
  });

  test('a run that cannot resume', async () => {
    const treePrefix = `fenced-tree-${process.pid}-${n++}`;
    const { store, deps } = subject(new RunTree(redis, treePrefix));
    const id = `run_noresume${n}`;
    await redis.set(`${treePrefix}:run:${id}:suspension`, '{not json', 'EX', 60);
    await store.create(id, { task: 'x' }, new Date());
    await redis.set(lockKey(id), 'token-B', 'PX', 30_000);
    expect(await store.claim(id, 'token-B', lockKey(id))).toBe(true);
    const stale = processRun({ runId: id, spec: { task: 'x' } }, new AbortController().signal, deps, { attempt: 1, crashedBefore: false, fence: 'token-A', lockKey: lockKey(id) });
    await expect(stale).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringContaining('cannot resume') });
    expect((await store.get(id))!.finishedAt).toBeUndefined();
    const holder = processRun({ runId: id, spec: { task: 'x' } }, new AbortController().signal, deps, { attempt: 2, crashedBefore: false, fence: 'token-B', lockKey: lockKey(id) });
    await expect(holder).rejects.toMatchObject({ code: 'invalid_input' });
    expect(await store.get(id)).toMatchObject({ status: 'error', errorCode: 'invalid_input', reason: expect.stringContaining('cannot resume: the suspension record') });
  });

  test('a job that failed outside processRun (recordEnded)', async () => {
    const { store, deps } = subject();
    const id = `run_failedjob${n}`;
    await store.create(id, { task: 'x' }, new Date());
    await redis.set(lockKey(id), 'token-B', 'PX', 30_000);
    expect(await store.claim(id, 'token-B', lockKey(id))).toBe(true);
    expect(await recordEnded(deps, id, 'late failure of attempt A', 'internal', { fence: 'token-A', lockKey: lockKey(id) })).toBe(false);
    expect((await store.get(id))!.finishedAt).toBeUndefined();
    expect(await recordEnded(deps, id, 'attempt B failed', 'model_failed', { fence: 'token-B', lockKey: lockKey(id) })).toBe(true);
    expect(await store.get(id)).toMatchObject({ status: 'error', errorCode: 'model_failed', reason: 'attempt B failed' });
  });
});

test('a Redis outage while loading a resume ends store_unavailable, never invalid_input (defect 6)', async () => {
  // The suspension is read over a connection that is gone: a real ioredis failure, not a fake one.
  const dead = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 0, enableOfflineQueue: false, lazyConnect: true });
  dead.on('error', () => undefined);
  const { store, deps } = subject(new RunTree(dead, 'fenced-dead'));
  const id = `run_outage${n}`;
  await store.create(id, { task: 'x' }, new Date());
  await redis.set(lockKey(id), 'token-A', 'PX', 30_000);
  const err: unknown = await processRun({ runId: id, spec: { task: 'x' } }, new AbortController().signal, deps, { attempt: 1, crashedBefore: false, fence: 'token-A', lockKey: lockKey(id) }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CorralError);
  expect(err).toMatchObject({ code: 'store_unavailable', message: expect.stringContaining('cannot resume') });
  expect((err as Error).cause).toBeInstanceOf(Error);
  expect(await store.get(id)).toMatchObject({ status: 'error', errorCode: 'store_unavailable' });
  dead.disconnect();
});

describe('through a real worker on a real queue', () => {
  let queue: Queue;
  let running: RunningWorker | undefined;
  const conns: Redis[] = [];
  afterEach(async () => {
    await running?.close();
    running = undefined;
    await queue?.obliterate({ force: true }).catch(() => undefined);
    await queue?.close();
    for (const c of conns.splice(0)) c.disconnect();
  });

  async function worker(modelFor: RunProcessorDeps['modelFor']) {
    const { store, deps, logged } = subject();
    const name = `fenced-q-${Date.now().toString(36)}-${n++}`;
    queue = new Queue(name, { connection: redis });
    const [connection, sub] = [redis.duplicate({ maxRetriesPerRequest: null }), redis.duplicate()];
    conns.push(connection, sub);
    running = await startWorker({ ...deps, modelFor, queueName: name, concurrency: 1, connection, subscriber: sub, cancelChannel: store.cancelChannel });
    return { store, queue, logged };
  }

  test('a job that fails outside processRun while it holds its lock ends its run with the reason and the code', async () => {
    const { store } = await worker(() => {
      throw new CorralError('model_failed', 'the model could not be made');
    });
    const id = `run_endsown${n}`;
    await store.create(id, { task: 'x' }, new Date());
    await queue.add('run', { runId: id, spec: { task: 'x' } }, { jobId: id, attempts: 1 });
    await eventually(async () => !!(await store.get(id))?.finishedAt, { what: 'the run to end' });
    expect(await store.get(id)).toMatchObject({ status: 'error', errorCode: 'model_failed', reason: 'the model could not be made' });
  });

  test('a job whose lock passed to another attempt before it failed leaves that attempt\'s run alone', async () => {
    const id = `run_takenover${n}`;
    const lock = () => `${queue.qualifiedName}:${id}:lock`;
    const { store, logged } = await worker(async () => {
      // Attempt B takes the job over (its lock and the run), then this attempt fails.
      await redis.set(lock(), 'token-B', 'PX', 30_000);
      expect(await store.claim(id, 'token-B', lock())).toBe(true);
      throw new Error('the model could not be made');
    });
    await store.create(id, { task: 'x' }, new Date());
    await queue.add('run', { runId: id, spec: { task: 'x' } }, { jobId: id, attempts: 1 });
    // The failure has been through the worker (after its end was attempted) once BullMQ said something of it.
    await eventually(async () => logged.some((l) => l.msg === 'job failed' || l.msg === 'worker error'), { what: 'attempt A\'s failure to reach BullMQ' });
    expect((await store.get(id))!.finishedAt).toBeUndefined();
    expect(await store.update(id, { reason: 'attempt B goes on' }, 'token-B')).toBe(true);
  });
});
