/**
 * What the model was given besides the task, and what it left for later runs, as report.md sections:
 * "Context" (AGENTS.md, skills and memory loaded at the start; each compaction of the conversation)
 * and "Memory proposals" (the MEMORY: lines of the final answer, whether they were appended, and why).
 * All of it was written by the workspace or the model, so it is escaped.
 */
import { codeSpan, escapeInline, fenced } from './markdown-escape';
import type { RunSummary } from './summarize-run';

export function contextSection(s: RunSummary): string {
  const lines = ['## Context', ''];
  const c = s.context;
  if (!c) {
    lines.push('- **AGENTS.md, skills, memory:** _not recorded (the log has no context.loaded)_');
  } else {
    lines.push(`- **AGENTS.md:** ${c.agentsMd ? `loaded ${describeLoaded(c.agentsMd)}` : 'none loaded'}`);
    const skills = c.skills ?? [];
    if (!skills.length) lines.push('- **Skills:** none');
    else {
      lines.push(`- **Skills:** ${skills.length}`);
      for (const k of skills) lines.push(`  - ${codeSpan(k.name)} — ${escapeInline(k.description)} (${codeSpan(k.path)})`);
    }
    lines.push(`- **Memory:** ${c.memory ? `loaded ${describeLoaded(c.memory)}` : 'none loaded'}`);
  }
  if (!s.compactions.length) lines.push('- **Compactions:** none');
  else {
    lines.push(`- **Compactions:** ${s.compactions.length}`);
    for (const k of s.compactions) {
      lines.push(
        `  - ${k.ts}: ${k.messagesBefore} → ${k.messagesAfter} messages, ~${k.tokensBefore.toLocaleString('en-US')} → ~${k.tokensAfter.toLocaleString('en-US')} tokens`,
      );
    }
  }
  return lines.join('\n');
}

/** context.loaded carries a path or the loaded text; a short single line is shown as a path, anything else by its size. */
function describeLoaded(v: string): string {
  return !/\n/.test(v) && v.length <= 200 ? `(${codeSpan(v)})` : `(${v.length.toLocaleString('en-US')} characters)`;
}

export function memorySection(s: RunSummary): string {
  if (!s.memoryProposals.length) return '## Memory proposals\n\nNo memory proposed.';
  const parts = ['## Memory proposals'];
  for (const m of s.memoryProposals) {
    const lines = m.lines ?? [];
    const head = `**Applied:** ${m.applied ? 'yes' : '**no**'} — ${escapeInline(m.reason)}`;
    parts.push(lines.length ? `${head}\n\n${fenced(lines.join('\n'), 'text')}` : `${head}\n\n_No lines proposed._`);
  }
  return parts.join('\n\n');
}
