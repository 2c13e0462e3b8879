/**
 * What the run did to and around its sandbox, as report.md sections: "Files changed" (from the last
 * workspace.changes), "Done checks" (each done.check; omitted when the run ran none), "Egress" (the
 * proxy, totals, distinct wildcard names, attempts and counted repeats) and "Artifacts".
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
