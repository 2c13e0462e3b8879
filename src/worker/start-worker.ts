/**
 * The BullMQ worker: takes run jobs from the queue, `concurrency` at a time (= sandbox slots), and
 * hands each to processRun with the job's AbortSignal. Cancel requests arrive on the store's pub/sub
 * channel and abort the job here if this worker holds it. Bad job data and ended runs become
 * UnrecoverableError (no retry; the reason is the job's failedReason); the worker keeps going.
 */
import { UnrecoverableError, Worker, type ConnectionOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { CorralError } from '../domain/errors';
import { processRun, type RunProcessorDeps, type RunSummary } from './run-processor';

export interface StartWorkerOptions extends RunProcessorDeps {
  queueName: string;
  concurrency: number;
  /** BullMQ connection (an ioredis client with maxRetriesPerRequest: null). */
  connection: ConnectionOptions;
  /** A Redis connection this worker may put in subscriber mode for cancel requests. */
  subscriber: Redis;
}

export interface RunningWorker {
  worker: Worker;
  /** Run ids this worker is executing now. */
  active: ReadonlySet<string>;
  close(): Promise<void>;
}

export async function startWorker(o: StartWorkerOptions): Promise<RunningWorker> {
  const active = new Set<string>();
  const worker = new Worker<unknown, RunSummary>(
    o.queueName,
    async (job, _token, signal) => {
      const id = job.id ?? '';
      active.add(id);
      try {
        return await processRun(job.data, signal ?? new AbortController().signal, o);
      } catch (err) {
        if (err instanceof CorralError) throw new UnrecoverableError(err.message);
        throw err;
      } finally {
        active.delete(id);
      }
    },
    { connection: o.connection, concurrency: o.concurrency, autorun: true, maxStalledCount: 0 },
  );
  worker.on('failed', (job, err) => o.log('job failed', { jobId: job?.id, reason: err.message }));
  worker.on('error', (err) => o.log('worker error', { error: err.message }));

  await o.subscriber.subscribe(o.store.cancelChannel);
  o.subscriber.on('message', (channel: string, runId: string) => {
    if (channel === o.store.cancelChannel && active.has(runId)) {
      o.log('cancelling run', { runId });
      worker.cancelJob(runId, 'cancelled by request');
    }
  });
  await worker.waitUntilReady();

  return {
    worker,
    active,
    async close() {
      await o.subscriber.unsubscribe(o.store.cancelChannel).catch(() => undefined);
      await worker.close();
    },
  };
}
