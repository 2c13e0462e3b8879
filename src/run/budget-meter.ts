/**
 * A run's budgets: counts usage (LLM calls, tool calls, tokens, cost, wall time), emits one
 * budget.warning when a budget passes 80 % and budget.exceeded when it runs out. check() returns the
 * first exhausted budget (or null); the loop turns that into a `budget_exhausted` / `timed_out` end.
 */
import type { BudgetName, Emit, RunUsage } from '../domain/events';
import type { ModelUsage } from '../domain/model';
import type { RunBudgets } from '../domain/run-spec';

export interface Prices {
  inputPerMtok: number;
  outputPerMtok: number;
}

export const WARN_AT = 0.8;

const LABELS: Record<BudgetName, string> = { llmCalls: 'LLM calls', toolCalls: 'tool calls', tokens: 'tokens', wallTimeS: 'wall time (s)', costUsd: 'cost (USD)' };

export function budgetLabel(b: BudgetName): string {
  return LABELS[b];
}

export class BudgetMeter {
  readonly usage: RunUsage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  private readonly warned = new Set<BudgetName>();
  private readonly started: number;

  constructor(
    private readonly budgets: RunBudgets,
    private readonly prices: Prices,
    private readonly emit: Emit,
    private readonly clock: () => number,
  ) {
    this.started = clock();
  }

  /** Counts one model call; returns its cost in USD. Call checkWarnings() once its event is out. */
  addModelCall(u: ModelUsage): number {
    const cost = (u.inputTokens * this.prices.inputPerMtok + u.outputTokens * this.prices.outputPerMtok) / 1e6;
    this.usage.llmCalls += 1;
    this.usage.inputTokens += u.inputTokens;
    this.usage.outputTokens += u.outputTokens;
    this.usage.costUsd += cost;
    return cost;
  }

  /** Counts tokens and cost of a model call made for the run's housekeeping (compaction), not a turn. */
  addHousekeeping(u: ModelUsage): void {
    this.usage.inputTokens += u.inputTokens;
    this.usage.outputTokens += u.outputTokens;
    this.usage.costUsd += (u.inputTokens * this.prices.inputPerMtok + u.outputTokens * this.prices.outputPerMtok) / 1e6;
    this.warn();
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
