/**
 * The BullMQ worker: takes run jobs from the queue, `concurrency` at a time (= sandbox slots), and
 * hands each to processRun with the job's AbortSignal. Cancel requests arrive on the store's pub/sub
 * channel and abort the job here if this worker holds it. Bad job data and ended runs become
 * JobFailure, an UnrecoverableError (no retry; the reason is the job's failedReason) that keeps the
 * CorralError's code and the error as its cause; the worker keeps going. A job BullMQ failed because
 * its worker died is told by its stalled counter, never by the text of a message.
 * A run that delegates to sub-runs adds them as flow children of its job (`flow`) and, suspended,
 * leaves as WaitingChildrenError: its slot is free until BullMQ hands the job back after its children.
 */
import { resolve } from 'node:path';
import { DelayedError, UnrecoverableError, WaitingChildrenError, Worker, type ConnectionOptions, type FlowProducer, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { CorralError, codeOf, type ErrorCode } from '../domain/errors';
import { isRunId } from '../domain/run-id';
import { RUN_JOB_NAME } from '../queue/run-queue';
import { DEFAULT_TENANT, type EndGuard } from '../queue/run-store';
import { flowJobPort } from '../queue/subrun-jobs';
import { RunSuspended, processRun, recordRefused, type RunProcessorDeps, type RunSummary } from './run-processor';
import { runFileLocation } from '../artifacts/artifact-store';
import { publishLostRun } from './run-files';
import { WorkerSlots } from './slots';

/** A run job's end as BullMQ keeps it: never retried, with the code of what ended it and that error as its cause. */
export class JobFailure extends UnrecoverableError {
  readonly code: ErrorCode;
  constructor(code: ErrorCode, message: string, cause?: unknown) {
    super(message);
    this.code = code;
    if (cause !== undefined) this.cause = cause;
  }

  static from(err: CorralError): JobFailure {
    return new JobFailure(err.code, err.message, err);
  }
}

/**
 * The queue contract, checked before anything else: a job is named `run`, its id is a run id, and
 * its data's runId is that id. A job that breaks it runs nothing; its record (under the job id, when
 * that is a run id) says why, and BullMQ keeps the reason as the job's failedReason. A job whose id is
 * no run id has no record to write: its failedReason is all there is.
 */
async function checkEnvelope(o: StartWorkerOptions, job: Job, token: string | undefined): Promise<void> {
  const id = job.id ?? '';
  const dataId = (job.data as { runId?: unknown } | null)?.runId;
  let problem: string | undefined;
  if (job.name !== RUN_JOB_NAME) problem = `job name ${JSON.stringify(job.name.slice(0, 100))}: this queue takes only jobs named "${RUN_JOB_NAME}"`;
  else if (!isRunId(id)) problem = `job id ${JSON.stringify(String(id).slice(0, 100))} is not a run id; a run job's id is its run id (run_…)`;
  else if (dataId !== id) problem = `data.runId ${JSON.stringify(String(dataId).slice(0, 100))} differs from the job id ${id}; a run job's id is its run id`;
  if (!problem) return;
  if (isRunId(id)) await recordRefused(o.store, id, { task: '(job refused at the queue contract)' }, `malformed job: ${problem}`, new Date(o.clock()), undefined, jobLock(job, token));
  throw new JobFailure('invalid_input', `malformed job: ${problem}`);
}

/**
 * Before a run starts: when the Docker engine does not answer, the job goes back to the queue delayed
 * (2 s, 4 s, 8 s … by default; no attempt is used up and nothing has run), and after
 * CORRAL_DOCKER_RETRIES waits the run fails with the reason.
 */
async function waitForDocker(o: StartWorkerOptions, job: Job, token: string | undefined): Promise<void> {
  try {
    await o.sandboxReady!();
    return;
  } catch (err) {
    const runId = job.id ?? '';
    const tries = await o.store.countDockerWait(runId);
    const max = o.dockerRetries ?? 6;
    if (tries > max) {
      throw new JobFailure('sandbox_unavailable', `the Docker engine was unavailable at ${tries} tries: ${(err as Error).message}`, err);
    }
    const delay = (o.dockerBackoffMs ?? 2000) * 2 ** (tries - 1);
    o.log('Docker engine unavailable; the run waits', { runId, tries, delayMs: delay, error: (err as Error).message });
    await o.store.update(runId, { status: 'queued', reason: `waiting for the Docker engine (try ${tries} of ${max}, next in ${Math.round(delay / 1000)} s): ${(err as Error).message}` });
    await job.moveToDelayed(Date.now() + delay, token);
    throw new DelayedError();
  }
}

/** The job's fence while `token` holds it: its lock key in BullMQ's keys, and the token. */
function jobLock(job: Job, token: string | undefined): EndGuard | undefined {
  return token ? { fence: token, lockKey: `${job.queueQualifiedName}:${job.id ?? ''}:lock` } : undefined;
}

/**
 * The invariant "once a job has ended for good, its run is terminal with a reason": processRun records
 * the end on its own paths; whatever failed outside them (a model that could not be made, a replay with
 * nothing to replay, a store error, the Docker engine away too long) is recorded here, by the attempt
 * itself while it still holds the job's lock — so never over a run another attempt took — unless the
 * run already has an end. A retry, a delay or a wait for sub-runs is no end.
 */
function recordingEnds(o: StartWorkerOptions, processor: (job: Job, token: string | undefined, signal: AbortSignal | undefined) => Promise<RunSummary>) {
  return async (job: Job, token: string | undefined, signal: AbortSignal | undefined): Promise<RunSummary> => {
    try {
      return await processor(job, token, signal);
    } catch (err) {
      const retried = err instanceof DelayedError || err instanceof WaitingChildrenError || !(err instanceof UnrecoverableError || job.attemptsMade + 1 >= (job.opts.attempts ?? 1));
      if (!retried && job.id) await recordEnded(o, job.id, (err as Error).message, err instanceof JobFailure ? err.code : codeOf(err), jobLock(job, token));
      throw err;
    }
  };
}

/** Records the end of a run whose worker died (its job stalled), unless something already did. */
async function recordStalled(o: StartWorkerOptions, runId: string, message: string): Promise<void> {
  const run = await o.store.get(runId).catch(() => null);
  const reason = `the worker running it stopped (${run?.workerId ?? 'unknown worker'}; ${message}); its sandbox is removed by the reaper`;
  if (!(await recordEnded(o, runId, reason, 'worker_lost'))) return;
  // The dead worker wrote no files: its log so far and a report go to the store from here.
  const tenant = run?.tenant ?? DEFAULT_TENANT;
  try {
    const files = await publishLostRun({
      store: o.artifacts, runs: o.store, tenant, runId, scratchDir: resolve(o.config.CORRAL_DATA_DIR),
      reason, at: new Date(o.clock()), maxLogBytes: o.config.CORRAL_LOG_MAX_BYTES, maxEvents: o.config.CORRAL_LOG_MAX_EVENTS,
    });
    if (files) {
      await o.store.update(runId, { logPath: runFileLocation(o.artifacts, tenant, runId, 'events.jsonl'), reportPath: runFileLocation(o.artifacts, tenant, runId, 'report.md'), logSeal: files.seal });
      o.log('files of a lost run written', { runId, files: files.stored });
    }
  } catch (err) {
    o.log('could not write the files of a lost run', { runId, error: (err as Error).message });
  }
}

/**
 * Records a run as ended with `error` when its job failed before the run could record an end itself
 * (never over a recorded end); true when this call ended it. `fence`: the job's (EndGuard) — the end
 * lands only while that attempt still holds the job; absent only for a job whose worker died.
 */
export async function recordEnded(o: Pick<StartWorkerOptions, 'store' | 'clock' | 'log'>, runId: string, reason: string, code: ErrorCode = 'internal', fence?: EndGuard): Promise<boolean> {
  try {
    return await o.store.end(runId, 'error', reason, new Date(o.clock()), fence, code);
  } catch (err) {
    o.log('could not record the end of a run', { runId, reason, error: (err as Error).message });
    return false;
  }
}

export interface StartWorkerOptions extends RunProcessorDeps {
  queueName: string;
  concurrency: number;
  /** How often to look for stalled jobs, and whether a stalled run is started again once. */
  stalledIntervalMs?: number;
  retryStalled?: boolean;
  lockMs?: number;
  /** Checked before a run starts; when it throws, the run waits (delayed job, backoff) instead of failing. */
  sandboxReady?: () => Promise<void>;
  dockerRetries?: number;
  dockerBackoffMs?: number;
  /** BullMQ connection (an ioredis client with maxRetriesPerRequest: null). */
  connection: ConnectionOptions;
  /** A Redis connection this worker may put in subscriber mode for cancel requests, and their channel (RedisRunStore.cancelChannel). */
  subscriber: Redis;
  cancelChannel: string;
  /** Adds sub-runs as flow children of their parent's job; absent: runs cannot delegate. */
  flow?: FlowProducer;
}

export interface RunningWorker {
  /** The worker's main queue consumer (`concurrency` jobs at once). */
  worker: Worker;
  /** Run ids this worker is executing now (parked ones included). */
  active: ReadonlySet<string>;
  /** The worker's sandbox slots (parked runs hold none). */
  slots: WorkerSlots;
  /**
   * Stops taking jobs, lets running runs finish for `graceMs`, then cancels them (reason "shutdown";
   * they end `cancelled` with their sandboxes removed) and waits for that clean-up.
   */
  close(graceMs?: number): Promise<void>;
}

export async function startWorker(o: StartWorkerOptions): Promise<RunningWorker> {
  const active = new Set<string>();
  /** Which consumer holds each active run's job (cancel goes to it). */
  const holder = new Map<string, Worker>();
  let closing = false;
  // Parking: each parked run frees its slot, and one more consumer (concurrency 1) takes a job for it;
  // when a parked run has its slot again, the newest extra consumer stops taking jobs (it finishes
  // the one it holds). So the worker holds at most `concurrency` + parked jobs, and runs at most
  // `concurrency` of them.
  const relief: Worker[] = [];
  const retiring = new Set<Worker>();
  const slots = new WorkerSlots(o.concurrency, (parked) => {
    while (!closing && relief.length < parked) relief.push(consumer(1));
    while (relief.length > parked) {
      const r = relief.pop()!;
      retiring.add(r);
      void r.close().catch((err: Error) => o.log('worker error', { error: err.message })).finally(() => retiring.delete(r));
    }
  });

  // A job is failed for stalling only once its counter passed this (BullMQ's deferred failure).
  const maxStalledCount = o.retryStalled ? 1 : 0;
  const consumer = (concurrency: number): Worker<unknown, RunSummary> => {
    const w: Worker<unknown, RunSummary> = new Worker<unknown, RunSummary>(
      o.queueName,
      recordingEnds(o, async (job, token, signal) => {
        const id = job.id ?? '';
        await checkEnvelope(o, job, token);
        if (o.sandboxReady) await waitForDocker(o, job, token);
        const lease = slots.lease();
        active.add(id);
        holder.set(id, w);
        try {
          await lease.acquire(signal);
          const port = o.flow && token ? flowJobPort(o.flow, o.queueName, job, token) : undefined;
          const lock = jobLock(job, token);
          return await processRun(job.data, signal ?? new AbortController().signal, o, {
            attempt: job.attemptsStarted, crashedBefore: job.stalledCounter > 0, lease, queuedAt: job.timestamp, ...(typeof lock === 'object' ? lock : {}),
          }, port);
        } catch (err) {
          if (err instanceof RunSuspended) throw new WaitingChildrenError();
          if (err instanceof CorralError) throw JobFailure.from(err);
          throw err;
        } finally {
          lease.release();
          active.delete(id);
          if (holder.get(id) === w) holder.delete(id);
        }
      }),
      {
        connection: o.connection, concurrency, autorun: true,
        maxStalledCount, stalledInterval: o.stalledIntervalMs ?? 30_000, lockDuration: o.lockMs ?? 30_000,
      },
    );
    w.on('failed', (job, err) => {
      const stalled = !!job && job.stalledCounter > maxStalledCount;
      const code = err instanceof JobFailure ? err.code : undefined;
      o.log('job failed', { jobId: job?.id, reason: err.message, ...(code ? { code } : {}), ...(stalled ? { stalled: job.stalledCounter } : {}) });
      if (!job?.id) return;
      // Not claimed: another attempt owns the run (or it has ended); its end is not this job's to write.
      if (err instanceof JobFailure && err.cause instanceof CorralError && err.cause.details?.notClaimed) return;
      // A stalled job was failed by whichever worker noticed; the dead worker never recorded an end.
      // (Every other end for good was recorded by its attempt, under the job's lock: recordingEnds.)
      if (stalled) void recordStalled(o, job.id, err.message);
    });
    w.on('error', (err) => o.log('worker error', { error: err.message }));
    return w;
  };
  const worker = consumer(o.concurrency);
  const consumers = () => [worker, ...relief, ...retiring];

  await o.subscriber.subscribe(o.cancelChannel);
  o.subscriber.on('message', (channel: string, runId: string) => {
    const w = channel === o.cancelChannel && active.has(runId) ? holder.get(runId) : undefined;
    if (w) {
      o.log('cancelling run', { runId });
      w.cancelJob(runId, 'requested through the API');
    }
  });
  await worker.waitUntilReady();

  return {
    worker,
    active,
    slots,
    async close(graceMs = 0) {
      closing = true;
      // Not awaited: with Redis away it would never answer, and the grace below must start now.
      void o.subscriber.unsubscribe(o.cancelChannel).catch(() => undefined);
      const all = consumers();
      const closed = Promise.all(all.map((w) => w.close()));
      const timer = setTimeout(() => {
        if (active.size) o.log('shutdown grace over: cancelling running runs', { runs: [...active] });
        for (const w of all) w.cancelAllJobs('shutdown');
      }, graceMs);
      try {
        await closed;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}
