/**
 * Parses unified diffs as `git diff` and `diff -u` write them: `diff --git` sections with their
 * extended headers (new/deleted file, rename), `--- old` / `+++ new` pairs (`a/` `b/` prefixes or
 * plain paths, C-quoted names, tab-separated timestamps), `/dev/null` for a created or deleted file,
 * and `@@ -a,b +c,d @@` hunks with `\ No newline at end of file` markers. Hunk line counts are taken
 * from the body when the header miscounts (the applier's exact context match is what guards the
 * result). Lines outside any file section (a commit message, `Index:`) are ignored.
 *
 * `patchPaths()` is the policy's view of the same text: every name any header-like line could make
 * the applier touch, a superset of what parseUnifiedDiff() yields, so the gate never sees less.
 */

export interface HunkLine {
  op: ' ' | '-' | '+';
  text: string;
}

export interface Hunk {
  /** The header as written, e.g. `@@ -10,4 +10,5 @@`. */
  header: string;
  /** As in the header: the first old line (1-based; for an empty old side, the line after which to insert). */
  oldStart: number;
  lines: HunkLine[];
  /** `\ No newline at end of file` after the old side's / new side's last line. */
  oldNoNewline: boolean;
  newNoNewline: boolean;
}

export interface FilePatch {
  /** Workspace path of the file before (null: created from /dev/null) and after (null: deleted). */
  oldPath: string | null;
  newPath: string | null;
  hunks: Hunk[];
  /** 1-based line of the patch where this file's section starts. */
  line: number;
}

export type ParsedDiff = { ok: true; files: FilePatch[] } | { ok: false; error: string };

const HUNK_HEADER = /^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@/;
const NULL_NAME = '/dev/null';

/** Decodes a header name: C-quoted (`"a/x\tb"`) or plain up to a tab (where `diff -u` puts a timestamp). */
export function headerName(raw: string): string {
  const s = raw.replace(/\r$/, '');
  if (s.startsWith('"')) {
    const q = unquoteC(s);
    if (q !== null) return q.name;
  }
  const tab = s.indexOf('\t');
  return (tab >= 0 ? s.slice(0, tab) : s).trimEnd();
}

/** Parses a C-quoted string at the start of `s` (git's quoting of unusual names); null if unterminated. */
function unquoteC(s: string): { name: string; rest: string } | null {
  const bytes: number[] = [];
  const simple: Record<string, number> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, '\\': 92 };
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { name: Buffer.from(bytes).toString('utf8'), rest: s.slice(i + 1) };
    if (c !== '\\') {
      bytes.push(...Buffer.from(c, 'utf8'));
      continue;
    }
    const e = s[i + 1];
    if (e !== undefined && /[0-7]/.test(e)) {
      const oct = /^[0-7]{1,3}/.exec(s.slice(i + 1))![0];
      bytes.push(parseInt(oct, 8) & 0xff);
      i += oct.length;
    } else if (e !== undefined) {
      bytes.push(simple[e] ?? e.charCodeAt(0));
      i += 1;
    }
  }
  return null;
}

/**
 * The (old, new) name pairs a `diff --git <old> <new>` line could mean. Quoted names are exact;
 * unquoted names are ambiguous when they contain spaces, so every split before " b/" is returned.
 */
export function gitHeaderCandidates(rest: string): Array<[string, string]> {
  const s = rest.replace(/\r$/, '');
  if (s.startsWith('"')) {
    const a = unquoteC(s);
    if (!a) return [];
    const r = a.rest.trimStart();
    return [[a.name, r.startsWith('"') ? (unquoteC(r)?.name ?? r) : r]];
  }
  const out: Array<[string, string]> = [];
  for (let i = s.indexOf(' '); i >= 0; i = s.indexOf(' ', i + 1)) {
    const b = s.slice(i + 1);
    out.push([s.slice(0, i), b.startsWith('"') ? (unquoteC(b)?.name ?? b) : b]);
  }
  return out;
}

/** Strips git's `a/` / `b/` prefixes when both present sides carry them; otherwise names are plain paths. */
function stripPrefixes(oldName: string | null, newName: string | null): [string | null, string | null] {
  const prefixed = (oldName === null || oldName.startsWith('a/')) && (newName === null || newName.startsWith('b/'));
  if (!prefixed) return [oldName, newName];
  return [oldName && oldName.slice(2), newName && newName.slice(2)];
}

interface Section {
  line: number;
  git: boolean;
  gitNames: Array<[string, string]>;
  oldName?: string | null;
  newName?: string | null;
  created: boolean;
  deleted: boolean;
  renameFrom?: string;
  renameTo?: string;
  unsupported?: string;
  hunks: Hunk[];
}

export function parseUnifiedDiff(text: string): ParsedDiff {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const sections: Section[] = [];
  let cur: Section | null = null;
  const start = (line: number, git: boolean, gitNames: Array<[string, string]> = []): Section => {
    cur = { line, git, gitNames, created: false, deleted: false, hunks: [] };
    sections.push(cur);
    return cur;
  };

  let i = 0;
  while (i < lines.length) {
    const line = lines[i]!;
    const s = cur as Section | null;
    if (line.startsWith('diff --git ')) {
      start(i + 1, true, gitHeaderCandidates(line.slice('diff --git '.length)));
      i++;
      continue;
    }
    if (line.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) {
      const sec = s && s.git && s.oldName === undefined && s.hunks.length === 0 ? s : start(i + 1, false);
      const o = headerName(line.slice(4));
      const n = headerName(lines[i + 1]!.slice(4));
      sec.oldName = o === NULL_NAME ? null : o;
      sec.newName = n === NULL_NAME ? null : n;
      i += 2;
      continue;
    }
    if (line.startsWith('@@')) {
      if (!s || s.oldName === undefined) return { ok: false, error: `line ${i + 1}: a hunk (${line.trim()}) before any "--- old" / "+++ new" file header` };
      const parsed = readHunk(lines, i, s);
      if (!parsed.ok) return parsed;
      s.hunks.push(parsed.hunk);
      i = parsed.next;
      continue;
    }
    if (s && s.hunks.length === 0 && s.oldName === undefined) {
      if (s.git && line.startsWith('new file mode ')) s.created = true;
      else if (s.git && line.startsWith('deleted file mode ')) s.deleted = true;
      else if (s.git && line.startsWith('rename from ')) s.renameFrom = headerName(line.slice('rename from '.length));
      else if (s.git && line.startsWith('rename to ')) s.renameTo = headerName(line.slice('rename to '.length));
      else if (s.git && line.startsWith('copy from ')) s.unsupported = 'copies';
      else if (s.git && (line.startsWith('old mode ') || line.startsWith('new mode '))) s.unsupported ??= 'mode changes';
    }
    if (line.startsWith('GIT binary patch') || line.startsWith('Binary files ')) {
      return { ok: false, error: `line ${i + 1}: binary files are not supported by apply_patch (${line.trim()}); use bash for them` };
    }
    i++;
  }

  const files: FilePatch[] = [];
  for (const sec of sections) {
    const r = resolveSection(sec);
    if (!r.ok) return r;
    files.push(r.file);
  }
  return { ok: true, files };
}

function resolveSection(sec: Section): { ok: true; file: FilePatch } | { ok: false; error: string } {
  const at = `the file section at line ${sec.line}`;
  if (sec.unsupported) return { ok: false, error: `${at}: ${sec.unsupported} are not supported by apply_patch; use bash for them` };
  let oldName: string | null;
  let newName: string | null;
  if (sec.oldName !== undefined) {
    [oldName, newName] = stripPrefixes(sec.oldName, sec.newName ?? null);
  } else if (sec.renameFrom !== undefined && sec.renameTo !== undefined) {
    [oldName, newName] = [sec.renameFrom, sec.renameTo];
  } else if (sec.git) {
    // A header-only git section: an empty file created or deleted (or a pure rename, handled above).
    const pair = sec.gitNames.find(([a, b]) => a.startsWith('a/') && b.startsWith('b/') && a.slice(2) === b.slice(2)) ?? (sec.gitNames.length === 1 ? sec.gitNames[0] : undefined);
    if (!pair) return { ok: false, error: `${at}: cannot tell the file names apart in its "diff --git" line; add "--- a/…" / "+++ b/…" lines` };
    [oldName, newName] = stripPrefixes(pair[0], pair[1]);
    if (!sec.created && !sec.deleted) return { ok: false, error: `${at} (${newName}) changes nothing apply_patch can apply (no hunks)` };
    if (sec.created) oldName = null;
    if (sec.deleted) newName = null;
  } else {
    return { ok: false, error: `${at} has no "--- old" / "+++ new" header` };
  }
  if (oldName === null && newName === null) return { ok: false, error: `${at}: both sides are /dev/null` };
  if (sec.oldName !== undefined && sec.hunks.length === 0 && !sec.created && !sec.deleted && oldName === newName) {
    return { ok: false, error: `${at} (${newName ?? oldName}) has a file header but no @@ hunks` };
  }
  return { ok: true, file: { oldPath: oldName, newPath: newName, hunks: sec.hunks, line: sec.line } };
}

type HunkRead = { ok: true; hunk: Hunk; next: number } | { ok: false; error: string };

function readHunk(lines: string[], at: number, sec: Section): HunkRead {
  const header = lines[at]!;
  const m = HUNK_HEADER.exec(header);
  if (!m) return { ok: false, error: `line ${at + 1}: malformed hunk header ${JSON.stringify(header)}; expected "@@ -start,count +start,count @@"` };
  const wantOld = m[2] === undefined ? 1 : Number(m[2]);
  const wantNew = m[4] === undefined ? 1 : Number(m[4]);
  const hunk: Hunk = { header: m[0], oldStart: Number(m[1]), lines: [], oldNoNewline: false, newNoNewline: false };
  let oldCount = 0;
  let newCount = 0;
  let i = at + 1;
  for (; i < lines.length; i++) {
    const l = lines[i]!;
    if (l.startsWith('\\')) {
      const last = hunk.lines[hunk.lines.length - 1];
      if (last?.op !== '+') hunk.oldNoNewline = true;
      if (last?.op !== '-') hunk.newNoNewline = true;
      continue;
    }
    if (l.startsWith('@@') || l.startsWith('diff --git ')) break;
    if (l.startsWith('--- ') && lines[i + 1]?.startsWith('+++ ')) break;
    const full = oldCount >= wantOld && newCount >= wantNew;
    if (full && (l === '-- ' || l === '--')) break; // an e-mail signature after the last hunk
    if (l === '' && !full) {
      // An empty context line whose leading space was lost.
      hunk.lines.push({ op: ' ', text: '' });
      oldCount++;
      newCount++;
      continue;
    }
    const op = l[0];
    if (op !== ' ' && op !== '-' && op !== '+') break;
    hunk.lines.push({ op, text: l.slice(1) });
    if (op !== '+') oldCount++;
    if (op !== '-') newCount++;
  }
  if (hunk.lines.length === 0) return { ok: false, error: `line ${at + 1}: the hunk ${hunk.header}${sec.newName ? ` of ${sec.newName}` : ''} has no lines` };
  return { ok: true, hunk, next: i };
}

/**
 * Every file name the patch's header-like lines could refer to (`---`, `+++`, `diff --git`,
 * `rename`/`copy` lines, wherever they stand), each without an `a/` / `b/` prefix (first) and as
 * written; /dev/null is left out. The policy checks each as a write path.
 */
export function patchPaths(text: string): string[] {
  const names = new Set<string>();
  const add = (n: string) => {
    if (n === NULL_NAME || n === '') return;
    if (n.startsWith('a/') || n.startsWith('b/')) names.add(n.slice(2));
    names.add(n);
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('--- ') || line.startsWith('+++ ')) add(headerName(line.slice(4)));
    else if (line.startsWith('diff --git ')) for (const [a, b] of gitHeaderCandidates(line.slice('diff --git '.length))) { add(a); add(b); }
    else {
      const m = /^(rename|copy) (from|to) (.*)$/.exec(line);
      if (m) add(headerName(m[3]!));
    }
  }
  return [...names];
}
