/**
 * What a change to a protected file looks like to the human asked about it and in the log: a
 * unified diff of the text (at most MAX_DIFF characters, cut with a mark), or a line saying what the
 * entry was and became when it is not text (binary, too large to keep, a link, a directory).
 */
import { createTwoFilesPatch } from 'diff';
import type { ProtectedEntry } from '../domain/effects';

export const MAX_DIFF = 4000;

function describe(e: ProtectedEntry | undefined): string {
  if (!e) return 'nothing';
  if (e.type === 'symlink') return `a symbolic link to ${JSON.stringify(e.link ?? '')}`;
  if (e.type === 'file') return `${e.hardlink ? `a hard link to ${JSON.stringify(e.link ?? '')}, ` : ''}a file of ${e.size} bytes, mode ${e.mode.toString(8).padStart(4, '0')}${e.sha256 ? `, sha256 ${e.sha256.slice(0, 16)}…` : ''}`;
  return `a ${e.type}`;
}

function textOf(e: ProtectedEntry | undefined): string | null {
  if (!e) return '';
  if (e.type !== 'file' || !e.data) return null;
  if (e.data.includes(0)) return null;
  const t = e.data.toString('utf8');
  return t.includes('\ufffd') ? null : t;
}

export function effectDiff(path: string, before: ProtectedEntry | undefined, after: ProtectedEntry | undefined): string {
  const a = textOf(before);
  const b = textOf(after);
  const header = `${path}: ${describe(before)} → ${describe(after)}`;
  if (a === null || b === null) return header;
  const patch = createTwoFilesPatch(`a/${path}`, `b/${path}`, a, b, undefined, undefined, { context: 3 });
  const body = patch.split('\n').slice(2).join('\n');
  const text = `${header}\n${body}`;
  return text.length <= MAX_DIFF ? text : `${text.slice(0, MAX_DIFF)}\n[… ${text.length - MAX_DIFF} more characters of the diff not shown]`;
}
