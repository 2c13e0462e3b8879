/**
 * Which changed paths stay out of workspace.patch: those the workspace's own ignore rules name — its
 * `.gitignore` files (each for its directory and below, deeper ones winning) and `.git/info/exclude`
 * as they were in the seed, never as the agent left them — and the run's `patch.exclude` patterns
 * (gitignore syntax, strongest). What they match is what `git status` would not show as untracked:
 * build output, coverage, caches. Such changes are counted and listed, and are in workspace.tar.
 *
 * The rules are plain data (PatchIgnoreRules) so they can cross to wherever the diff runs; the
 * matcher follows git's rules (gitignore(5): `!` negation, a trailing `/` for directories only, a
 * `/` at the start or in the middle anchors, `**` segments, `*`, `?`, `[...]` with ranges and
 * POSIX classes, backslash escapes; a path inside an ignored directory cannot be re-included) and is
 * checked against git itself in test/unit/patch-ignore.test.ts.
 *
 * The patterns are the tenant's and the paths the agent's, so matching has no regular expressions:
 * wildcards are matched with one backtrack point per level (work bounded by pattern × name length),
 * and the whole export has a step budget. Past it, ignore rules stop applying (the rest of the
 * changes go into the patch, and a note says so): a slower answer is never a wrong one.
 */
import type { FileSide } from './workspace-diff';

export interface PatchIgnoreRules {
  /** Ignore files, lowest precedence first: `base` is the directory they apply to ('' for the root). */
  sources: Array<{ base: string; text: string; file: string }>;
  /** The run's patch.exclude patterns: root-based, above every file. */
  exclude: string[];
  /** Ignore files that were not read (too large, too many), said in the export's notes. */
  skipped: string[];
}

/** Largest ignore file read, ignore files read at most, rules kept in all. */
const MAX_IGNORE_FILE_BYTES = 256 * 1024;
const MAX_IGNORE_FILES = 2000;
const MAX_RULES = 20_000;
/** Longest pattern kept (a longer line is skipped: no real ignore pattern is that long). */
const MAX_PATTERN_CHARS = 1024;
/** Matching steps one export may spend (≈ a second of CPU at worst). */
export const IGNORE_STEP_BUDGET = 50_000_000;

const isIgnoreFile = (path: string) => path === '.gitignore' || path.endsWith('/.gitignore');

/** Reads the seed's ignore files (root first, then by depth) into rules. */
export async function loadIgnoreRules(seed: ReadonlyMap<string, FileSide>, o: { gitignore: boolean; exclude: readonly string[] }): Promise<PatchIgnoreRules> {
  const rules: PatchIgnoreRules = { sources: [], exclude: [...o.exclude], skipped: [] };
  if (!o.gitignore) return rules;
  const depth = (p: string) => p.split('/').length;
  const files = [...seed.keys()].filter((p) => isIgnoreFile(p) || p === '.git/info/exclude')
    .sort((a, b) => (a === '.git/info/exclude' ? -1 : b === '.git/info/exclude' ? 1 : depth(a) - depth(b) || (a < b ? -1 : a > b ? 1 : 0)));
  for (const file of files) {
    const side = seed.get(file)!;
    if (rules.sources.length >= MAX_IGNORE_FILES || side.size > MAX_IGNORE_FILE_BYTES) {
      rules.skipped.push(file);
      continue;
    }
    const data = side.data ?? (side.load ? await side.load() : undefined);
    if (!data) {
      rules.skipped.push(file);
      continue;
    }
    const base = file === '.git/info/exclude' ? '' : file.slice(0, Math.max(0, file.length - '/.gitignore'.length));
    rules.sources.push({ base: file === '.gitignore' ? '' : base, text: data.toString('utf8'), file });
  }
  return rules;
}

interface Rule {
  negate: boolean;
  dirOnly: boolean;
  /** Matched against the path below `base` (true) or against the last name only (false). */
  anchored: boolean;
  /** Pattern segments (split at `/`); `**` as a whole segment crosses directories. */
  segs: string[];
  base: string;
}

/** One line of an ignore file as a rule, or null (blank, comment, unusable). */
export function parseIgnoreLine(line: string, base: string): Rule | null {
  // git reads CRLF ignore files as LF ones.
  let p = line.endsWith('\r') ? line.slice(0, -1) : line;
  if (p === '' || p.startsWith('#') || p.length > MAX_PATTERN_CHARS) return null;
  // Trailing spaces go, unless escaped with a backslash.
  let end = p.length;
  while (end > 0 && p[end - 1] === ' ') {
    let bs = 0;
    for (let i = end - 2; i >= 0 && p[i] === '\\'; i--) bs++;
    if (bs % 2 === 1) break;
    end--;
  }
  p = p.slice(0, end);
  let negate = false;
  if (p.startsWith('!')) {
    negate = true;
    p = p.slice(1);
  }
  let dirOnly = false;
  if (p.endsWith('/')) {
    dirOnly = true;
    p = p.slice(0, -1);
  }
  if (p === '') return null;
  const anchored = p.includes('/');
  if (p.startsWith('/')) p = p.slice(1);
  if (p === '') return null;
  return { negate, dirOnly, anchored, segs: p.split('/'), base };
}

class OutOfBudget extends Error {}

export interface IgnoreMatcher {
  /** Whether a changed file at `path` stays out of the patch. */
  ignored(path: string): boolean;
  /** Set once the step budget ran out (ignore rules no longer apply), or rules were dropped. */
  notes(): string[];
}

/** A matcher over the rules; `budget` bounds its work over its whole life. */
export function ignoreMatcher(rules: PatchIgnoreRules, budget = IGNORE_STEP_BUDGET): IgnoreMatcher {
  const all: Rule[] = [];
  const notes: string[] = [];
  if (rules.skipped.length) notes.push(`ignore files not read (too large or too many), so they did not apply: ${rules.skipped.slice(0, 10).join(', ')}${rules.skipped.length > 10 ? ', …' : ''}`);
  const add = (text: string, base: string) => {
    for (const raw of text.replace(/^\uFEFF/, '').split('\n')) {
      if (all.length >= MAX_RULES) return;
      const r = parseIgnoreLine(raw, base);
      if (r) all.push(r);
    }
  };
  for (const s of rules.sources) add(s.text, s.base);
  for (const e of rules.exclude) add(e, '');
  if (all.length >= MAX_RULES) notes.push(`only the first ${MAX_RULES} ignore rules applied`);
  let steps = 0;
  let spent = false;
  const tick = (n: number) => {
    steps += n;
    if (steps > budget) throw new OutOfBudget();
  };
  const dirMemo = new Map<string, boolean>();

  /** The last rule (in precedence order) that matches decides; none: not ignored. */
  const decide = (path: string, isDir: boolean): boolean => {
    const name = path.slice(path.lastIndexOf('/') + 1);
    for (let i = all.length - 1; i >= 0; i--) {
      const r = all[i]!;
      if (r.dirOnly && !isDir) continue;
      if (r.base !== '' && !path.startsWith(`${r.base}/`)) continue;
      const rel = r.base === '' ? path : path.slice(r.base.length + 1);
      const hit = r.anchored ? matchSegments(r.segs, rel.split('/'), tick) : matchName(r.segs[0]!, name, tick);
      if (hit) return !r.negate;
    }
    return false;
  };
  const dirIgnored = (dir: string): boolean => {
    if (dir === '') return false;
    const known = dirMemo.get(dir);
    if (known !== undefined) return known;
    const slash = dir.lastIndexOf('/');
    const v = (slash > 0 && dirIgnored(dir.slice(0, slash))) || decide(dir, true);
    dirMemo.set(dir, v);
    return v;
  };
  return {
    ignored(path) {
      if (spent || all.length === 0) return false;
      try {
        const slash = path.lastIndexOf('/');
        return (slash > 0 && dirIgnored(path.slice(0, slash))) || decide(path, false);
      } catch (err) {
        if (!(err instanceof OutOfBudget)) throw err;
        spent = true;
        notes.push(`the ignore rules took too long to match (over ${budget} steps), so they stopped applying from ${JSON.stringify(path.slice(0, 200))} on: later changes are in the patch even where a rule names them`);
        return false;
      }
    },
    notes: () => [...notes],
  };
}

/**
 * Path segments against pattern segments: `**` matches zero or more whole segments (one or more as
 * the last segment: `dir/**` is what is inside dir, not dir). Greedy with one backtrack point.
 */
function matchSegments(pat: string[], text: string[], tick: (n: number) => void): boolean {
  const last = pat.length - 1;
  let p = 0;
  let t = 0;
  let starP = -1;
  let starT = 0;
  while (t < text.length) {
    tick(1);
    if (p < pat.length && pat[p] === '**') {
      starP = p;
      starT = p === last ? t + 1 : t;
      p++;
      if (p > last) return true;
      continue;
    }
    if (p < pat.length && matchName(pat[p]!, text[t]!, tick)) {
      p++;
      t++;
      continue;
    }
    if (starP < 0) return false;
    p = starP + 1;
    starT++;
    t = starT;
  }
  while (p < pat.length && pat[p] === '**' && p !== last) p++;
  return p === pat.length;
}

/** One name against one pattern segment (fnmatch within a segment: `*`, `?`, `[...]`, `\x`). */
export function matchName(pat: string, name: string, tick: (n: number) => void): boolean {
  let p = 0;
  let t = 0;
  let starP = -1;
  let starT = 0;
  while (t < name.length) {
    tick(1);
    const c = pat[p];
    if (c === '*') {
      while (pat[p] === '*') p++;
      if (p === pat.length) return true;
      starP = p;
      starT = t;
      continue;
    }
    if (c !== undefined) {
      const step = matchOne(pat, p, name[t]!);
      if (step > 0) {
        p += step;
        t++;
        continue;
      }
    }
    if (starP < 0) return false;
    p = starP;
    starT++;
    t = starT;
  }
  while (pat[p] === '*') p++;
  return p === pat.length;
}

/** How many pattern characters at `p` match `ch` (0: no match, or a broken class). */
function matchOne(pat: string, p: number, ch: string): number {
  const c = pat[p]!;
  if (c === '?') return 1;
  if (c === '\\') return p + 1 < pat.length && pat[p + 1] === ch ? 2 : 0;
  if (c !== '[') return c === ch ? 1 : 0;
  let i = p + 1;
  let negate = false;
  if (pat[i] === '!' || pat[i] === '^') {
    negate = true;
    i++;
  }
  let hit = false;
  let first = true;
  while (i < pat.length && (first || pat[i] !== ']')) {
    first = false;
    if (pat[i] === '[' && pat[i + 1] === ':') {
      const close = pat.indexOf(':]', i + 2);
      if (close < 0) return 0;
      const cls = POSIX[pat.slice(i + 2, close)];
      if (!cls) return 0;
      if (cls.test(ch)) hit = true;
      i = close + 2;
      continue;
    }
    let lo = pat[i]!;
    if (lo === '\\' && i + 1 < pat.length) lo = pat[++i]!;
    i++;
    if (pat[i] === '-' && i + 1 < pat.length && pat[i + 1] !== ']') {
      let hi = pat[i + 1]!;
      i += 2;
      if (hi === '\\' && i < pat.length) hi = pat[i++]!;
      if (ch >= lo && ch <= hi) hit = true;
    } else if (ch === lo) {
      hit = true;
    }
  }
  if (i >= pat.length) return 0;
  return hit !== negate ? i + 1 - p : 0;
}

const POSIX: Record<string, RegExp> = {
  alnum: /^[A-Za-z0-9]$/, alpha: /^[A-Za-z]$/, blank: /^[ \t]$/, cntrl: /^[\x00-\x1f\x7f]$/, // eslint-disable-line no-control-regex
  digit: /^[0-9]$/, graph: /^[!-~]$/, lower: /^[a-z]$/, print: /^[ -~]$/, punct: /^[!-/:-@[-`{-~]$/,
  space: /^[ \t\n\r\f\v]$/, upper: /^[A-Z]$/, xdigit: /^[0-9A-Fa-f]$/,
};
