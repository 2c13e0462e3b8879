/**
 * The tool-call sections of report.md: "Tools used" (per tool: calls, ok, failed, blocked),
 * "Approvals" (each human approval asked and its answer), "Denied calls" (every blocked call with its
 * reason) and "Tool calls" (each call in full). Calls are numbered in log order; the summaries refer
 * to those numbers.
 */
import { callEntry } from './call-entry';
import { toolArgsPreview } from './format-tool-args';
import { codeSpan, escapeInline, markdownTable } from './markdown-escape';
import type { CallRecord, RunSummary } from './summarize-run';

export function toolsUsedSection(s: RunSummary): string {
  if (!s.calls.length) return '## Tools used\n\nNo tools used.';
  const byTool = new Map<string, { calls: number; ok: number; failed: number; blocked: number; open: number }>();
  for (const c of s.calls) {
    const t = byTool.get(c.tool) ?? { calls: 0, ok: 0, failed: 0, blocked: 0, open: 0 };
    t.calls += 1;
    if (c.blocked) t.blocked += 1;
    else if (!c.result) t.open += 1;
    else if (c.result.ok) t.ok += 1;
    else t.failed += 1;
    byTool.set(c.tool, t);
  }
  const tools = [...byTool.entries()].sort(([a, x], [b, y]) => y.calls - x.calls || a.localeCompare(b));
  const rows = tools.map(([tool, t]) => [codeSpan(tool), String(t.calls), String(t.ok), t.failed ? `**${t.failed}**` : '0', t.blocked ? `**${t.blocked}**` : '0']);
  const total = tools.reduce((n, [, t]) => ({ ok: n.ok + t.ok, failed: n.failed + t.failed, blocked: n.blocked + t.blocked, open: n.open + t.open }), { ok: 0, failed: 0, blocked: 0, open: 0 });
  rows.push(['**total**', String(s.calls.length), String(total.ok), String(total.failed), String(total.blocked)]);
  const lines = ['## Tools used', '', markdownTable(['Tool', 'Calls', 'Ok', 'Failed', 'Blocked'], ['l', 'r', 'r', 'r', 'r'], rows)];
  if (total.open) lines.push('', `_${total.open} call${total.open === 1 ? ' has' : 's have'} no recorded result._`);
  return lines.join('\n');
}

export function approvalsSection(s: RunSummary): string {
  const asked = s.calls.map((c, i) => ({ c, n: i + 1 })).filter(({ c }) => c.approvalPending || c.verdict?.approval);
  if (!asked.length) {
    const off = s.started && !s.started.approvals ? ' (approvals are off for this run: a call that needs one is denied)' : '';
    return `## Approvals\n\nNone asked${off}.`;
  }
  const rows = asked.map(({ c, n }) => {
    const ap = c.verdict?.approval;
    const answer = !ap ? '_no answer recorded_' : ap.timedOut ? '**timed out**' : ap.approved ? 'approved' : '**denied**';
    const why = c.approvalPending ? escapeInline(c.approvalPending.reason) + (c.approvalPending.risk ? ` (risk ${escapeInline(c.approvalPending.risk)})` : '') : '—';
    return [String(n), codeSpan(c.tool), preview(c), why, answer, ap ? `${codeSpan(ap.by)}${ap.note ? ` — ${codeSpan(ap.note)}` : ''}` : '—', ap ? (ap.waitedMs / 1000).toFixed(1) : '—'];
  });
  const n = asked.length;
  return ['## Approvals', '', `${n} approval${n === 1 ? '' : 's'} asked.`, '', markdownTable(['#', 'Tool', 'Call', 'Asked because', 'Answer', 'By', 'Waited (s)'], ['r', 'l', 'l', 'l', 'l', 'l', 'r'], rows)].join('\n');
}

export function deniedCallsSection(s: RunSummary): string {
  const denied = s.calls.map((c, i) => ({ c, n: i + 1 })).filter(({ c }) => c.blocked);
  if (!denied.length) return '## Denied calls\n\nNo calls were blocked.';
  const items = denied.map(({ c, n }) => {
    const reason = c.verdict?.reason ?? c.result?.summary ?? 'no reason recorded';
    const rule = c.verdict?.static?.rule ? ` (rule ${codeSpan(c.verdict.static.rule)})` : '';
    const args = preview(c);
    return `- **#${n}** ${codeSpan(c.tool)}${args === '—' ? '' : ` ${args}`} — ${escapeInline(reason)}${rule}`;
  });
  return ['## Denied calls', '', `${denied.length} call${denied.length === 1 ? '' : 's'} blocked (details under Tool calls):`, '', ...items].join('\n');
}

export function toolCallsSection(s: RunSummary): string {
  if (!s.calls.length) return '## Tool calls\n\nNo tool calls.';
  const blocked = s.calls.filter((c) => c.blocked).length;
  const head = `## Tool calls\n\n${s.calls.length} call${s.calls.length === 1 ? '' : 's'}, ${blocked ? `**${blocked} blocked**` : 'none blocked'}.`;
  return [head, ...s.calls.map((c, i) => callEntry(c, i + 1, s))].join('\n\n');
}

function preview(c: CallRecord): string {
  const text = toolArgsPreview(c.tool, c.hasArgs ? c.args : (c.requestedArgs ?? undefined));
  return text ? codeSpan(text) : '—';
}
