/**
 * The one diff model of a run's workspace: for each path, its seed side and its exported side give
 * one FileChange (what the report's "Files changed" shows) and the git-style section of
 * workspace.patch, computed together from the same hunks (the `diff` package's structuredPatch), so
 * the report and the patch cannot disagree. Text files up to MAX_DIFF_BYTES are diffed line by line;
 * binary or too costly files are carried as git binary patches (git-binary-patch.ts), so that
 * `git apply` on the seed's tree gives the exported tree. A change whose new content is over
 * MAX_DIFF_BYTES is not in the patch at all: its FileChange says so (`notInPatch`), and the file is
 * in workspace.tar. Executable bits are git modes (100644 / 100755); other permission bits (setuid,
 * setgid) are kept in the FileChange, which git cannot express. Names reach here already checked
 * (export-names.ts): no control characters.
 */
import { createHash } from 'node:crypto';
import { formatPatch, OMIT_HEADERS, structuredPatch } from 'diff';
import type { FileChange } from '../domain/sandbox';
import { binaryBody, gitBlobId } from './git-binary-patch';

export const MAX_DIFF_BYTES = 1024 * 1024;
/** Per-file budget of the line diff; a file that takes longer is reported as differing, not diffed. */
const DIFF_TIMEOUT_MS = 1000;

/** One side of a path: its content (when small enough to diff), its digest, size and permission bits. */
export interface FileSide {
  /** Present when size <= MAX_DIFF_BYTES. */
  data?: Buffer;
  sha256: string;
  /** git's blob id of the content (SHA-1 of `blob SIZE\0` + content): a binary patch names it. */
  gitId?: string;
  size: number;
  mode: number;
  /** Reads `data` back when it was not kept in memory (a large seed's index: seed-file.ts). */
  load?: () => Promise<Buffer>;
}

/** The side with its data, read back through load() when the diff will need it (it changed, and is small enough). */
export async function withData(side: FileSide | null, other: FileSide | null): Promise<FileSide | null> {
  if (!side || side.data || !side.load || side.size > MAX_DIFF_BYTES) return side;
  if (other && other.sha256 === side.sha256) return side;
  return { ...side, data: await side.load() };
}

export function sideOf(data: Buffer, mode: number): FileSide {
  return { ...(data.length <= MAX_DIFF_BYTES ? { data } : {}), sha256: createHash('sha256').update(data).digest('hex'), gitId: gitBlobId(data), size: data.length, mode: mode & 0o7777 };
}

// ignoreBOM: a byte-order mark is content (dropping it would make the patch's first line differ from the file's).
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The text of a side, or null when it is binary (a NUL early on, not UTF-8) or was not kept. */
function textOf(side: FileSide): string | null {
  if (!side.data || side.data.subarray(0, 8000).includes(0)) return null;
  try {
    return utf8.decode(side.data);
  } catch {
    return null;
  }
}

const gitMode = (mode: number) => (mode & 0o111 ? '100755' : '100644');

/** A name as git writes it in headers: C-quoted when it holds `"` or `\` or starts or ends with a space. */
export function gitName(prefix: string, path: string): string {
  const p = `${prefix}${path}`;
  if (!/["\\]|^ | $/.test(path)) return p;
  return `"${p.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export interface DiffSection {
  change: FileChange;
  /** The git-style section of the patch (ends with a newline), '' when git has nothing to say (only setuid-like bits changed). */
  text: string;
}

/**
 * Whether diffFile would do costly work for these sides — a line diff, or a binary patch's deflate and
 * base85 — which the export runs off its loop (diff-thread.ts): any change with content at hand.
 */
export function needsLineDiff(before: FileSide | null, after: FileSide | null): boolean {
  if (!before && !after) return false;
  if (before && after && before.sha256 === after.sha256) return false;
  return !!(before?.data || after?.data);
}

/**
 * diffFile without the line diff (when the diff thread could not give one): a text change as one hunk
 * replacing the whole file, a binary one as its binary patch — both still apply with git.
 */
export function binaryDiff(path: string, before: FileSide | null, after: FileSide | null): DiffSection | null {
  return diffFile(path, before, after, { lines: false });
}

/** The change of one path between its seed and exported sides; null when it did not change. */
export function diffFile(path: string, before: FileSide | null, after: FileSide | null, o: { lines?: boolean } = {}): DiffSection | null {
  if (!before && !after) return null;
  if (before && after && before.sha256 === after.sha256 && before.mode === after.mode) return null;
  const change: FileChange = { path, change: !before ? 'added' : !after ? 'deleted' : 'modified', added: 0, removed: 0 };
  if (before && after && before.mode !== after.mode) {
    change.modeBefore = before.mode;
    change.modeAfter = after.mode;
  } else if (!before && after && after.mode !== 0o644) {
    change.modeAfter = after.mode;
  }
  const head = [`diff --git ${gitName('a/', path)} ${gitName('b/', path)}`];
  if (!before) head.push(`new file mode ${gitMode(after!.mode)}`);
  else if (!after) head.push(`deleted file mode ${gitMode(before.mode)}`);
  else if (gitMode(before.mode) !== gitMode(after.mode)) head.push(`old mode ${gitMode(before.mode)}`, `new mode ${gitMode(after.mode)}`);
  const contentSame = before !== null && after !== null && before.sha256 === after.sha256;
  if (contentSame) return { change, text: head.length > 1 ? `${head.join('\n')}\n` : '' };

  const a = before ? gitName('a/', path) : '/dev/null';
  const b = after ? gitName('b/', path) : '/dev/null';
  const oldText = before ? textOf(before) : '';
  const newText = after ? textOf(after) : '';
  const bothText = oldText !== null && newText !== null;
  // lines: false (the diff thread gave up on this file) skips straight to the whole-file hunk below
  const patch = bothText && o.lines !== false ? structuredPatch(a, b, oldText, newText, undefined, undefined, { context: 3, timeout: DIFF_TIMEOUT_MS }) : undefined;
  if (!patch && bothText) {
    // Too costly to diff line by line (every line of a large file changed): one hunk replacing the
    // whole file — still text a reviewer reads and git applies.
    const r = replaceAll(oldText, newText);
    change.added = r.added;
    change.removed = r.removed;
    return { change, text: `${[...head, `--- ${a}`, `+++ ${b}`].join('\n')}\n${r.hunk}` };
  }
  if (!patch) {
    change.binary = true;
    return { change, text: binarySection(change, head, before, after) };
  }
  for (const h of patch.hunks) {
    for (const l of h.lines) {
      if (l.startsWith('+')) change.added += 1;
      else if (l.startsWith('-')) change.removed += 1;
    }
  }
  if (patch.hunks.length === 0) return { change, text: head.length > 1 ? `${head.join('\n')}\n` : '' };
  const hunks = formatPatch(patch, OMIT_HEADERS);
  return { change, text: `${[...head, `--- ${a}`, `+++ ${b}`].join('\n')}\n${hunks.endsWith('\n') ? hunks : `${hunks}\n`}` };
}

/** The id git names for a side: kept from when it was read, else from its content; null when neither is at hand. */
function idOf(side: FileSide): string | null {
  return side.gitId ?? (side.data ? gitBlobId(side.data) : null);
}

/**
 * A binary (or not line-diffable) change as a git binary patch; '' with `change.notInPatch` set when
 * the patch cannot carry it (the new content is over MAX_DIFF_BYTES, or a side's id is unknown).
 */
function binarySection(change: FileChange, head: string[], before: FileSide | null, after: FileSide | null): string {
  if (after && !after.data) {
    change.notInPatch = `${after.size} bytes, over the ${MAX_DIFF_BYTES} bytes a patch carries for one file; take it from workspace.tar`;
    return '';
  }
  const beforeId = before ? idOf(before) : null;
  const afterId = after ? idOf(after) : null;
  if ((before && !beforeId) || (after && !afterId)) {
    change.notInPatch = 'its content could not be identified for a binary patch; take it from workspace.tar';
    return '';
  }
  const sameMode = before && after && gitMode(before.mode) === gitMode(after.mode) ? gitMode(after.mode) : undefined;
  return `${head.join('\n')}\n${binaryBody({ beforeId, afterId, after: after?.data ?? null, beforeData: before?.data ?? null, ...(sameMode ? { mode: sameMode } : {}) })}`;
}

/** Lines of a text as a diff sees them, and whether its last line lacks its newline. */
function linesOf(text: string): { lines: string[]; noNewline: boolean } {
  if (text === '') return { lines: [], noNewline: false };
  const lines = text.split('\n');
  const noNewline = lines.at(-1) !== '';
  if (!noNewline) lines.pop();
  return { lines, noNewline };
}

/** One hunk that removes every line of `before` and adds every line of `after`. */
function replaceAll(before: string, after: string): { hunk: string; added: number; removed: number } {
  const o = linesOf(before);
  const n = linesOf(after);
  const range = (start: number, count: number) => `${count === 0 ? 0 : start},${count}`;
  const out = [`@@ -${range(1, o.lines.length)} +${range(1, n.lines.length)} @@`];
  for (const l of o.lines) out.push(`-${l}`);
  if (o.noNewline) out.push('\\ No newline at end of file');
  for (const l of n.lines) out.push(`+${l}`);
  if (n.noNewline) out.push('\\ No newline at end of file');
  return { hunk: `${out.join('\n')}\n`, added: n.lines.length, removed: o.lines.length };
}
