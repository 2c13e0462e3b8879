/**
 * Markdown quoting for text the report did not write (tasks, commands, reasons, model output):
 * fenced blocks and code spans whose delimiters outrun any backticks inside, inline escaping, and
 * GitHub table-cell escaping. Untrusted text can then neither break the report's structure nor
 * pose as part of it.
 */

/** A fenced block whose fence is longer than any backtick run in `text`. */
export function fenced(text: string, lang = ''): string {
  const fence = '`'.repeat(Math.max(3, longestRun(text, '`') + 1));
  const body = text.endsWith('\n') ? text : `${text}\n`;
  return `${fence}${lang}\n${body}${fence}`;
}

/** An inline code span on one line (newlines shown as ⏎), safe for any backticks inside. */
export function codeSpan(text: string): string {
  const flat = text.replace(/\r?\n/g, '⏎');
  const ticks = '`'.repeat(longestRun(flat, '`') + 1);
  const pad = flat.startsWith('`') || flat.endsWith('`') || flat === '' ? ' ' : '';
  return `${ticks}${pad}${flat}${pad}${ticks}`;
}

/** Plain inline text: markdown and HTML metacharacters escaped, line breaks folded to spaces. Pipes are left to tableCell. */
export function escapeInline(text: string): string {
  return text.replace(/\r?\n/g, ' ').replace(/[\\`*_[\]<>#~&]/g, (c) => `\\${c}`);
}

/**
 * One GitHub table cell from already-formatted markdown: pipes escaped (also inside code spans,
 * where GitHub honours `\|`), newlines turned into <br>.
 */
export function tableCell(markdown: string): string {
  return markdown.replace(/\|/g, '\\|').replace(/\r?\n/g, '<br>');
}

/** Prefixes every line with "> ". */
export function blockquote(markdown: string): string {
  return markdown.split('\n').map((l) => (l === '' ? '>' : `> ${l}`)).join('\n');
}

function longestRun(text: string, ch: string): number {
  let best = 0;
  let cur = 0;
  for (const c of text) {
    cur = c === ch ? cur + 1 : 0;
    if (cur > best) best = cur;
  }
  return best;
}

/** A GitHub table from already-formatted markdown cells (each passed through tableCell); `align` per column, 'r' = right. */
export function markdownTable(head: readonly string[], align: ReadonlyArray<'l' | 'r'>, rows: ReadonlyArray<readonly string[]>): string {
  const line = (cells: readonly string[]) => `| ${cells.map(tableCell).join(' | ')} |`;
  const rule = `|${head.map((_, i) => (align[i] === 'r' ? '---:' : '---')).join('|')}|`;
  return [line(head), rule, ...rows.map(line)].join('\n');
}
