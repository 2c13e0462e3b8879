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
import { CancelledError, CorralError, describeZodIssues } from '../domain/errors';
import type { BudgetName, Emit, RunOutcome, RunUsage } from '../domain/events';
import type { Gate } from '../domain/gate';
import type { ChatMessage, Model, ModelToolCall } from '../domain/model';
import type { RunBudgets } from '../domain/run-spec';
import type { Sandbox } from '../domain/sandbox';
import { TOOLS, toolSpecs } from '../tools/registry';
import type { Tool } from '../tools/tool';
import { systemPrompt } from './system-prompt';

export interface Prices {
  inputPerMtok: number;
  outputPerMtok: number;
}

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

class Stop {
  constructor(
    readonly outcome: RunOutcome,
    readonly reason: string,
    readonly budget?: BudgetName,
  ) {}
}

export async function runAgentLoop(deps: AgentLoopDeps, input: AgentLoopInput): Promise<RunLoopResult> {
  const tools = deps.tools ?? TOOLS;
  const specs = toolSpecs(tools);
  const { budgets } = input;
  const started = deps.clock();
  const usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };

  // One signal for everything in flight: the caller's cancel or the wall-time budget.
  const wall = new AbortController();
  const wallTimer = setTimeout(() => wall.abort(), budgets.wallTimeS * 1000);
  wallTimer.unref?.();
  const signal = input.signal ? AbortSignal.any([input.signal, wall.signal]) : wall.signal;

  const messages: ChatMessage[] = [
    { role: 'system', content: systemPrompt(tools) },
    { role: 'user', content: userMessage(input.task, input.workspaceFiles) },
  ];
  const evidence: string[] = [];
  let finalAnswer: string | null = null;

  const exceeded = (budget: BudgetName, limit: number, used: number): Stop => {
    deps.emit({ type: 'budget.exceeded', budget, limit, used });
    return new Stop('failed', `budget exceeded: ${budgetLabel(budget)} (limit ${limit}, used ${roundUsed(budget, used)})`, budget);
  };
  /** Turns an abort into the right stop: the wall-time budget or a cancellation. */
  const stopFor = (err: unknown): Stop => {
    if (wall.signal.aborted && !input.signal?.aborted) return exceeded('wallTimeS', budgets.wallTimeS, (deps.clock() - started) / 1000);
    if (input.signal?.aborted || err instanceof CancelledError) return new Stop('cancelled', 'the run was cancelled');
    if (err instanceof CorralError) return new Stop('failed', `${err.code}: ${err.message}`);
    throw err;
  };

  let stop: Stop | undefined;
  try {
    for (let turn = 1; ; turn++) {
      if (signal.aborted) throw new CancelledError();
      if (usage.llmCalls >= budgets.llmCalls) throw exceeded('llmCalls', budgets.llmCalls, usage.llmCalls);
      const t0 = deps.clock();
      const res = await deps.model.complete({ messages, tools: specs, signal });
      usage.llmCalls += 1;
      usage.inputTokens += res.usage.inputTokens;
      usage.outputTokens += res.usage.outputTokens;
      const cost = (res.usage.inputTokens * deps.prices.inputPerMtok + res.usage.outputTokens * deps.prices.outputPerMtok) / 1e6;
      usage.costUsd += cost;
      deps.emit({
        type: 'model.response', turn, content: res.content, toolCalls: res.toolCalls.map((c) => ({ id: c.id, name: c.name })),
        usage: res.usage, costUsd: cost, ms: deps.clock() - t0,
      });
      messages.push({ role: 'assistant', content: res.content, ...(res.toolCalls.length ? { toolCalls: res.toolCalls } : {}) });

      if (res.toolCalls.length === 0) {
        finalAnswer = res.content ?? '';
        break;
      }
      if (usage.costUsd > budgets.costUsd) throw exceeded('costUsd', budgets.costUsd, usage.costUsd);

      for (const call of res.toolCalls) {
        // A cancel (or the wall time) that landed while the model or the previous tool was finishing
        // stops here: nothing new reaches the gate (classifier, approvals) or the sandbox.
        if (signal.aborted) throw new CancelledError();
        if (usage.toolCalls >= budgets.toolCalls) throw exceeded('toolCalls', budgets.toolCalls, usage.toolCalls);
        usage.toolCalls += 1;
        const content = await runToolCall(deps, tools, input, call, evidence, signal);
        messages.push({ role: 'tool', toolCallId: call.id, content });
      }
    }
  } catch (err) {
    stop = err instanceof Stop ? err : stopFor(err);
  } finally {
    clearTimeout(wallTimer);
  }

  usage.wallTimeMs = deps.clock() - started;
  if (stop) return { outcome: stop.outcome, finalAnswer: null, reason: stop.reason, usage, ...(stop.budget ? { budgetExceeded: stop.budget } : {}) };
  return { outcome: 'succeeded', finalAnswer, reason: 'the model gave its final answer', usage };
}

/**
 * One tool call: parse → validate → gate → execute. Returns what the model sees. Infrastructure
 * errors and cancellation propagate; everything else is a result.
 */
async function runToolCall(
  deps: AgentLoopDeps,
  tools: readonly Tool[],
  input: AgentLoopInput,
  call: ModelToolCall,
  evidence: string[],
  signal: AbortSignal,
): Promise<string> {
  const t0 = deps.clock();
  const refuse = (args: unknown, content: string, summary: string): string => {
    deps.emit({ type: 'tool.call', callId: call.id, tool: call.name, args });
    deps.emit({ type: 'tool.result', callId: call.id, tool: call.name, ok: false, blocked: false, summary, ms: deps.clock() - t0 });
    return content;
  };

  const tool = tools.find((t) => t.name === call.name);
  if (!tool) {
    const names = tools.map((t) => t.name).join(', ');
    return refuse(call.arguments, `error: there is no tool named "${call.name}". Available tools: ${names}.`, `unknown tool "${call.name}"`);
  }
  let raw: unknown;
  try {
    raw = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch (e) {
    return refuse(call.arguments, `error: the arguments are not valid JSON (${(e as Error).message}). Send a JSON object matching the ${tool.name} schema.`, 'arguments were not valid JSON');
  }
  const parsed = tool.schema.safeParse(raw);
  if (!parsed.success) {
    const { message } = describeZodIssues(parsed.error.issues);
    return refuse(raw, `error: invalid arguments for ${tool.name}: ${message}`, `invalid arguments: ${message}`);
  }
  const args = parsed.data as Record<string, unknown>;
  deps.emit({ type: 'tool.call', callId: call.id, tool: tool.name, args });

  const verdict = await deps.gate.decide(
    { callId: call.id, tool: tool.name, args },
    { runId: input.runId, task: input.task, policy: input.policy, approvals: input.approvals, evidence: [...evidence], signal },
  );
  deps.emit({ type: 'policy.decision', callId: call.id, tool: tool.name, verdict });
  if (verdict.decision === 'deny') {
    deps.emit({ type: 'tool.result', callId: call.id, tool: tool.name, ok: false, blocked: true, summary: verdict.reason, ms: deps.clock() - t0 });
    return verdict.reason;
  }

  if (signal.aborted) throw new CancelledError();
  const out = await tool.execute(args, { sandbox: deps.sandbox, execTimeoutMs: input.execTimeoutMs, maxOutputBytes: input.maxOutputBytes, signal });
  // A call that completed is logged even if the run was cancelled meanwhile (its effects happened);
  // the loop stops before the next call or model turn.
  const { stdout: _o, stderr: _e, ...exec } = out.exec ?? ({} as NonNullable<typeof out.exec>);
  deps.emit({
    type: 'tool.result', callId: call.id, tool: tool.name, ok: out.ok, blocked: false, summary: out.summary,
    ...(out.exec ? { exec } : {}), ms: deps.clock() - t0,
  });
  evidence.push(`${tool.name} output: ${out.content.slice(0, EVIDENCE_CHARS)}`);
  if (evidence.length > EVIDENCE_ITEMS) evidence.shift();
  return out.content;
}

function userMessage(task: string, files: string[] | undefined): string {
  if (!files?.length) return `${task}\n\n(The workspace /workspace is empty.)`;
  const shown = files.slice(0, 50);
  const more = files.length > shown.length ? `\n… and ${files.length - shown.length} more` : '';
  return `${task}\n\nFiles in /workspace:\n${shown.map((f) => `- ${f}`).join('\n')}${more}`;
}

function budgetLabel(b: BudgetName): string {
  return { llmCalls: 'LLM calls', toolCalls: 'tool calls', wallTimeS: 'wall time (s)', costUsd: 'cost (USD)' }[b];
}

function roundUsed(b: BudgetName, used: number): string {
  return b === 'costUsd' ? used.toFixed(4) : b === 'wallTimeS' ? used.toFixed(1) : String(used);
}
