/**
 * The agent loop, over ports only (Model, Sandbox, Gate, emit, clock): ask the model, run each tool
 * call it asks for through the gate and then the sandbox, feed the results back, until the model
 * answers without tool calls or a budget runs out.
 *
 * Expected outcomes are values the model sees: bad tool JSON, an unknown tool, invalid arguments, a
 * blocked call, a non-zero exit. Broken infrastructure (model endpoint down after retries, Docker
 * failing) ends the run as `failed` with the reason; cancellation ends it as `cancelled`. The loop
 * never throws for those; it returns a RunLoopResult and leaves run.finished to its caller, which
 * still has artifacts and the sandbox to deal with.
 *
 * Streaming: each turn's deltas go to deps.onDelta. Model routing (input.routing): each turn's model
 * is chosen by model-router.ts from what the previous turn did, and priced at that model's prices.
 *
 * Sub-runs (input.subruns): an allowed `delegate` call is checked against the depth and fan-out caps
 * and its budgets carved out of what is left (delegation.ts). When a turn has accepted delegate calls,
 * the loop runs the turn's other calls, then returns `suspended` with its state (loop-state.ts) and
 * the task sheets; the caller starts the sub-runs and later calls the loop again with `resume` (that
 * state and the sub-runs' results), and the loop goes on from the next turn as if it had not stopped.
 */
import { CancelledError, CorralError, type ErrorCode } from '../domain/errors';
import type { BudgetName, Emit, RunOutcome, RunUsage } from '../domain/events';
import { emptyHistory, extendHistory } from '../domain/call-history';
import type { CallHistory, Gate } from '../domain/gate';
import type { ChatMessage, Model, ModelDelta } from '../domain/model';
import type { RunBudgets, Routing } from '../domain/run-spec';
import type { Sandbox } from '../domain/sandbox';
import type { SecretMasker } from '../domain/effects';
import { TaskSheet } from '../domain/subrun';
import { toolAllowed } from '../domain/mcp';
import { TOOLS, toolSpecs } from '../tools/registry';
import type { Tool } from '../tools/tool';
import { doneChecks, renderContractForModel, type TaskContract } from '../domain/task-contract';
import { BudgetMeter, WARN_AT, costOf, type Prices } from './budget-meter';
import { compactMessages, estimateTokens } from './compaction';
import { grantBudgets } from './delegation';
import { describeFailedChecks, runDoneChecks } from './done-checks';
import type { LoopState, PendingResult } from './loop-state';
import { NO_SIGNALS, routeTurn, type TurnSignals } from './model-router';
import { RepetitionTracker } from './repetition';
import { systemPrompt } from './system-prompt';
import { runToolCall, type CallEffectsPort, type CallKind } from './tool-call';

export type { Prices } from './budget-meter';

export interface AgentLoopDeps {
  model: Model;
  sandbox: Sandbox;
  gate: Gate;
  emit: Emit;
  /** Milliseconds since the epoch; injected so tests control time. */
  clock: () => number;
  prices: Prices;
  /** Prices of a named model (model routing); default: `prices` for every model. */
  pricesFor?: (model: string) => Prices;
  tools?: readonly Tool[];
  /** Receives each turn's streamed pieces (live views only). */
  onDelta?: (turn: number, d: ModelDelta) => void;
  /** The effect check around each call (run/effect-guard.ts). */
  effects?: CallEffectsPort;
  /** Masks secrets in tool and done-check output (policy/secret-scan-pool.ts). */
  secrets?: SecretMasker;
}

/** What the loop may do with `delegate`: the run's depth and the server's caps. */
export interface SubRunCaps {
  /** 0 for a top-level run. */
  depth: number;
  maxDepth: number;
  /** Sub-runs one run may start over its whole life. */
  maxChildren: number;
}

/** What a sub-run handed back, for the delegate call that started it. */
export interface DelegationResult {
  callId: string;
  /** What the model sees (the result sheet as JSON). */
  content: string;
  summary: string;
  /** ok: the sub-run succeeded; failed: it ended any other way. */
  kind: CallKind;
  /** What the sub-run used (counted as this run's) and the budgets it had been granted (released now). */
  usage: Omit<RunUsage, 'wallTimeMs'>;
  granted: RunBudgets;
}

export interface AgentLoopInput {
  runId: string;
  task: string;
  policy: string;
  approvals: boolean;
  budgets: RunBudgets;
  execTimeoutMs: number;
  maxOutputBytes: number;
  /** Workspace paths to mention in the first message (the model still has to read them). */
  workspaceFiles?: string[];
  /** Cancels the run: aborts the model call or the exec in flight. */
  signal?: AbortSignal;
  /** The parsed task contract: allowed tools, what not to do, done checks. Absent: `task` as is, all tools. */
  contract?: TaskContract;
  /** Appended to the system prompt: the workspace's AGENTS.md and skills, memory (all rendered as untrusted). */
  context?: string;
  /** Compact the conversation when its estimated size passes this many tokens (default 60 000). */
  compactAtTokens?: number;
  /** Messages kept verbatim at the end when compacting (default 8). */
  keepRecent?: number;
  /** Per-turn model choice; absent: the model's own default for every turn. */
  routing?: Routing;
  /** Sub-runs allowed (delegate); absent: delegate calls are refused. */
  subruns?: SubRunCaps;
  /** Continue a suspended loop: its state and the results of the sub-runs it waited for. */
  resume?: { state: LoopState; results: DelegationResult[]; note?: string };
  /**
   * Where `task` is not the submitter's writing (a sub-run's task sheet comes from its parent's model):
   * the submitter's task at the root, which the gate takes as the user's authorization, while `task`
   * goes to the gate as untrusted evidence. Absent: `task` is the submitter's.
   */
  authorizedTask?: string;
  /**
   * The done checks were written by a model (a sub-run's, from its parent's delegate call): each passes
   * the gate as a bash call before it runs, and one the gate refuses fails without running.
   */
  gateDoneChecks?: boolean;
  /** What calls before this run wrote and linked in the workspace it starts from (a sub-run: its parent's). */
  history?: CallHistory;
}

export interface RunLoopEnd {
  outcome: RunOutcome;
  finalAnswer: string | null;
  reason: string;
  usage: RunUsage;
  /** Set when a budget ended the run. */
  budgetExceeded?: BudgetName;
  /** Set when an error ended the run: its code and the error. */
  error?: { code: ErrorCode; cause?: unknown };
}

/** The loop stopped to wait for sub-runs: start them, then call the loop again with `resume`. */
export interface RunLoopSuspended {
  outcome: 'suspended';
  finalAnswer: null;
  reason: string;
  usage: RunUsage;
  state: LoopState;
  delegations: Array<{ callId: string; sheet: TaskSheet; budgets: RunBudgets }>;
}

export type RunLoopResult = RunLoopEnd | RunLoopSuspended;

/** How many recent tool outputs the gate sees as (untrusted) evidence, and how much of each. */
const EVIDENCE_ITEMS = 3;
const EVIDENCE_CHARS = 2000;
/** This many malformed calls in a row (bad JSON, unknown tool, wrong types) end the run as `error`. */
export const MAX_MALFORMED_IN_A_ROW = 5;
/** This many blocked or refused calls in a row end the run as `policy_aborted`. */
export const MAX_BLOCKED_IN_A_ROW = 5;
/** Rounds of failed done checks the model may try to fix before the run ends as `failed`. */
export const MAX_DONE_ROUNDS = 3;

class Stop {
  constructor(
    readonly outcome: RunOutcome,
    readonly reason: string,
    readonly budget?: BudgetName,
    /** For an error stop: the code of what broke, and the error itself. */
    readonly error?: { code: ErrorCode; cause?: unknown },
  ) {}
}

/** The tools a run offers the model: the contract's list, or every tool that is not opt-in. */
function offeredTools(all: readonly Tool[], allowed: ReadonlySet<string> | null, subruns: SubRunCaps | undefined): Tool[] {
  const canDelegate = subruns !== undefined && subruns.depth < subruns.maxDepth;
  return all.filter((t) => (allowed ? toolAllowed(allowed, t.name) : !t.optIn) && (!t.deferred || canDelegate));
}

export async function runAgentLoop(deps: AgentLoopDeps, input: AgentLoopInput): Promise<RunLoopResult> {
  const allTools = deps.tools ?? TOOLS;
  const allowed = input.contract?.allowedTools ? new Set(input.contract.allowedTools) : null;
  const offered = offeredTools(allTools, allowed, input.subruns);
  const specs = toolSpecs(offered);
  const checks = input.contract ? doneChecks(input.contract) : [];
  const saved = input.resume?.state;
  const repetition = new RepetitionTracker(saved ? { from: saved.repetition } : {});
  let doneRounds = saved?.doneRounds ?? 0;
  const { budgets } = input;
  const meter = new BudgetMeter(budgets, deps.prices, deps.emit, deps.clock, saved?.meter);
  const priceOf = (model: string | undefined) => (model && deps.pricesFor ? deps.pricesFor(model) : deps.prices);

  // One signal for everything in flight: the caller's cancel or the wall-time budget (which counts
  // from the run's first start, waits for sub-runs included).
  const wall = new AbortController();
  const wallLeftMs = Math.max(0, budgets.wallTimeS * 1000 - (deps.clock() - meter.startedAt));
  const wallTimer = setTimeout(() => wall.abort(), wallLeftMs);
  const warnTimer = setTimeout(() => meter.warnWallTime(), Math.max(0, wallLeftMs - budgets.wallTimeS * 1000 * (1 - WARN_AT)));
  wallTimer.unref?.();
  warnTimer.unref?.();
  const signal = input.signal ? AbortSignal.any([input.signal, wall.signal]) : wall.signal;

  let messages: ChatMessage[] = saved ? [...saved.messages] : [
    { role: 'system', content: systemPrompt(offered) + (input.context ? `\n\n${input.context}` : '') },
    { role: 'user', content: userMessage(input.contract ? renderContractForModel(input.contract) : input.task, input.workspaceFiles) },
  ];
  let evidence: string[] = saved ? [...saved.evidence] : [];
  /** What this run's executed calls wrote and linked (the gate judges later calls with it). */
  let history: CallHistory = saved?.history ?? input.history ?? emptyHistory();
  /** The gate's view of the run: the submitter's task as authorization; a model-written task is evidence only. */
  const gateTask = input.authorizedTask ?? input.task;
  const taskEvidence = input.authorizedTask !== undefined ? [`the sub-run's task, as its parent's model wrote it: ${input.task.slice(0, EVIDENCE_CHARS)}`] : [];
  let finalAnswer: string | null = null;
  let malformed = saved?.malformed ?? 0;
  let blocked = saved?.blocked ?? 0;
  let signals: TurnSignals = saved?.signals ?? { ...NO_SIGNALS };
  let childrenStarted = saved?.childrenStarted ?? 0;

  const exhausted = (b: BudgetName) => new Stop(b === 'wallTimeS' ? 'timed_out' : 'budget_exhausted', meter.exceeded(b), b);
  /** Turns an abort into the right stop: the wall-time budget or a cancellation. */
  const stopFor = (err: unknown): Stop => {
    if (wall.signal.aborted && !input.signal?.aborted) return exhausted('wallTimeS');
    if (input.signal?.aborted) {
      const why = input.signal.reason;
      return new Stop('cancelled', typeof why === 'string' ? `the run was cancelled (${why})` : 'the run was cancelled');
    }
    if (err instanceof CancelledError) return new Stop('cancelled', 'the run was cancelled');
    if (err instanceof CorralError) return new Stop('error', `${err.code}: ${err.message}`, undefined, { code: err.code, cause: err });
    throw err;
  };
  /** Counts a tool result into the streaks, the evidence and the routing signals; may stop the run. */
  const observeResult = (name: string, kind: CallKind, content: string, turnSignals: TurnSignals) => {
    malformed = kind === 'malformed' ? malformed + 1 : 0;
    if (malformed >= MAX_MALFORMED_IN_A_ROW) throw new Stop('error', `the model sent ${malformed} malformed tool calls in a row`, undefined, { code: 'model_failed' });
    blocked = kind === 'blocked' || kind === 'refused' ? blocked + 1 : kind === 'malformed' ? blocked : 0;
    if (blocked >= MAX_BLOCKED_IN_A_ROW) throw new Stop('policy_aborted', `${blocked} tool calls in a row were blocked by the policy; the run was stopped`);
    if (kind === 'failed') turnSignals.failedTool = true;
    if (kind === 'blocked' || kind === 'refused') turnSignals.blockedCall = true;
    if (kind === 'malformed') turnSignals.malformedCall = true;
    if (kind === 'ok' || kind === 'failed') {
      evidence.push(`${name} output: ${content.slice(0, EVIDENCE_CHARS)}`);
      if (evidence.length > EVIDENCE_ITEMS) evidence = evidence.slice(-EVIDENCE_ITEMS);
    }
  };

  let stop: Stop | undefined;
  let suspension: RunLoopSuspended | undefined;
  try {
    if (wallLeftMs <= 0) throw exhausted('wallTimeS');
    if (saved && input.resume) {
      // The suspended turn's results, in call order: the sub-runs' sheets fill in the delegate calls.
      const resumeSignals: TurnSignals = { ...NO_SIGNALS, subRunResults: true };
      const byCall = new Map(input.resume.results.map((r) => [r.callId, r]));
      const last = saved.pending.length - 1;
      saved.pending.forEach((p, i) => {
        let content = p.content ?? '';
        if (p.child) {
          const r = byCall.get(p.callId);
          meter.release(p.child.budgets);
          if (r) meter.addChildUsage(r.usage);
          content = r?.content ?? 'error: the sub-run left no result';
          const kind: CallKind = r?.kind ?? 'failed';
          deps.emit({ type: 'tool.result', callId: p.callId, tool: p.tool, ok: kind === 'ok', blocked: false, summary: r?.summary ?? 'the sub-run left no result', ms: 0, output: content.slice(0, 2000) });
          observeResult(p.tool, kind, content, resumeSignals);
        }
        const note = i === last && input.resume?.note ? `\n\n${input.resume.note}` : '';
        messages.push({ role: 'tool', toolCallId: p.callId, content: content + note });
      });
      signals = resumeSignals;
      meter.checkWarnings();
    }

    for (let turn = (saved?.turn ?? 0) + 1; ; turn++) {
      if (signal.aborted) throw new CancelledError();
      if (meter.full('llmCalls')) throw exhausted('llmCalls');
      const over0 = meter.overspent();
      if (over0) throw exhausted(over0);
      const route = input.routing ? routeTurn(input.routing, turn, signals) : undefined;
      const turnSignals: TurnSignals = { ...NO_SIGNALS };
      const tokensBefore = estimateTokens(messages);
      if (tokensBefore > (input.compactAtTokens ?? 60_000)) {
        const c = await compactMessages(messages, { model: deps.model, keepRecent: input.keepRecent ?? 8, signal });
        meter.addHousekeeping(c.usage, priceOf(input.routing?.strong));
        if (c.removed > 0) {
          deps.emit({ type: 'context.compacted', messagesBefore: messages.length, messagesAfter: c.messages.length, tokensBefore, tokensAfter: estimateTokens(c.messages) });
          messages = c.messages;
          turnSignals.compacted = true;
        }
      }
      const t0 = deps.clock();
      const res = await deps.model.complete({
        messages, tools: specs, signal,
        ...(route ? { model: route.model } : {}),
        ...(deps.onDelta ? { onDelta: (d: ModelDelta) => deps.onDelta!(turn, d) } : {}),
      });
      const cost = meter.addModelCall(res.usage, priceOf(route?.model));
      deps.emit({
        type: 'model.response', turn, content: res.content, toolCalls: res.toolCalls,
        usage: res.usage, costUsd: cost, ms: deps.clock() - t0, model: res.model, finishReason: res.finishReason,
        ...(route && input.routing ? { route: { model: route.model, tier: route.tier, rule: route.rule, strongCostUsd: costOf(res.usage, priceOf(input.routing.strong)) } } : {}),
      });
      meter.checkWarnings();
      messages.push({ role: 'assistant', content: res.content, ...(res.toolCalls.length ? { toolCalls: res.toolCalls } : {}) });
      const over = meter.overspent();
      if (over) throw exhausted(over);

      if (res.toolCalls.length === 0) {
        if (checks.length) {
          const gateCheck = input.gateDoneChecks
            ? async (command: string, i: number) => {
              const callId = `done-check-${doneRounds + 1}-${i + 1}`;
              const verdict = await deps.gate.decide({ callId, tool: 'bash', args: { command } }, { runId: input.runId, task: gateTask, policy: input.policy, approvals: input.approvals, evidence: [...taskEvidence, ...evidence], history, signal });
              deps.emit({ type: 'policy.decision', callId, tool: 'bash', verdict });
              return verdict;
            }
            : undefined;
          const results = await maskChecks(await runDoneChecks(deps.sandbox, checks, { timeoutMs: input.execTimeoutMs, maxOutputBytes: input.maxOutputBytes, signal, ...(gateCheck ? { gate: gateCheck } : {}) }), deps);
          for (const r of results) deps.emit({ type: 'done.check', command: r.command, ok: r.ok, exitCode: r.exitCode, summary: r.summary });
          const failed = results.filter((r) => !r.ok);
          if (failed.length) {
            doneRounds += 1;
            const which = failed.map((r) => `\`${r.command}\` (${r.summary})`).join(', ');
            if (doneRounds >= MAX_DONE_ROUNDS) throw new Stop('failed', `done checks still failing after ${doneRounds} rounds: ${which}`);
            messages.push({ role: 'user', content: describeFailedChecks(results) });
            signals = { ...turnSignals, failedCheck: true };
            continue;
          }
        }
        finalAnswer = res.content ?? '';
        break;
      }

      // Delegate calls of this turn: checked and granted now, started by the caller after the turn.
      const delegations: RunLoopSuspended['delegations'] = [];
      const delegateCalls = res.toolCalls.filter((c) => allTools.find((t) => t.name === c.name)?.deferred).length;
      const leftAtTurnStart = meter.left();
      const defer = (call: { id: string }, args: Record<string, unknown>) => {
        const refuse = (why: string) => ({ content: `error: the sub-run was not started: ${why}.`, summary: `not started: ${why}`, kind: 'failed' as CallKind });
        const caps = input.subruns;
        if (!caps) return refuse('this run cannot start sub-runs');
        if (caps.depth >= caps.maxDepth) return refuse(`the depth cap is reached (this run is at depth ${caps.depth}; CORRAL_SUBRUN_MAX_DEPTH is ${caps.maxDepth}) — do this part yourself`);
        if (childrenStarted + delegations.length >= caps.maxChildren) return refuse(`the fan-out cap is reached (a run may start ${caps.maxChildren} sub-runs; CORRAL_SUBRUN_MAX_CHILDREN) — do this part yourself`);
        const sheet = TaskSheet.parse(args);
        if (sheet.allowedTools) {
          const mine = offered.map((t) => t.name);
          const extra = sheet.allowedTools.filter((t) => !mine.includes(t));
          if (extra.length) return refuse(`allowedTools may only name tools this run has (${mine.join(', ')}), not ${extra.join(', ')}`);
        }
        const grant = grantBudgets(sheet.budgets, meter.left(), leftAtTurnStart, delegateCalls);
        if (!grant.ok) return refuse(grant.reason);
        meter.reserve(grant.budgets);
        delegations.push({ callId: call.id, sheet, budgets: grant.budgets });
        return 'deferred' as const;
      };
      const pending: PendingResult[] = [];
      for (const call of res.toolCalls) {
        // A cancel (or the wall time) that landed while the model or the previous tool was finishing
        // stops here: nothing new reaches the gate (classifier, approvals) or the sandbox.
        if (signal.aborted) throw new CancelledError();
        if (meter.full('toolCalls')) throw exhausted('toolCalls');
        meter.addToolCall();
        const r = await runToolCall(
          { tools: allTools, allowed, gate: deps.gate, sandbox: deps.sandbox, emit: deps.emit, clock: deps.clock, execTimeoutMs: input.execTimeoutMs, maxOutputBytes: input.maxOutputBytes, defer, ...(deps.effects ? { effects: deps.effects } : {}), ...(deps.secrets ? { secrets: deps.secrets } : {}) },
          call,
          { runId: input.runId, task: gateTask, policy: input.policy, approvals: input.approvals, evidence: [...taskEvidence, ...evidence], history, signal },
        );
        const note = repetition.observe(call.name, call.arguments);
        if (r.deferred) {
          const d = delegations.find((x) => x.callId === call.id)!;
          pending.push({ callId: call.id, tool: call.name, child: { sheet: d.sheet, budgets: d.budgets } });
          continue;
        }
        history = extendHistory(history, r.adds);
        const content = note ? `${r.content}\n\n${note}` : r.content;
        pending.push({ callId: call.id, tool: call.name, content, kind: r.kind });
        observeResult(call.name, r.kind, r.content, turnSignals);
      }
      if (delegations.length) {
        childrenStarted += delegations.length;
        const state: LoopState = {
          v: 1, turn, messages, meter: meter.snapshot(), doneRounds, malformed, blocked, evidence, history,
          repetition: repetition.state(), signals: turnSignals, childrenStarted, pending,
        };
        suspension = { outcome: 'suspended', finalAnswer: null, reason: `waiting for ${delegations.length} sub-run(s)`, usage: meter.finish(), state, delegations };
        break;
      }
      for (const p of pending) messages.push({ role: 'tool', toolCallId: p.callId, content: p.content ?? '' });
      signals = turnSignals;
    }
  } catch (err) {
    stop = err instanceof Stop ? err : stopFor(err);
  } finally {
    clearTimeout(wallTimer);
    clearTimeout(warnTimer);
  }

  if (suspension && !stop) return suspension;
  const usage = meter.finish();
  if (stop) return { outcome: stop.outcome, finalAnswer: null, reason: stop.reason, usage, ...(stop.budget ? { budgetExceeded: stop.budget } : {}), ...(stop.error ? { error: stop.error } : {}) };
  const reason = checks.length ? `the model gave its final answer and all ${checks.length} done check(s) passed` : 'the model gave its final answer';
  return { outcome: 'succeeded', finalAnswer, reason, usage };
}

/** Done-check output goes to the model and the log: secrets in it are masked first. */
async function maskChecks<T extends { output: string; summary: string }>(results: T[], deps: AgentLoopDeps): Promise<T[]> {
  if (!deps.secrets) return results;
  const out: T[] = [];
  for (const r of results) {
    const m = await deps.secrets.mask(r.output);
    if (m.found.length || m.coarse) deps.emit({ type: 'secret.masked', callId: null, where: 'done-check', found: m.found, ...(m.coarse ? { coarse: m.coarse } : {}) });
    out.push({ ...r, output: m.text });
  }
  return out;
}

function userMessage(task: string, files: string[] | undefined): string {
  if (!files?.length) return `${task}\n\n(The workspace /workspace is empty.)`;
  const shown = files.slice(0, 50);
  const more = files.length > shown.length ? `\n… and ${files.length - shown.length} more` : '';
  return `${task}\n\nFiles in /workspace:\n${shown.map((f) => `- ${f}`).join('\n')}${more}`;
}
