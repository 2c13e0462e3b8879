/**
 * After a load run: did every run happen exactly once, and what did it leave behind?
 *   auditRuns       per run: run.started / run.finished in its events.jsonl, the worker named there,
 *                   its BullMQ job's state and attempts, and how many workers logged "run finished"
 *   auditRedis      every key the runs and the queue left, each classified as expected-retained or
 *                   not (see EXPECTED below), with TTLs
 *   waitFinished    polls the run hashes (one pipeline per round) until every run has finishedAt
 * No assertions here: the load test asserts on these values, bench/ reports them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Queue } from 'bullmq';
import type Docker from 'dockerode';
import type { Redis } from 'ioredis';
import type { LoadWorker } from './load-stack';

const PREFIX = 'corral';
/** The retained-key class of a tenant's active-run set (see auditRedis). */
export const TENANT_ACTIVE = 'tenant active-run set (no TTL; finished runs pruned on the next submission)';

export interface RunAudit {
  id: string;
  /** The run hash's status (succeeded, error, …). */
  status: string | null;
  started: number;
  finished: number;
  outcome: string | null;
  /** workerId of every run.started event in its log. */
  workerIds: string[];
  jobState: string;
  attemptsMade: number | null;
  attemptsStarted: number | null;
  /** How many "run finished" log records for this run, over all workers. */
  finishedLogs: number;
}

export interface RunsAudit {
  runs: RunAudit[];
  /** Runs that did not start once, finish once (succeeded), on a known worker, with one completed attempt. */
  notOnce: RunAudit[];
  /** Runs finished per worker id (from the logs). */
  perWorker: Record<string, number>;
}

function events(dataDir: string, id: string): Array<Record<string, unknown>> {
  const p = join(dataDir, 'runs', id, 'events.jsonl');
  if (!existsSync(p)) return [];
  return readFileSync(p, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
}

export async function auditRuns(o: { ids: readonly string[]; dataDir: string; queue: Queue; redis: Redis; workers: readonly LoadWorker[] }): Promise<RunsAudit> {
  const finishedBy = new Map<string, string[]>();
  for (const w of o.workers) {
    for (const r of w.records()) {
      if (r.msg === 'run finished' && typeof r.runId === 'string') finishedBy.set(r.runId, [...(finishedBy.get(r.runId) ?? []), w.id]);
    }
  }
  const known = new Set(o.workers.map((w) => w.id));
  const runs: RunAudit[] = [];
  for (const id of o.ids) {
    const ev = events(o.dataDir, id);
    const starts = ev.filter((e) => e.type === 'run.started');
    const finish = ev.filter((e) => e.type === 'run.finished');
    const job = await o.queue.getJob(id);
    runs.push({
      id,
      status: await o.redis.hget(`${PREFIX}:run:${id}`, 'status'),
      started: starts.length,
      finished: finish.length,
      outcome: (finish[0]?.outcome as string | undefined) ?? null,
      workerIds: starts.map((e) => String(e.workerId)),
      jobState: job ? await job.getState() : 'missing',
      attemptsMade: job?.attemptsMade ?? null,
      attemptsStarted: job?.attemptsStarted ?? null,
      finishedLogs: finishedBy.get(id)?.length ?? 0,
    });
  }
  const notOnce = runs.filter((r) => !(r.started === 1 && r.finished === 1 && r.outcome === 'succeeded' && r.status === 'succeeded'
    && r.workerIds.length === 1 && known.has(r.workerIds[0]!) && r.jobState === 'completed' && r.attemptsMade === 1 && r.finishedLogs === 1));
  const perWorker: Record<string, number> = Object.fromEntries(o.workers.map((w) => [w.id, 0]));
  for (const r of runs) for (const w of r.workerIds) perWorker[w] = (perWorker[w] ?? 0) + 1;
  return { runs, notOnce, perWorker };
}

/**
 * Polls until every run is settled: its hash has finishedAt, its BullMQ job has left active (the
 * worker marks the job completed a moment after it writes finishedAt), and, when workers are
 * given, a worker has logged "run finished" for it. Returns the ids still unsettled at the deadline.
 */
export async function waitFinished(redis: Redis, ids: readonly string[], timeoutMs: number, pollMs = 250, settle?: { queue: Queue; workers?: readonly LoadWorker[] }): Promise<string[]> {
  let left = [...ids];
  const end = Date.now() + timeoutMs;
  while (left.length && Date.now() < end) {
    const pipe = redis.pipeline();
    for (const id of left) pipe.hget(`${PREFIX}:run:${id}`, 'finishedAt');
    const res = (await pipe.exec()) ?? [];
    left = left.filter((_, i) => !res[i]?.[1]);
    if (settle) {
      const logged = new Set<string>();
      for (const w of settle.workers ?? []) for (const r of w.records()) if (r.msg === 'run finished' && typeof r.runId === 'string') logged.add(r.runId);
      const still: string[] = [];
      for (const id of ids) {
        if (left.includes(id)) { still.push(id); continue; }
        const state = await settle.queue.getJobState(id);
        if (state !== 'completed' && state !== 'failed') still.push(id);
        else if (settle.workers && !logged.has(id)) still.push(id);
      }
      left = still;
    }
    if (left.length) await new Promise((r) => setTimeout(r, pollMs));
  }
  return left;
}

export interface KeyInfo {
  key: string;
  type: string;
  /** Seconds; -1 = no expiry. */
  ttl: number;
  /** Elements (hash fields, list/zset/stream entries); 1 for a string. */
  size: number;
}

export interface RedisAudit {
  /** Keys expected to stay after the runs, by the reason they stay. */
  retained: Record<string, KeyInfo[]>;
  /** Keys that should not be there (a leak or stuck work), each with why. */
  unexpected: Array<KeyInfo & { why: string }>;
  /** Run keys (corral:run:{id}*) of these runs without a TTL: never expire. */
  runKeysWithoutTtl: KeyInfo[];
  /** Keys shared by every queue on this Redis (indexes, metrics); reported, not judged per queue. */
  shared: KeyInfo[];
}

async function info(redis: Redis, key: string): Promise<KeyInfo> {
  const type = await redis.type(key);
  const ttl = await redis.ttl(key);
  const size = type === 'hash' ? await redis.hlen(key) : type === 'zset' ? await redis.zcard(key) : type === 'list' ? await redis.llen(key)
    : type === 'stream' ? await redis.xlen(key) : type === 'set' ? await redis.scard(key) : 1;
  return { key, type, ttl, size };
}

async function scan(redis: Redis, pattern: string): Promise<string[]> {
  const keys: string[] = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    cursor = next;
    keys.push(...batch);
  } while (cursor !== '0');
  return keys;
}

/**
 * Expected after every run finished (anything else under these prefixes is unexpected):
 *   corral:run:{id}, corral:run:{id}:events, corral:run:{id}:usage   the run's record, event stream and
 *       live usage: kept for retention (FINISHED_TTL_S, 14 days), so each must carry a TTL
 *   bull:{queue}:{id}          the completed job: kept by removeOnComplete (age 7 d / count 10 000); BullMQ
 *       trims these when later jobs complete, so they have no Redis TTL
 *   bull:{queue}:completed     the completed set (same retention); :meta, :id, :events (a stream BullMQ caps
 *       at ~10 000 entries), :stalled-check (has a TTL) — per-queue bookkeeping
 *   corral:q:{queue}:tenant:{t}:submits   per-tenant submission log (sliding window): with a TTL
 *   corral:q:{queue}:tenant:{t}:active    per-tenant claimed active-run slots: no TTL, and it still holds
 *       the finished runs until the tenant's next submission prunes them; accepted only when every
 *       member is one of these runs (the load test then checks that the next submission prunes them)
 * Unexpected: jobs still waiting/active/delayed/failed, job locks, approval answer lists, a run key
 * without TTL, a job hash for an id that is not one of the runs, any other key under the prefixes.
 * With `all` (a Redis of our own), every other key is reported too (as unexpected unless shared).
 */
export async function auditRedis(redis: Redis, o: { queue: string; runIds: readonly string[]; all?: boolean }): Promise<RedisAudit> {
  const ids = new Set(o.runIds);
  const retained: Record<string, KeyInfo[]> = {};
  const unexpected: RedisAudit['unexpected'] = [];
  const shared: KeyInfo[] = [];
  const keep = (why: string, k: KeyInfo) => (retained[why] ??= []).push(k);
  const bad = (why: string, k: KeyInfo) => unexpected.push({ ...k, why });
  const seen = new Set<string>();

  const runKeys: KeyInfo[] = [];
  for (const id of ids) {
    for (const key of await scan(redis, `${PREFIX}:run:${id}*`)) {
      const k = await info(redis, key);
      seen.add(key);
      runKeys.push(k);
      const rest = key.slice(`${PREFIX}:run:${id}`.length);
      if (rest === '' || rest === ':events' || rest === ':usage') keep(`run record/stream/usage (TTL ${rest || 'hash'})`, k);
      else bad(rest.startsWith(':answer:') ? 'approval answer list left behind' : 'unknown per-run key', k);
    }
  }
  const runKeysWithoutTtl = runKeys.filter((k) => k.ttl < 0);

  const q = `bull:${o.queue}:`;
  for (const key of await scan(redis, `${q}*`)) {
    seen.add(key);
    const k = await info(redis, key);
    const rest = key.slice(q.length);
    if (ids.has(rest)) keep('BullMQ completed job hash (removeOnComplete retention)', k);
    else if (rest === 'completed') keep('BullMQ completed set', k);
    else if (['meta', 'id', 'events', 'stalled-check'].includes(rest)) keep('BullMQ queue bookkeeping', k);
    else if (['wait', 'active', 'delayed', 'prioritized', 'paused', 'waiting-children', 'failed', 'marker', 'pc', 'stalled'].includes(rest)) {
      if (k.size > 0 && !(rest === 'pc' || rest === 'marker')) bad(`jobs left in "${rest}"`, k);
      else keep('BullMQ empty/transient structure', k);
    } else if (rest.endsWith(':lock')) bad('job lock left behind', k);
    else if (rest.endsWith(':logs')) keep('BullMQ job log', k);
    else bad(ids.has(rest.split(':')[0]!) ? 'unknown job sub-key' : 'job/key not from these runs', k);
  }

  for (const key of await scan(redis, `${PREFIX}:q:${o.queue}:*`)) {
    seen.add(key);
    const k = await info(redis, key);
    if (k.ttl > 0) keep('per-queue tenant quota bookkeeping (with TTL)', k);
    else if (/:tenant:[^:]+:active$/.test(key) && k.type === 'zset') {
      // Claimed active-run slots: no TTL, pruned of finished runs on the tenant's next submission.
      const members = await redis.zrange(key, 0, '-1');
      if (members.every((m) => ids.has(m))) keep(TENANT_ACTIVE, k);
      else bad(`tenant active-run set holds ids that are not these runs: ${members.filter((m) => !ids.has(m)).slice(0, 5).join(', ')}`, k);
    } else bad('per-queue key without TTL', k);
  }

  if (o.all) {
    for (const key of await scan(redis, '*')) {
      if (seen.has(key)) continue;
      const k = await info(redis, key);
      if (/^corral:(runs|metrics|tenant:[^:]+:runs)$/.test(key)) shared.push(k);
      else if (key.startsWith(`${PREFIX}:idem:`) && k.ttl > 0) keep('idempotency keys (with TTL)', k);
      else bad('key outside the expected set', k);
    }
  } else {
    for (const key of ['corral:runs', 'corral:metrics', 'corral:tenant:default:runs']) {
      if (await redis.exists(key)) shared.push(await info(redis, key));
    }
  }
  return { retained, unexpected, runKeysWithoutTtl, shared };
}

/** Containers (running or not) labelled with this queue: what the workers left. */
export async function containersOfQueue(docker: Docker, queue: string): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: { label: [`corral.queue=${queue}`] } });
}

/** Summary counts of a RedisAudit for printing. */
export function summariseRedis(a: RedisAudit): Record<string, unknown> {
  return {
    retained: Object.fromEntries(Object.entries(a.retained).map(([why, ks]) => [why, ks.length])),
    unexpected: a.unexpected.map((k) => `${k.key} (${k.type}, ttl ${k.ttl}, size ${k.size}): ${k.why}`),
    run_keys_without_ttl: a.runKeysWithoutTtl.map((k) => k.key),
    shared: a.shared.map((k) => `${k.key} (${k.type}, ttl ${k.ttl}, size ${k.size})`),
  };
}
