/**
 * Records read back from Redis are checked, never cast: a corrupt schedule or idempotency record
 * (planted in the real test Redis) is an internal error naming the record, and a good one reads back.
 */
import { Redis } from 'ioredis';
import { IdempotencyStore } from '../../src/queue/idempotency';
import { ScheduleStore } from '../../src/queue/schedule-store';

let redis: Redis;
const prefix = `stored-${process.pid}-${Date.now().toString(36)}`;
beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  await redis.quit();
});

test('a corrupt schedule record is an internal error naming it', async () => {
  const conn = redis.duplicate({ maxRetriesPerRequest: null });
  const store = new ScheduleStore(redis, `${prefix}-q`, conn, prefix);
  try {
    await redis.set(`${prefix}:schedule:sch_bad1`, '{"id":"sch_bad1","runs":"many"}');
    await expect(store.get('sch_bad1')).rejects.toMatchObject({ code: 'internal', message: expect.stringMatching(/^schedule record sch_bad1 is corrupt: /) });
    await redis.set(`${prefix}:schedule:sch_bad2`, 'not json');
    await expect(store.get('sch_bad2')).rejects.toMatchObject({ code: 'internal', message: 'schedule record sch_bad2 is corrupt: not JSON' });
    const good = { id: 'sch_good', tenant: 'acme', createdAt: new Date(0).toISOString(), runs: 2, cron: '0 * * * *', timezone: 'UTC', template: 't', params: {} };
    await redis.set(`${prefix}:schedule:sch_good`, JSON.stringify(good));
    expect(await store.get('sch_good')).toEqual(good);
  } finally {
    await store.close();
    conn.disconnect(); // a connection passed to BullMQ is not closed by it
  }
});

test('a corrupt idempotency record is an internal error, not a wrong answer', async () => {
  const store = new IdempotencyStore(redis, prefix);
  expect(await store.reserve('acme', 'k1', 'hash-1', 'run_idem0001', 60, 1_000)).toEqual({ kind: 'new' });
  // The key carries the first request's time (a duplicate waits for that request's record until then + a bound).
  expect(await store.reserve('acme', 'k1', 'hash-1', 'run_idem0002', 60, 2_000)).toEqual({ kind: 'existing', runId: 'run_idem0001', at: 1_000 });
  const keys = await redis.keys(`${prefix}:idem:acme:*`);
  expect(keys).toHaveLength(1);
  await redis.set(keys[0]!, '{"runId":42}');
  await expect(store.reserve('acme', 'k1', 'hash-1', 'run_idem0003', 60)).rejects.toMatchObject({ code: 'internal', message: expect.stringMatching(/idempotency record .* is corrupt/) });
});
