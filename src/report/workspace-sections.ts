/**
 * What the run did to and around its sandbox, as report.md sections: "Files changed" (from the last
 * workspace.changes), "Done checks" (each done.check; omitted when the run ran none), "Egress" (every
 * network attempt) and "Artifacts".
 */
import { codeSpan, escapeInline, markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

export function filesChangedSection(s: RunSummary): string {
  const w = s.workspaceChanges;
  if (!w) return '## Files changed\n\n_Not recorded (the log has no workspace.changes)._';
  const files = w.files ?? [];
  if (!files.length) return '## Files changed\n\nNo files changed.';
  const count = (k: string) => files.filter((f) => f.change === k).length;
  const kinds = ['added', 'modified', 'deleted'].map((k) => [k, count(k)] as const).filter(([, n]) => n > 0);
  const plus = files.reduce((n, f) => n + (f.added ?? 0), 0);
  const minus = files.reduce((n, f) => n + (f.removed ?? 0), 0);
  const head = `${files.length} file${files.length === 1 ? '' : 's'} changed: ${kinds.map(([k, n]) => `${n} ${k}`).join(', ')} · +${plus} −${minus} lines.`;
  const rows = files.map((f) => [codeSpan(f.path), f.change, `+${f.added ?? 0}`, `−${f.removed ?? 0}`]);
  return ['## Files changed', '', head, '', markdownTable(['Path', 'Change', 'Added', 'Removed'], ['l', 'l', 'r', 'r'], rows)].join('\n');
}

export function doneChecksSection(s: RunSummary): string {
  if (!s.doneChecks.length) return '';
  // Checks run in rounds (each time the model said it was done); a round ends when a command repeats.
  const rounds: Array<typeof s.doneChecks> = [];
  for (const c of s.doneChecks) {
    const cur = rounds.at(-1);
    if (!cur || cur.some((x) => x.command === c.command)) rounds.push([c]);
    else cur.push(c);
  }
  const last = rounds.at(-1) ?? [];
  const lastPassed = last.every((c) => c.ok);
  const summary = `${rounds.length} round${rounds.length === 1 ? '' : 's'} of ${last.length} check${last.length === 1 ? '' : 's'}; `
    + `the last round ${lastPassed ? 'passed' : '**failed**'}.`;
  const rows = s.doneChecks.map((c, i) => [
    String(i + 1),
    codeSpan(c.command),
    c.ok ? '✅ passed' : '❌ **failed**',
    c.exitCode === null ? 'none' : String(c.exitCode),
    escapeInline(c.summary ?? ''),
  ]);
  return [
    '## Done checks',
    '',
    summary,
    '',
    markdownTable(['#', 'Command', 'Result', 'Exit', 'Summary'], ['r', 'l', 'l', 'r', 'l'], rows),
  ].join('\n');
}

export function egressSection(s: RunSummary): string {
  if (!s.egress.length) return '## Egress\n\nNo network access attempted.';
  const rows = s.egress.map((e, i) => [
    String(i + 1),
    codeSpan(`${e.host}:${e.port}`),
    codeSpan(e.method),
    e.decision === 'deny' ? '**deny**' : 'allow',
    escapeInline(e.reason),
    e.callId === null ? '—' : codeSpan(e.callId),
  ]);
  return ['## Egress', '', markdownTable(['#', 'Host:port', 'Method', 'Decision', 'Reason', 'Call'], ['r', 'l', 'l', 'l', 'l', 'l'], rows)].join('\n');
}

export function artifactsSection(s: RunSummary): string {
  if (!s.artifacts.length) return '## Artifacts\n\nNo artifacts recorded.';
  const rows = s.artifacts.map((a) => [escapeInline(a.name), codeSpan(a.path), a.bytes.toLocaleString('en-US')]);
  return ['## Artifacts', '', markdownTable(['Name', 'Path', 'Bytes'], ['l', 'l', 'r'], rows)].join('\n');
}
