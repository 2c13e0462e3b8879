/**
 * Sub-runs on the queue: a child run is a BullMQ flow child of its parent's job, on the same queue,
 * with the run contract's job name, options and id (= its run id). Children are added together
 * (FlowProducer.addBulk, one transaction) with `ignoreDependencyOnFailure`, so a child whose job
 * fails (its worker died, its data was refused) still lets the parent go on — it then reads the
 * failure instead of a result sheet. The parent yields with moveToWaitingChildren and its job is
 * moved back to the queue by BullMQ when the last child ends, to be picked up by any worker.
 */
import type { FlowProducer, Job } from 'bullmq';
import type { RunJob } from '../domain/run-spec';
import type { JobPort } from '../worker/subrun-start';
import { RUN_JOB_NAME, RUN_JOB_OPTIONS } from './run-queue';

/** Job keys ("bull:queue:run_…") → run ids. */
function byRunId<T>(o: Record<string, T>): Map<string, T> {
  return new Map(Object.entries(o).map(([k, v]) => [k.slice(k.lastIndexOf(':') + 1), v]));
}

export function flowJobPort(flow: FlowProducer, queueName: string, job: Job, token: string): JobPort {
  return {
    async addChildren(children: RunJob[]) {
      await flow.addBulk(children.map((data) => ({
        name: RUN_JOB_NAME,
        queueName,
        data,
        opts: { ...RUN_JOB_OPTIONS, jobId: data.runId, parent: { id: job.id!, queue: job.queueQualifiedName }, ignoreDependencyOnFailure: true },
      })));
    },
    waitForChildren: () => job.moveToWaitingChildren(token),
    async childResults() {
      return { values: byRunId(await job.getChildrenValues()), failures: byRunId(await job.getIgnoredChildrenFailures()) };
    },
  };
}
