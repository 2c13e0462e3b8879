/**
 * Fires schedules: a BullMQ worker on the schedules queue, run by every API process (BullMQ hands each
 * firing to exactly one of them). A firing renders the schedule's template with its parameters and
 * submits it like any run of the schedule's tenant — every submission check and the tenant's limits
 * apply. Whatever stops it (the schedule deleted meanwhile, the template gone from this server, a
 * limit) makes no run; the reason is recorded on the schedule (`lastError`) and logged, never thrown
 * into a retry loop.
 */
import { Worker, type ConnectionOptions } from 'bullmq';
import type { ApiDeps } from './api-deps';
import { SCHEDULE_JOB_NAME, scheduleQueueName, type ScheduleJob } from '../queue/schedule-store';
import { scheduledBody } from './schedule-routes';
import { checkSpec, createRun } from './submit-run';

export type ScheduleLog = (msg: string, fields?: Record<string, unknown>) => void;

/** One firing; resolves with the run id, or null when no run was made (the reason is recorded). */
export async function fireSchedule(deps: ApiDeps, scheduleId: string, log: ScheduleLog): Promise<string | null> {
  const store = deps.schedules!;
  const s = await store.get(scheduleId);
  if (!s) return null; // deleted between its firing and now
  const now = new Date(deps.clock());
  try {
    const t = (deps.templates ?? []).find((x) => x.name === s.template);
    if (!t) throw new Error(`this server has no template named ${s.template} any more`);
    const spec = await checkSpec(deps, scheduledBody(t, s), s.tenant);
    const id = deps.newRunId();
    await createRun(deps, s.tenant, id, spec);
    await store.recordFiring(s.id, { runId: id }, now);
    log('schedule fired', { schedule: s.id, tenant: s.tenant, run: id });
    return id;
  } catch (err) {
    const message = (err as Error).message;
    await store.recordFiring(s.id, { error: message }, now);
    log('schedule fired but made no run', { schedule: s.id, tenant: s.tenant, error: message, level: 'warn' });
    return null;
  }
}

export function startScheduleRunner(deps: ApiDeps, connection: ConnectionOptions, log: ScheduleLog): Worker<ScheduleJob> {
  const worker = new Worker<ScheduleJob>(
    scheduleQueueName(deps.config.CORRAL_QUEUE),
    async (job) => (job.name === SCHEDULE_JOB_NAME ? fireSchedule(deps, job.data.scheduleId, log) : null),
    { connection, concurrency: 4 },
  );
  worker.on('error', (err) => log('schedule runner error', { error: err.message }));
  return worker;
}
