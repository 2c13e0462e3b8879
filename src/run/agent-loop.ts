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
 */
import { CancelledError, CorralError } from '../domain/errors';
import type { BudgetName, Emit, RunOutcome, RunUsage } from '../domain/events';
import type { Gate } from '../domain/gate';
import type { ChatMessage, Model } from '../domain/model';
import type { RunBudgets } from '../domain/run-spec';
import type { Sandbox } from '../domain/sandbox';
import { TOOLS, toolSpecs } from '../tools/registry';
import type { Tool } from '../tools/tool';
import { doneChecks, renderContractForModel, type TaskContract } from '../domain/task-contract';
import { BudgetMeter, WARN_AT, type Prices } from './budget-meter';
import { compactMessages, estimateTokens } from './compaction';
import { describeFailedChecks, runDoneChecks } from './done-checks';
import { RepetitionTracker } from './repetition';
import { systemPrompt } from './system-prompt';
import { runToolCall } from './tool-call';

export type { Prices } from './budget-meter';

export interface AgentLoopDeps {
  model: Model;
  sandbox: Sandbox;
  gate: Gate;
  emit: Emit;
  /** Milliseconds since the epoch; injected so tests control time. */
  clock: () => number;
  prices: Prices;
  tools?: readonly Tool[];
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
}

export interface RunLoopResult {
  outcome: RunOutcome;
  finalAnswer: string | null;
  reason: string;
  usage: RunUsage;
  /** Set when a budget ended the run. */
  budgetExceeded?: BudgetName;
}

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
  ) {}
}

export async function runAgentLoop(deps: AgentLoopDeps, input: AgentLoopInput): Promise<RunLoopResult> {
  const allTools = deps.tools ?? TOOLS;
  const allowed = input.contract?.allowedTools ? new Set(input.contract.allowedTools) : null;
  const offered = allowed ? allTools.filter((t) => allowed.has(t.name)) : allTools;
  const specs = toolSpecs(offered);
  const checks = input.contract ? doneChecks(input.contract) : [];
  const repetition = new RepetitionTracker();
  let doneRounds = 0;
  const { budgets } = input;
  const meter = new BudgetMeter(budgets, deps.prices, deps.emit, deps.clock);

  // One signal for everything in flight: the caller's cancel or the wall-time budget.
  const wall = new AbortController();
  const wallTimer = setTimeout(() => wall.abort(), budgets.wallTimeS * 1000);
  const warnTimer = setTimeout(() => meter.warnWallTime(), budgets.wallTimeS * 1000 * WARN_AT);
  wallTimer.unref?.();
  warnTimer.unref?.();
  const signal = input.signal ? AbortSignal.any([input.signal, wall.signal]) : wall.signal;

  let messages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(offered) + (input.context ? `\n\n${input.context}` : '') },
    { role: 'user', content: userMessage(input.contract ? renderContractForModel(input.contract) : input.task, input.workspaceFiles) },
  ];
  const evidence: string[] = [];
  let finalAnswer: string | null = null;
  let malformed = 0;
  let blocked = 0;

  const exhausted = (b: BudgetName) => new Stop(b === 'wallTimeS' ? 'timed_out' : 'budget_exhausted', meter.exceeded(b), b);
  /** Turns an abort into the right stop: the wall-time budget or a cancellation. */
  const stopFor = (err: unknown): Stop => {
    if (wall.signal.aborted && !input.signal?.aborted) return exhausted('wallTimeS');
    if (input.signal?.aborted) {
      const why = input.signal.reason;
      return new Stop('cancelled', typeof why === 'string' ? `the run was cancelled (${why})` : 'the run was cancelled');
    }
    if (err instanceof CancelledError) return new Stop('cancelled', 'the run was cancelled');
    if (err instanceof CorralError) return new Stop('error', `${err.code}: ${err.message}`);
    throw err;
  };

  let stop: Stop | undefined;
  try {
    for (let turn = 1; ; turn++) {
      if (signal.aborted) throw new CancelledError();
      if (meter.full('llmCalls')) throw exhausted('llmCalls');
      const tokensBefore = estimateTokens(messages);
      if (tokensBefore > (input.compactAtTokens ?? 60_000)) {
        const c = await compactMessages(messages, { model: deps.model, keepRecent: input.keepRecent ?? 8, signal });
        meter.addHousekeeping(c.usage);
        if (c.removed > 0) {
          deps.emit({ type: 'context.compacted', messagesBefore: messages.length, messagesAfter: c.messages.length, tokensBefore, tokensAfter: estimateTokens(c.messages) });
          messages = c.messages;
        }
      }
      const t0 = deps.clock();
      const res = await deps.model.complete({ messages, tools: specs, signal });
      const cost = meter.addModelCall(res.usage);
      deps.emit({
        type: 'model.response', turn, content: res.content, toolCalls: res.toolCalls,
        usage: res.usage, costUsd: cost, ms: deps.clock() - t0, model: res.model, finishReason: res.finishReason,
      });
      meter.checkWarnings();
      messages.push({ role: 'assistant', content: res.content, ...(res.toolCalls.length ? { toolCalls: res.toolCalls } : {}) });
      const over = meter.overspent();
      if (over) throw exhausted(over);

      if (res.toolCalls.length === 0) {
        if (checks.length) {
          const results = await runDoneChecks(deps.sandbox, checks, { timeoutMs: input.execTimeoutMs, maxOutputBytes: input.maxOutputBytes, signal });
          for (const r of results) deps.emit({ type: 'done.check', command: r.command, ok: r.ok, exitCode: r.exitCode, summary: r.summary });
          const failed = results.filter((r) => !r.ok);
          if (failed.length) {
            doneRounds += 1;
            const which = failed.map((r) => `\`${r.command}\` (${r.summary})`).join(', ');
            if (doneRounds >= MAX_DONE_ROUNDS) throw new Stop('failed', `done checks still failing after ${doneRounds} rounds: ${which}`);
            messages.push({ role: 'user', content: describeFailedChecks(results) });
            continue;
          }
        }
        finalAnswer = res.content ?? '';
        break;
      }

      for (const call of res.toolCalls) {
        // A cancel (or the wall time) that landed while the model or the previous tool was finishing
        // stops here: nothing new reaches the gate (classifier, approvals) or the sandbox.
        if (signal.aborted) throw new CancelledError();
        if (meter.full('toolCalls')) throw exhausted('toolCalls');
        meter.addToolCall();
        const r = await runToolCall(
          { tools: allTools, allowed, gate: deps.gate, sandbox: deps.sandbox, emit: deps.emit, clock: deps.clock, execTimeoutMs: input.execTimeoutMs, maxOutputBytes: input.maxOutputBytes },
          call,
          { runId: input.runId, task: input.task, policy: input.policy, approvals: input.approvals, evidence: [...evidence], signal },
        );
        const note = repetition.observe(call.name, call.arguments);
        messages.push({ role: 'tool', toolCallId: call.id, content: note ? `${r.content}\n\n${note}` : r.content });
        malformed = r.kind === 'malformed' ? malformed + 1 : 0;
        if (malformed >= MAX_MALFORMED_IN_A_ROW) throw new Stop('error', `the model sent ${malformed} malformed tool calls in a row`);
        blocked = r.kind === 'blocked' || r.kind === 'refused' ? blocked + 1 : r.kind === 'malformed' ? blocked : 0;
        if (blocked >= MAX_BLOCKED_IN_A_ROW) throw new Stop('policy_aborted', `${blocked} tool calls in a row were blocked by the policy; the run was stopped`);
        if (r.kind === 'ok' || r.kind === 'failed') {
          evidence.push(`${call.name} output: ${r.content.slice(0, EVIDENCE_CHARS)}`);
          if (evidence.length > EVIDENCE_ITEMS) evidence.shift();
        }
      }
    }
  } catch (err) {
    stop = err instanceof Stop ? err : stopFor(err);
  } finally {
    clearTimeout(wallTimer);
    clearTimeout(warnTimer);
  }

  const usage = meter.finish();
  if (stop) return { outcome: stop.outcome, finalAnswer: null, reason: stop.reason, usage, ...(stop.budget ? { budgetExceeded: stop.budget } : {}) };
  const reason = checks.length ? `the model gave its final answer and all ${checks.length} done check(s) passed` : 'the model gave its final answer';
  return { outcome: 'succeeded', finalAnswer, reason, usage };
}

function userMessage(task: string, files: string[] | undefined): string {
  if (!files?.length) return `${task}\n\n(The workspace /workspace is empty.)`;
  const shown = files.slice(0, 50);
  const more = files.length > shown.length ? `\n… and ${files.length - shown.length} more` : '';
  return `${task}\n\nFiles in /workspace:\n${shown.map((f) => `- ${f}`).join('\n')}${more}`;
}
