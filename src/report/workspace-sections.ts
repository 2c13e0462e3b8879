/**
 * What the run did to and around its sandbox, as report.md sections: "Needs review" (risky changes:
 * hooks, CI and agent configs, new executable or setuid bits), "Files changed" (exactly the sections
 * of workspace.patch, from the last workspace.changes), "Not exported" (what the artifacts leave out,
 * and why), "Done checks" (each done.check; omitted when the run ran none), "Egress" (the proxy,
 * totals, distinct wildcard names, attempts and counted repeats) and "Artifacts". Names and reasons
 * come from the sandbox: refused characters are shown as \\u escapes (showName) and everything is
 * escaped, so a name cannot pose as report text.
 */
import type { NotExportedCode } from '../domain/sandbox';
import { showName } from '../domain/export-names';
import { codeSpan, escapeInline, fenced, markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

const name = (p: string) => codeSpan(showName(p));
const text = (t: string) => escapeInline(showName(t));
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

const CODE_LABEL: Record<NotExportedCode, string> = {
  'bad-name': 'unexportable name',
  symlink: 'symbolic link',
  special: 'special file',
  'too-large': 'over the per-file size cap',
  'total-cap': 'over the total size cap',
  'entry-cap': 'over the entry cap',
  changed: 'changed during the export',
  unreadable: 'unreadable',
};

export function needsReviewSection(s: RunSummary): string {
  const w = s.workspaceChanges;
  if (!w || w.needsReview === undefined) return '';
  const flags = w.needsReview;
  if (!flags.length) return '## Needs review\n\nNothing flagged: the run changed no git hooks or config, CI files or agent configs, set no new executable or setuid bits, and wrote no confusable names or control bytes (workspace and git bundle).';
  const total = flags.length + (w.needsReviewOmitted ?? 0);
  const file = w.needsReviewFile ?? 'needs-review.jsonl';
  const more = w.needsReviewOmitted ? ` The first ${flags.length} are listed here; all ${total} are in ${codeSpan(file)} (GET /v1/runs/:id/artifacts/${file}).` : '';
  const byRule = w.needsReviewByRule ? Object.entries(w.needsReviewByRule).sort((a, b) => (b[1] ?? 0) - (a[1] ?? 0)).map(([r, n]) => `${codeSpan(r)} ${n}`).join(', ') : '';
  const head = `⚠ **${plural(total, 'change')} to review before using the artifacts**: they make git, CI, editors or agents run code, set permission bits, or show as something they are not.${more}${byRule ? `\n\nBy rule: ${byRule}.` : ''}`;
  const where = (f: (typeof flags)[number]) => (f.where === 'bundle' ? `bundle ${codeSpan(f.commit ?? '')}` : 'workspace');
  const rows = flags.map((f) => [name(f.path), codeSpan(f.rule), where(f), text(f.reason)]);
  return ['## Needs review', '', head, '', markdownTable(['Path', 'Rule', 'Where', 'Why'], ['l', 'l', 'l', 'l'], rows)].join('\n');
}

function modeNote(f: { modeBefore?: number; modeAfter?: number; binary?: boolean; notInPatch?: string }): string {
  const o = (m: number) => m.toString(8).padStart(4, '0');
  const notes: string[] = [];
  if (f.notInPatch) notes.push('not in the patch (too large): take it from workspace.tar');
  else if (f.binary) notes.push('binary: a git binary patch (git apply)');
  if (f.modeAfter !== undefined) notes.push(f.modeBefore !== undefined ? `mode ${o(f.modeBefore)} → ${o(f.modeAfter)}` : `mode ${o(f.modeAfter)}`);
  return notes.join('; ');
}

export function filesChangedSection(s: RunSummary): string {
  const w = s.workspaceChanges;
  if (!w) return '## Files changed\n\n_Not recorded (the log has no workspace.changes)._';
  const files = w.files ?? [];
  const ignored = w.ignored?.count
    ? `\n\n${plural(w.ignored.count, 'changed file')} matched the ignore rules (the workspace's .gitignore files as they were at the start, and the run's ${codeSpan('patch.exclude')}) and ${w.ignored.count === 1 ? 'is' : 'are'} only in workspace.tar: ${w.ignored.paths.slice(0, 20).map(name).join(', ')}${w.ignored.count > Math.min(20, w.ignored.paths.length) ? ', …' : ''}.`
    : '';
  const outside = (w.notInPatch ?? []).length
    ? `\n\n**Not in workspace.patch** (take ${w.notInPatch!.length === 1 ? 'it' : 'them'} from workspace.tar): ${w.notInPatch!.map((n) => name(n.path)).join(', ')}.`
    : '';
  const git = `${w.gitFiles ? `\n\n${plural(w.gitFiles, 'file')} under ${codeSpan('.git/')} changed as well: they are in workspace.tar, never in workspace.patch.` : ''}${ignored}${outside}`;
  if (!files.length) return `## Files changed\n\nNo files changed.${git}`;
  const count = (k: string) => files.filter((f) => f.change === k).length;
  const kinds = ['added', 'modified', 'deleted'].map((k) => [k, count(k)] as const).filter(([, n]) => n > 0);
  const plus = files.reduce((n, f) => n + (f.added ?? 0), 0);
  const minus = files.reduce((n, f) => n + (f.removed ?? 0), 0);
  const more = w.filesOmitted ? ` The first ${files.length} are listed; ${w.filesOmitted} more are in workspace.patch.` : '';
  const head = `${plural(files.length + (w.filesOmitted ?? 0), 'file')} changed: ${kinds.map(([k, n]) => `${n} ${k}`).join(', ')} · +${plus} −${minus} lines. These are exactly the files of workspace.patch${(w.notInPatch ?? []).length ? ', except those marked as not in it' : ''}.${more}`;
  const rows = files.map((f) => [name(f.path), f.change, `+${f.added ?? 0}`, `−${f.removed ?? 0}`, escapeInline(modeNote(f))]);
  return ['## Files changed', '', head, '', markdownTable(['Path', 'Change', 'Added', 'Removed', 'Note'], ['l', 'l', 'r', 'r', 'l'], rows)].join('\n') + git;
}

export function notExportedSection(s: RunSummary): string {
  const w = s.workspaceChanges;
  const list = w?.notExported ?? [];
  const omitted = Object.entries(w?.notExportedOmitted ?? {}).filter(([, n]) => (n ?? 0) > 0) as Array<[NotExportedCode, number]>;
  if (!list.length && !omitted.length) return '';
  const total = list.length + omitted.reduce((n, [, k]) => n + k, 0);
  const head = `${plural(total, 'workspace entry', 'workspace entries')} ${total === 1 ? 'is' : 'are'} in neither workspace.tar nor workspace.patch.`;
  const rows = list.map((e) => [name(e.path), CODE_LABEL[e.code] ?? text(String(e.code)), text(e.reason)]);
  const rest = omitted.length ? `\n\nNot listed: ${omitted.map(([c, n]) => `${n} more (${CODE_LABEL[c] ?? text(c)})`).join(', ')}.` : '';
  return ['## Not exported', '', head, '', markdownTable(['Path', 'Kind', 'Why'], ['l', 'l', 'l'], rows)].join('\n') + rest;
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

/** Rows of the attempts table at most; the rest are counted under it. */
const EGRESS_ROWS = 200;

export function egressSection(s: RunSummary): string {
  const st = s.egressStats;
  if (!s.egress.length && !s.egressAggregates.length && !s.egressProxy.length && !st) return '## Egress\n\nNo network access attempted.';
  const parts = ['## Egress'];
  for (const p of s.egressProxy) {
    if (p.state === 'failed') parts.push(`⚠ **The egress proxy failed:** ${escapeInline(p.detail)}`);
    else if (p.state === 'started') parts.push(`Proxy: ${escapeInline(p.detail)}.`);
  }
  if (st) {
    const mb = (n: number) => `${(n / 1024 / 1024).toFixed(n < 1024 * 1024 ? 3 : 1)} MB`;
    const codes = Object.entries(st.byCode ?? {}).filter(([k]) => k !== 'allowed').sort((a, b) => (b[1] ?? 0) - (a[1] ?? 0));
    parts.push([
      `**Totals:** ${st.connections.toLocaleString('en-US')} connections (at most ${st.peakConnections} at once), ${st.allowed.toLocaleString('en-US')} allowed, ${st.denied.toLocaleString('en-US')} denied; ${mb(st.bytesOut)} sent, ${mb(st.bytesIn)} received; ${st.resolutions.toLocaleString('en-US')} name resolutions.`,
      codes.length ? `**Denied by reason:** ${codes.map(([k, n]) => `${codeSpan(k)} ×${(n ?? 0).toLocaleString('en-US')}`).join(', ')}.` : '',
    ].filter(Boolean).join('\n'));
    const wild = Object.entries(st.wildcardNames ?? {});
    if (wild.length || st.wildcardRefused) {
      const total = wild.reduce((a, [, n]) => a + n, 0);
      parts.push(`${total > 20 || st.wildcardRefused ? '⚠ ' : ''}**Distinct names under wildcards** (each new name is a DNS query that can carry data out — an exfiltration signal): ${wild.map(([p, n]) => `${codeSpan(p)} ${n}`).join(', ') || 'none'}${st.wildcardRefused ? `; ${st.wildcardRefused.toLocaleString('en-US')} more refused by the wildcard rate or name cap` : ''}.`);
    }
  }
  if (s.egress.length) {
    const rows = s.egress.slice(0, EGRESS_ROWS).map((e, i) => [
      String(i + 1),
      codeSpan(`${e.host}:${e.port}`),
      codeSpan(e.method),
      e.decision === 'deny' ? '**deny**' : 'allow',
      escapeInline(e.reason),
      e.callId === null ? '—' : codeSpan(e.callId),
    ]);
    parts.push(markdownTable(['#', 'Host:port', 'Method', 'Decision', 'Reason', 'Call'], ['r', 'l', 'l', 'l', 'l', 'l'], rows));
    if (s.egress.length > EGRESS_ROWS) parts.push(`_${(s.egress.length - EGRESS_ROWS).toLocaleString('en-US')} more attempts are in the log._`);
  }
  if (s.egressAggregates.length) {
    const byKey = new Map<string, { e: (typeof s.egressAggregates)[number]; count: number }>();
    for (const a of s.egressAggregates) {
      const k = `${a.decision}|${a.method}|${a.code}|${a.callId ?? ''}|${a.code === 'allowed' ? a.sample : ''}`;
      const cur = byKey.get(k);
      if (cur) cur.count += a.count;
      else byKey.set(k, { e: a, count: a.count });
    }
    const rows = [...byKey.values()].map(({ e, count }) => [
      count.toLocaleString('en-US'), codeSpan(e.method), e.decision === 'deny' ? '**deny**' : 'allow', codeSpan(e.code), codeSpan(e.sample), e.callId === null ? '—' : codeSpan(e.callId),
    ]);
    parts.push(`Repeated attempts, counted instead of logged one by one:\n\n${markdownTable(['More ×', 'Method', 'Decision', 'Code', 'Example', 'Call'], ['r', 'l', 'l', 'l', 'l', 'l'], rows)}`);
  }
  return parts.join('\n\n');
}

export function artifactsSection(s: RunSummary): string {
  if (!s.artifacts.length) return '## Artifacts\n\nNo artifacts recorded.';
  const rows = s.artifacts.map((a) => [escapeInline(a.name), codeSpan(a.path), a.bytes.toLocaleString('en-US')]);
  return ['## Artifacts', '', markdownTable(['Name', 'Path', 'Bytes'], ['l', 'l', 'r'], rows)].join('\n');
}

/** The environment's setup phase: each command, its exit and (when it failed) its output's tail; the egress change. */
export function setupSection(s: RunSummary): string {
  const { started, commands, finished, narrowed } = s.setup;
  if (!started) return '';
  const parts: string[] = ['## Setup'];
  const cache = started.cache === 'hit' ? 'a cached result was restored; the commands did not run' : started.cache === 'miss' ? 'nothing cached for this key yet' : 'not cached';
  parts.push(`Environment ${codeSpan(started.environment)}: ${started.commands} command${started.commands === 1 ? '' : 's'}; ${cache}. Setup egress: ${started.egressAllow.length ? started.egressAllow.map(codeSpan).join(', ') : 'none'}.`);
  if (commands.length) {
    parts.push(markdownTable(['#', 'Command', 'Result', 'Time'], ['r', 'l', 'l', 'r'], commands.map((c) => [
      String(c.index), codeSpan(c.command.trim().replace(/\s*\n\s*/g, ' ⏎ ')), c.timedOut ? '⏱ **timed out**' : c.exitCode === 0 ? '✅ exit 0' : `❌ **exit ${c.exitCode ?? 'none'}**`, `${(c.ms / 1000).toFixed(1)} s`,
    ])));
    const bad = commands.find((c) => c.timedOut || c.exitCode !== 0);
    if (bad?.output) parts.push(`Output of command ${bad.index} (its end):`, fenced(bad.output));
  }
  if (finished) {
    const baseline = finished.baselineFiles !== undefined ? ` ${finished.baselineFiles} file${finished.baselineFiles === 1 ? '' : 's'} setup wrote are the patch's baseline (not the agent's change).` : '';
    const cached = finished.cached ? ` Cache: ${finished.cached}.` : '';
    parts.push(finished.ok ? `Setup finished in ${(finished.ms / 1000).toFixed(1)} s (not counted in the wall-time budget, which starts after it).${baseline}${cached}${finished.note ? ` ${escapeInline(finished.note)}` : ''}` : '**Setup failed**: the agent never started.');
  }
  if (narrowed) {
    parts.push(`Before the agent's first call, egress became ${narrowed.allow.length ? narrowed.allow.map(codeSpan).join(', ') : 'none'}; ${narrowed.connectionsClosed} connection${narrowed.connectionsClosed === 1 ? '' : 's'} open then ${narrowed.connectionsClosed === 1 ? 'was' : 'were'} closed${narrowed.proxyKilled ? ' (the proxy did not confirm and was stopped)' : ''}.`);
  }
  return parts.join('\n\n');
}
