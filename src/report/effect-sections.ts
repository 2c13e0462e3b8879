/**
 * The report's "Effects at the exits" section: what calls did that their decisions did not cover and
 * what became of it (protected files undone, refused or approved; connections a call was not
 * predicted to open), the checks' cost, and the secrets masked out of the transcript (rules and
 * counts, never a secret). Paths, hosts and reasons come from the sandbox or the run: all escaped.
 */
import { showName } from '../domain/export-names';
import { codeSpan, escapeInline, markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

const MAX_ROWS = 200;

export function effectsSection(s: RunSummary): string {
  if (!s.effects.length && !s.effectsUnchecked.length && !s.effectStats.length && !s.secretsMasked.length) return '';
  const parts = ['## Effects at the exits'];
  const refused = s.effects.filter((e) => e.decision === 'deny');
  if (s.effects.length) {
    parts.push(`${s.effects.length} effect(s) the calls' decisions did not name: ${refused.length} refused, ${s.effects.length - refused.length} accepted (covered by the decision, harmless by rule, or approved).`);
    const rows = s.effects.slice(0, MAX_ROWS).map((e) => [
      codeSpan(e.callId ?? '(none)'),
      e.effect === 'file' ? `${codeSpan(showName(e.path ?? ''))} ${escapeInline(e.change ?? '')}${e.class ? ` (${codeSpan(e.class)})` : ''}` : `connection to ${codeSpan(`${e.host ?? '?'}:${e.port ?? '?'}`)}`,
      e.decision === 'deny' ? '**refused**' : 'accepted',
      escapeInline(e.by + (e.approvedBy ? ` (${e.approvedBy})` : '')),
      escapeInline(showName(e.reason).slice(0, 300)),
    ]);
    parts.push(markdownTable(['Call', 'Effect', 'Decision', 'By', 'Why'], ['l', 'l', 'l', 'l', 'l'], rows));
    if (s.effects.length > MAX_ROWS) parts.push(`The first ${MAX_ROWS} are listed; all ${s.effects.length} are effect.decision events in the log.`);
  }
  for (const u of s.effectsUnchecked) parts.push(`⚠ The protected files could not be checked${u.callId ? ` after ${codeSpan(u.callId)}` : ''}: ${escapeInline(u.reason)}`);
  const st = s.effectStats.at(-1);
  if (st) parts.push(`Checks: ${st.checks} (${st.mode === 'full' ? 'the whole workspace read each time' : 'root-level names and git\'s directory read each time'}), p50 ${st.p50Ms} ms, max ${st.maxMs} ms; ${st.restores} restore(s).`);
  if (s.secretsMasked.length) {
    const by = new Map<string, number>();
    for (const m of s.secretsMasked) for (const f of m.found) by.set(f.rule, (by.get(f.rule) ?? 0) + f.count);
    const coarse = s.secretsMasked.filter((m) => m.coarse).length;
    parts.push(`Secrets masked out of the transcript: ${[...by].map(([r, n]) => `${codeSpan(r)} ×${n}`).join(', ') || 'none found'}${coarse ? ` (${coarse} output(s) masked coarsely: the full scan did not finish)` : ''}.`);
  }
  return parts.join('\n\n');
}
