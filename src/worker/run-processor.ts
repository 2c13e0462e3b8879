/**
 * One queue job → one run: validate the job data, record the run as running, acquire its sandbox,
 * drive the agent loop, export the workspace, remove the sandbox, write report.md, record the outcome.
 * Every event goes to the run's JSONL log (data/runs/{id}/events.jsonl) and its Redis stream.
 *
 * Malformed job data fails that job with a reason (InvalidInputError → the worker makes it an
 * UnrecoverableError) and never reaches Docker. A run that ends `failed` or `cancelled` also fails
 * its job, after its log, report and artifacts are written and its sandbox is gone.
 */
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config';
import { admitSpec, type Admitted, type UploadLookup } from '../domain/admit-spec';
import { CorralError, InvalidInputError, codeForOutcome, describeZodIssues, type ErrorCode } from '../domain/errors';
import type { RunEvent, RunEventBody, RunOutcome, RunUsage } from '../domain/events';
import type { Environment } from '../domain/environment';
import { hasSetup, runSetup } from '../environments/setup-phase';
import { exportBundle } from '../git/bundle';
import type { SetupCache } from '../environments/setup-cache';
import { cloneWorkspace } from '../git/clone';
import { credentialFor, type GitCredential } from '../git/git-remote';
import { gitIdentity } from '../git/identity';
import type { Gate } from '../domain/gate';
import type { ProtectedMatcher, SecretMasker } from '../domain/effects';
import { sharedSecretPool } from '../policy/secret-scan-pool';
import { DEFAULT_PROTECTED_SET } from '../domain/protected-set';
import { EffectGuard } from '../run/effect-guard';
import { McpSession, mcpLimits } from '../mcp/mcp-session';
import type { Model } from '../domain/model';
import { isRunId } from '../domain/run-id';
import { RunJob, type RunBudgets, type RunSpec } from '../domain/run-spec';
import type { ResultSheet } from '../domain/subrun';
import type { EgressAttempt, EgressSummary, LeasedSandbox, SandboxProvider, WorkspaceExport } from '../domain/sandbox';
import type { ApprovalPort } from '../domain/approval-port';
import type { RunMetrics } from '../queue/run-metrics';
import { DEFAULT_TENANT, type EndGuard, type RunArtifact, type RunStore, type RunWorkspace } from '../queue/run-store';
import type { RunTree } from '../queue/run-tree';
import { EventRecorder } from '../report/event-recorder';
import { JsonlSink, chainEnd, readJsonl } from '../report/jsonl-sink';
import { logGenesis } from '../report/log-chain';
import type { LogSigner } from '../report/log-signature';
import { untracedRun, type RunTracing } from '../domain/run-trace';
import { finishLog } from './run-log-end';
import { buildReport } from '../report/report-markdown';
import { runAgentLoop, type DelegationResult, type Prices } from '../run/agent-loop';
import type { LoopState } from '../run/loop-state';
import { routingFor } from '../run/model-router';
import { renderMemory } from '../run/memory';
import { loadWorkspaceContext, renderWorkspaceContext } from '../run/workspace-context';
import { toolsFor } from '../tools/registry';
import { proposeMemory } from './memory-store';
import { publishOrMark, releaseRunDir } from './run-files';
import { runFileLocation, type ArtifactStore, type RunFileName } from '../artifacts/artifact-store';
import type { TenantMemory } from '../queue/redis-memory';
import { NEEDS_REVIEW_FILE, needsReviewLines, runWorkspace, workspaceChanges } from './export-summary';
import { RedisApprovalPort } from './redis-approval-port';
import type { SlotLease } from './slots';
import { DeltaPublisher } from './delta-publisher';
import { durably } from './durable-write';
import { EventStreamWriter } from './event-stream-writer';
import { startSubRuns, type JobPort } from './subrun-start';
import { childSeed, collectSubRunResults, makeResultSheet } from './subrun-results';
import { RESUME_NOTE, nextCheckpoint, parseSuspension, readCheckpoint, type Suspension } from './suspension';

export type WorkerLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface RunProcessorDeps {
  config: Config;
  sandboxes: SandboxProvider;
  store: RunStore;
  /** The model for a run (spec.model overrides the configured one). */
  modelFor: (spec: RunSpec) => Model | Promise<Model>;
  /** The policies this worker's gates have: a job naming another is refused before it runs. */
  policyNames: readonly string[];
  /** The environment catalogue; absent: only the built-in `default`. */
  environments?: ReadonlyMap<string, Environment>;
  /** Per-tenant git credentials (CORRAL_GIT_CREDENTIALS_FILE), used by the worker's clone only. */
  gitCredentials?: ReadonlyMap<string, GitCredential[]>;
  /** This host's cache of setup phases' results; absent: setup runs every time. */
  setupCache?: SetupCache;
  /** A gate for one run, asking humans through the given approval port. */
  gateFor: (approvals: ApprovalPort) => Gate;
  workerId: string;
  clock: () => number;
  log: WorkerLog;
  /** Aggregates each run's events into the metrics any API instance serves (and its live usage). */
  metrics?: RunMetrics;
  /** Sub-runs: parent/child records and suspensions (with a JobPort per job); absent: delegate is refused. */
  tree?: RunTree;
  newRunId?: () => string;
  /** Uploaded workspaces (PUT /v1/workspaces) on this host: a run naming workspace.id starts from one. */
  uploads?: UploadLookup;
  /** Where the run's files go at its end (the data dir, or an object store). */
  artifacts: ArtifactStore;
  /** Tenant memory (memory.key), shared by every worker on every host. */
  memory: TenantMemory;
  /** A policy's protected set (its built-in list and the operator's rules); absent: the built-in one. */
  protectedSetFor?: (policy: string) => ProtectedMatcher;
  /** Masks secrets in what goes to the transcript; absent: the process's shared scanner. */
  secrets?: SecretMasker;
  /** Signs each run log's final hash with the operator's key (CORRAL_LOG_SIGNING_KEY_FILE); absent: unsigned. */
  logSigner?: LogSigner;
  /** Traces runs (OpenTelemetry); absent: runs keep the trace id their job carried and make no spans. */
  tracing?: RunTracing;
}

export interface RunSummary {
  runId: string;
  outcome: RunOutcome;
  reason: string;
  finalAnswer: string | null;
  reportPath: string;
  logPath: string;
  /** A sub-run's result sheet: its job's return value, which its parent reads. */
  sheet?: ResultSheet;
  /** For an `error` end: the code of what broke (internal when it was not a CorralError). */
  errorCode?: ErrorCode;
}

/** The run gave up its slot to wait for its sub-runs: the worker moves its job to waiting-children. */
export class RunSuspended extends Error {
  constructor(readonly runId: string) {
    super(`run ${runId} waits for its sub-runs`);
  }
}

/** An end decided before the agent loop starts (a sub-run whose parent's time ran out). */
class EarlyEnd {
  constructor(readonly outcome: RunOutcome, readonly reason: string) {}
}


/**
 * Raised for a run that ended other than succeeded: its reason is the job's failure reason, its code
 * the class of the end (a budget → limit_exceeded, an error → the code of what broke), its cause the
 * error that ended it, if one did.
 */
export class RunEndedError extends CorralError {
  constructor(readonly summary: RunSummary, cause?: unknown) {
    super(codeForOutcome(summary.outcome, summary.errorCode), `run ${summary.outcome}: ${summary.reason}`, { outcome: summary.outcome }, cause === undefined ? undefined : { cause });
  }
}

/** "the run was cancelled (shutdown)" when the abort carries a reason. */
export function cancelReason(signal: AbortSignal): string {
  return typeof signal.reason === 'string' ? `the run was cancelled (${signal.reason})` : 'the run was cancelled';
}

/** What the workspace holds at the start (files only, at most 200), for the model's first message. */
async function listWorkspace(sandbox: LeasedSandbox, signal: AbortSignal): Promise<string[]> {
  const entries = await sandbox.listFiles('.', { maxEntries: 200, signal });
  return entries.filter((e) => e.type === 'file').map((e) => e.path.replace(/^\.\//, ''));
}

/** USD per million tokens for a model: its entry in CORRAL_MODEL_PRICES, else the default prices. */
export function pricesFor(config: Config, model: string): Prices {
  const p = config.CORRAL_MODEL_PRICES[model];
  return p ? { inputPerMtok: p.input, outputPerMtok: p.output } : { inputPerMtok: config.CORRAL_PRICE_INPUT_PER_MTOK, outputPerMtok: config.CORRAL_PRICE_OUTPUT_PER_MTOK };
}

/**
 * A job refused before it ran: its record (made if there is none) ends `error` with invalid_input and
 * the reason — under `guard` (the job's fence: only while this attempt holds the job; see EndGuard).
 */
export async function recordRefused(store: RunStore, runId: string, spec: Parameters<RunStore['ensure']>[1], reason: string, at: Date, tenant?: string, guard?: EndGuard): Promise<boolean> {
  await store.ensure(runId, spec, at, tenant);
  return store.end(runId, 'error', reason, at, guard, 'invalid_input');
}

/** An attempt's fence for an end it records before it claimed the run: its job's lock must still hold its token. */
export function jobFence(attempt: Pick<Attempt, 'fence' | 'lockKey'>): EndGuard | undefined {
  return attempt.fence === undefined ? undefined : { fence: attempt.fence, ...(attempt.lockKey !== undefined ? { lockKey: attempt.lockKey } : {}) };
}

/** Reads a run id out of job data that failed validation, so the failure can still be recorded. */
function salvageRunId(data: unknown): string | undefined {
  const id = (data as { runId?: unknown } | null)?.runId;
  return isRunId(id) ? id : undefined;
}

/** A summary from the run's egress path as the event that logs it. */
function egressEvent(s: EgressSummary): RunEventBody {
  if (s.kind === 'stats') return { type: 'egress.stats', ...s.stats };
  const { kind: _kind, ...rest } = s;
  return s.kind === 'aggregate' ? { ...(rest as Omit<typeof s, 'kind'>), type: 'egress.aggregate' } : { ...(rest as Omit<typeof s, 'kind'>), type: 'egress.proxy' };
}

export interface Attempt {
  /** 1 for the first start; more when a stalled run is started again. */
  attempt: number;
  /** An earlier attempt's worker died mid-run. */
  crashedBefore: boolean;
  /** The job's lock token: this attempt's writes to the run store land only while it owns the run. */
  fence?: string;
  /** The Redis key of the job's lock (BullMQ): the claim lands only while it holds `fence`. */
  lockKey?: string;
  /** This run's worker slot: given back while the run waits for a human (parking). */
  lease?: SlotLease;
  /** When the job was put on the queue (ms since the epoch): the trace's queue-wait span starts there. */
  queuedAt?: number;
}

export async function processRun(data: unknown, signal: AbortSignal, deps: RunProcessorDeps, attempt: Attempt = { attempt: 1, crashedBefore: false }, job?: JobPort): Promise<RunSummary> {
  const { config, store, clock, log, tree } = deps;
  const parsed = RunJob.safeParse(data);
  if (!parsed.success) {
    const reason = `malformed job data: ${describeZodIssues(parsed.error.issues).message}`;
    const runId = salvageRunId(data);
    if (runId) {
      await recordRefused(store, runId, { task: '(malformed job)' }, reason, new Date(clock()), undefined, jobFence(attempt));
    }
    throw new InvalidInputError(reason);
  }
  const { runId, spec, parent } = parsed.data;
  // A job id BullMQ no longer remembers (retention passed, queue cleaned) may arrive again: a run that
  // already ended is never executed twice.
  const previous = await store.get(runId);
  if (previous?.finishedAt) {
    throw new InvalidInputError(`run ${runId} already ended (${previous.status} at ${previous.finishedAt}); a run is executed once — submit a new run or replay this one`);
  }
  // Whose run it is (memory, uploads and every API route are per tenant): the tenant the API recorded;
  // for a job another producer wrote straight to the queue, the one its data names, else `default`.
  const recorded = await store.tenantOf(runId);
  if (recorded !== null && parsed.data.tenant !== undefined && parsed.data.tenant !== recorded) {
    // Never re-assign a run that exists: the record's tenant is who submitted it.
    throw new InvalidInputError(`job data: tenant "${parsed.data.tenant}" is not the tenant of run ${runId} ("${recorded}"); a job may not move a run to another tenant`, 'tenant');
  }
  const tenant = recorded ?? parsed.data.tenant ?? DEFAULT_TENANT;
  const unnamedTenant = recorded === null && parsed.data.tenant === undefined && !parent;
  const trace = (deps.tracing ?? { startRun: untracedRun }).startRun({
    runId, tenant, attempt: attempt.attempt, startedAt: clock(), resumed: deps.tracing ? !!(await tree?.loadSuspension(runId).catch(() => null)) : false, task: spec.task,
    ...(parsed.data.traceparent ? { traceparent: parsed.data.traceparent } : {}), ...(parsed.data.tracestate ? { tracestate: parsed.data.tracestate } : {}),
    ...(attempt.queuedAt !== undefined ? { queuedAt: attempt.queuedAt } : {}), ...(parent ? { parentRunId: parent.runId } : {}),
    ...(deps.tracing ? { toolNames: toolsFor(config).map((t) => t.name) } : {}),
  });
  if (unnamedTenant) log('a job put straight on the queue names no tenant: its run is tenant "default"\'s, which no token sees when auth is on (set data.tenant)', { runId });
  // The admission the API applies, again: a producer may have written this job straight to the queue,
  // or the server's configuration changed since it was submitted. Refused: nothing runs, the record says why.
  let admitted: Admitted;
  try {
    admitted = await trace.phase('admission', () => admitSpec(spec, {
      config, policyNames: deps.policyNames, toolNames: toolsFor(config).map((t) => t.name),
      tenant, ...(deps.uploads ? { uploads: deps.uploads } : {}), ...(deps.environments ? { environments: deps.environments } : {}),
    }));
  } catch (err) {
    trace.end({ outcome: 'error', errorCode: err instanceof CorralError ? err.code : 'internal' });
    if (!(err instanceof InvalidInputError)) throw err;
    const reason = `not admitted: ${err.message}`;
    await recordRefused(store, runId, spec, reason, new Date(clock()), tenant, jobFence(attempt));
    throw new InvalidInputError(reason, err.field, undefined, { cause: err });
  }
  const protectedSet = deps.protectedSetFor?.(spec.policy) ?? DEFAULT_PROTECTED_SET;
  const secrets = deps.secrets ?? sharedSecretPool();
  const runDir = resolve(config.CORRAL_DATA_DIR, 'runs', runId);
  mkdirSync(runDir, { recursive: true });
  const logPath = join(runDir, 'events.jsonl');
  const reportPath = join(runDir, 'report.md');
  // A run that waited for its sub-runs comes back here: its suspension record says where it stopped.
  let resumeFrom: Suspension | null = null;
  let prior: RunEvent[] = [];
  let priorChain: ReturnType<typeof chainEnd> = null;
  try {
    const text = tree ? await tree.loadSuspension(runId) : null;
    if (text) resumeFrom = parseSuspension(text, runId);
    if (resumeFrom && !job) throw new InvalidInputError('this worker has no queue access for sub-runs');
    if (resumeFrom && !existsSync(logPath)) throw new InvalidInputError(`the log of this run's first part is not in this worker's data dir (${logPath}); resuming a run needs workers that share CORRAL_DATA_DIR`);
    if (resumeFrom) {
      prior = readJsonl(logPath);
      priorChain = chainEnd(logPath);
    }
  } catch (err) {
    // Whatever broke keeps its class (a Redis outage is store_unavailable, not bad input); the end is
    // written only while this attempt still holds the job.
    const failure = CorralError.wrap(err, `cannot resume: ${(err as Error).message}`);
    trace.end({ outcome: 'error', errorCode: failure.code });
    await store.end(runId, 'error', failure.message, new Date(clock()), jobFence(attempt), failure.code)
      .catch((e: Error) => log('could not record that the run cannot resume', { runId, error: e.message }));
    throw failure;
  }
  const now = () => new Date(clock());
  const maxWaitMs = config.CORRAL_REDIS_DURABLE_WAIT_S * 1000;
  await store.ensure(runId, spec, now(), tenant);
  // The claim is confirmed by the replicas before anything runs: a claim a failover took back (with the
  // job's start) would let another worker take the job from the new primary and run it a second time.
  if (attempt.fence && !(await durably(() => store.claim(runId, attempt.fence!, attempt.lockKey), { store, log, runId, what: 'claim', maxWaitMs }))) {
    trace.end({ outcome: 'error', errorCode: 'conflict' });
    throw new CorralError('conflict', `run ${runId} was not claimed: another attempt holds its job, or it has ended`, { notClaimed: true });
  }
  // A run started again after a crash starts a fresh log; the crashed attempt's log is kept beside it.
  if (attempt.crashedBefore && !resumeFrom && existsSync(logPath)) renameSync(logPath, join(runDir, `events.attempt${attempt.attempt - 1}.jsonl`));

  const redisWrites: Promise<unknown>[] = [];
  // Writes fenced by this attempt's token: after another attempt claimed the run, they are discarded and logged.
  let staleLogged = false;
  const staleWrite = (what: string): false => {
    if (!staleLogged) log('stale write discarded: another attempt owns this run now', { runId, what, attempt: attempt.attempt });
    staleLogged = true;
    return false;
  };
  const update = async (u: Parameters<RunStore['update']>[1]): Promise<boolean> =>
    (await store.update(runId, u, attempt.fence)) || staleWrite(`update ${Object.keys(u).join(',')}`);
  const observe = deps.metrics?.observer(runId);
  let currentCall: string | null = null;
  /** The effect check of the current sandbox (one per leg). */
  let guard: EffectGuard | undefined;
  // The log's chain starts from the run id and the spec admitted here; a resumed run's goes on from its last line.
  const jsonl = new JsonlSink(logPath, { genesis: logGenesis(runId, spec), ...(priorChain ? { resume: priorChain } : {}) });
  let sandbox: LeasedSandbox | undefined;
  const deltas = config.CORRAL_MODEL_STREAM ? new DeltaPublisher({
    runId, now, maxDeltas: config.CORRAL_STREAM_MAX_DELTAS,
    publish: (d) => store.appendDelta(d, attempt.fence),
    onError: (err) => log('could not publish a live delta', { runId, error: err.message }),
  }) : undefined;
  // With a token, events go on the Redis log in order and without holes (event-stream-writer.ts).
  const stream = attempt.fence ? new EventStreamWriter({
    store, fence: attempt.fence, base: prior.reduce((m, e) => Math.max(m, e.seq), 0), events: () => recorder.events(),
    onStale: (e) => staleWrite(`event ${e.seq} (${e.type})`),
    onError: (err, e) => log('could not append event to Redis', { runId, seq: e.seq, error: err.message }),
    onRefill: (from, to) => log('events a Redis failover lost were appended again', { runId, from, to }),
  }) : undefined;
  const recorder = new EventRecorder({
    runId,
    now,
    maxEvents: config.CORRAL_LOG_MAX_EVENTS,
    maxBytes: config.CORRAL_LOG_MAX_BYTES,
    prior,
    sinks: [
      // A turn's last deltas go on the stream before its model.response does.
      (e) => {
        if (e.type === 'model.response') deltas?.flush();
      },
      (e) => jsonl.write(e),
      (e) => {
        if (stream) redisWrites.push(stream.push(e));
        else {
          redisWrites.push(store.appendEvent(e).catch((err: Error) => log('could not append event to Redis', { runId, seq: e.seq, error: err.message })));
        }
      },
      (e) => {
        // attribution for the log; the egress proxy learns the call (and what to do with its connections) from the effect guard
        if (e.type === 'tool.call') currentCall = e.callId;
        else if (e.type === 'tool.result') currentCall = null;
        else return;
        if (!guard) sandbox?.noteToolCall?.(currentCall);
      },
      trace.sink,
      ...(observe ? [(e: RunEvent) => {
        redisWrites.push(observe(e).catch((err: Error) => log('could not record metrics', { runId, seq: e.seq, error: err.message })));
      }] : []),
    ],
  });
  const emit = recorder.emit;

  // Memory is per tenant: another tenant naming the same key gets its own notes.
  const memorySpec = !parent && spec.memory ? { ...spec.memory, key: tenant === DEFAULT_TENANT ? spec.memory.key : `${tenant}/${spec.memory.key}` } : undefined;
  const stored = (name: RunFileName) => runFileLocation(deps.artifacts, tenant, runId, name);
  await update({
    status: 'running', ...(resumeFrom ? {} : { startedAt: now().toISOString() }), workerId: deps.workerId, logPath: stored('events.jsonl'), reportPath: stored('report.md'),
    ...(trace.traceId ? { traceId: trace.traceId } : {}),
  });
  // The run's first start: wall time counts from here across waits for sub-runs.
  const t0 = resumeFrom ? resumeFrom.loop.meter.startedAt : clock();
  const routing = routingFor(spec, config);
  const model = trace.model(await deps.modelFor(spec), spec.model ?? routing?.strong ?? config.CORRAL_MODEL);
  // A sub-run ends by its parent's deadline whatever its own wall-time budget says.
  const budgets: RunBudgets = parent ? { ...spec.budgets, wallTimeS: Math.max(0, Math.min(spec.budgets.wallTimeS, Math.floor((parent.deadlineAt - t0) / 1000))) } : spec.budgets;
  if (!resumeFrom) {
    emit({
      type: 'run.started', workerId: deps.workerId, task: spec.task, policy: spec.policy, approvals: spec.approvals,
      model: model.description, budgets,
      ...(attempt.crashedBefore ? { attempt: attempt.attempt, note: `attempt ${attempt.attempt}: the worker of the earlier attempt crashed mid-run; this attempt starts from a clean workspace` } : {}),
      ...(unnamedTenant && !attempt.crashedBefore ? { note: 'this job came straight to the queue without a tenant: the run is tenant "default"\'s (with auth on, no token sees it); producers name the tenant in data.tenant' } : {}),
      ...(routing ? { routing: { strong: routing.strong, cheap: routing.cheap, strongOn: routing.strongOn } } : {}),
      ...(parent ? { parent: { runId: parent.runId, callId: parent.callId, depth: parent.depth } } : {}),
    });
  }

  let outcome: RunOutcome;
  let reason: string;
  /** For an error end: the code of what broke, and the error itself (the job failure's cause). */
  let errorCode: ErrorCode = 'internal';
  let endCause: unknown;
  let finalAnswer: string | null = null;
  let usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  const artifacts: RunArtifact[] = [];
  let exportSummary: RunWorkspace | undefined;
  let exported: WorkspaceExport | undefined;
  let checks = 0;
  /** The setup phase's time, reported apart from the agent's wall time, which starts when setup ends. */
  let setupMs: number | undefined;
  let agentT0 = t0;
  // A cancel that came while no worker held the run (it waited for sub-runs, or was still queued).
  const cancelled = new AbortController();
  const runSignal = AbortSignal.any([signal, cancelled.signal]);
  /** workspace.git: the worker's clone (removed at the end), and the commit the run started from. */
  let cloneDir: string | undefined;
  let gitBase: string | undefined;
  /** The run's MCP servers in the current sandbox (one session per leg). */
  let mcp: McpSession | undefined;
  const stopMcp = async () => {
    const m = mcp;
    mcp = undefined;
    await m?.stop().catch((err: Error) => log('could not stop the MCP servers', { runId, error: err.message }));
  };
  const disposeSandbox = async () => {
    await stopMcp();
    const s = sandbox;
    sandbox = undefined;
    guard?.finish();
    guard = undefined;
    if (!s) return;
    try {
      await s.dispose();
      emit({ type: 'sandbox.removed', containerId: s.id });
    } catch (err) {
      log('could not remove the sandbox; the reaper will', { runId, containerId: s.id, error: (err as Error).message });
    }
  };
  try {
    const { limits, contract } = admitted;
    checks = contract.doneMeans.filter((d) => d.kind === 'check').length;
    const depth = parent?.depth ?? 0;
    // A sub-run's task and checks are its parent model's writing: the gate takes the submitter's task
    // at the root as the authorization, gates the checks, and starts from the parent's call history.
    const authorizedTask = parent ? parent.authorizedTask ?? '(the submitted task is not known to this sub-run: nothing beyond routine work is authorized)' : spec.task;
    const specTar = spec.workspace.tarBase64 ? Buffer.from(spec.workspace.tarBase64, 'base64') : undefined;
    let seed: { files: Record<string, string>; tar?: Buffer; file?: string } = {
      files: spec.workspace.files, ...(specTar ? { tar: specTar } : {}), ...(admitted.upload ? { file: admitted.upload.path } : {}),
    };
    const git = spec.workspace.git;
    if (git && admitted.git && !parent) {
      // The worker clones (credentials stay here); the checkout seeds the sandbox like an upload.
      const dir = join(runDir, `clone-${attempt.attempt}`);
      rmSync(dir, { recursive: true, force: true });
      cloneDir = dir;
      const credential = deps.gitCredentials ? credentialFor(deps.gitCredentials, tenant, admitted.git) : undefined;
      const c = await cloneWorkspace({
        remote: admitted.git, ...(git.ref ? { ref: git.ref } : {}), depth: git.depth, ...(credential ? { credential } : {}),
        dir, maxBytes: limits.workspaceMb * 1024 * 1024, maxEntries: config.CORRAL_WORKSPACE_MAX_ENTRIES,
        timeoutMs: config.CORRAL_GIT_TIMEOUT_S * 1000, signal: runSignal, ...(config.CORRAL_GIT_CA_FILE ? { caFile: config.CORRAL_GIT_CA_FILE } : {}),
      });
      gitBase = c.commit;
      emit({ type: 'workspace.cloned', url: admitted.git.url, ref: git.ref ?? null, commit: c.commit, depth: git.depth, files: c.files, bytes: c.bytes, ms: c.ms, credential: credential !== undefined });
      seed = { ...seed, file: c.tarPath };
    }
    if (parent) {
      if (!tree) throw new InvalidInputError('parent: this worker does not run sub-runs', 'parent');
      if (budgets.wallTimeS < 1) throw new EarlyEnd('timed_out', `its parent run's wall time ran out before this sub-run could start`);
      seed = { files: {}, tar: await childSeed({ config, tree }, runId, parent, limits.workspaceMb) };
    }
    if (tree && (await tree.cancelRequested(runId))) cancelled.abort('requested through the API');
    const subruns = tree && job && deps.newRunId && config.CORRAL_SUBRUN_MAX_DEPTH > 0
      ? { depth, maxDepth: config.CORRAL_SUBRUN_MAX_DEPTH, maxChildren: config.CORRAL_SUBRUN_MAX_CHILDREN }
      : undefined;
    const approvals = new RedisApprovalPort(store, emit, {
      timeoutMs: config.CORRAL_APPROVAL_TIMEOUT_S * 1000, clock,
      ...(attempt.fence ? { fence: attempt.fence } : {}),
      ...(attempt.lease ? { parking: { lease: attempt.lease, tenant, maxParked: config.CORRAL_MAX_PARKED_PER_TENANT } } : {}),
    });
    let checkpointSeed = resumeFrom?.checkpoint ?? null;
    let toCollect = resumeFrom;
    let inPlace: { state: LoopState; results: DelegationResult[] } | null = null;
    let lastCheckpoint = resumeFrom?.checkpoint;
    let context = '';
    let workspaceFiles: string[] | undefined;
    /** Who else hears the run's egress attempts (the setup phase, while it runs). */
    const egressWatchers = new Set<(a: EgressAttempt) => void>();
    for (let leg = 0; ; leg++) {
      if (!sandbox) {
        const fromCheckpoint = checkpointSeed ? readCheckpoint(runDir, checkpointSeed, limits.workspaceMb) : undefined;
        const a0 = clock();
        // A first start (not a resumed run, a checkpoint's leg or a sub-run) runs the environment's setup phase.
        const setup = leg === 0 && !resumeFrom && !parent && !fromCheckpoint && hasSetup(admitted.environment);
        const env = admitted.environment;
        sandbox = await deps.sandboxes.acquire({
          runId, workerId: deps.workerId,
          // The wall-time budget counts the agent only: the sandbox also lives through setup's own bound.
          deadline: new Date(Math.max(clock(), t0 + budgets.wallTimeS * 1000) + (setup ? env.setup.timeoutS * 1000 : 0) + 60_000),
          files: fromCheckpoint ? {} : seed.files,
          ...(fromCheckpoint
            ? { seedTar: fromCheckpoint, baseline: { files: seed.files, ...(seed.tar ? { seedTar: seed.tar } : {}), ...(seed.file ? { seedFile: seed.file } : {}) } }
            : { ...(seed.tar ? { seedTar: seed.tar } : {}), ...(seed.file ? { seedFile: seed.file } : {}) }),
          limits,
          ...(env.image !== config.CORRAL_SANDBOX_IMAGE ? { image: env.image } : {}),
          ...(Object.keys(env.env).length > 0 ? { env: env.env } : {}),
          runEnv: gitIdentity(config, runId, tenant),
          ...(env.path.length > 0 ? { pathPrepend: env.path } : {}),
          egressAllow: setup ? env.setup.egress : admitted.egress,
          ...(setup && admitted.egress.length > 0 ? { egressProxy: true } : {}),
          onEgress: (a) => {
            emit({ ...a, type: 'egress', callId: a.callId !== undefined ? a.callId : currentCall });
            guard?.onAttempt(a);
            for (const l of egressWatchers) l(a);
          },
          onEgressSummary: (s) => emit(egressEvent(s)),
          onEgressHold: (h) => {
            if (guard) guard.onHold(h);
            else sandbox?.releaseEgress?.(h.id, false);
          },
          // Not runSignal: a run cancelled while it waited still gets a sandbox, so its workspace is exported.
          signal,
        });
        emit({
          type: 'sandbox.ready', containerId: sandbox.id, image: env.image, ms: clock() - a0, egressAllow: admitted.egress,
          ...(sandbox.isolation ? { isolation: sandbox.isolation } : {}), ...(env.name !== 'default' ? { environment: env.name } : {}),
        });
        await update({ containerId: sandbox.id });
        if (setup) {
          const s0 = clock();
          const r = await runSetup({
            sandbox, emit, clock, tenant, scratchDir: runDir, signal: runSignal, log, secrets,
            watchEgress: (l) => {
              egressWatchers.add(l);
              return () => egressWatchers.delete(l);
            },
            maxCaptureBytes: Math.min(config.CORRAL_SETUP_CACHE_MB, limits.workspaceMb + 64) * 1024 * 1024,
            ...(deps.setupCache ? { cache: deps.setupCache } : {}),
          }, env, admitted.egress).finally(() => {
            // The agent's wall time starts now (the loop's meter starts when it does).
            agentT0 = clock();
            setupMs = agentT0 - s0;
          });
          if (!r.ok) throw new EarlyEnd('setup_failed', r.reason);
        }
        // After setup (it may install them; its end kills every agent process) and before the effect check's baseline.
        if (admitted.mcp.length > 0) {
          mcp = await McpSession.start({
            sandbox, environment: env, servers: admitted.mcp, emit, clock, limits: mcpLimits(config),
            maxOutputBytes: config.CORRAL_MAX_OUTPUT_BYTES, mask: async (t) => (await secrets.mask(t)).text, signal: runSignal,
          });
        }
      }
      if (toCollect) {
        const results = await collectSubRunResults({ store, job: job!, emit, clock, workerId: deps.workerId }, toCollect);
        inPlace = { state: toCollect.loop, results };
        await tree!.clearSuspension(runId);
        await update({ status: 'running' });
        toCollect = null;
      }
      if (leg === 0 && !inPlace) {
        const memory = memorySpec ? await deps.memory.read(memorySpec.key) : null;
        const workspace = await loadWorkspaceContext(sandbox, { signal: runSignal });
        emit({ type: 'context.loaded', agentsMd: workspace.agentsMd?.path ?? null, skills: workspace.skills, memory: memory === null ? null : deps.memory.describe(memorySpec!.key) });
        context = [renderWorkspaceContext(workspace), renderMemory(memory), ...(mcp?.notes ?? [])].filter(Boolean).join('\n\n');
        workspaceFiles = await listWorkspace(sandbox, runSignal);
      }
      const fresh = checkpointSeed !== null && inPlace !== null;
      // the files need a sandbox the engine can read (not gVisor's); the network check, one with an egress proxy
      if (!guard && config.CORRAL_EFFECT_CHECK && (sandbox.effects || sandbox.noteToolCall)) {
        guard = await EffectGuard.start({
          runId, sandbox, set: protectedSet, emit, clock, ...(spec.approvals ? { approvals } : {}),
          mask: async (t) => (await secrets.mask(t)).text,
        }, runSignal);
      }
      const result = await runAgentLoop(
        {
          model, sandbox, gate: deps.gateFor(approvals), emit, clock, tools: [...toolsFor(config), ...(mcp?.tools ?? [])],
          prices: pricesFor(config, spec.model ?? routing?.strong ?? config.CORRAL_MODEL),
          pricesFor: (m) => pricesFor(config, m),
          ...(deltas ? { onDelta: (turn: number, d: Parameters<DeltaPublisher['push']>[1]) => deltas.push(turn, d) } : {}),
          ...(guard ? { effects: guard } : {}),
          secrets,
        },
        {
          runId, task: spec.task, policy: spec.policy, approvals: spec.approvals, budgets,
          execTimeoutMs: limits.execTimeoutS * 1000, maxOutputBytes: config.CORRAL_MAX_OUTPUT_BYTES,
          ...(workspaceFiles ? { workspaceFiles } : {}), signal: runSignal, contract, context, compactAtTokens: config.CORRAL_COMPACT_AT_TOKENS,
          ...(routing ? { routing } : {}), ...(subruns ? { subruns } : {}),
          ...(inPlace ? { resume: { ...inPlace, ...(fresh ? { note: RESUME_NOTE } : {}) } } : {}),
          ...(parent ? { authorizedTask, gateDoneChecks: true, ...(parent.history ? { history: parent.history } : {}) } : {}),
        },
      );
      inPlace = null;
      if (result.outcome !== 'suspended') {
        ({ outcome, reason, finalAnswer, usage } = result);
        if (result.error) ({ code: errorCode, cause: endCause } = result.error);
        break;
      }
      // The turn delegated: copy the workspace, start the sub-runs, give up the slot and the sandbox.
      const checkpoint = nextCheckpoint(lastCheckpoint);
      const started = await startSubRuns(
        { config, store, tree: tree!, job: job!, newRunId: deps.newRunId!, clock, emit, ...(attempt.fence ? { fence: attempt.fence } : {}) },
        { runId, spec, tenant, runDir, depth, contract, authorizedTask, traceparentFor: (callId) => trace.traceparentFor(callId) }, sandbox, result, checkpoint,
      );
      if ('failed' in started) {
        inPlace = { state: result.state, results: started.failed };
        checkpointSeed = null;
        continue;
      }
      lastCheckpoint = checkpoint;
      await disposeSandbox();
      await Promise.all(redisWrites);
      if (await job!.waitForChildren()) throw new RunSuspended(runId);
      // Every sub-run ended already: go on here, in a new sandbox from the checkpoint.
      checkpointSeed = checkpoint;
      toCollect = started.suspension;
    }
    if (memorySpec && outcome === 'succeeded') {
      await proposeMemory({ runId, memory: memorySpec, approvals: spec.approvals, finalAnswer, store: deps.memory, port: approvals, emit, now, signal: runSignal });
    }

    try {
      // The MCP servers end first (their end is logged as corral's), then the agent's processes stop and
      // its protected files are compared once more before anything leaves.
      await stopMcp();
      await guard?.finalCheck();
      // Streamed to disk by the sandbox adapter; the files appear under these names only when complete.
      exported = await sandbox!.exportWorkspace({
        tarPath: join(runDir, 'workspace.tar'), patchPath: join(runDir, 'workspace.patch'), protectedSet,
        patchIgnore: { gitignore: spec.patch?.gitignore ?? true, exclude: spec.patch?.exclude ?? [] },
      });
      for (const [name, f] of [['workspace.tar', exported.tar], ['workspace.patch', exported.patch]] as const) {
        artifacts.push({ name, path: stored(name), bytes: f.bytes });
        emit({ type: 'artifact', name, path: stored(name), bytes: f.bytes });
      }
      // Every review flag, the workspace's and the bundle's, goes into needs-review.jsonl: lists elsewhere are cut, this file never is.
      const flags = [...exported.needsReview];
      if (spec.workspace.git?.bundle && gitBase && cloneDir) {
        const b = await exportBundle({ sandbox: sandbox!, base: gitBase, runId, repo: join(cloneDir, 'repo'), dest: join(runDir, 'agent.bundle'), signal: runSignal, protectedSet });
        const { needsReview: bundleFlags = [], ...rest } = b;
        flags.push(...bundleFlags);
        emit({ type: 'git.bundle', ...rest, ...(b.path ? { needsReview: bundleFlags.slice(0, 200), needsReviewTotal: bundleFlags.length } : {}) });
        if (b.path) {
          artifacts.push({ name: 'agent.bundle', path: stored('agent.bundle'), bytes: b.bytes });
          emit({ type: 'artifact', name: 'agent.bundle', path: stored('agent.bundle'), bytes: b.bytes });
        }
      }
      const reviewPath = join(runDir, NEEDS_REVIEW_FILE);
      writeFileSync(reviewPath, needsReviewLines(flags), { mode: 0o644 });
      const reviewBytes = statSync(reviewPath).size;
      artifacts.push({ name: NEEDS_REVIEW_FILE, path: stored(NEEDS_REVIEW_FILE), bytes: reviewBytes });
      emit({ type: 'artifact', name: NEEDS_REVIEW_FILE, path: stored(NEEDS_REVIEW_FILE), bytes: reviewBytes });
      emit({ type: 'workspace.changes', ...workspaceChanges(exported, flags) });
      exportSummary = runWorkspace(exported, flags);
    } catch (err) {
      log('could not export the workspace', { runId, error: (err as Error).message });
      reason += ` (the workspace could not be exported: ${(err as Error).message})`;
    }
  } catch (err) {
    if (err instanceof RunSuspended) {
      deltas?.close();
      await Promise.all(redisWrites);
      log('run waits for its sub-runs', { runId });
      trace.end({ outcome: 'suspended', suspended: true });
      throw err;
    }
    if (err instanceof EarlyEnd) {
      outcome = err.outcome;
      reason = err.reason;
    } else {
      if (!(err instanceof CorralError)) log('run crashed', { runId, error: (err as Error).stack ?? String(err) });
      outcome = runSignal.aborted ? 'cancelled' : 'error';
      errorCode = err instanceof CorralError ? err.code : 'internal';
      endCause = err;
      reason = runSignal.aborted ? cancelReason(runSignal) : err instanceof CorralError ? `${err.code}: ${err.message}` : `internal error: ${(err as Error).message}`;
    }
    usage = { ...usage, wallTimeMs: clock() - agentT0 };
  } finally {
    deltas?.close();
    await disposeSandbox();
    if (cloneDir) rmSync(cloneDir, { recursive: true, force: true });
  }

  if (setupMs !== undefined) usage = { ...usage, setupMs };
  // A log that could not be written is no record of the run: the end says so (log_failed).
  const logEnd = await finishLog({ jsonl, recorder, emit, log, runId, end: { outcome, reason, finalAnswer, usage, errorCode }, signer: deps.logSigner });
  ({ outcome, reason, errorCode } = logEnd.end);
  const traceUrl = trace.traceId && config.CORRAL_TRACE_URL_TEMPLATE ? config.CORRAL_TRACE_URL_TEMPLATE.replaceAll('{traceId}', trace.traceId) : undefined;
  writeFileSync(reportPath, buildReport(recorder.events(), { audit: { ...logEnd.seal, ...(trace.traceId ? { traceId: trace.traceId } : {}), ...(traceUrl ? { traceUrl } : {}) } }));
  // The workspace copies made for sub-runs are not needed once the run has ended.
  for (const f of readdirSync(runDir)) if (/^checkpoint-[0-9]+\.(tar|patch)$/.test(f)) rmSync(join(runDir, f), { force: true });
  // The files leave this host: every end comes here (a crash of this process is finished by another worker).
  const published = await publishOrMark({ store: deps.artifacts, tenant, runId, runDir, at: now() });
  if (published.failed) {
    log('could not store the run\'s files; they stay on this host until the run-files sweeper stores them', { runId, store: deps.artifacts.description, error: published.failed });
    reason += ` (its files could not be stored in ${deps.artifacts.description}: ${published.failed})`;
  } else if (deps.artifacts.kind !== 'local') {
    log('run files stored', { runId, store: deps.artifacts.description, files: published.stored });
  }
  await Promise.all(redisWrites);
  const code = outcome === 'succeeded' ? undefined : codeForOutcome(outcome, errorCode);
  // The end is confirmed by the replicas before the job completes (and is written again, the same end,
  // until it is): an end a failover took back would leave the run "running" for ever.
  const end = { status: outcome, outcome, ...(code ? { errorCode: code } : {}), reason, finalAnswer, usage, artifacts, ...(exportSummary ? { workspace: exportSummary } : {}), ...logEnd.record, finishedAt: now().toISOString() };
  // The log goes with the end: each try first appends the run's last event again (a no-op when it is
  // there). After a failover that took back the log's tail, no later event would find that hole, so
  // this refills it (EventStreamWriter), and the replicas' confirmation of the end then covers it too.
  const last = recorder.events().at(-1);
  const writeEnd = async () => {
    if (stream && last) await stream.push(last);
    return update(end);
  };
  if (await durably(writeEnd, { store, log, runId, what: 'end', maxWaitMs })) {
    await store.expireFinished(runId);
  }
  trace.end({ outcome, ...(outcome === 'error' ? { errorCode } : {}) });
  log('run finished', { runId, outcome, reason, llmCalls: usage.llmCalls, toolCalls: usage.toolCalls, ...(trace.traceId ? { traceId: trace.traceId } : {}) });
  const summary: RunSummary = { runId, outcome, reason, finalAnswer, reportPath, logPath, ...(outcome === 'error' ? { errorCode } : {}) };
  if (parent) {
    // A sub-run's end, whatever it is, is a result for its parent: its job completes with the sheet.
    summary.sheet = await makeResultSheet({ config, runId, task: spec.task, runDir, outcome, reason, finalAnswer, usage, budgets, events: recorder.events(), ...(exported ? { exported } : {}), checks });
    await releaseRunDir(deps.artifacts, runDir, published);
    return summary;
  }
  await releaseRunDir(deps.artifacts, runDir, published);
  if (outcome !== 'succeeded') throw new RunEndedError(summary, endCause);
  return summary;
}
