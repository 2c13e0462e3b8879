/**
 * The budget carve-out of a `delegate` call: what a sub-run may spend comes out of what its parent
 * has left. Pure.
 *
 * - Left = the parent's budget − what it used (its own turns and calls, plus what finished sub-runs
 *   used) − what is reserved for sub-runs of this turn; for LLM calls one more is kept back, so the
 *   parent can read the results. Wall time left counts from the parent's start.
 * - A budget the sheet names must be at most what is left, else the call is refused saying so.
 * - A budget the sheet omits gets an equal share of what was left when the turn began: with k
 *   delegate calls in the turn, 1/(k+1) each (the parent keeps a share too). Wall time is the
 *   exception: sub-runs run side by side on one clock, so siblings do not divide it; an omitted one
 *   gets three quarters of what is left (the parent keeps the rest to use the results), and none
 *   outlives the parent's deadline whatever it asks.
 * - A share below a budget's minimum (an LLM call, 1,000 tokens, 5 s) is refused: too little is left.
 */
import type { BudgetName } from '../domain/events';
import type { RunBudgets } from '../domain/run-spec';
import type { SheetBudgets } from '../domain/subrun';

export const BUDGET_NAMES: readonly BudgetName[] = ['llmCalls', 'toolCalls', 'tokens', 'wallTimeS', 'costUsd'];

/** The smallest budget a run can have (RunBudgets' minimums). */
export const MIN_BUDGETS: Readonly<RunBudgets> = { llmCalls: 1, toolCalls: 0, tokens: 1000, wallTimeS: 5, costUsd: 0 };

const LABEL: Record<BudgetName, string> = { llmCalls: 'LLM calls', toolCalls: 'tool calls', tokens: 'tokens', wallTimeS: 's of wall time', costUsd: 'USD' };

function floorTo(b: BudgetName, n: number): number {
  return b === 'costUsd' ? Math.floor(n * 1e6) / 1e6 : Math.floor(n);
}

function show(b: BudgetName, n: number): string {
  // Rounded down, so "has only $X left" never shows more than there is.
  return b === 'costUsd' ? `$${(Math.floor(n * 1e4) / 1e4).toFixed(4)}` : `${floorTo(b, n)} ${LABEL[b]}`;
}

/** A default share must leave the sub-run able to work: cost above zero too. */
const MIN_SHARE: Readonly<RunBudgets> = { ...MIN_BUDGETS, costUsd: 1e-6 };

/** An omitted wall time: this fraction of what the parent has left. */
const WALL_SHARE = 0.75;

export type Grant = { ok: true; budgets: RunBudgets } | { ok: false; reason: string };

/**
 * The budgets granted to one sub-run. `left` is what the parent has left now (reservations of
 * earlier delegate calls in the turn already taken out); `leftAtTurnStart` and `delegationsInTurn`
 * size the default shares.
 */
export function grantBudgets(asked: SheetBudgets, left: Readonly<RunBudgets>, leftAtTurnStart: Readonly<RunBudgets>, delegationsInTurn: number): Grant {
  const out = {} as RunBudgets;
  const share = 1 / (Math.max(1, delegationsInTurn) + 1);
  for (const b of BUDGET_NAMES) {
    const have = Math.max(0, left[b]);
    const want = asked[b];
    if (want !== undefined) {
      if (want > have + 1e-9) {
        return { ok: false, reason: `the sub-run asks for ${show(b, want)} but this run has only ${show(b, have)} left to give${b === 'llmCalls' ? ' (one LLM call is kept for this run to read the results)' : ''}; ask for less or leave it out to get a share` };
      }
      out[b] = want;
      continue;
    }
    const given = floorTo(b, b === 'wallTimeS' ? have * WALL_SHARE : Math.min(have, leftAtTurnStart[b] * share));
    if (given < MIN_SHARE[b]) {
      return { ok: false, reason: `too little budget is left for a sub-run: ${show(b, have)} left${b === 'llmCalls' ? ' after the one this run keeps' : ''}, and a sub-run needs at least ${show(b, MIN_SHARE[b])}` };
    }
    out[b] = given;
  }
  return { ok: true, budgets: out };
}
