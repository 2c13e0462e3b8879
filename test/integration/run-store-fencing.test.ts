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

const pending = (callId: string) => ({ callId, tool: 'bash', args: { command: 'rm -r x' }, reason: 'asks', since: new Date(0).toISOString() });

test('setPending and clearPending of a stale attempt are discarded', async () => {
  const store = new RunStore(redis, `fence-p-${Date.now()}`);
  const id = 'run_fencing2';
  await store.create(id, { task: 'x' }, new Date());
  expect(await store.claim(id, 'token-A')).toBe(true);
  expect(await store.setPending(id, pending('call_a'), 'token-A')).toBe(true);
  expect((await store.get(id))!.status).toBe('awaiting_approval');

  expect(await store.claim(id, 'token-B')).toBe(true);
  expect(await store.update(id, { status: 'running' }, 'token-B')).toBe(true);
  // The old attempt's late approval writes land nowhere.
  expect(await store.setPending(id, pending('call_stale'), 'token-A')).toBe(false);
  expect(await store.clearPending(id, 'call_a', 'token-A')).toBe(false);
  const run = await store.get(id);
  expect(run!.pendingApprovals.map((p) => p.callId)).toEqual(['call_a']);
  expect(run!.status).toBe('running');
  // The owner's own clear works and sets the status back only when nothing is pending.
  expect(await store.setPending(id, pending('call_b'), 'token-B')).toBe(true);
  expect(await store.clearPending(id, 'call_a', 'token-B')).toBe(true);
  expect((await store.get(id))!.status).toBe('awaiting_approval');
  expect(await store.clearPending(id, 'call_b', 'token-B')).toBe(true);
  expect((await store.get(id))).toMatchObject({ status: 'running', pendingApprovals: [] });
});

test('a claim lands only while the job lock holds the token, and never on an ended run', async () => {
  const prefix = `fence-c-${Date.now()}`;
  const store = new RunStore(redis, prefix);
  const id = 'run_fencing3';
  const lockKey = `${prefix}:bull:q:${id}:lock`;
  await store.create(id, { task: 'x' }, new Date());
  // No lock at all (the job was moved on), or a lock of another worker: not claimed.
  expect(await store.claim(id, 'token-A', lockKey)).toBe(false);
  await redis.set(lockKey, 'token-B', 'PX', 30_000);
  expect(await store.claim(id, 'token-A', lockKey)).toBe(false);
  expect(await store.claim(id, 'token-B', lockKey)).toBe(true);
  expect(await store.update(id, { status: 'running' }, 'token-B')).toBe(true);
  expect(await store.update(id, { status: 'running' }, 'token-A')).toBe(false);

  expect(await store.end(id, 'succeeded', 'done', new Date(), { fence: 'token-B' })).toBe(true);
  await redis.set(lockKey, 'token-C', 'PX', 30_000);
  expect(await store.claim(id, 'token-C', lockKey)).toBe(false);
  expect((await store.get(id))!.status).toBe('succeeded');
  await redis.del(lockKey);
});

test('end never overwrites a recorded end, and its guards hold', async () => {
  const store = new RunStore(redis, `fence-e-${Date.now()}`);
  const [a, b, c] = ['run_fencing4', 'run_fencing5', 'run_fencing6'];
  for (const id of [a, b, c]) await store.create(id, { task: 'x' }, new Date());

  // A recorded end stays: a later end (a late failed handler, a second cancel) changes nothing.
  expect(await store.end(a, 'succeeded', 'the model gave its final answer', new Date(1000))).toBe(true);
  expect(await store.end(a, 'error', 'late', new Date(2000))).toBe(false);
  expect(await store.get(a)).toMatchObject({ status: 'succeeded', reason: 'the model gave its final answer', finishedAt: new Date(1000).toISOString() });

  // 'unclaimed': only while no worker has claimed the run.
  await store.claim(b, 'token-W');
  expect(await store.end(b, 'cancelled', 'cancelled before it started', new Date(), 'unclaimed')).toBe(false);
  expect((await store.get(b))!.finishedAt).toBeUndefined();
  expect(await store.end(c, 'cancelled', 'cancelled before it started', new Date(), 'unclaimed')).toBe(true);

  // A fenced end of a stale attempt is discarded.
  await store.claim(b, 'token-X');
  expect(await store.end(b, 'error', 'stale', new Date(), { fence: 'token-W' })).toBe(false);
  expect(await store.end(b, 'error', 'the owner ends it', new Date(), { fence: 'token-X' })).toBe(true);
  expect((await store.get(b))!.reason).toBe('the owner ends it');

  // No record: nothing is created.
  expect(await store.end('run_nosuchrun', 'error', 'x', new Date())).toBe(false);
  expect(await store.get('run_nosuchrun')).toBeNull();
});

test('parking: a tenant has at most `cap` parked runs; expired entries free the cap', async () => {
  const store = new RunStore(redis, `park-${Date.now()}`);
  const now = Date.now();
  expect(await store.reserveParking('acme', 'run_p1', now + 10_000, 2, now)).toBe(true);
  expect(await store.reserveParking('acme', 'run_p2', now + 10_000, 2, now)).toBe(true);
  expect(await store.reserveParking('acme', 'run_p3', now + 10_000, 2, now)).toBe(false);
  expect(await store.reserveParking('acme', 'run_p1', now + 20_000, 2, now)).toBe(true); // the same run again
  expect(await store.reserveParking('globex', 'run_g1', now + 10_000, 2, now)).toBe(true); // another tenant's own cap
  expect(await store.parkedCount('acme', now)).toBe(2);
  await store.releaseParking('acme', 'run_p2');
  expect(await store.reserveParking('acme', 'run_p3', now + 10_000, 2, now)).toBe(true);
  // A worker died with run_p3 parked: past its time it no longer counts.
  expect(await store.reserveParking('acme', 'run_p4', now + 30_000, 2, now + 15_000)).toBe(true);
  expect(await store.parkedCount('acme', now + 15_000)).toBe(2);
});
