/**
 * callEntry: one tool call's part of report.md — heading (blocked calls stand out), call id and
 * turn, the arguments, the approval request, the gate's verdict with its static / classifier /
 * approval layers, the result (summary once, then the call's duration), the output excerpt the model
 * saw (collapsed), and the call's egress attempts.
 */
import type { GateVerdict } from '../domain/gate';
import { formatToolArgs } from './format-tool-args';
import { codeSpan, escapeInline, fenced } from './markdown-escape';
import type { CallRecord, RunSummary } from './summarize-run';

export const BLOCKED = '⛔ **BLOCKED**';

export function callEntry(c: CallRecord, n: number, s: RunSummary): string {
  const title = `### ${n}. ${codeSpan(c.tool)}${c.blocked ? ` — ${BLOCKED}` : ''}`;
  const meta = `call ${codeSpan(c.callId)}${c.turn !== null ? ` · turn ${c.turn}` : ''}`;
  const items: string[] = [];
  if (c.approvalPending) {
    const risk = c.approvalPending.risk ? ` (risk ${escapeInline(c.approvalPending.risk)})` : '';
    items.push(`- **Approval requested:** ${escapeInline(c.approvalPending.reason)}${risk}`);
  }
  items.push(c.verdict ? verdictLines(c.verdict) : noVerdictLine(c));
  items.push(resultLine(c, s));
  if (c.egress.length) {
    const list = c.egress.map((e) => `${codeSpan(`${e.host}:${e.port}`)} ${e.decision === 'deny' ? '**deny**' : 'allow'}`);
    items.push(`- **Egress:** ${list.join(', ')}`);
  }
  const parts = [title, meta, argsBlock(c), items.join('\n')];
  const output = outputBlock(c);
  if (output) parts.push(output);
  return parts.join('\n\n');
}

function argsBlock(c: CallRecord): string {
  if (c.hasArgs) return formatToolArgs(c.tool, c.args);
  if (c.requestedArgs !== null) return `_No tool.call event; the arguments as the model sent them:_\n\n${fenced(c.requestedArgs, 'json')}`;
  return '_arguments not recorded (no tool.call event)_';
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
    lines.push(`  - approval: ${how} by ${codeSpan(ap.by)}${ap.note ? ` (note: ${codeSpan(ap.note)})` : ''} after ${(ap.waitedMs / 1000).toFixed(1)} s${ap.timedOut ? ' (**timed out**)' : ''}`);
  }
  return lines.join('\n');
}

/** Status, the tool's own summary once, exec facts the summary does not already state, then how long the call took. */
function resultLine(c: CallRecord, s: RunSummary): string {
  const r = c.result;
  if (!r) return `- **Result:** _none recorded${s.finished ? '' : ' (the log ends before this call finished)'}_`;
  const status = r.blocked ? BLOCKED : r.ok ? 'ok' : '**failed**';
  const summary = r.summary ?? '';
  const facts: string[] = [];
  if (r.exec) {
    if (!/\bexit\b|timed out|out of memory/.test(summary)) facts.push(`exit ${r.exec.exitCode ?? 'none'}`);
    if (r.exec.timedOut && !summary.includes('timed out')) facts.push('**timed out**');
    if (r.exec.oomKilled && !summary.includes('out of memory')) facts.push('**killed: out of memory**');
    if (r.exec.truncated && !summary.includes('truncated')) facts.push('output truncated');
  }
  facts.push(`took ${r.ms} ms`);
  return `- **Result:** ${status}${summary ? ` — ${escapeInline(summary)}` : ''} · ${facts.join(' · ')}`;
}

/** The excerpt of the tool's output the model was shown, collapsed; '' when the log has none. */
function outputBlock(c: CallRecord): string {
  const out = c.result?.output;
  if (typeof out !== 'string') return '';
  const body = out === '' ? '_empty_' : fenced(out, 'text');
  return `<details><summary>output</summary>\n\n${body}\n\n</details>`;
}

/** A call the gate never saw: refused by the task's allowed tools, or malformed before it got there. */
function noVerdictLine(c: CallRecord): string {
  if (c.result?.blocked) return '- **Policy:** not consulted — refused before the gate';
  if (c.result) return '- **Policy:** not consulted — the call was malformed';
  return '- **Policy:** _no verdict recorded_';
}
