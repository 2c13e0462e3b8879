/**
 * Schedules in Redis, fired by BullMQ job schedulers. The record (`PREFIX:schedule:ID`, a JSON string)
 * says what to run; the tenant's set (`PREFIX:schedules:TENANT`) lists its schedules; the firing itself
 * is a BullMQ job scheduler on the schedules queue (`QUEUE-schedules`) with the same id, so it lives in
 * Redis and outlives every process: whichever API process runs the schedule runner takes the next job.
 * Deleting removes the scheduler first, then the record (a firing that races it finds no record and
 * does nothing).
 */
import { Queue, type ConnectionOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { StoredSchedule, type Schedule } from '../domain/schedule';
import { parseStored } from './stored-json';

export const SCHEDULE_JOB_NAME = 'scheduled-run';
export interface ScheduleJob { scheduleId: string }

export function scheduleQueueName(runQueue: string): string {
  return `${runQueue}-schedules`;
}

export class ScheduleStore {
  readonly queue: Queue<ScheduleJob>;

  constructor(
    private readonly redis: Redis,
    runQueue: string,
    connection: ConnectionOptions,
    private readonly prefix = 'corral',
  ) {
    this.queue = new Queue<ScheduleJob>(scheduleQueueName(runQueue), { connection });
  }

  private key(id: string): string {
    return `${this.prefix}:schedule:${id}`;
  }

  private tenantKey(tenant: string): string {
    return `${this.prefix}:schedules:${tenant}`;
  }

  async count(tenant: string): Promise<number> {
    return this.redis.scard(this.tenantKey(tenant));
  }

  /** Saves the record, then arms the scheduler (an armed scheduler always has its record). */
  async create(s: Schedule): Promise<void> {
    await this.redis.multi().set(this.key(s.id), JSON.stringify(s)).sadd(this.tenantKey(s.tenant), s.id).exec();
    await this.queue.upsertJobScheduler(s.id, { pattern: s.cron, tz: s.timezone }, { name: SCHEDULE_JOB_NAME, data: { scheduleId: s.id }, opts: { removeOnComplete: 100, removeOnFail: 100 } });
  }

  async get(id: string): Promise<Schedule | null> {
    const raw = await this.redis.get(this.key(id));
    if (!raw) return null;
    const s = parseStored(StoredSchedule, raw, `schedule record ${id}`) as Schedule;
    const sched = await this.queue.getJobScheduler(id).catch(() => undefined);
    return sched?.next ? { ...s, next: new Date(sched.next).toISOString() } : s;
  }

  async list(tenant: string): Promise<Schedule[]> {
    const ids = (await this.redis.smembers(this.tenantKey(tenant))).sort();
    const all = await Promise.all(ids.map((id) => this.get(id)));
    return all.filter((s): s is Schedule => s !== null).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
  }

  async remove(s: Schedule): Promise<void> {
    await this.queue.removeJobScheduler(s.id);
    await this.redis.multi().del(this.key(s.id)).srem(this.tenantKey(s.tenant), s.id).exec();
  }

  /** Records a firing's outcome on the record (if it still exists). */
  async recordFiring(id: string, outcome: { runId: string } | { error: string }, at: Date): Promise<void> {
    const raw = await this.redis.get(this.key(id));
    if (!raw) return;
    const s = parseStored(StoredSchedule, raw, `schedule record ${id}`) as Schedule;
    const next: Schedule = 'runId' in outcome
      ? { ...s, runs: s.runs + 1, lastRun: { id: outcome.runId, at: at.toISOString() } }
      : { ...s, lastError: { message: outcome.error.slice(0, 500), at: at.toISOString() } };
    await this.redis.set(this.key(id), JSON.stringify(next), 'XX');
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
