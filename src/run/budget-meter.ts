/**
 * A run's budgets: counts usage (LLM calls, tool calls, tokens, cost, wall time), emits one
 * budget.warning when a budget passes 80 % and budget.exceeded when it runs out. check() returns the
 * first exhausted budget (or null); the loop turns that into a `budget_exhausted` / `timed_out` end.
 *
 * Sub-runs spend out of the same budgets: reserve() sets aside what a delegate call granted, and when
 * the sub-run ends release() gives the reservation back and addChildUsage() counts what it really
 * used. snapshot() and the `from` option carry the meter over a suspension (the run waits for its
 * sub-runs without a worker), wall time included: it counts from the run's first start.
 */
import type { BudgetName, Emit, RunUsage } from '../domain/events';
import type { ModelUsage } from '../domain/model';
import type { RunBudgets } from '../domain/run-spec';

export interface Prices {
  inputPerMtok: number;
  outputPerMtok: number;
}

export const WARN_AT = 0.8;

/** USD for one model call's tokens at the given prices. */
export function costOf(u: ModelUsage, p: Prices): number {
  return (u.inputTokens * p.inputPerMtok + u.outputTokens * p.outputPerMtok) / 1e6;
}

/** What a meter carries over a suspension. */
export interface MeterState {
  usage: Omit<RunUsage, 'wallTimeMs'>;
  /** Epoch ms of the run's first start. */
  startedAt: number;
  warned: BudgetName[];
}

const NONE: RunBudgets = { llmCalls: 0, toolCalls: 0, tokens: 0, wallTimeS: 0, costUsd: 0 };

/** The budgets a sub-run's grant is carved out of (wall time is shared, see reserve()). */
const CARVED: readonly BudgetName[] = ['llmCalls', 'toolCalls', 'tokens', 'costUsd'];

const LABELS: Record<BudgetName, string> = { llmCalls: 'LLM calls', toolCalls: 'tool calls', tokens: 'tokens', wallTimeS: 'wall time (s)', costUsd: 'cost (USD)' };

export function budgetLabel(b: BudgetName): string {
  return LABELS[b];
}

export class BudgetMeter {
  readonly usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  private readonly warned = new Set<BudgetName>();
  private readonly started: number;
  private reserved: RunBudgets = { ...NONE };

  constructor(
    private readonly budgets: RunBudgets,
    private readonly prices: Prices,
    private readonly emit: Emit,
    private readonly clock: () => number,
    from?: MeterState,
  ) {
    this.started = from?.startedAt ?? clock();
    if (from) {
      Object.assign(this.usage, from.usage);
      for (const b of from.warned) this.warned.add(b);
    }
  }

  /** Counts one model call (at `prices`, default the run's); returns its cost in USD. Call checkWarnings() once its event is out. */
  addModelCall(u: ModelUsage, prices: Prices = this.prices): number {
    const cost = costOf(u, prices);
    this.usage.llmCalls += 1;
    this.usage.inputTokens += u.inputTokens;
    this.usage.outputTokens += u.outputTokens;
    this.usage.costUsd += cost;
    return cost;
  }

  /** Counts tokens and cost of a model call made for the run's housekeeping (compaction), not a turn. */
  addHousekeeping(u: ModelUsage, prices: Prices = this.prices): void {
    this.usage.inputTokens += u.inputTokens;
    this.usage.outputTokens += u.outputTokens;
    this.usage.costUsd += costOf(u, prices);
    this.warn();
  }

  /**
   * Sets aside budgets granted to a sub-run (they count as spent until release()). Wall time is not
   * set aside: sub-runs of a turn run side by side on the same clock, each ending by this run's deadline.
   */
  reserve(b: RunBudgets): void {
    for (const k of CARVED) this.reserved[k] += b[k];
  }

  release(b: RunBudgets): void {
    for (const k of CARVED) this.reserved[k] = Math.max(0, this.reserved[k] - b[k]);
  }

  /** Counts what a finished sub-run used (its LLM calls, tool calls, tokens and cost are this run's too). */
  addChildUsage(u: Omit<RunUsage, 'wallTimeMs'>): void {
    this.usage.llmCalls += u.llmCalls;
    this.usage.toolCalls += u.toolCalls;
    this.usage.inputTokens += u.inputTokens;
    this.usage.outputTokens += u.outputTokens;
    this.usage.costUsd += u.costUsd;
    this.warn();
  }

  /** What is left to give a sub-run now: budget − used − reserved (one LLM call kept for this run). */
  left(): RunBudgets {
    const out = { ...NONE };
    for (const b of Object.keys(NONE) as BudgetName[]) out[b] = Math.max(0, this.budgets[b] - this.used(b) - this.reserved[b] - (b === 'llmCalls' ? 1 : 0));
    return out;
  }

  /** Epoch ms of the run's first start. */
  get startedAt(): number {
    return this.started;
  }

  snapshot(): MeterState {
    const { wallTimeMs: _w, ...usage } = this.usage;
    return { usage, startedAt: this.started, warned: [...this.warned] };
  }

  addToolCall(): void {
    this.usage.toolCalls += 1;
    this.warn();
  }

  used(b: BudgetName): number {
    switch (b) {
      case 'llmCalls': return this.usage.llmCalls;
      case 'toolCalls': return this.usage.toolCalls;
      case 'tokens': return this.usage.inputTokens + this.usage.outputTokens;
      case 'costUsd': return this.usage.costUsd;
      case 'wallTimeS': return (this.clock() - this.started) / 1000;
    }
  }

  /** Whether one more of `b` (an LLM call, a tool call) would go past its budget. */
  full(b: 'llmCalls' | 'toolCalls'): boolean {
    return this.used(b) >= this.budgets[b];
  }

  /** Whether tokens or cost are past their budgets (checked after each model call). */
  overspent(): BudgetName | null {
    if (this.used('tokens') > this.budgets.tokens) return 'tokens';
    if (this.used('costUsd') > this.budgets.costUsd) return 'costUsd';
    return null;
  }

  /** Emits budget.exceeded and returns the reason text. */
  exceeded(b: BudgetName): string {
    const used = this.used(b);
    this.emit({ type: 'budget.exceeded', budget: b, limit: this.budgets[b], used });
    return `budget exhausted: ${budgetLabel(b)} (limit ${this.budgets[b]}, used ${round(b, used)})`;
  }

  /** Emits budget.warning for the wall time (the loop calls it from a timer at 80 %). */
  warnWallTime(): void {
    this.warnOnce('wallTimeS');
  }

  finish(): RunUsage {
    this.usage.wallTimeMs = this.clock() - this.started;
    return { ...this.usage };
  }

  /** Emits budget.warning for each budget that just passed 80 %. */
  checkWarnings(): void {
    this.warn();
  }

  private warn(): void {
    for (const b of ['llmCalls', 'toolCalls', 'tokens', 'costUsd'] as const) {
      const used = this.used(b);
      if (used > 0 && used >= WARN_AT * this.budgets[b]) this.warnOnce(b);
    }
  }

  private warnOnce(b: BudgetName): void {
    if (this.warned.has(b)) return;
    this.warned.add(b);
    this.emit({ type: 'budget.warning', budget: b, limit: this.budgets[b], used: this.used(b) });
  }
}

function round(b: BudgetName, used: number): string {
  return b === 'costUsd' ? used.toFixed(4) : b === 'wallTimeS' ? used.toFixed(1) : String(used);
}
