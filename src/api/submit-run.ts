/**
 * Submitting a run: everything a body must pass before a job exists (the RunSpec schema, then
 * admitSpec — the same admission the worker applies to every job — then a replayOf run of the same
 * tenant that has model turns), then the idempotency key, then the tenant's
 * limits, then the run record and the job. Nothing malformed reaches a worker.
 */
import type { Queue } from 'bullmq';
import type { Config } from '../config';
import type { Environment } from '../domain/environment';
import { CorralError, InvalidInputError, StoreUnavailableError, codeOf } from '../domain/errors';
import { NotDurableError } from '../queue/durability';
import { admitSpec, type AdmissionContext, type Admitted, type UploadLookup } from '../domain/admit-spec';
import { RunSpec } from '../domain/run-spec';
import { hashJson, type IdempotencyStore } from '../queue/idempotency';
import { enqueueRun } from '../queue/run-queue';
import type { RunStore } from '../queue/run-store';
import type { TenantQuota } from '../queue/tenant-quota';
import { toolsFor } from '../tools/registry';
import { HttpError, parseInput } from './http-errors';
import { runLinks } from './run-links';
import type { SubmitTrace } from '../domain/run-trace';

export interface SubmitDeps {
  config: Config;
  store: RunStore;
  queue: Queue;
  quota: TenantQuota;
  idempotency: IdempotencyStore;
  newRunId: () => string;
  clock: () => number;
  policyNames: readonly string[];
  environments?: ReadonlyMap<string, Environment>;
  /** Uploaded workspaces: a spec naming workspace.id is checked against them. */
  uploads?: UploadLookup;
}

export interface Submitted {
  status: 200 | 201;
  body: { id: string; status: string; links: ReturnType<typeof runLinks>; idempotentReplay?: true; traceId?: string };
}

/** The submission's trace: the job carries its context, the record its trace id. */
export type SubmitTraceRef = Pick<SubmitTrace, 'traceparent' | 'traceId'>;

/**
 * A run can be replayed only once it has ended and only if it got at least one model answer: its
 * recorded turns are what a replay plays back. (A run cancelled before it started, or one whose first
 * model call failed, has none — the worker would refuse it too, and record why.)
 */
export async function checkReplaySource(deps: Pick<SubmitDeps, 'store'>, runId: string): Promise<void> {
  const run = await deps.store.get(runId);
  if (!run) throw new InvalidInputError(`body: replayOf: no run with id ${runId}`, 'replayOf');
  if (!run.finishedAt) throw new CorralError('conflict', `run ${runId} has not finished (${run.status}); only a finished run can be replayed`);
  if (run.usage && run.usage.llmCalls === 0) {
    throw new CorralError('conflict', `run ${runId} ended (${run.status}) before any model call, so it has no model turns to replay`);
  }
}

/** What admitSpec checks against on this server; `label` goes before each message ("body: "). */
export function admission(deps: Pick<SubmitDeps, 'config' | 'policyNames' | 'uploads' | 'environments'>, label: string, tenant: string): AdmissionContext {
  return {
    config: deps.config, policyNames: deps.policyNames, toolNames: toolsFor(deps.config).map((t) => t.name), label,
    tenant, ...(deps.uploads ? { uploads: deps.uploads } : {}), ...(deps.environments ? { environments: deps.environments } : {}),
  };
}

/** Parses and checks a body as a RunSpec of `tenant` (admitSpec, then its replayOf run); every failure is a 400 naming its field. */
export async function checkSpec(deps: SubmitDeps, body: unknown, tenant: string): Promise<RunSpec> {
  return (await admitBody(deps, body, tenant)).spec;
}

/** checkSpec, answering with what admission resolved (the upload a workspace.id names, the git remote): what a plan shows. */
export async function admitBody(deps: SubmitDeps, body: unknown, tenant: string): Promise<Admitted> {
  const spec = parseInput(RunSpec, body, 'body');
  const admitted = await admitSpec(spec, admission(deps, 'body: ', tenant));
  if (spec.replayOf) {
    if ((await deps.store.tenantOf(spec.replayOf)) !== tenant) throw new InvalidInputError(`body: replayOf: no run with id ${spec.replayOf}`, 'replayOf');
    await checkReplaySource(deps, spec.replayOf);
  }
  return admitted;
}

/**
 * How long a submission can take, at most: its Redis commands are bounded by
 * CORRAL_REDIS_COMMAND_TIMEOUT_MS, its WAIT by CORRAL_REDIS_DURABLE_TIMEOUT_MS. A key older than this
 * with no run has no request still making it.
 */
function remakeAfterMs(config: Config): number {
  return 2 * config.CORRAL_REDIS_COMMAND_TIMEOUT_MS + config.CORRAL_REDIS_DURABLE_TIMEOUT_MS + 2000;
}

/**
 * Creates a run of `tenant` for a checked spec. With an idempotency key, a repeat of an earlier
 * request returns that request's run (200), and the same key with a different spec is a 409.
 */
export async function submitRun(deps: SubmitDeps, tenant: string, spec: RunSpec, idempotencyKey?: string, trace?: SubmitTraceRef): Promise<Submitted> {
  const id = deps.newRunId();
  if (idempotencyKey !== undefined) {
    const r = await deps.idempotency.reserve(tenant, idempotencyKey, hashJson(spec), id, deps.config.CORRAL_IDEMPOTENCY_TTL_S, deps.clock());
    if (r.kind === 'mismatch') {
      throw new CorralError('conflict', `Idempotency-Key was already used with a different body (for run ${r.runId}); use a new key for a different run`);
    }
    if (r.kind === 'existing') {
      // The key's first request may still be making the run (a concurrent duplicate): wait for its
      // record, at most as long as a submission can take.
      const bound = remakeAfterMs(deps.config);
      let run = await deps.store.get(r.runId);
      const polls = r.unconfirmed || r.at === undefined ? 0 : Math.ceil(Math.max(0, bound - (deps.clock() - r.at)) / 100);
      for (let i = 0; !run && i < polls; i++) {
        await new Promise((res) => setTimeout(res, 100));
        run = await deps.store.get(r.runId);
      }
      if (run) {
        // The earlier request may have failed between the record and the job (a failover): a run still
        // queued is queued again — its job id is its run id, so a job that exists is left as it is.
        if (run.status === 'queued') await deps.store.durable(() => enqueueRun(deps.queue, r.runId, spec, tenant));
        return { status: 200, body: { id: r.runId, status: run.status, links: runLinks(r.runId), idempotentReplay: true } };
      }
      // A key from before keys carried their time: as before, its run is reported queued.
      if (r.at === undefined && !r.unconfirmed) return { status: 200, body: { id: r.runId, status: 'queued', links: runLinks(r.runId), idempotentReplay: true } };
      // No run, and no request is making it any more: the first was answered 503 (unconfirmed) and a
      // failover lost the run. It is made now under the id the key names, by one request only.
      if (!(await deps.idempotency.claimRemake(tenant, idempotencyKey, r.runId, Math.ceil(bound / 1000)))) {
        throw new StoreUnavailableError(`the run for this Idempotency-Key (${r.runId}) is being created by another request; try again shortly with the same key`);
      }
      try {
        await createRun(deps, tenant, r.runId, spec, trace);
      } catch (err) {
        await deps.idempotency.releaseRemake(tenant, idempotencyKey).catch(() => undefined);
        throw err;
      }
      return { status: 201, body: { id: r.runId, status: 'queued', links: runLinks(r.runId), ...(trace?.traceId ? { traceId: trace.traceId } : {}) } };
    }
  }
  try {
    await createRun(deps, tenant, id, spec, trace);
  } catch (err) {
    // Not confirmed by a replica: the run may exist (or appear once a replica has it), so the key keeps
    // naming it — a retry with the same key returns it, or makes it if a failover lost it.
    if (idempotencyKey !== undefined) {
      if (err instanceof NotDurableError) await deps.idempotency.markUnconfirmed(tenant, idempotencyKey, id).catch(() => undefined);
      else await deps.idempotency.release(tenant, idempotencyKey, id).catch(() => undefined);
    }
    throw err;
  }
  return { status: 201, body: { id, status: 'queued', links: runLinks(id), ...(trace?.traceId ? { traceId: trace.traceId } : {}) } };
}

/** The tenant's limits, then the record and the job; a limit hit is a 429 saying which one. */
export async function createRun(deps: SubmitDeps, tenant: string, id: string, spec: RunSpec, trace?: SubmitTraceRef): Promise<void> {
  const now = deps.clock();
  const rate = await deps.quota.takeSubmit(tenant, deps.config.CORRAL_TENANT_SUBMITS_PER_MIN, id, now);
  if (!rate.ok) throw tooMany(rate);
  const isFinished = async (runId: string) => {
    const run = await deps.store.get(runId);
    return run ? !!run.finishedAt : null;
  };
  const active = await deps.quota.claimActive(tenant, id, deps.config.CORRAL_TENANT_MAX_ACTIVE_RUNS, now, isFinished);
  if (!active.ok) {
    await deps.quota.returnSubmit(tenant, id);
    throw tooMany(active);
  }
  // The record and the job, confirmed by the replicas (CORRAL_REDIS_DURABLE_REPLICAS) before the 201:
  // the store and the queue share the API's connection, so one WAIT covers both.
  let created = false;
  try {
    await deps.store.durable(async () => {
      await deps.store.create(id, spec, new Date(now), tenant);
      created = true;
      if (trace?.traceId) await deps.store.update(id, { traceId: trace.traceId });
      await enqueueRun(deps.queue, id, spec, tenant, trace?.traceparent);
    });
  } catch (err) {
    if (err instanceof NotDurableError) {
      // Unconfirmed, the run may still exist: its active slot stays claimed (pruned once it has ended).
      throw new NotDurableError(`the run was written but Redis could not confirm it is safe from a failover (${err.message}); try again shortly — with the same Idempotency-Key you get this run if it exists, or it is made`, err.result, { cause: err });
    }
    // Redis failed between the writes (it may still be away): the record ends (endUnqueued) and its
    // active slot is given back, both best effort.
    await deps.quota.releaseActive(tenant, id).catch(() => undefined);
    if (created) await endUnqueued(deps, id, err);
    throw err;
  }
}

/**
 * A record whose job could not be added would show `queued` forever: it ends `error` with what broke
 * (a Redis outage: store_unavailable). Only while no worker has claimed it — an add whose reply was
 * lost may still have reached the queue, and then its worker refuses a run that has already ended.
 * If the store is away too, the end cannot be written; the caller's error is what it gets either way.
 */
async function endUnqueued(deps: Pick<SubmitDeps, 'store' | 'clock'>, id: string, err: unknown): Promise<void> {
  const reason = `the run could not be queued: ${(err as Error).message}`.slice(0, 1000);
  await deps.store.end(id, 'error', reason, new Date(deps.clock()), 'unclaimed', codeOf(err)).catch(() => false);
}

function tooMany(v: { limit: string; max: number; retryAfterS: number; message: string }): HttpError {
  return new HttpError(429, 'rate_limited', v.message, { 'retry-after': String(v.retryAfterS) }, { limit: v.limit, max: v.max, retryAfterS: v.retryAfterS });
}
