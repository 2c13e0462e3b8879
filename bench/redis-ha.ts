/**
 * Redis that fails over, at what cost (`BENCH_STAGES=redis-ha npm run bench`): the same measures on
 * three set-ups started here side by side, each a fresh set of redis-server containers on loopback
 * (test/support/sentinel-redis.ts, the local Redis image):
 *   single         one Redis, corral's default for redis:// (no WAIT)
 *   sentinel       a primary, a replica and three sentinels, reached through redis+sentinel:// — with
 *                  WAIT for one replica on the writes that matter (CORRAL_REDIS_DURABLE_REPLICAS=1, the
 *                  Sentinel default)
 *   sentinel_nowait  the same topology with CORRAL_REDIS_DURABLE_REPLICAS=0: the difference to
 *                  `sentinel` is the cost of the durability step alone
 * For each: enqueue → start of a bare BullMQ worker and of corral's worker process (the claim's WAIT
 * is inside the latter), runs per minute of one worker (concurrency BENCH_HA_CONCURRENCY, a
 * BENCH_HA_TOOLS-call task, BENCH_HA_RUNS runs), and POST /v1/runs latency through the API (the
 * submission's WAIT is inside it) — in BENCH_HA_ROUNDS rounds, the three set-ups in turn within each. Also the raw price of one WAIT: an HSET alone vs an HSET followed
 * by WAIT 1 on the same connection.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RedisConnections } from '../src/queue/redis-connections';
import { startFakeDecisionsServer } from '../test/support/fake-decisions-server';
import { loadAgent, loadTask } from '../test/support/load-agent';
import { waitFinished } from '../test/support/load-audit';
import { startLoadStack } from '../test/support/load-stack';
import { startSentinelRedis, startSingleRedis } from '../test/support/sentinel-redis';
import { benchBareBullmq, benchCorralEnqueue } from './enqueue-to-start';
import { benchRunsPerMinute, type RateResult } from './runs-per-minute';
import { envInt, note, round, stats, type P50P95 } from './stats';

export interface TopologyBench {
  durable_replicas: number;
  /** p50/p95 over the rounds' p50s. */
  bare_bullmq_enqueue_to_start_ms: P50P95;
  corral_enqueue_to_start_ms: P50P95;
  /** The median round. */
  runs_per_minute: RateResult;
  runs_per_minute_rounds: number[];
  api_post_run_ms: P50P95;
  api_posts: number;
}

export interface RedisHaBench {
  single: TopologyBench;
  sentinel: TopologyBench;
  sentinel_nowait: TopologyBench;
  /** One write alone vs the same write then WAIT 1 (ms, p50/p95), on the Sentinel primary. */
  wait_cost_ms: { hset: P50P95; hset_then_wait: P50P95; samples: number };
  host: { cpus: number; redis_server: string };
}

async function postLatency(url: string, n: number): Promise<{ ms: number[]; ids: string[] }> {
  const ms: number[] = [];
  const ids: string[] = [];
  for (let i = 0; i < n + 3; i++) {
    const t = performance.now();
    const res = await fetch(`${url}/v1/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: loadTask(0, `post ${i}`) }) });
    const took = performance.now() - t;
    const body = (await res.json()) as { id?: string };
    if (res.status !== 201 || !body.id) throw new Error(`POST /v1/runs: HTTP ${res.status} ${JSON.stringify(body)}`);
    ids.push(body.id);
    if (i >= 3) ms.push(took); // the first few warm the connections
  }
  return { ms, ids };
}

interface Setup {
  name: 'single' | 'sentinel' | 'sentinel_nowait';
  durableReplicas: number;
  redis: Redis;
  queue: Queue;
  queueConn: Redis;
  stack: Awaited<ReturnType<typeof startLoadStack>>;
  worker: Awaited<ReturnType<Awaited<ReturnType<typeof startLoadStack>>['startWorker']>>;
}

async function setUp(name: Setup['name'], url: string, durableReplicas: number, modelBaseURL: string): Promise<Setup> {
  const conns = new RedisConnections(url);
  const redis = conns.open('commands', `bench-${name}`);
  const stack = await startLoadStack({
    redisUrl: url, modelBaseURL, name: `bench-ha-${name}`,
    env: { CORRAL_REDIS_DURABLE_REPLICAS: String(durableReplicas), CORRAL_TENANT_MAX_ACTIVE_RUNS: '100000', CORRAL_TENANT_SUBMITS_PER_MIN: '100000' },
  });
  const queueConn = conns.open('commands', `bench-${name}-queue`);
  const queue = new Queue(stack.queue, { connection: queueConn });
  const worker = await stack.startWorker(`bench-ha-${name}`, envInt('BENCH_HA_CONCURRENCY', 4));
  return { name, durableReplicas, redis, queue, queueConn, stack, worker };
}

async function tearDown(x: Setup): Promise<void> {
  await x.stack.close();
  await x.queue.close();
  x.queueConn.disconnect();
  x.redis.disconnect();
}

/**
 * Every measure in rounds, the three set-ups one after the other within each round (a busy host
 * slows all three alike); each measure's samples are pooled over the rounds, runs per minute is the
 * median round.
 */
async function measureAll(setups: Setup[], rounds: number): Promise<Record<Setup['name'], TopologyBench>> {
  const acc = new Map(setups.map((x) => [x.name, { bare: [] as number[], corral: [] as number[], rates: [] as RateResult[], posts: [] as number[] }]));
  for (let round = 1; round <= rounds; round++) {
    for (const x of setups) {
      const a = acc.get(x.name)!;
      note(`redis-ha round ${round}/${rounds}, ${x.name}`);
      const bare = await benchBareBullmq(x.redis, envInt('BENCH_HA_BARE_SAMPLES', 100));
      a.bare.push(bare.p50);
      const corral = await benchCorralEnqueue(x.redis, x.queue, envInt('BENCH_HA_ENQUEUE_SAMPLES', 10));
      a.corral.push(corral.enqueue_to_start_ms.p50);
      a.rates.push(await benchRunsPerMinute({ stack: x.stack, worker: x.worker, queue: x.queue, redis: x.redis, runs: envInt('BENCH_HA_RUNS', 16), tools: envInt('BENCH_HA_TOOLS', 3) }));
      const posts = await postLatency(x.stack.url!, envInt('BENCH_HA_POSTS', 30));
      a.posts.push(...posts.ms);
      await waitFinished(x.redis, posts.ids, 300_000, 100);
    }
  }
  const out = {} as Record<Setup['name'], TopologyBench>;
  for (const x of setups) {
    const a = acc.get(x.name)!;
    const byRate = [...a.rates].sort((p, q) => p.runs_per_minute - q.runs_per_minute);
    out[x.name] = {
      durable_replicas: x.durableReplicas,
      bare_bullmq_enqueue_to_start_ms: stats(a.bare), corral_enqueue_to_start_ms: stats(a.corral),
      runs_per_minute: byRate[Math.floor(byRate.length / 2)]!, runs_per_minute_rounds: a.rates.map((r) => r.runs_per_minute),
      api_post_run_ms: stats(a.posts), api_posts: a.posts.length,
    };
  }
  return out;
}

async function waitCost(url: string, samples: number): Promise<RedisHaBench['wait_cost_ms']> {
  const r: Redis = new RedisConnections(url).open('commands', 'bench-wait');
  try {
    const alone: number[] = [];
    const waited: number[] = [];
    for (let i = 0; i < samples; i++) {
      let t = performance.now();
      await r.hset('bench:wait', 'n', i);
      alone.push(performance.now() - t);
      t = performance.now();
      await r.hset('bench:wait', 'n', i);
      const acked = await r.wait(1, 1000);
      if (acked < 1) throw new Error('the replica did not confirm a write within 1 s');
      waited.push(performance.now() - t);
    }
    await r.del('bench:wait');
    return { hset: stats(alone), hset_then_wait: stats(waited), samples };
  } finally {
    r.disconnect();
  }
}

export async function benchRedisHa(): Promise<RedisHaBench> {
  const model = await startFakeDecisionsServer({ chat: loadAgent() });
  const single = await startSingleRedis();
  const s = await startSentinelRedis({ downAfterMs: 5000 });
  const setups: Setup[] = [];
  try {
    note('redis-ha: one WAIT\'s price on the Sentinel primary');
    const waitCostMs = await waitCost(s.url, envInt('BENCH_HA_WAIT_SAMPLES', 500));
    note('redis-ha: a single Redis, and Sentinel (a primary, a replica, 3 sentinels) with and without WAIT, side by side');
    setups.push(await setUp('single', single.url, 0, model.baseURL));
    setups.push(await setUp('sentinel', s.url, 1, model.baseURL));
    setups.push(await setUp('sentinel_nowait', s.url, 0, model.baseURL));
    const r = await measureAll(setups, envInt('BENCH_HA_ROUNDS', 3));
    const probe = single.node.connect();
    const version = /redis_version:(\S+)/.exec(await probe.info('server'))?.[1] ?? '?';
    probe.disconnect();
    return { ...r, wait_cost_ms: waitCostMs, host: { cpus: (await import('node:os')).cpus().length, redis_server: `v=${version}` } };
  } finally {
    for (const x of setups) await tearDown(x);
    await s.close();
    await single.close();
    await model.close();
  }
}

/** A one-line summary of the ratios worth reading first. */
export function summariseRedisHa(b: RedisHaBench): Record<string, number> {
  return {
    runs_per_minute_sentinel_over_single: round(b.sentinel.runs_per_minute.runs_per_minute / b.single.runs_per_minute.runs_per_minute, 2),
    runs_per_minute_wait_over_nowait: round(b.sentinel.runs_per_minute.runs_per_minute / b.sentinel_nowait.runs_per_minute.runs_per_minute, 2),
    post_run_p50_added_by_wait_ms: round(b.sentinel.api_post_run_ms.p50 - b.sentinel_nowait.api_post_run_ms.p50, 2),
    enqueue_to_start_p50_added_by_wait_ms: round(b.sentinel.corral_enqueue_to_start_ms.p50 - b.sentinel_nowait.corral_enqueue_to_start_ms.p50, 2),
  };
}
