/**
 * buildReport: report.md for a team lead reading a finished (or crashed) run — who ran what with
 * which model, policy and sandbox; usage against budgets; every tool call with its arguments, the
 * gate's verdict and the result (blocked calls stand out); egress attempts; artifacts; the final
 * answer. Derived only from RunEvents; copes with partial logs. Everything the run or the model
 * wrote is quoted or escaped, so it cannot pose as part of the report.
 */
import type { BudgetName, RunEvent } from '../domain/events';
import type { GateVerdict } from '../domain/gate';
import { formatToolArgs } from './format-tool-args';
import { blockquote, codeSpan, escapeInline, fenced, tableCell } from './markdown-escape';
import { summarizeRun, type CallRecord, type RunSummary } from './summarize-run';

const BLOCKED = '⛔ **BLOCKED**';

export function buildReport(events: readonly RunEvent[], opts: { title?: string } = {}): string {
  const s = summarizeRun(events);
  const title = opts.title ?? `Run ${s.runId ?? '(unknown)'}`;
  const sections = [
    `# ${escapeInline(title)}`,
    header(s),
    taskSection(s),
    usageSection(s),
    toolCallsSection(s),
    egressSection(s),
    artifactsSection(s),
    finalAnswerSection(s),
    logSection(s),
  ];
  return `${sections.filter((x) => x !== '').join('\n\n')}\n`;
}

function header(s: RunSummary): string {
  const st = s.started;
  const sb = s.sandbox;
  const lines = [
    `- **Run:** ${s.runId === null ? '_no events_' : codeSpan(s.runId)}`,
    `- **Outcome:** ${outcome(s)}`,
    `- **Started:** ${st ? st.ts : '_not recorded_'}${s.finished ? ` · **Finished:** ${s.finished.ts}` : ''}`,
  ];
  if (st) {
    lines.push(
      `- **Model:** ${codeSpan(st.model)}`,
      `- **Policy:** ${codeSpan(st.policy)} · **Approvals:** ${st.approvals ? 'on' : 'off'}`,
      `- **Worker:** ${codeSpan(st.workerId)}`,
    );
  } else {
    lines.push('- **Model, policy, approvals, worker:** _not recorded (the log has no run.started)_');
  }
  if (sb) {
    const removed = s.sandboxRemoved ? 'removed' : '**not recorded as removed**';
    lines.push(`- **Sandbox:** container ${codeSpan(sb.containerId)} · image ${codeSpan(sb.image)} · ready in ${sb.ms} ms · ${removed}`);
    lines.push(`- **Egress allowlist:** ${sb.egressAllow.length ? sb.egressAllow.map(codeSpan).join(', ') : 'none (no network)'}`);
  } else {
    lines.push('- **Sandbox:** _not recorded (no sandbox.ready)_');
  }
  return lines.join('\n');
}

function outcome(s: RunSummary): string {
  const f = s.finished;
  if (!f) return `**run did not finish (log ends at seq ${s.lastSeq ?? 0})**`;
  const mark = f.outcome === 'succeeded' ? '✅' : f.outcome === 'cancelled' ? '⏹' : f.outcome === 'budget_exhausted' || f.outcome === 'timed_out' ? '⏱' : f.outcome === 'policy_aborted' ? '⛔' : '❌';
  return `${mark} **${f.outcome}** — ${escapeInline(f.reason)}`;
}

function taskSection(s: RunSummary): string {
  if (!s.started) return '';
  const task = s.started.task;
  const body = /\r?\n/.test(task.trim()) ? fenced(task, 'text') : escapeInline(task);
  return `## Task\n\n${blockquote(body)}`;
}

const BUDGET_ROWS: Array<{ label: string; budget: BudgetName | null; used: (s: RunSummary) => number }> = [
  { label: 'LLM calls', budget: 'llmCalls', used: (s) => s.usage.llmCalls },
  { label: 'Tool calls', budget: 'toolCalls', used: (s) => s.usage.toolCalls },
  { label: 'Tokens in', budget: null, used: (s) => s.usage.inputTokens },
  { label: 'Tokens out', budget: null, used: (s) => s.usage.outputTokens },
  { label: 'Cost (USD)', budget: 'costUsd', used: (s) => s.usage.costUsd },
  { label: 'Wall time (s)', budget: 'wallTimeS', used: (s) => s.usage.wallTimeMs / 1000 },
];

function formatAmount(budget: BudgetName | null, n: number): string {
  if (budget === 'costUsd') return n.toFixed(4);
  if (budget === 'wallTimeS') return Number.isInteger(n) ? String(n) : n.toFixed(1);
  return n.toLocaleString('en-US');
}

function usageSection(s: RunSummary): string {
  const exceeded = new Set(s.budgetsExceeded.map((b) => b.budget));
  const rows = BUDGET_ROWS.map((r) => {
    const limit = r.budget ? s.started?.budgets?.[r.budget] : undefined;
    const used = formatAmount(r.budget, r.used(s));
    const over = r.budget && exceeded.has(r.budget) ? ' ⚠ **exceeded**' : '';
    return `| ${r.label} | ${used}${over} | ${limit === undefined ? '—' : formatAmount(r.budget, limit)} |`;
  });
  const lines = ['## Usage', '', '| | Used | Budget |', '|---|---:|---:|', ...rows, ''];
  if (s.usageFrom === 'log') lines.push('_Added up from the log: the run did not finish, so there is no final usage record._', '');
  lines.push(
    s.budgetsExceeded.length
      ? s.budgetsExceeded
          .map((b) => `**Budget exceeded: ${budgetLabel(b.budget)}** — used ${formatAmount(b.budget, b.used)} of ${formatAmount(b.budget, b.limit)}.`)
          .join('\n\n')
      : 'No budget was exceeded.',
  );
  return lines.join('\n');
}

function budgetLabel(b: BudgetName): string {
  return BUDGET_ROWS.find((r) => r.budget === b)?.label ?? b;
}

function toolCallsSection(s: RunSummary): string {
  if (!s.calls.length) return '## Tool calls\n\nNo tool calls.';
  const blocked = s.calls.filter((c) => c.blocked).length;
  const head = `## Tool calls\n\n${s.calls.length} call${s.calls.length === 1 ? '' : 's'}, ${blocked ? `**${blocked} blocked**` : 'none blocked'}.`;
  return [head, ...s.calls.map((c, i) => callEntry(c, i + 1, s))].join('\n\n');
}

function callEntry(c: CallRecord, n: number, s: RunSummary): string {
  const title = `### ${n}. ${codeSpan(c.tool)}${c.blocked ? ` — ${BLOCKED}` : ''}`;
  const meta = `call ${codeSpan(c.callId)}${c.turn !== null ? ` · turn ${c.turn}` : ''}`;
  const args = c.hasArgs ? formatToolArgs(c.tool, c.args) : '_arguments not recorded (no tool.call event)_';
  const items: string[] = [];
  if (c.approvalPending) {
    const risk = c.approvalPending.risk ? ` (risk ${escapeInline(c.approvalPending.risk)})` : '';
    items.push(`- **Approval requested:** ${escapeInline(c.approvalPending.reason)}${risk}`);
  }
  items.push(c.verdict ? verdictLines(c.verdict) : '- **Policy:** _no verdict recorded_');
  items.push(resultLine(c, s));
  if (c.egress.length) {
    const list = c.egress.map((e) => `${codeSpan(`${e.host}:${e.port}`)} ${e.decision === 'deny' ? '**deny**' : 'allow'}`);
    items.push(`- **Egress:** ${list.join(', ')}`);
  }
  return [title, meta, args, items.join('\n')].join('\n\n');
}

function verdictLines(v: GateVerdict): string {
  const decision = v.decision === 'deny' ? '**deny**' : 'allow';
  const lines = [`- **Policy:** ${decision} — ${escapeInline(v.reason)}`];
  const st = v.static;
  if (st) {
    const rule = st.rule === null ? 'no rule matched' : `rule ${codeSpan(st.rule)}`;
    const risk = st.risk ? ` (risk ${st.risk})` : '';
    lines.push(`  - static: ${rule} → ${st.decision}${risk} — ${escapeInline(st.reason)}`);
  }
  const cl = v.classifier;
  if (cl) {
    const err = cl.error ? ` — **classifier error:** ${escapeInline(cl.error)}` : '';
    lines.push(
      `  - classifier: risk ${cl.riskLevel} (${cl.risk.toFixed(2)}/3), authorized ${Math.round(cl.authorized * 100)}%, ` +
        `decision ${cl.decision}, via ${cl.via}, ${cl.latencyMs} ms${err}`,
    );
  }
  const ap = v.approval;
  if (ap) {
    const how = ap.approved ? 'approved' : '**denied**';
    lines.push(`  - approval: ${how} by ${codeSpan(ap.by)} after ${(ap.waitedMs / 1000).toFixed(1)} s${ap.timedOut ? ' (**timed out**)' : ''}`);
  }
  return lines.join('\n');
}

function resultLine(c: CallRecord, s: RunSummary): string {
  const r = c.result;
  if (!r) return `- **Result:** _none recorded${s.finished ? '' : ' (the log ends before this call finished)'}_`;
  const status = r.blocked ? BLOCKED : r.ok ? 'ok' : '**failed**';
  const facts: string[] = [];
  if (r.exec) {
    facts.push(`exit ${r.exec.exitCode ?? 'none'}`);
    if (r.exec.timedOut) facts.push('**timed out**');
    if (r.exec.oomKilled) facts.push('**killed: out of memory**');
    if (r.exec.truncated) facts.push('output truncated');
  }
  facts.push(`${r.ms} ms`);
  return `- **Result:** ${status} — ${escapeInline(r.summary)} · ${facts.join(' · ')}`;
}

function egressSection(s: RunSummary): string {
  if (!s.egress.length) return '## Egress\n\nNo network access attempted.';
  const rows = s.egress.map((e, i) =>
    '| ' +
    [
      String(i + 1),
      codeSpan(`${e.host}:${e.port}`),
      codeSpan(e.method),
      e.decision === 'deny' ? '**deny**' : 'allow',
      escapeInline(e.reason),
      e.callId === null ? '—' : codeSpan(e.callId),
    ]
      .map(tableCell)
      .join(' | ') +
    ' |',
  );
  return ['## Egress', '', '| # | Host:port | Method | Decision | Reason | Call |', '|---:|---|---|---|---|---|', ...rows].join('\n');
}

function artifactsSection(s: RunSummary): string {
  if (!s.artifacts.length) return '## Artifacts\n\nNo artifacts recorded.';
  const rows = s.artifacts.map(
    (a) => `| ${[escapeInline(a.name), codeSpan(a.path), a.bytes.toLocaleString('en-US')].map(tableCell).join(' | ')} |`,
  );
  return ['## Artifacts', '', '| Name | Path | Bytes |', '|---|---|---:|', ...rows].join('\n');
}

function finalAnswerSection(s: RunSummary): string {
  const f = s.finished;
  if (!f) return '## Final answer\n\n_None: the run did not finish._';
  if (f.finalAnswer === null || f.finalAnswer.trim() === '') return '## Final answer\n\n_No final answer._';
  return `## Final answer\n\n${fenced(f.finalAnswer, 'markdown')}`;
}

function logSection(s: RunSummary): string {
  const lines = [`## Log\n\n${s.eventCount} events${s.lastSeq !== null ? `, last seq ${s.lastSeq}` : ''}.`];
  if (s.missingSeqs.length) {
    const ranges = s.missingSeqs.map(([a, b]) => (a === b ? String(a) : `${a}–${b}`));
    lines.push(`⚠ **The log is missing seq ${ranges.join(', ')}**; this report may be incomplete.`);
  }
  if (s.unknownTypes.length) lines.push(`Ignored events of unknown type: ${s.unknownTypes.map(codeSpan).join(', ')}.`);
  return lines.join('\n\n');
}
