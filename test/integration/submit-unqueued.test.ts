/**
 * A submit whose job cannot be added leaves no ghost (issue 40, defect 1): the record the API created
 * ends `error` with what broke instead of showing `queued` forever, the tenant's active slot is given
 * back, and RedisRunStore.create writes a record and both its list indexes in one script — a record
 * never exists without them. Real Redis and a real BullMQ queue whose connection is gone.
 */
import { createServer } from 'node:net';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { startApiFixture, type ApiFixture } from '../support/api-fixture';
import { eventually } from '../support/eventually';

/** A loopback port nothing listens on: a queue aimed at it fails every command at once. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe('a job that cannot be added', () => {
  let f: ApiFixture | undefined;
  let dead: Queue | undefined;
  afterEach(async () => {
    await f?.close();
    await dead?.close().catch(() => undefined);
    f = dead = undefined;
  });

  test('ends its run error with the cause, gives back the active slot, and answers 503', async () => {
    dead = new Queue(`unqueued-${process.pid}`, { connection: { host: '127.0.0.1', port: await closedPort(), enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null } });
    dead.on('error', () => undefined);
    f = await startApiFixture({ env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '1' }, deps: { queue: dead } });
    for (let i = 0; i < 3; i++) {
      const res = await f.call('POST', '/v1/runs', { body: { task: `attempt ${i}` } });
      // A slot held by a ghost would make the second submit a 429 (the cap is one active run).
      expect(res.status).toBe(503);
      expect(res.headers['retry-after']).toBeDefined();
      expect(JSON.stringify(res.body)).not.toContain('127.0.0.1');
    }
    const runs = await f.store.list(10);
    expect(runs).toHaveLength(3);
    for (const run of runs) {
      expect(run).toMatchObject({ status: 'error', errorCode: 'store_unavailable', tenant: 'acme', reason: expect.stringContaining('could not be queued'), finishedAt: expect.any(String) });
      expect(run.status).not.toBe('queued');
    }
  });
});

test('RedisRunStore.create writes the record and both indexes in one script', async () => {
  const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const monitor = await redis.monitor();
  const seen: Array<{ args: string[]; source: string }> = [];
  const prefix = `create1-${process.pid}-${Date.now().toString(36)}`;
  monitor.on('monitor', (_time: string, args: string[], source: string) => {
    if (args.some((a) => a.includes(prefix))) seen.push({ args, source });
  });
  const client = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  try {
    const store = new RedisRunStore(client, prefix);
    await store.create('run_onescript1', { task: 'x' }, new Date(), 'acme');
    await eventually(() => seen.filter((s) => s.args[0]!.toLowerCase() === 'zadd').length === 2, { what: 'both index writes on the monitor' });
    // Everything the client itself sent is one script; the index writes ran inside it.
    expect(seen.filter((s) => s.source !== 'lua').map((s) => s.args[0]!.toLowerCase())).toEqual(['eval']);
    expect(seen.filter((s) => s.args[0]!.toLowerCase() === 'zadd').every((s) => s.source === 'lua')).toBe(true);
    expect(await client.zscore(`${prefix}:runs`, 'run_onescript1')).not.toBeNull();
    expect(await store.list(5)).toEqual([expect.objectContaining({ id: 'run_onescript1', tenant: 'acme', status: 'queued' })]);
    // A second create of the same id changes nothing.
    await store.create('run_onescript1', { task: 'y' }, new Date(0), 'globex');
    expect(await store.get('run_onescript1')).toMatchObject({ task: 'x', tenant: 'acme' });
    expect(await client.zcard(`${prefix}:runs`)).toBe(1);
  } finally {
    const keys = await client.keys(`${prefix}:*`);
    if (keys.length) await client.del(...keys);
    monitor.disconnect();
    client.disconnect();
    redis.disconnect();
  }
});
