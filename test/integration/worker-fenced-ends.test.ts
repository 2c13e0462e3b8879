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
import { Redis } from 'ioredis';
import { LocalArtifactStore } from '../../src/artifacts/local-artifact-store';
import { loadConfig } from '../../src/config';
import { CorralError } from '../../src/domain/errors';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { RunTree } from '../../src/queue/run-tree';
import { processRun, type RunProcessorDeps } from '../../src/worker/run-processor';

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
