/**
 * Fencing in the run store (real Redis): once a new attempt claims a run with its job lock token, the
 * old attempt's late writes — state updates and events — are discarded, not merged.
 */
import { Redis } from 'ioredis';
import { RunStore } from '../../src/queue/run-store';
import type { RunEvent } from '../../src/domain/events';

let redis: Redis;
beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

const event = (runId: string, seq: number): RunEvent => ({
  runId, seq, ts: new Date(0).toISOString(), type: 'budget.warning', budget: 'llmCalls', limit: 10, used: 8,
});

test('a stale attempt cannot overwrite the run or add events after another attempt claimed it', async () => {
  const store = new RunStore(redis, `fence-${Date.now()}`);
  const id = 'run_fencing1';
  await store.create(id, { task: 'x' }, new Date());
  await store.claim(id, 'token-A');
  expect(await store.update(id, { status: 'running', workerId: 'worker-a' }, 'token-A')).toBe(true);
  expect(await store.appendEvent(event(id, 1), 'token-A')).toBe(true);

  await store.claim(id, 'token-B'); // the job was taken over (stalled → started again)
  expect(await store.update(id, { status: 'running', workerId: 'worker-b' }, 'token-B')).toBe(true);

  expect(await store.update(id, { status: 'succeeded', outcome: 'succeeded', finalAnswer: 'late' }, 'token-A')).toBe(false);
  expect(await store.appendEvent(event(id, 2), 'token-A')).toBe(false);

  const run = await store.get(id);
  expect(run).toMatchObject({ status: 'running', workerId: 'worker-b' });
  expect(run).not.toHaveProperty('finalAnswer');
  expect(run).not.toHaveProperty('owner');
  expect((await store.readEvents(id)).map((r) => r.event.seq)).toEqual([1]);
  expect(await store.appendEvent(event(id, 2), 'token-B')).toBe(true);
});
