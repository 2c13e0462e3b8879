/**
 * The `corral watch` view: turns a run's events into readable lines — each model turn, each step
 * (tool + short arguments), the gate's decision (allowed / BLOCKED + why), the result, approval
 * prompts with the exact `corral approve` command — and budget bars computed from the events
 * (budgets from run.started; usage from model.response, tool.call, run.finished).
 *
 * Pure: no I/O and no clock of its own (callers pass `now`). In plain mode a budget line is printed
 * with each model turn; in live mode (a terminal) the caller keeps footer() at the bottom instead.
 *
 * A streaming answer arrives as live deltas first: pushDelta() returns the text to show as it comes
 * (`turn 3 ▸ …`, control characters made visible), and that turn's model.response then prints only
 * what the text did not show (final answer or how many tool calls, and the budget line).
 */
import type { BudgetName, LiveDelta, RunEvent, RunUsage } from '../domain/events';
import type { GateVerdict } from '../domain/gate';
import { visible } from './live-output';
import { clip, describeArgs, renderEvent } from './render-event';

export { visible };

export interface WatchViewOptions {
  /** true: the caller shows footer() live, so budget lines are not repeated in the log. */
  live: boolean;
  /** The command a person runs to approve a call, e.g. `corral approve RUN CALL --api URL`. */
  approveCommand?: (runId: string, callId: string) => string;
}

const BUDGETS: ReadonlyArray<{ name: BudgetName; label: string }> = [
  { name: 'llmCalls', label: 'LLM calls' },
  { name: 'toolCalls', label: 'tool calls' },
  { name: 'tokens', label: 'tokens' },
  { name: 'costUsd', label: 'cost' },
  { name: 'wallTimeS', label: 'wall time' },
];

const BAR_WIDTH = 10;
const STEP_INDENT = '         ';

/** `▓▓▓▓░░░░░░` for used/limit, rounded; never full before the limit is reached. */
export function bar(used: number, limit: number, width = BAR_WIDTH): string {
  if (!(limit > 0)) return '░'.repeat(width);
  let n = Math.round(Math.min(1, used / limit) * width);
  if (used < limit && n === width) n = width - 1;
  return '▓'.repeat(n) + '░'.repeat(width - n);
}

function compact(n: number): string {
  if (n >= 1e6) return `${+(n / 1e6).toFixed(n >= 1e7 ? 0 : 1)}M`;
  if (n >= 1e3) return `${+(n / 1e3).toFixed(n >= 1e4 ? 0 : 1)}k`;
  return String(Math.round(n));
}

function amount(name: BudgetName, used: number, limit: number): string {
  switch (name) {
    case 'costUsd':
      return `$${used.toFixed(used > 0 && used < 0.01 ? 4 : 2)}/$${limit.toFixed(2)}`;
    case 'wallTimeS':
      return `${used < 10 ? used.toFixed(1) : Math.round(used)}/${limit} s`;
    case 'tokens':
      return `${compact(used)}/${compact(limit)}`;
    default:
      return `${used}/${limit}`;
  }
}

function decisionText(v: GateVerdict): string {
  const reason = v.reason
    .replace(/^Allowed( by the policy)?: /, '')
    .replace(/^This call was blocked: /, '')
    .replace(/; do not retry the same call — choose another approach or explain what you need\.$/, '');
  return v.decision === 'allow' ? `✓ allowed: ${clip(reason, 140)}` : `✗ BLOCKED: ${clip(reason, 160)}`;
}

/** The last non-empty line of a bash result's stdout/stderr excerpt, for a hint of what happened. */
function lastOutputLine(output: string | undefined): string | null {
  if (!output) return null;
  const lines = output.split('\n').map((l) => l.trim()).filter((l) => l && !/^(exit code: |stdout:$|stderr:$|\(no output\)$|\[output truncated)/.test(l));
  return lines.length ? clip(lines.at(-1)!, 70) : null;
}

export class WatchView {
  private budgets: Record<BudgetName, number> | null = null;
  private usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  private startedAt: number | null = null;
  /** The run waited for sub-runs: a later sandbox.ready does not restart its wall-time clock. */
  private resumed = false;
  private lastTs: number | null = null;
  private receivedAt: number | null = null;
  private step = 0;
  private readonly decided = new Set<string>();
  private readonly pending = new Map<string, string>();
  private runId: string | null = null;
  /** The turn whose text is streaming now, the last turn that got its model.response, tool names shown. */
  private streaming: number | null = null;
  private lastTurn = 0;
  private readonly toolsShown = new Set<number>();
  finished: Extract<RunEvent, { type: 'run.finished' }> | null = null;

  constructor(private readonly opts: WatchViewOptions) {}

  /** Lines to print for one event (possibly none); `now` is when it arrived (for the live wall time). */
  push(e: RunEvent, now?: number): string[] {
    this.runId = e.runId;
    const ts = Date.parse(e.ts);
    if (Number.isFinite(ts)) this.lastTs = ts;
    this.receivedAt = now ?? null;
    switch (e.type) {
      case 'run.started': {
        const attempt = (e as { attempt?: number }).attempt;
        const note = (e as { note?: string }).note;
        this.budgets = { ...e.budgets };
        this.usage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
        this.startedAt = Number.isFinite(ts) ? ts : null;
        this.resumed = false;
        this.step = 0;
        return [
          `▶ ${e.runId} started on ${e.workerId}${attempt && attempt > 1 ? ` (attempt ${attempt})` : ''}`,
          `  model: ${e.model} · policy: ${e.policy} · approvals: ${e.approvals ? 'on' : 'off (unattended: calls that need a human are refused)'}`,
          ...(note ? [`  note: ${note}`] : []),
        ];
      }
      case 'model.response': {
        this.usage.llmCalls += 1;
        this.usage.inputTokens += e.usage.inputTokens;
        this.usage.outputTokens += e.usage.outputTokens;
        this.usage.costUsd += e.costUsd;
        const final = e.toolCalls.length === 0;
        const streamed = this.streaming === e.turn;
        this.streaming = null;
        this.lastTurn = Math.max(this.lastTurn, e.turn);
        const said = e.content ? ` “${clip(e.content, final ? 100 : 110)}”` : '';
        const on = e.route ? ` [${e.route.tier}: ${e.route.model}]` : '';
        const head = streamed
          ? `  ↳ ${final ? 'final answer' : `${e.toolCalls.length} tool call${e.toolCalls.length === 1 ? '' : 's'}`}${on}`
          : `turn ${e.turn}${final ? ' · final answer' : ''}${on}${said}`;
        return !this.opts.live && !final && this.budgets ? [head, `  ${this.budgetSummary()}`] : [head];
      }
      case 'tool.call': {
        this.usage.toolCalls += 1;
        this.step += 1;
        return [`  step ${this.step}  ${e.tool}  ${describeArgs(e.tool, e.args)}`];
      }
      case 'policy.decision': {
        this.decided.add(e.callId);
        this.pending.delete(e.callId);
        return [`${STEP_INDENT}${decisionText(e.verdict)}`];
      }
      case 'approval.pending': {
        const cmd = this.approveCommand(e.runId, e.callId);
        this.pending.set(e.callId, cmd);
        return [
          `${STEP_INDENT}⏸ waiting for a human: ${clip(e.reason, 140)}${e.risk ? ` (risk: ${e.risk})` : ''}`,
          `${STEP_INDENT}  approve: ${cmd}`,
          `${STEP_INDENT}  deny:    ${cmd} --deny`,
        ];
      }
      case 'tool.result': {
        if (e.blocked && this.decided.has(e.callId)) return [];
        if (e.blocked) return [`${STEP_INDENT}✗ REFUSED: ${clip(e.summary, 160)}`];
        const tail = e.tool === 'bash' ? lastOutputLine(e.output) : null;
        return [`${STEP_INDENT}← ${e.ok ? 'ok' : 'failed'}: ${clip(e.summary, 110)}${tail ? ` · ${tail}` : ''}`];
      }
      case 'budget.warning':
        return [`  ⚠ budget warning: ${this.label(e.budget)} at ${Math.round((e.used / e.limit) * 100)} % (${amount(e.budget, e.used, e.limit)})`];
      case 'budget.exceeded':
        return [`  ✗ budget exhausted: ${this.label(e.budget)} (${amount(e.budget, e.used, e.limit)})`];
      case 'run.finished': {
        this.finished = e;
        this.usage = { ...e.usage };
        this.pending.clear();
        return [`■ ${e.outcome} — ${e.reason}`, ...(this.budgets ? this.budgetBlock() : [])];
      }
      case 'sandbox.ready':
      case 'context.loaded':
        // The budget meter (and its wall-time clock) starts when the agent loop does, after these;
        // a sandbox re-created after waiting for sub-runs does not restart it.
        if (Number.isFinite(ts) && !this.resumed) this.startedAt = ts;
        return this.other(e);
      case 'run.suspended':
        this.resumed = true;
        return this.other(e);
      case 'subrun.finished':
        // What a sub-run used is the run's usage too (its budgets were carved out of the run's).
        this.usage.llmCalls += e.usage.llmCalls;
        this.usage.toolCalls += e.usage.toolCalls;
        this.usage.inputTokens += e.usage.inputTokens;
        this.usage.outputTokens += e.usage.outputTokens;
        this.usage.costUsd += e.usage.costUsd;
        return this.other(e);
      default:
        return this.other(e);
    }
  }

  /** Text to write as it arrives (no newline at its end), for one live delta; '' when nothing to show. */
  pushDelta(d: LiveDelta): string {
    if (d.turn <= this.lastTurn || this.finished) return '';
    let out = '';
    if (this.streaming !== d.turn) {
      this.streaming = d.turn;
      this.toolsShown.clear();
      out += `turn ${d.turn} ▸ `;
    }
    if (d.text) out += visible(d.text).replace(/\n/g, '\n    ');
    for (const t of d.tools ?? []) {
      if (!t.name || this.toolsShown.has(t.index)) continue;
      this.toolsShown.add(t.index);
      out += ` [→ ${visible(t.name).slice(0, 60)}]`;
    }
    if (d.note) out += ` [${visible(d.note)}]`;
    return out;
  }

  private other(e: RunEvent): string[] {
    const line = renderEvent(e);
    return line ? [line] : [];
  }

  /** The live footer: budget bars and the approval commands of calls still waiting. */
  footer(now?: number): string[] {
    if (this.finished || !this.budgets) return [];
    const waiting = [...this.pending.values()].map((cmd) => `  ⏸ waiting for approval: ${cmd}`);
    return [`  ── ${this.runId ?? 'run'} · ${this.pending.size ? 'awaiting approval' : 'running'} ──`, ...this.budgetBlock(now), ...waiting];
  }

  /** One line with every budget: `budget: LLM calls ▓▓░░░░░░░░ 2/10 · tool calls …`. */
  budgetSummary(now?: number): string {
    return `budget: ${BUDGETS.map((b) => {
      const { used, limit } = this.use(b.name, now);
      return `${b.name === 'wallTimeS' ? 'time' : b.label} ${bar(used, limit)} ${amount(b.name, used, limit)}`;
    }).join(' · ')}`;
  }

  /** One line per budget, labels aligned. */
  budgetBlock(now?: number): string[] {
    return BUDGETS.map((b) => {
      const { used, limit } = this.use(b.name, now);
      const warn = used >= 0.8 * limit && used > 0 ? (used >= limit ? '  ✗' : '  ⚠') : '';
      return `  ${b.label.padEnd(10)} ${bar(used, limit)} ${amount(b.name, used, limit)}${warn}`;
    });
  }

  private use(name: BudgetName, now?: number): { used: number; limit: number } {
    const limit = this.budgets?.[name] ?? 0;
    switch (name) {
      case 'llmCalls': return { used: this.usage.llmCalls, limit };
      case 'toolCalls': return { used: this.usage.toolCalls, limit };
      case 'tokens': return { used: this.usage.inputTokens + this.usage.outputTokens, limit };
      case 'costUsd': return { used: this.usage.costUsd, limit };
      case 'wallTimeS': {
        if (this.finished) return { used: this.usage.wallTimeMs / 1000, limit };
        if (this.startedAt === null || this.lastTs === null) return { used: 0, limit };
        // Server time of the last event, plus the time since it arrived here (no clock skew, and a
        // replayed history does not count the hours since the run started).
        const since = now !== undefined && this.receivedAt !== null ? Math.max(0, now - this.receivedAt) : 0;
        return { used: Math.max(0, this.lastTs - this.startedAt + since) / 1000, limit };
      }
    }
  }

  private label(b: BudgetName): string {
    return BUDGETS.find((x) => x.name === b)?.label ?? b;
  }

  private approveCommand(runId: string, callId: string): string {
    return this.opts.approveCommand ? this.opts.approveCommand(runId, callId) : `corral approve ${runId} ${callId}`;
  }
}
