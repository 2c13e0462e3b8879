/**
 * formatToolArgs: a tool call's arguments as markdown for the report — a bash command in a ```bash
 * fence, anything else as compact JSON. Long string values are cut (head kept) and a note says
 * which value lost how many characters, so the report stays readable and never silently shortens.
 * toolArgsPreview gives the one-line form the summary sections use.
 */
import { fenced, codeSpan } from './markdown-escape';

/** Characters kept of one long value (a command, a file's content). */
export const MAX_VALUE_CHARS = 2000;
/** Characters kept of the whole compact JSON, for argument objects with many parts. */
export const MAX_JSON_CHARS = 8000;

interface Cut {
  at: string;
  total: number;
  cut: number;
}

export function formatToolArgs(tool: string, args: unknown): string {
  if (args === undefined) return '_no arguments recorded_';
  const command = tool === 'bash' && isRecord(args) && typeof args.command === 'string' ? args.command : null;
  if (command !== null) {
    const cuts: Cut[] = [];
    const text = cutString(command, 'command', cuts);
    const rest = Object.fromEntries(Object.entries(args as Record<string, unknown>).filter(([k]) => k !== 'command'));
    const extra = Object.keys(rest).length ? `\n\nother arguments: ${codeSpan(JSON.stringify(cutValues(rest, '', cuts, 0)))}` : '';
    return fenced(text, 'bash') + extra + cutNote(cuts);
  }
  const cuts: Cut[] = [];
  let json = JSON.stringify(cutValues(args, '', cuts, 0)) ?? String(args);
  if (json.length > MAX_JSON_CHARS) {
    cuts.push({ at: '(whole JSON)', total: json.length, cut: json.length - MAX_JSON_CHARS });
    json = `${json.slice(0, MAX_JSON_CHARS)}…`;
  }
  return fenced(json, 'json') + cutNote(cuts);
}

/** Characters of the one-line preview. */
export const PREVIEW_CHARS = 120;

/** One line for summaries: a bash command as is, other arguments as compact JSON; cut with "…". '' when absent. */
export function toolArgsPreview(tool: string, args: unknown): string {
  if (args === undefined) return '';
  const command = tool === 'bash' && isRecord(args) && typeof args.command === 'string' ? args.command : null;
  const text = (command ?? (typeof args === 'string' ? args : JSON.stringify(args) ?? String(args))).replace(/\s*\r?\n\s*/g, ' ⏎ ');
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS)}…` : text;
}

function cutString(s: string, at: string, cuts: Cut[]): string {
  if (s.length <= MAX_VALUE_CHARS) return s;
  cuts.push({ at, total: s.length, cut: s.length - MAX_VALUE_CHARS });
  return `${s.slice(0, MAX_VALUE_CHARS)}…`;
}

function cutValues(v: unknown, path: string, cuts: Cut[], depth: number): unknown {
  if (typeof v === 'string') return cutString(v, path || '(value)', cuts);
  if (depth > 32 || v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map((x, i) => cutValues(x, `${path}[${i}]`, cuts, depth + 1));
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, cutValues(x, path ? `${path}.${k}` : k, cuts, depth + 1)]));
}

function cutNote(cuts: Cut[]): string {
  if (!cuts.length) return '';
  const parts = cuts.map((c) => `${codeSpan(c.at)}: ${c.cut.toLocaleString('en-US')} of ${c.total.toLocaleString('en-US')} characters cut`);
  return `\n\n_Cut for the report: ${parts.join('; ')}._`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
