/**
 * Schedules: a template run on a cron pattern, unattended (asks are refused, never waited on). A
 * schedule belongs to the tenant that made it; each run it makes is labelled `schedule: ID` (and
 * `template: NAME`). The pattern is checked here: 5 fields (minute … weekday) or 6 with seconds, an
 * IANA time zone, and no two firings closer than the operator's minimum interval.
 */
import { CronExpressionParser } from 'cron-parser';
import { z } from 'zod';
import { InvalidInputError } from './errors';
import { TEMPLATE_NAME } from './run-template';

export const ScheduleBody = z.strictObject({
  cron: z.string().trim().min(1, 'must not be empty').max(100).meta({ description: 'a cron pattern: "m h dom mon dow" (or with a leading seconds field when the server allows such short intervals)' }),
  timezone: z.string().max(64).default('UTC').meta({ description: 'IANA time zone the pattern is read in (default UTC)' }),
  template: z.string().regex(TEMPLATE_NAME, 'a template name: lower case letters, digits and -'),
  params: z.record(z.string().max(64), z.string()).default({}),
  name: z.string().trim().min(1).max(100).optional().meta({ description: 'a name for people; shown in lists' }),
});
export type ScheduleBody = z.infer<typeof ScheduleBody>;

export interface Schedule extends ScheduleBody {
  id: string;
  tenant: string;
  createdAt: string;
  /** The next firing, as the pattern says (the scheduler's own clock decides). */
  next?: string;
  lastRun?: { id: string; at: string };
  lastError?: { message: string; at: string };
  runs: number;
}

/** A stored schedule record, checked when read back (a corrupt record is an error naming it, never a cast). */
export const StoredSchedule = z.object({
  cron: z.string(), timezone: z.string(), template: z.string(), params: z.record(z.string(), z.string()), name: z.string().optional(),
  id: z.string(), tenant: z.string(), createdAt: z.string(), runs: z.number().int().nonnegative(),
  lastRun: z.object({ id: z.string(), at: z.string() }).optional(),
  lastError: z.object({ message: z.string(), at: z.string() }).optional(),
});

/**
 * The next firings of a pattern; InvalidInputError naming `cron` or `timezone` when it is not a pattern,
 * the zone is unknown, or two firings are closer than `minIntervalS`.
 */
export function checkCron(cron: string, timezone: string, minIntervalS: number, now = new Date()): Date[] {
  try {
    new Intl.DateTimeFormat('en', { timeZone: timezone });
  } catch {
    throw new InvalidInputError(`timezone: "${timezone}" is not an IANA time zone (e.g. UTC, Europe/Berlin)`, 'timezone');
  }
  const fields = cron.split(/\s+/).length;
  if (fields !== 5 && fields !== 6) throw new InvalidInputError(`cron: "${cron}" has ${fields} fields; give 5 (minute hour day-of-month month day-of-week) or 6 (seconds first)`, 'cron');
  let next: Date[];
  try {
    const e = CronExpressionParser.parse(cron, { tz: timezone, currentDate: now });
    next = Array.from({ length: 6 }, () => e.next().toDate());
  } catch (err) {
    throw new InvalidInputError(`cron: "${cron}" is not a cron pattern (${(err as Error).message})`, 'cron', undefined, { cause: err });
  }
  for (let i = 1; i < next.length; i++) {
    const gap = (next[i]!.getTime() - next[i - 1]!.getTime()) / 1000;
    if (gap < minIntervalS) throw new InvalidInputError(`cron: "${cron}" fires every ${gap} s; this server allows schedules at most every ${minIntervalS} s (CORRAL_SCHEDULE_MIN_INTERVAL_S)`, 'cron');
  }
  return next;
}
