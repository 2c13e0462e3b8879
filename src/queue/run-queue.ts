/**
 * The queue contract: the BullMQ queue every producer writes to and every worker reads. A job's name
 * is "run", its id is the run id (so a resubmitted id is not run twice) and its data is a RunJob
 * (`{ runId, spec, tenant }`, spec = the REST body schema; tenant absent = `default`). Runs have side effects, so a job is attempted once;
 * a worker that dies mid-run leaves a stalled job that BullMQ fails after maxStalledCount.
 */
import { Queue, type ConnectionOptions, type JobsOptions } from 'bullmq';
import { randomBytes } from 'node:crypto';
import type { RunJob, RunSpec } from '../domain/run-spec';

export const RUN_JOB_NAME = 'run';

export const RUN_JOB_OPTIONS: JobsOptions = {
  attempts: 1,
  removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
  removeOnFail: { age: 14 * 24 * 3600, count: 10_000 },
};

export function newRunId(): string {
  return `run_${randomBytes(9).toString('base64url')}`;
}

export function createRunQueue(name: string, connection: ConnectionOptions): Queue {
  return new Queue(name, { connection });
}

/** `traceparent`: the submission's trace context, so the run's trace joins it. */
export async function enqueueRun(queue: Queue, runId: string, spec: RunSpec, tenant?: string, traceparent?: string): Promise<void> {
  const data: RunJob = { runId, spec, ...(tenant !== undefined ? { tenant } : {}), ...(traceparent ? { traceparent } : {}) };
  await queue.add(RUN_JOB_NAME, data, { ...RUN_JOB_OPTIONS, jobId: runId });
}
