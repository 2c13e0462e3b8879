/**
 * Enqueue → processing start, one job at a time onto an idle worker (p50/p95 in ms):
 *   benchBareBullmq     a bare BullMQ Worker in this process with an empty processor: performance.now()
 *                       before queue.add → first line of the processor (same clock, sub-ms)
 *   benchCorralEnqueue  corral's worker (`bin/corral worker`, a child process): Date.now() before the
 *                       RunJob is enqueued (src/queue/run-queue enqueueRun, as any producer does) → the
 *                       run's startedAt, which corral's processor writes when it starts the run (after
 *                       validating the job and creating the run record). Also the BullMQ pick-up alone
 *                       (job.processedOn − job.timestamp). Same host, so both ends read one wall clock
 *                       (ms resolution). Each run is a no-tool-call task, waited for before the next.
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { RunSpec } from '../src/domain/run-spec';
import { enqueueRun, newRunId } from '../src/queue/run-queue';
import { loadTask } from '../test/support/load-agent';
import { waitFinished } from '../test/support/load-audit';
import { stats, type P50P95 } from './stats';

export async function benchBareBullmq(redis: Redis, samples: number): Promise<P50P95 & { samples: number }> {
  const name = `bench-bare-${process.pid}-${Date.now().toString(36)}`;
  const qConn = redis.duplicate({ maxRetriesPerRequest: null });
  const wConn = redis.duplicate({ maxRetriesPerRequest: null });
  const queue = new Queue(name, { connection: qConn });
  let started: ((t: number) => void) | undefined;
  const worker = new Worker(name, async () => started?.(performance.now()), { connection: wConn, concurrency: 1 });
  await worker.waitUntilReady();
  const xs: number[] = [];
  try {
    for (let i = 0; i < samples + 5; i++) {
      const begun = new Promise<number>((r) => (started = r));
      const t0 = performance.now();
      await queue.add('bench', { i }, { removeOnComplete: true, removeOnFail: true });
      const t1 = await begun;
      if (i >= 5) xs.push(t1 - t0); // the first few warm the connections
      await new Promise((r) => setTimeout(r, 5));
    }
  } finally {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    qConn.disconnect();
    wConn.disconnect();
  }
  return { ...stats(xs), samples };
}

export interface CorralEnqueueBench {
  enqueue_to_start_ms: P50P95;
  enqueue_to_pickup_ms: P50P95;
  samples: number;
  failed: number;
}

/** `queue` is the queue a started corral worker (concurrency 1, idle) reads. */
export async function benchCorralEnqueue(redis: Redis, queue: Queue, samples: number): Promise<CorralEnqueueBench & { runIds: string[] }> {
  const toStart: number[] = [];
  const toPickup: number[] = [];
  const runIds: string[] = [];
  let failed = 0;
  const spec = RunSpec.parse({ task: loadTask(0, 'enqueue to start') });
  for (let i = 0; i < samples + 1; i++) {
    const id = newRunId();
    const t0 = Date.now();
    await enqueueRun(queue, id, spec);
    const left = await waitFinished(redis, [id], 60_000, 10);
    if (left.length) throw new Error(`run ${id} did not finish in 60 s`);
    runIds.push(id);
    const [startedAt, status] = await redis.hmget(`corral:run:${id}`, 'startedAt', 'status');
    const job = (await queue.getJob(id)) as Job | undefined;
    if (status !== 'succeeded') failed += 1;
    if (i === 0) continue; // the worker's first run loads code paths lazily
    toStart.push(Date.parse(startedAt!) - t0);
    if (job?.processedOn) toPickup.push(job.processedOn - job.timestamp);
  }
  return { enqueue_to_start_ms: stats(toStart), enqueue_to_pickup_ms: stats(toPickup), samples, failed, runIds };
}
