/**
 * The "Budgets" section of report.md: one row per budget (LLM calls, tool calls, tokens in + out,
 * cost, wall time) with used / limit / %, the budgets that passed their warning mark, and the one
 * that ran out. Usage comes from run.finished, or is added up from the log when the run did not finish.
 */
import type { BudgetName } from '../domain/events';
import { markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

const ROWS: Array<{ budget: BudgetName; label: string; used: (s: RunSummary) => number }> = [
  { budget: 'llmCalls', label: 'LLM calls', used: (s) => s.usage.llmCalls },
  { budget: 'toolCalls', label: 'Tool calls', used: (s) => s.usage.toolCalls },
  { budget: 'tokens', label: 'Tokens (in + out)', used: (s) => s.usage.inputTokens + s.usage.outputTokens },
  { budget: 'costUsd', label: 'Cost (USD)', used: (s) => s.usage.costUsd },
  { budget: 'wallTimeS', label: 'Wall time (s)', used: (s) => s.usage.wallTimeMs / 1000 },
];

export function budgetLabel(b: BudgetName): string {
  return ROWS.find((r) => r.budget === b)?.label ?? b;
}

export function formatAmount(budget: BudgetName, n: number): string {
  if (budget === 'costUsd') return n.toFixed(4);
  if (budget === 'wallTimeS') return Number.isInteger(n) ? String(n) : n.toFixed(1);
  return Math.round(n).toLocaleString('en-US');
}

function percent(used: number, limit: number | undefined): string {
  if (limit === undefined || !(limit > 0)) return '—';
  const p = (used / limit) * 100;
  return p > 0 && p < 1 ? '<1 %' : `${Math.round(p)} %`;
}

export function budgetSection(s: RunSummary): string {
  const exhausted = new Set(s.budgetsExceeded.map((b) => b.budget));
  const warned = new Set(s.budgetWarnings.map((b) => b.budget));
  const rows = ROWS.map((r) => {
    const limit = s.started?.budgets?.[r.budget];
    const used = r.used(s);
    const state = exhausted.has(r.budget) ? '⛔ **exhausted**' : warned.has(r.budget) ? '⚠ warned' : '';
    return [r.label, formatAmount(r.budget, used), limit === undefined ? '—' : formatAmount(r.budget, limit), percent(used, limit), state];
  });
  const lines = ['## Budgets', '', markdownTable(['Budget', 'Used', 'Limit', '%', 'State'], ['l', 'r', 'r', 'r', 'l'], rows), ''];
  lines.push(`Tokens: ${formatAmount('tokens', s.usage.inputTokens)} in + ${formatAmount('tokens', s.usage.outputTokens)} out.`);
  const setupMs = s.usage.setupMs ?? s.setup.finished?.ms;
  if (setupMs !== undefined) lines.push('', `Setup took ${(setupMs / 1000).toFixed(1)} s, apart from the wall time above: the wall-time budget is the agent's, from the end of setup.`);
  if (s.usageFrom === 'log') lines.push('', '_Added up from the log: the run did not finish, so there is no final usage record._');
  if (s.budgetWarnings.length) {
    lines.push('', 'Warnings:', '');
    for (const w of s.budgetWarnings) {
      lines.push(`- ⚠ ${budgetLabel(w.budget)} at ${percent(w.used, w.limit)}: ${formatAmount(w.budget, w.used)} of ${formatAmount(w.budget, w.limit)} (${w.ts})`);
    }
  }
  for (const b of s.budgetsExceeded) {
    lines.push('', `⛔ **Budget exhausted: ${budgetLabel(b.budget)}** — used ${formatAmount(b.budget, b.used)} of ${formatAmount(b.budget, b.limit)}.`);
  }
  if (!s.budgetWarnings.length && !s.budgetsExceeded.length) lines.push('', 'No budget warnings; no budget ran out.');
  return lines.join('\n');
}
