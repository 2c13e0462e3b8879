/**
 * buildReport: report.md for a team lead reading a finished (or crashed) run — the task; status and
 * reason; model (configured and as the server reported it), policy, sandbox and cost; budgets used
 * against their limits with warnings; changes that need review; tools used; approvals asked and their
 * answers; denied calls; files changed and what was not exported; done checks; memory proposals; the
 * context the model was given; the final answer; every tool call in full (arguments, verdict, result, output excerpt); egress; artifacts; the log's
 * health. Derived only from RunEvents; copes with partial logs, and a section that cannot be rendered
 * says so instead of failing the report. Everything the run or the model wrote is quoted or escaped,
 * so it cannot pose as part of the report.
 */
import { auditSection, type ReportAudit } from './audit-section';
import type { RunEvent, RunOutcome } from '../domain/events';
import { budgetSection, formatAmount } from './budget-section';
import { effectsSection } from './effect-sections';
import { contextSection, memorySection } from './context-sections';
import { blockquote, codeSpan, escapeInline, fenced } from './markdown-escape';
import { modelsSection, subRunSection } from './subrun-section';
import { summarizeRun, type RunSummary, type Tally } from './summarize-run';
import { approvalsSection, deniedCallsSection, toolCallsSection, toolsUsedSection } from './tool-sections';
import { mcpSection } from './mcp-section';
import { artifactsSection, doneChecksSection, egressSection, filesChangedSection, needsReviewSection, notExportedSection, setupSection } from './workspace-sections';

/** One distinct mark per outcome. */
export const OUTCOME_MARKS: Readonly<Record<RunOutcome, string>> = {
  succeeded: '✅',
  failed: '❌',
  budget_exhausted: '🪫',
  timed_out: '⏱',
  policy_aborted: '⛔',
  setup_failed: '🧱',
  cancelled: '⏹',
  error: '💥',
};

const SECTIONS: Array<[string, (s: RunSummary) => string]> = [
  ['Summary', header],
  ['Task', taskSection],
  ['Needs review', needsReviewSection],
  ['Setup', setupSection],
  ['MCP servers', mcpSection],
  ['Budgets', budgetSection],
  ['Sub-runs', subRunSection],
  ['Models', modelsSection],
  ['Tools used', toolsUsedSection],
  ['Approvals', approvalsSection],
  ['Denied calls', deniedCallsSection],
  ['Effects at the exits', effectsSection],
  ['Files changed', filesChangedSection],
  ['Not exported', notExportedSection],
  ['Done checks', doneChecksSection],
  ['Memory proposals', memorySection],
  ['Context', contextSection],
  ['Final answer', finalAnswerSection],
  ['Tool calls', toolCallsSection],
  ['Egress', egressSection],
  ['Artifacts', artifactsSection],
  ['Log', logSection],
];

/** `audit`: the log's seal and the run's trace, known only at the end (an Audit section at the end of the report). */
export function buildReport(events: readonly RunEvent[], opts: { title?: string; audit?: ReportAudit } = {}): string {
  let s: RunSummary;
  try {
    s = summarizeRun(events);
  } catch (err) {
    const title = opts.title ?? `Run ${events[0]?.runId ?? '(unknown)'}`;
    return `# ${escapeInline(title)}

⚠ **The report could not be built from the log** (${events.length} events): ${escapeInline(errorText(err))}
`;
  }
  const title = opts.title ?? `Run ${s.runId ?? '(unknown)'}`;
  const parts = [`# ${escapeInline(title)}`];
  if (!s.finished) {
    parts.push(`> ⚠ **Partial log:** the run did not finish (the log has no run.finished; it ends at seq ${s.lastSeq ?? 0}). This report shows what was logged until then.`);
  }
  for (const [name, render] of SECTIONS) {
    let md: string;
    try {
      md = render(s);
    } catch (err) {
      md = `## ${name}\n\n⚠ _This section could not be rendered from the log: ${escapeInline(errorText(err))}_`;
    }
    if (md !== '') parts.push(md);
  }
  if (opts.audit) {
    const md = auditSection(opts.audit, s.runId);
    if (md !== '') parts.push(md);
  }
  return `${parts.join('\n\n')}\n`;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function header(s: RunSummary): string {
  const st = s.started;
  const sb = s.sandbox;
  const lines = [
    `- **Run:** ${s.runId === null ? '_no events_' : codeSpan(s.runId)}`,
    `- **Status:** ${status(s)}`,
    `- **Started:** ${st ? st.ts : '_not recorded_'}${s.finished ? ` · **Finished:** ${s.finished.ts}` : ''}`,
  ];
  if (st) {
    lines.push(
      `- **Model:** ${codeSpan(st.model)} (configured) · ${reportedModels(s)}`,
      `- **Policy:** ${codeSpan(st.policy)} · **Approvals:** ${st.approvals ? 'on' : 'off'}`,
      `- **Worker:** ${codeSpan(st.workerId)}`,
    );
  } else {
    lines.push(`- **Model:** ${reportedModels(s)}`, '- **Configured model, policy, approvals, worker:** _not recorded (the log has no run.started)_');
  }
  const costLimit = st?.budgets?.costUsd;
  lines.push(`- **Cost:** ${formatAmount('costUsd', s.usage.costUsd)} USD${costLimit === undefined ? '' : ` of ${formatAmount('costUsd', costLimit)}`}${s.usageFrom === 'log' ? ' (added up from the log)' : ''}`);
  if (sb) {
    const removed = s.sandboxRemoved ? 'removed' : '**not recorded as removed**';
    lines.push(`- **Sandbox:** container ${codeSpan(sb.containerId)} · image ${codeSpan(sb.image)}${sb.isolation ? ` · ${sb.isolation === 'gvisor' ? 'gVisor' : 'runc'}` : ''} · ready in ${sb.ms} ms · ${removed}${s.sandboxCount > 1 ? ` · ${s.sandboxCount - 1} more, each re-created from a copy of the workspace after waiting for sub-runs` : ''}`);
    if (s.cloned) {
      const c = s.cloned;
      lines.push(`- **Workspace:** cloned ${codeSpan(c.url)}${c.ref ? ` ${codeSpan(c.ref)}` : ''} at ${codeSpan(c.commit.slice(0, 12))} (depth ${c.depth}; ${c.files} files, ${(c.bytes / 1048576).toFixed(1)} MiB; ${c.credential ? 'with the tenant\'s credential, which never entered the sandbox' : 'no credential'})`);
    }
    if (s.bundle) {
      const b = s.bundle;
      lines.push(`- **Git bundle:** ${b.path ? `${b.commits} commit${b.commits === 1 ? '' : 's'} of the agent on ${codeSpan(b.branch)} in \`agent.bundle\` (\`git fetch agent.bundle ${b.branch}\`)` : `none — ${escapeInline(b.note ?? '')}`}`);
    }
    lines.push(`- **Egress allowlist:** ${sb.egressAllow.length ? sb.egressAllow.map(codeSpan).join(', ') : 'none (no network)'}`);
  } else {
    lines.push('- **Sandbox:** _not recorded (no sandbox.ready)_');
  }
  return lines.join('\n');
}

function status(s: RunSummary): string {
  const f = s.finished;
  if (!f) return `**run did not finish (log ends at seq ${s.lastSeq ?? 0})**`;
  const mark = OUTCOME_MARKS[f.outcome] ?? '❓';
  // A reason of several lines (a failed setup's output) shows its first here; the section has the rest.
  const [first = '', ...more] = (f.reason ?? '').split('\n');
  return `${mark} **${escapeInline(String(f.outcome))}** — ${escapeInline(first)}${more.length ? ' …' : ''}`;
}

function reportedModels(s: RunSummary): string {
  if (!s.modelResponses) return 'server reported: _no model response logged_';
  if (!s.reportedModels.length) return `server reported: _not logged (${s.modelResponses} model response${s.modelResponses === 1 ? '' : 's'} without a model name)_`;
  const tally = (list: Tally[]) => list.map((t) => `${codeSpan(t.value)}${list.length > 1 ? ` ×${t.count}` : ''}`).join(', ');
  const turns = s.reportedModels.reduce((n, t) => n + t.count, 0);
  const finish = s.finishReasons.length ? ` · finish reasons ${s.finishReasons.map((t) => `${codeSpan(t.value)} ×${t.count}`).join(', ')}` : '';
  return `server reported ${tally(s.reportedModels)} over ${turns} turn${turns === 1 ? '' : 's'}${finish}`;
}

function taskSection(s: RunSummary): string {
  if (!s.started) return '';
  const task = s.started.task;
  const body = /\r?\n/.test(task.trim()) ? fenced(task, 'text') : escapeInline(task);
  return `## Task\n\n${blockquote(body)}`;
}

function finalAnswerSection(s: RunSummary): string {
  const f = s.finished;
  if (!f) return '## Final answer\n\n_None: the run did not finish._';
  if (!f.finalAnswer?.trim()) return '## Final answer\n\n_No final answer._';
  return `## Final answer\n\n${fenced(f.finalAnswer, 'markdown')}`;
}

function logSection(s: RunSummary): string {
  const lines = [`## Log\n\n${s.eventCount} events${s.lastSeq !== null ? `, last seq ${s.lastSeq}` : ''}.`];
  if (s.missingSeqs.length) {
    const ranges = s.missingSeqs.map(([a, b]) => (a === b ? String(a) : `${a}–${b}`));
    lines.push(`⚠ **The log is missing seq ${ranges.join(', ')}**; this report may be incomplete.`);
  }
  const t = s.truncations.find((x) => x.final) ?? s.truncations.at(-1);
  if (t) {
    const dropped = Object.entries(t.dropped ?? {}).sort((a, b) => b[1] - a[1]);
    const n = dropped.reduce((a, [, c]) => a + c, 0);
    lines.push(`⚠ **The log was truncated:** ${escapeInline(s.truncations[0]!.reason)}. ${n.toLocaleString('en-US')} events (${((t.droppedBytes ?? 0) / 1024 / 1024).toFixed(1)} MB) were not kept${dropped.length ? `: ${dropped.map(([k, c]) => `${codeSpan(k)} ×${c.toLocaleString('en-US')}`).join(', ')}` : ''}.`);
  }
  if (s.unknownTypes.length) lines.push(`Ignored events of unknown type: ${s.unknownTypes.map(codeSpan).join(', ')}.`);
  return lines.join('\n\n');
}
