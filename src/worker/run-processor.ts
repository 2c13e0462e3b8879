/**
 * One queue job → one run: validate the job data, record the run as running, acquire its sandbox,
 * drive the agent loop, export the workspace, remove the sandbox, write report.md, record the outcome.
 * Every event goes to the run's JSONL log (data/runs/{id}/events.jsonl) and its Redis stream.
 *
 * Malformed job data fails that job with a reason (InvalidInputError → the worker makes it an
 * UnrecoverableError) and never reaches Docker. A run that ends `failed` or `cancelled` also fails
 * its job, after its log, report and artifacts are written and its sandbox is gone.
 */
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Config } from '../config';
import { CorralError, InvalidInputError, describeZodIssues } from '../domain/errors';
import type { RunEvent, RunEventBody, RunOutcome, RunUsage } from '../domain/events';
import type { Gate } from '../domain/gate';
import type { Model } from '../domain/model';
import { RunJob, type RunSpec } from '../domain/run-spec';
import type { EgressSummary, LeasedSandbox, SandboxProvider } from '../domain/sandbox';
import type { ApprovalPort } from '../policy/approval-port';
import type { RunMetrics } from '../queue/run-metrics';
import { DEFAULT_TENANT, type RunArtifact, type RunStore, type RunWorkspace } from '../queue/run-store';
import { EventRecorder } from '../report/event-recorder';
import { JsonlSink } from '../report/jsonl-sink';
import { buildReport } from '../report/report-markdown';
import { runAgentLoop, type Prices } from '../run/agent-loop';
import { checkBudgets } from '../run/budget-limits';
import { resolveLimits } from '../sandbox/limits';
import { checkEgressAllow } from '../sandbox/egress-allowlist';
import { contractForSpec } from '../domain/task-contract';
import { renderMemory } from '../run/memory';
import { loadWorkspaceContext, renderWorkspaceContext } from '../run/workspace-context';
import { TOOLS } from '../tools/registry';
import { memoryPath, proposeMemory, readMemory } from './memory-store';
import { runWorkspace, workspaceChanges } from './export-summary';
import { RedisApprovalPort } from './redis-approval-port';

export type WorkerLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface RunProcessorDeps {
  config: Config;
  sandboxes: SandboxProvider;
  store: RunStore;
  /** The model for a run (spec.model overrides the configured one). */
  modelFor: (spec: RunSpec) => Model;
  /** A gate for one run, asking humans through the given approval port. */
  gateFor: (approvals: ApprovalPort) => Gate;
  workerId: string;
  clock: () => number;
  log: WorkerLog;
  /** Aggregates each run's events into the metrics any API instance serves (and its live usage). */
  metrics?: RunMetrics;
}

export interface RunSummary {
  runId: string;
  outcome: RunOutcome;
  reason: string;
  finalAnswer: string | null;
  reportPath: string;
  logPath: string;
}

/** Raised for a run that ended failed/cancelled: its reason is the job's failure reason. */
export class RunEndedError extends CorralError {
  constructor(readonly summary: RunSummary) {
    super(summary.outcome === 'cancelled' ? 'cancelled' : 'internal', `run ${summary.outcome}: ${summary.reason}`);
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

/** Reads a run id out of job data that failed validation, so the failure can still be recorded. */
function salvageRunId(data: unknown): string | undefined {
  const id = (data as { runId?: unknown } | null)?.runId;
  return typeof id === 'string' && /^run_[A-Za-z0-9_-]{6,64}$/.test(id) ? id : undefined;
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
}

export async function processRun(data: unknown, signal: AbortSignal, deps: RunProcessorDeps, attempt: Attempt = { attempt: 1, crashedBefore: false }): Promise<RunSummary> {
  const { config, store, clock, log } = deps;
  const parsed = RunJob.safeParse(data);
  if (!parsed.success) {
    const reason = `malformed job data: ${describeZodIssues(parsed.error.issues).message}`;
    const runId = salvageRunId(data);
    if (runId) {
      await store.ensure(runId, { task: '(malformed job)' }, new Date(clock()));
      await store.end(runId, 'error', reason, new Date(clock()));
    }
    throw new InvalidInputError(reason);
  }
  const { runId, spec } = parsed.data;
  // A job id BullMQ no longer remembers (retention passed, queue cleaned) may arrive again: a run that
  // already ended is never executed twice.
  const previous = await store.get(runId);
  if (previous?.finishedAt) {
    throw new InvalidInputError(`run ${runId} already ended (${previous.status} at ${previous.finishedAt}); a run is executed once — submit a new run or replay this one`);
  }
  const runDir = resolve(config.CORRAL_DATA_DIR, 'runs', runId);
  mkdirSync(runDir, { recursive: true });
  const logPath = join(runDir, 'events.jsonl');
  const reportPath = join(runDir, 'report.md');
  // A run started again after a crash starts a fresh log; the crashed attempt's log is kept beside it.
  if (attempt.crashedBefore && existsSync(logPath)) renameSync(logPath, join(runDir, `events.attempt${attempt.attempt - 1}.jsonl`));
  const now = () => new Date(clock());

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
  const jsonl = new JsonlSink(logPath);
  let sandbox: LeasedSandbox | undefined;
  const recorder = new EventRecorder({
    runId,
    now,
    maxEvents: config.CORRAL_LOG_MAX_EVENTS,
    maxBytes: config.CORRAL_LOG_MAX_BYTES,
    sinks: [
      (e) => jsonl.write(e),
      (e) => {
        redisWrites.push(store.appendEvent(e, attempt.fence).then(
          (ok) => ok || staleWrite(`event ${e.seq} (${e.type})`),
          (err: Error) => log('could not append event to Redis', { runId, seq: e.seq, error: err.message }),
        ));
      },
      (e) => {
        if (e.type === 'tool.call') currentCall = e.callId;
        else if (e.type === 'tool.result') currentCall = null;
        else return;
        sandbox?.noteToolCall?.(currentCall);
      },
      ...(observe ? [(e: RunEvent) => {
        redisWrites.push(observe(e).catch((err: Error) => log('could not record metrics', { runId, seq: e.seq, error: err.message })));
      }] : []),
    ],
  });
  const emit = recorder.emit;

  await store.ensure(runId, spec, now());
  if (attempt.fence) await store.claim(runId, attempt.fence);
  // Memory is per tenant: another tenant naming the same key gets its own notes.
  const tenant = (await store.tenantOf(runId)) ?? DEFAULT_TENANT;
  const memorySpec = spec.memory && { ...spec.memory, key: tenant === DEFAULT_TENANT ? spec.memory.key : `${tenant}/${spec.memory.key}` };
  await update({ status: 'running', startedAt: now().toISOString(), workerId: deps.workerId, logPath, reportPath });
  const t0 = clock();
  const model = deps.modelFor(spec);
  emit({
    type: 'run.started', workerId: deps.workerId, task: spec.task, policy: spec.policy, approvals: spec.approvals,
    model: model.description, budgets: spec.budgets,
    ...(attempt.crashedBefore ? { attempt: attempt.attempt, note: `attempt ${attempt.attempt}: the worker of the earlier attempt crashed mid-run; this attempt starts from a clean workspace` } : {}),
  });

  let outcome: RunOutcome;
  let reason: string;
  let finalAnswer: string | null = null;
  let usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  const artifacts: RunArtifact[] = [];
  let exportSummary: RunWorkspace | undefined;
  try {
    const limits = resolveLimits(spec.limits, config);
    checkBudgets(spec.budgets, config);
    checkEgressAllow(spec.egress.allow, config);
    const contract = contractForSpec(spec, TOOLS.map((t) => t.name));
    const a0 = clock();
    sandbox = await deps.sandboxes.acquire({
      runId, workerId: deps.workerId,
      deadline: new Date(clock() + spec.budgets.wallTimeS * 1000 + 60_000),
      files: spec.workspace.files,
      ...(spec.workspace.tarBase64 ? { seedTar: Buffer.from(spec.workspace.tarBase64, 'base64') } : {}),
      limits,
      egressAllow: spec.egress.allow,
      onEgress: (a) => emit({ ...a, type: 'egress', callId: a.callId !== undefined ? a.callId : currentCall }),
      onEgressSummary: (s) => emit(egressEvent(s)),
      signal,
    });
    emit({ type: 'sandbox.ready', containerId: sandbox.id, image: config.CORRAL_SANDBOX_IMAGE, ms: clock() - a0, egressAllow: spec.egress.allow, ...(sandbox.isolation ? { isolation: sandbox.isolation } : {}) });
    await update({ containerId: sandbox.id });
    const memory = memorySpec ? readMemory(config.CORRAL_DATA_DIR, memorySpec.key) : null;
    const workspace = await loadWorkspaceContext(sandbox, { signal });
    emit({ type: 'context.loaded', agentsMd: workspace.agentsMd?.path ?? null, skills: workspace.skills, memory: memory === null ? null : memoryPath(config.CORRAL_DATA_DIR, memorySpec!.key) });
    const context = [renderWorkspaceContext(workspace), renderMemory(memory)].filter(Boolean).join('\n\n');

    const approvals = new RedisApprovalPort(store, emit, config.CORRAL_APPROVAL_TIMEOUT_S * 1000, clock);
    const result = await runAgentLoop(
      {
        model, sandbox, gate: deps.gateFor(approvals), emit, clock,
        prices: pricesFor(config, spec.model ?? config.CORRAL_MODEL),
      },
      {
        runId, task: spec.task, policy: spec.policy, approvals: spec.approvals, budgets: spec.budgets,
        execTimeoutMs: limits.execTimeoutS * 1000, maxOutputBytes: config.CORRAL_MAX_OUTPUT_BYTES,
        workspaceFiles: await listWorkspace(sandbox, signal), signal, contract, context, compactAtTokens: config.CORRAL_COMPACT_AT_TOKENS,
      },
    );
    ({ outcome, reason, finalAnswer, usage } = result);
    if (memorySpec && outcome === 'succeeded') {
      await proposeMemory({ runId, memory: memorySpec, approvals: spec.approvals, finalAnswer, dataDir: config.CORRAL_DATA_DIR, port: approvals, emit, now, signal });
    }

    try {
      // Streamed to disk by the sandbox adapter; the files appear under these names only when complete.
      const exported = await sandbox.exportWorkspace({ tarPath: join(runDir, 'workspace.tar'), patchPath: join(runDir, 'workspace.patch') });
      for (const [name, f] of [['workspace.tar', exported.tar], ['workspace.patch', exported.patch]] as const) {
        artifacts.push({ name, path: f.path, bytes: f.bytes });
        emit({ type: 'artifact', name, path: f.path, bytes: f.bytes });
      }
      emit({ type: 'workspace.changes', ...workspaceChanges(exported) });
      exportSummary = runWorkspace(exported);
    } catch (err) {
      log('could not export the workspace', { runId, error: (err as Error).message });
      reason += ` (the workspace could not be exported: ${(err as Error).message})`;
    }
  } catch (err) {
    if (!(err instanceof CorralError)) log('run crashed', { runId, error: (err as Error).stack ?? String(err) });
    outcome = signal.aborted ? 'cancelled' : 'error';
    reason = signal.aborted ? cancelReason(signal) : err instanceof CorralError ? `${err.code}: ${err.message}` : `internal error: ${(err as Error).message}`;
    usage = { ...usage, wallTimeMs: clock() - t0 };
  } finally {
    if (sandbox) {
      try {
        await sandbox.dispose();
        emit({ type: 'sandbox.removed', containerId: sandbox.id });
      } catch (err) {
        log('could not remove the sandbox; the reaper will', { runId, containerId: sandbox.id, error: (err as Error).message });
      }
    }
  }

  emit({ type: 'run.finished', outcome, finalAnswer, reason, usage });
  writeFileSync(reportPath, buildReport(recorder.events()));
  await Promise.all(redisWrites);
  if (await update({ status: outcome, outcome, reason, finalAnswer, usage, artifacts, ...(exportSummary ? { workspace: exportSummary } : {}), finishedAt: now().toISOString() })) {
    await store.expireFinished(runId);
  }
  log('run finished', { runId, outcome, reason, llmCalls: usage.llmCalls, toolCalls: usage.toolCalls });
  const summary: RunSummary = { runId, outcome, reason, finalAnswer, reportPath, logPath };
  if (outcome !== 'succeeded') throw new RunEndedError(summary);
  return summary;
}
