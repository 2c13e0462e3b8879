/**
 * Runs per minute of one worker process (`bin/corral worker`) at a given concurrency: `runs` runs of
 * a scripted task with `tools` bash calls each are enqueued at once onto the idle worker; the rate is
 * runs / (last finishedAt − enqueue start). One warm-up run first (not counted). Every run must end
 * succeeded exactly once; the worker's RSS is sampled throughout (peak reported). soak() then keeps
 * the same worker busy for many more runs, for its settled memory.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { RunSpec } from '../src/domain/run-spec';
import { enqueueRun, newRunId } from '../src/queue/run-queue';
import { loadTask } from '../test/support/load-agent';
import { auditRuns, waitFinished } from '../test/support/load-audit';
import { readRssMb } from '../test/support/load-rss';
import type { LoadStack, LoadWorker } from '../test/support/load-stack';
import { round } from './stats';

export interface RateResult {
  concurrency: number;
  runs: number;
  tools_per_run: number;
  wall_ms: number;
  runs_per_minute: number;
  not_once: number;
}

export async function runBatch(redis: Redis, queue: Queue, n: number, tools: number): Promise<{ ids: string[]; wallMs: number }> {
  const spec = RunSpec.parse({ task: loadTask(tools, 'runs per minute') });
  const ids = Array.from({ length: n }, () => newRunId());
  const t0 = Date.now();
  await Promise.all(ids.map((id) => enqueueRun(queue, id, spec)));
  const left = await waitFinished(redis, ids, 60_000 + n * 30_000, 50);
  if (left.length) throw new Error(`${left.length} of ${n} runs did not finish`);
  const ends = await Promise.all(ids.map((id) => redis.hget(`corral:run:${id}`, 'finishedAt')));
  return { ids, wallMs: Math.max(...ends.map((e) => Date.parse(e!))) - t0 };
}

export interface SoakResult {
  concurrency: number;
  runs: number;
  tools_per_run: number;
  runs_per_minute: number;
  not_once: number;
  rss_mb_start: number | null;
  rss_mb_end: number | null;
}

/**
 * Many more runs on the same worker (enqueued at once), for its memory after it has settled: RSS
 * grows over the first couple of hundred runs and then levels off, so a short stage understates it.
 */
export async function soak(o: { stack: LoadStack; worker: LoadWorker; queue: Queue; redis: Redis; runs: number; tools: number }): Promise<SoakResult> {
  const rssStart = readRssMb(o.worker.pid);
  const { ids, wallMs } = await runBatch(o.redis, o.queue, o.runs, o.tools);
  const audit = await auditRuns({ ids, dataDir: o.stack.dataDir, queue: o.queue, redis: o.redis, workers: o.stack.workers });
  const rssEnd = readRssMb(o.worker.pid);
  return {
    concurrency: o.worker.concurrency, runs: o.runs, tools_per_run: o.tools, runs_per_minute: round((o.runs * 60_000) / wallMs, 1),
    not_once: audit.notOnce.length, rss_mb_start: rssStart === null ? null : round(rssStart), rss_mb_end: rssEnd === null ? null : round(rssEnd),
  };
}

/** Measures on a worker already started at `worker.concurrency` and idle on `queue`. */
export async function benchRunsPerMinute(o: { stack: LoadStack; worker: LoadWorker; queue: Queue; redis: Redis; runs: number; tools: number }): Promise<RateResult> {
  await runBatch(o.redis, o.queue, 1, o.tools); // warm-up
  const { ids, wallMs } = await runBatch(o.redis, o.queue, o.runs, o.tools);
  const audit = await auditRuns({ ids, dataDir: o.stack.dataDir, queue: o.queue, redis: o.redis, workers: o.stack.workers });
  return {
    concurrency: o.worker.concurrency, runs: o.runs, tools_per_run: o.tools, wall_ms: wallMs,
    runs_per_minute: round((o.runs * 60_000) / wallMs, 1), not_once: audit.notOnce.length,
  };
}
