/**
 * Applies one file's hunks to its text, strictly: every context and removed line must match the
 * file exactly. A hunk is tried where its header says (shifted by how far earlier hunks moved),
 * then at the nearest other place it matches; hunks apply in order and never overlap. A hunk that
 * matches nowhere is rejected with the first line that differs at its stated place.
 */
import type { Hunk } from './unified-diff';

export type HunkResult =
  | { ok: true; content: string; added: number; removed: number }
  | { ok: false; hunk: number; header: string; why: string };

interface Lines { lines: string[]; finalNewline: boolean }

function splitLines(content: string): Lines {
  if (content === '') return { lines: [], finalNewline: true };
  const lines = content.split('\n');
  const finalNewline = lines[lines.length - 1] === '';
  if (finalNewline) lines.pop();
  return { lines, finalNewline };
}

function joinLines({ lines, finalNewline }: Lines): string {
  if (lines.length === 0) return '';
  return lines.join('\n') + (finalNewline ? '\n' : '');
}

function matchesAt(lines: string[], expected: string[], at: number): boolean {
  for (let j = 0; j < expected.length; j++) if (lines[at + j] !== expected[j]) return false;
  return true;
}

/** The match nearest to `want` in [min, max], or -1. */
function nearestMatch(lines: string[], expected: string[], want: number, min: number, max: number): number {
  for (let d = 0; want - d >= min || want + d <= max; d++) {
    if (want + d >= min && want + d <= max && matchesAt(lines, expected, want + d)) return want + d;
    if (d > 0 && want - d >= min && want - d <= max && matchesAt(lines, expected, want - d)) return want - d;
  }
  return -1;
}

function show(s: string): string {
  return JSON.stringify(s.length > 80 ? `${s.slice(0, 77)}...` : s);
}

/** Why `hunk` does not apply at `at`: the first of its old lines that differs from the file. */
function explain(hunk: Hunk, lines: string[], at: number): string {
  let n = at;
  for (const l of hunk.lines) {
    if (l.op === '+') continue;
    const kind = l.op === ' ' ? 'context line' : 'line to remove';
    if (n >= lines.length) return `${kind} ${n + 1} is past the end of the file (${lines.length} lines); the patch expects ${show(l.text)}`;
    const actual = lines[n]!;
    if (actual !== l.text) {
      const ws = actual.replace(/\s+/g, '') === l.text.replace(/\s+/g, '') ? ' (they differ only in whitespace)' : '';
      return `${kind} ${n + 1} differs: the patch has ${show(l.text)}, the file has ${show(actual)}${ws}`;
    }
    n++;
  }
  return 'its lines do not match the file in order';
}

/** Applies `hunks` to `content` (null: the file does not exist yet). */
export function applyHunks(content: string | null, hunks: readonly Hunk[]): HunkResult {
  const file = splitLines(content ?? '');
  const src = file.lines;
  const out: string[] = [];
  let finalNewline = file.finalNewline;
  let copied = 0; // src lines consumed so far
  let shift = 0; // how far the previous hunk landed from where its header said
  let added = 0;
  let removed = 0;
  for (const [k, hunk] of hunks.entries()) {
    const expected = hunk.lines.filter((l) => l.op !== '+').map((l) => l.text);
    const replacement = hunk.lines.filter((l) => l.op !== '-').map((l) => l.text);
    // An empty old side inserts after line oldStart; otherwise oldStart is the first old line.
    // (`@@ -1,0 …` on an empty file is read as `-0,0`.)
    const stated = expected.length === 0 ? (src.length === 0 ? 0 : hunk.oldStart) : hunk.oldStart - 1;
    const want = Math.min(Math.max(stated + shift, copied), src.length);
    const max = src.length - expected.length;
    const at = expected.length === 0 ? want : nearestMatch(src, expected, want, copied, max);
    if (expected.length === 0 && (stated + shift < copied || stated + shift > src.length)) {
      const why = stated + shift < copied
        ? 'it inserts inside the lines the previous hunk changed'
        : `it inserts after line ${stated + shift} but the file has ${src.length} lines`;
      return { ok: false, hunk: k + 1, header: hunk.header, why };
    }
    if (at < 0) return { ok: false, hunk: k + 1, header: hunk.header, why: explain(hunk, src, want) };
    shift = at - stated;
    out.push(...src.slice(copied, at), ...replacement);
    copied = at + expected.length;
    if (copied === src.length) {
      if (hunk.newNoNewline) finalNewline = false;
      else if (hunk.oldNoNewline) finalNewline = true;
    }
    added += replacement.length - hunk.lines.filter((l) => l.op === ' ').length;
    removed += expected.length - hunk.lines.filter((l) => l.op === ' ').length;
  }
  out.push(...src.slice(copied));
  return { ok: true, content: joinLines({ lines: out, finalNewline }), added, removed };
}
