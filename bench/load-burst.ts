/**
 * The load benchmark (issue 7 item 4, full size): `runs` runs POSTed at once to an API in this
 * process, onto 3 `bin/corral worker` processes (concurrency 2 each) on one queue, a scripted model
 * making `tools` bash calls per run. Reports wall time, whether every run happened exactly once
 * (test/support/load-audit), the work per worker, containers and Redis keys left (the stage gets a
 * Redis database of its own so that every key in it is accounted for), and each worker's RSS peak.
 */
import { Queue } from 'bullmq';
import Docker from 'dockerode';
import { RedisConnections } from '../src/queue/redis-connections';
import { loadTask } from '../test/support/load-agent';
import { auditRedis, auditRuns, containersOfQueue, summariseRedis, waitFinished } from '../test/support/load-audit';
import type { RssSampler } from '../test/support/load-rss';
import { startLoadStack } from '../test/support/load-stack';
import { round, sleep } from './stats';

export interface LoadResult {
  runs: number;
  workers: number;
  concurrency_per_worker: number;
  tools_per_run: number;
  submit_ms: number;
  submit_status: Record<string, number>;
  wall_ms: number;
  runs_per_minute: number;
  every_run_once: boolean;
  not_once: number;
  not_once_examples: unknown[];
  per_worker: Record<string, number>;
  model_requests: { expected: number; actual: number };
  containers_left: number;
  redis: Record<string, unknown>;
  redis_ok: boolean;
  worker_rss_mb_peak: Record<string, number>;
  worker_exit: Record<string, string>;
}

export async function benchLoadBurst(o: {
  redisUrl: string; modelBaseURL: string; modelRequests: () => number; rss: RssSampler; runs: number; tools: number;
}): Promise<LoadResult> {
  const WORKERS = ['load-w1', 'load-w2', 'load-w3'];
  const CONCURRENCY = 2;
  const docker = new Docker();
  const stack = await startLoadStack({
    redisUrl: o.redisUrl, modelBaseURL: o.modelBaseURL, name: 'bench-load',
    // One tenant submits the whole burst: lift its quotas (10 active runs, 60 submits/min by default).
    env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '100000', CORRAL_TENANT_SUBMITS_PER_MIN: '100000' },
  });
  const redis = new RedisConnections(o.redisUrl).open('commands', 'bench-load');
  const qConn = redis.duplicate({ maxRetriesPerRequest: null });
  const queue = new Queue(stack.queue, { connection: qConn });
  const workerExit: Record<string, string> = {};
  try {
    await Promise.all(WORKERS.map(async (id) => o.rss.track(id, (await stack.startWorker(id, CONCURRENCY)).pid)));
    const requestsBefore = o.modelRequests();
    const t0 = Date.now();
    const posted = await Promise.all(Array.from({ length: o.runs }, (_, i) => stack.request<{ id?: string }>('POST', '/v1/runs', { task: loadTask(o.tools, `burst ${i}`) })));
    const submitMs = Date.now() - t0;
    const submitStatus: Record<string, number> = {};
    for (const p of posted) submitStatus[p.status] = (submitStatus[p.status] ?? 0) + 1;
    const ids = posted.map((p) => p.body.id).filter((id): id is string => typeof id === 'string');
    const left = await waitFinished(redis, ids, 120_000 + o.runs * 5_000, 250);
    const wallMs = Date.now() - t0;
    if (left.length) throw new Error(`${left.length} of ${ids.length} burst runs did not finish`);

    const audit = await auditRuns({ ids, dataDir: stack.dataDir, queue, redis, workers: stack.workers });
    let containers = await containersOfQueue(docker, stack.queue);
    for (let i = 0; containers.length && i < 60; i++) {
      await sleep(250);
      containers = await containersOfQueue(docker, stack.queue);
    }
    const keys = await auditRedis(redis, { queue: stack.queue, runIds: ids, all: true });
    const peaks = o.rss.peaks();
    for (const w of stack.workers) {
      const e = await w.stop();
      workerExit[w.id] = e.signal ?? String(e.code);
    }
    return {
      runs: o.runs, workers: WORKERS.length, concurrency_per_worker: CONCURRENCY, tools_per_run: o.tools,
      submit_ms: submitMs, submit_status: submitStatus, wall_ms: wallMs,
      runs_per_minute: round((ids.length * 60_000) / wallMs, 1),
      every_run_once: audit.notOnce.length === 0 && ids.length === o.runs,
      not_once: audit.notOnce.length + (o.runs - ids.length),
      not_once_examples: audit.notOnce.slice(0, 3),
      per_worker: audit.perWorker,
      model_requests: { expected: ids.length * (o.tools + 1), actual: o.modelRequests() - requestsBefore },
      containers_left: containers.length,
      redis: summariseRedis(keys),
      redis_ok: keys.unexpected.length === 0 && keys.runKeysWithoutTtl.length === 0,
      worker_rss_mb_peak: Object.fromEntries(WORKERS.map((id) => [id, peaks[id] ?? 0])),
      worker_exit: workerExit,
    };
  } finally {
    await stack.close();
    const left = await containersOfQueue(docker, stack.queue);
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
    await queue.close();
    qConn.disconnect();
    redis.disconnect();
  }
}
