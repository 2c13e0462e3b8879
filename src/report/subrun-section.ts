/**
 * The "Sub-runs" and "Models" sections of report.md.
 *
 * Sub-runs: the tree of runs this run started with `delegate` (and theirs, from each child's result
 * sheet), each with its outcome and its use of the budgets it was granted, drawn as a text tree, plus
 * the split of this run's usage between its own turns and its sub-runs, and the waits (sandbox removed,
 * worker slot free). Models: with model routing, turns, tokens and cost per model, and what the same
 * tokens would have cost on the strong model alone.
 *
 * Tasks and reasons were written by models: the tree is a fenced block, the table cells escaped.
 */
import type { BudgetName, RunOutcome, RunUsage } from '../domain/events';
import type { SubRunNode } from '../domain/subrun';
import { formatAmount } from './budget-section';
import { codeSpan, escapeInline, fenced, markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

/** The report's outcome marks (report-markdown.ts keeps the same set; not imported, to avoid a cycle). */
const OUTCOME_MARKS: Readonly<Record<RunOutcome, string>> = { succeeded: '✅', failed: '❌', budget_exhausted: '🪫', timed_out: '⏱', policy_aborted: '⛔', setup_failed: '🧱', cancelled: '⏹', error: '💥' };

function use(u: RunUsage, b: Record<BudgetName, number>): string {
  return [
    `LLM calls ${u.llmCalls}/${b.llmCalls}`,
    `tool calls ${u.toolCalls}/${b.toolCalls}`,
    `tokens ${formatAmount('tokens', u.inputTokens + u.outputTokens)}/${formatAmount('tokens', b.tokens)}`,
    `$${formatAmount('costUsd', u.costUsd)}/$${formatAmount('costUsd', b.costUsd)}`,
    `${formatAmount('wallTimeS', Math.round(u.wallTimeMs / 100) / 10)}/${b.wallTimeS} s`,
  ].join(' · ');
}

function oneLine(text: string, max: number): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function drawTree(nodes: readonly SubRunNode[], prefix: string, out: string[], depth = 0): void {
  nodes.forEach((n, i) => {
    const last = i === nodes.length - 1;
    out.push(`${prefix}${last ? '└─ ' : '├─ '}${OUTCOME_MARKS[n.outcome] ?? '❓'} ${n.runId} ${n.outcome} — “${oneLine(n.task, 70)}”`);
    const inner = `${prefix}${last ? '   ' : '│  '}`;
    out.push(`${inner}   used ${use(n.usage, n.budgets)}`);
    if (n.outcome !== 'succeeded') out.push(`${inner}   reason: ${oneLine(n.reason, 150)}`);
    if (depth < 8) drawTree(n.children, inner, out, depth + 1);
  });
}

export function subRunSection(s: RunSummary): string {
  if (!s.subrunsStarted.length && !s.started?.parent) return '';
  const lines = ['## Sub-runs', ''];
  const p = s.started?.parent;
  if (p) lines.push(`This run is a sub-run (depth ${p.depth}) of ${codeSpan(p.runId)}, for its call ${codeSpan(p.callId)}; it started from a copy of that run's workspace.`, '');
  if (!s.subrunsStarted.length) return lines.join('\n').trimEnd();

  const finished = new Map(s.subrunsFinished.map((f) => [f.childRunId, f]));
  const nodes: SubRunNode[] = s.subrunsStarted.map((st) => {
    const f = finished.get(st.childRunId);
    return f?.node ?? {
      runId: st.childRunId, task: st.task, outcome: 'error', reason: 'no result recorded (the run ended or stopped before its sub-run did)',
      usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 }, budgets: st.budgets, children: [],
    };
  });
  const children = s.subrunsFinished.reduce(
    (a, f) => ({ llmCalls: a.llmCalls + f.usage.llmCalls, toolCalls: a.toolCalls + f.usage.toolCalls, tokens: a.tokens + f.usage.inputTokens + f.usage.outputTokens, costUsd: a.costUsd + f.usage.costUsd }),
    { llmCalls: 0, toolCalls: 0, tokens: 0, costUsd: 0 },
  );
  const u = s.usage;
  const own = { llmCalls: u.llmCalls - children.llmCalls, toolCalls: u.toolCalls - children.toolCalls, tokens: u.inputTokens + u.outputTokens - children.tokens, costUsd: u.costUsd - children.costUsd };
  const tree = [`${s.runId ?? 'this run'} (this run) — own use: LLM calls ${own.llmCalls} · tool calls ${own.toolCalls} · tokens ${formatAmount('tokens', own.tokens)} · $${formatAmount('costUsd', Math.max(0, own.costUsd))}`];
  drawTree(nodes, '', tree);
  lines.push(
    `${s.subrunsStarted.length} sub-run(s) started by this run. What they used is part of this run's budgets above: `
      + `its own turns used ${own.llmCalls} LLM call(s), ${own.toolCalls} tool call(s) and $${formatAmount('costUsd', Math.max(0, own.costUsd))}; `
      + `its sub-runs ${children.llmCalls}, ${children.toolCalls} and $${formatAmount('costUsd', children.costUsd)}.`,
    '',
    fenced(tree.join('\n'), 'text'),
  );
  const rows = s.subrunsStarted.map((st) => {
    const n = nodes.find((x) => x.runId === st.childRunId)!;
    return [codeSpan(st.childRunId), codeSpan(st.callId), `${OUTCOME_MARKS[n.outcome] ?? '❓'} ${escapeInline(n.outcome)}`, `${n.usage.llmCalls} / ${st.budgets.llmCalls}`, `${n.usage.toolCalls} / ${st.budgets.toolCalls}`,
      `${formatAmount('tokens', n.usage.inputTokens + n.usage.outputTokens)} / ${formatAmount('tokens', st.budgets.tokens)}`, `${formatAmount('costUsd', n.usage.costUsd)} / ${formatAmount('costUsd', st.budgets.costUsd)}`, `${formatAmount('wallTimeS', Math.round(n.usage.wallTimeMs / 100) / 10)} / ${st.budgets.wallTimeS}`];
  });
  lines.push('', markdownTable(['Sub-run', 'Call', 'Outcome', 'LLM calls', 'Tool calls', 'Tokens', 'Cost (USD)', 'Wall time (s)'], ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r'], rows));
  for (const [i, w] of s.suspensions.entries()) {
    const r = s.resumes[i];
    lines.push('', `- Waited for ${w.children.map(codeSpan).join(', ')} from ${w.ts}${r ? ` to ${r.ts} (${(r.waitedMs / 1000).toFixed(1)} s) and resumed on ${codeSpan(r.workerId)}` : ' (not resumed)'}: no worker slot and no sandbox held meanwhile; the workspace was kept as ${codeSpan(w.checkpoint)}.`);
  }
  return lines.join('\n');
}

export function modelsSection(s: RunSummary): string {
  const routed = s.responses.filter((r) => r.route);
  const routing = s.started?.routing;
  if (!routed.length || !routing) return '';
  const byModel = new Map<string, { tier: string; turns: number; inTok: number; outTok: number; cost: number }>();
  for (const r of routed) {
    const k = r.route!.model;
    const m = byModel.get(k) ?? { tier: r.route!.tier, turns: 0, inTok: 0, outTok: 0, cost: 0 };
    m.turns += 1;
    m.inTok += r.usage.inputTokens;
    m.outTok += r.usage.outputTokens;
    m.cost += r.costUsd;
    byModel.set(k, m);
  }
  const total = routed.reduce((a, r) => a + r.costUsd, 0);
  const strongOnly = routed.reduce((a, r) => a + r.route!.strongCostUsd, 0);
  const cheapTurns = routed.filter((r) => r.route!.tier === 'cheap').length;
  const rows = [...byModel.entries()].map(([model, m]) => [codeSpan(model), m.tier, String(m.turns), formatAmount('tokens', m.inTok), formatAmount('tokens', m.outTok), formatAmount('costUsd', m.cost)]);
  rows.push(['**Total**', '', String(routed.length), '', '', formatAmount('costUsd', total)]);
  const saved = strongOnly - total;
  const strongTurns = routed.filter((r) => r.route!.tier === 'strong').map((r) => `turn ${r.turn} (${r.route!.rule})`);
  return [
    '## Models',
    '',
    `Routing: ${codeSpan(routing.strong)} (strong) for ${routing.strongOn.map(codeSpan).join(', ')}; ${codeSpan(routing.cheap)} (cheap) for the other turns.`,
    '',
    markdownTable(['Model', 'Tier', 'Turns', 'Tokens in', 'Tokens out', 'Cost (USD)'], ['l', 'l', 'r', 'r', 'r', 'r'], rows),
    '',
    `${cheapTurns} of ${routed.length} turns (${Math.round((cheapTurns / routed.length) * 100)} %) went to the cheap model. `
      + `On ${codeSpan(routing.strong)} alone the same turns would have cost $${formatAmount('costUsd', strongOnly)} (the same tokens at its prices)`
      + `${strongOnly > 0 ? `: routing ${saved >= 0 ? 'saved' : 'cost'} $${formatAmount('costUsd', Math.abs(saved))} (${Math.round((Math.abs(saved) / strongOnly) * 100)} %)` : ''}.`,
    '',
    `Strong turns: ${strongTurns.length ? strongTurns.join(', ') : 'none'}.`,
  ].join('\n');
}
