/**
 * The run store's contract (test/support/run-store-contract.ts) against RedisRunStore on the real
 * test Redis: fencing of every worker write by the job's lock token, records, listing, counts, the
 * event log, approvals, parking, and corrupt hashes refused by field. Each test gets its own prefix.
 */
import { Redis } from 'ioredis';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { runStoreContract } from '../support/run-store-contract';

let redis: Redis;
let n = 0;
const stores: RedisRunStore[] = [];
beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
});
afterAll(async () => {
  for (const s of stores) await s.closeLive(); // the live feed's own connection
  await redis.quit();
});

runStoreContract(async () => {
  const prefix = `contract-${process.pid}-${Date.now().toString(36)}-${n++}`;
  const store = new RedisRunStore(redis, prefix);
  stores.push(store);
  return {
    store,
    setLock: async (key, token) => {
      // BullMQ's lock key, as the worker passes it (not under the store's prefix)
      if (token === null) await redis.del(key);
      else await redis.set(key, token, 'PX', 30_000);
    },
    setRaw: async (runId, field, value) => {
      await redis.hset(`${prefix}:run:${runId}`, field, value);
    },
  };
});
