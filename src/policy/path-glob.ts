/**
 * One glob dialect for policy globs and for the patterns of shell words: `**\/` matches any number
 * of directories (none included), `**` elsewhere any text across `/`, `*` and `?` stay within a
 * segment, `[…]` is a class (`!` or `^` negates, `[:alpha:]`-style names count as any character),
 * `\x` is a literal x. In policy globs dot files are not special. A SHELL glob (`{ shell: true }`)
 * follows bash's defaults: a wildcard at the start of a segment does not match a leading `.`
 * (`*` never names `.git`); the analyser asks for anything that turns dotglob on. An expansion in a
 * word's pattern (`**`) matches anything.
 *
 * `globToRegExp` compiles a glob; `globsOverlap(a, b)` says whether some path matches both — how a
 * glob argument (`.gi?/config`, `~/.ss*\/id_*`) is checked against protected-path rules. picomatch
 * compiles globs but has no intersection test, so both live here on one tokenizer.
 */

type Tok =
  | { k: 'lit'; c: string }
  | { k: 'one'; nodot?: boolean }
  | { k: 'star'; nodot?: boolean }
  | { k: 'any' }
  | { k: 'dirs' }
  | { k: 'class'; chars: string; ranges: Array<[string, string]>; neg: boolean; named: boolean; nodot?: boolean };

export interface GlobOptions { shell?: boolean }

export function tokenize(glob: string, o: GlobOptions = {}): Tok[] {
  const out: Tok[] = [];
  const atSegmentStart = () => out.length === 0 || (out[out.length - 1]!.k === 'lit' && (out[out.length - 1] as { c: string }).c === '/') || out[out.length - 1]!.k === 'dirs';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    const nodot = o.shell === true && atSegmentStart();
    if (c === '\\' && i + 1 < glob.length) { out.push({ k: 'lit', c: glob[++i]! }); continue; }
    if (c === '*') {
      if (glob[i + 1] === '*') {
        while (glob[i + 1] === '*') i++;
        if (glob[i + 1] === '/') { i++; out.push({ k: 'dirs' }); } else out.push({ k: 'any' });
      } else out.push({ k: 'star', ...(nodot ? { nodot } : {}) });
      continue;
    }
    if (c === '?') { out.push({ k: 'one', ...(nodot ? { nodot } : {}) }); continue; }
    if (c === '[') {
      const cls = parseClass(glob, i);
      if (cls) { out.push(nodot ? { ...cls.tok, nodot } as Tok : cls.tok); i = cls.end; continue; }
    }
    out.push({ k: 'lit', c });
  }
  return out;
}

function parseClass(g: string, start: number): { tok: Tok; end: number } | null {
  let i = start + 1;
  let neg = false;
  if (g[i] === '!' || g[i] === '^') { neg = true; i++; }
  let chars = '';
  const ranges: Array<[string, string]> = [];
  let named = false;
  let firstChar = true;
  for (; i < g.length; i++) {
    const c = g[i]!;
    if (c === ']' && !firstChar) return { tok: { k: 'class', chars, ranges, neg, named }, end: i };
    firstChar = false;
    if (c === '[' && g[i + 1] === ':') {
      const close = g.indexOf(':]', i + 2);
      if (close < 0) return null;
      named = true;
      i = close + 1;
      continue;
    }
    if (c === '\\' && i + 1 < g.length) { chars += g[++i]; continue; }
    if (g[i + 1] === '-' && g[i + 2] !== undefined && g[i + 2] !== ']') { ranges.push([c, g[i + 2]!]); i += 2; continue; }
    chars += c;
  }
  return null;
}

function classRegex(t: Extract<Tok, { k: 'class' }>): string {
  if (t.named) return t.neg ? '[^/]' : '[^/]';
  const esc = (s: string) => s.replace(/[\]\\^-]/g, '\\$&');
  // A reversed range (`[z-a]`) matches nothing in bash; it is dropped rather than handed to RegExp.
  const ranges = t.ranges.filter(([a, b]) => a.codePointAt(0)! <= b.codePointAt(0)!);
  const body = esc(t.chars) + ranges.map(([a, b]) => `${esc(a)}-${esc(b)}`).join('');
  if (body === '') return t.neg ? '[^/]' : '(?!)';
  return t.neg ? `[^/${body}]` : `[${body}]`;
}

const compiled = new Map<string, RegExp>();

/** Compiles a glob (memoised: policies, specs and the analyser compile the same few globs often). */
export function globToRegExp(glob: string, o: GlobOptions = {}): RegExp {
  const key = o.shell ? `\u0000${glob}` : glob;
  let re = compiled.get(key);
  if (!re) {
    if (compiled.size > 50_000) compiled.clear();
    re = compileGlob(glob, o);
    compiled.set(key, re);
  }
  return re;
}

function compileGlob(glob: string, o: GlobOptions): RegExp {
  let re = '';
  for (const t of tokenize(glob, o)) {
    const nd = 'nodot' in t && t.nodot ? '(?!\\.)' : '';
    if (t.k === 'lit') re += t.c.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    else if (t.k === 'one') re += `${nd}[^/]`;
    else if (t.k === 'star') re += `${nd}[^/]*`;
    else if (t.k === 'any') re += '.*';
    else if (t.k === 'dirs') re += '(?:.*/)?';
    else re += nd + classRegex(t);
  }
  return new RegExp(`^${re}$`, 's');
}

/** True when a shell glob segment (e.g. `.*`) could expand to `..`. */
export function segmentCouldBeDotDot(segment: string, shell = false): boolean {
  // in bash (`shell`) a wildcard at the start of a segment never matches a leading dot, so `*` is never `..`; `.*` may be
  return /[*?[]/.test(segment) && globToRegExp(segment, { shell }).test('..');
}

// ---- intersection ---------------------------------------------------------------------------
// Each glob is an NFA over positions in its token list; state [i, inside] where `inside` marks the
// middle of a `**/`. Two globs overlap when some character sequence takes both to their ends.

// State: i * 4 + flags; bit 0: inside a `**/`, bit 1: a `*` has consumed a character already.
type State = number;
type Pred = { k: 'char'; c: string } | { k: 'notslash'; nodot?: boolean } | { k: 'anychar' } | { k: 'class'; t: Extract<Tok, { k: 'class' }> };
const at = (i: number) => i * 4;

function closure(toks: Tok[], s: State): State[] {
  const out = new Set<State>([s]);
  const stack = [s];
  while (stack.length) {
    const x = stack.pop()!;
    const i = x >> 2;
    if (x & 1 || i >= toks.length) continue;
    const t = toks[i]!;
    if (t.k === 'star' || t.k === 'any' || t.k === 'dirs') {
      const next = at(i + 1);
      if (!out.has(next)) { out.add(next); stack.push(next); }
    }
  }
  return [...out];
}

function moves(toks: Tok[], s: State): Array<[Pred, State]> {
  const i = s >> 2;
  if (s & 1) return [[{ k: 'anychar' }, s], [{ k: 'char', c: '/' }, at(i + 1)]];
  if (i >= toks.length) return [];
  const t = toks[i]!;
  switch (t.k) {
    case 'lit': return [[{ k: 'char', c: t.c }, at(i + 1)]];
    case 'one': return [[{ k: 'notslash', ...(t.nodot ? { nodot: true } : {}) }, at(i + 1)]];
    case 'class': return [[{ k: 'class', t }, at(i + 1)]];
    case 'star': return [[{ k: 'notslash', ...(t.nodot && !(s & 2) ? { nodot: true } : {}) }, at(i) | 2]];
    case 'any': return [[{ k: 'anychar' }, s]];
    case 'dirs': return [[{ k: 'anychar' }, s | 1], [{ k: 'char', c: '/' }, at(i + 1)]];
  }
}

function accepts(p: Pred, c: string): boolean {
  switch (p.k) {
    case 'char': return p.c === c;
    case 'notslash': return c !== '/' && !(p.nodot && c === '.');
    case 'anychar': return true;
    case 'class': {
      if (c === '/' || (p.t.nodot && c === '.')) return false;
      if (p.t.named) return true;
      const inside = p.t.chars.includes(c) || p.t.ranges.some(([a, b]) => c >= a && c <= b);
      return p.t.neg ? !inside : inside;
    }
  }
}

function witnesses(p: Pred, q: Pred): string[] {
  const out = new Set<string>(['/', '\u0001']);
  for (const x of [p, q]) {
    if (x.k === 'char') out.add(x.c);
    if (x.k === 'class') { for (const c of x.t.chars) out.add(c); for (const [a, b] of x.t.ranges) { out.add(a); out.add(b); } }
  }
  return [...out];
}

const overlaps = new Map<string, boolean>();

/** Does some path match both globs? `a` may be a shell glob (`aShell`), `b` is a policy glob. Memoised. */
export function globsOverlap(a: string, b: string, aShell = false): boolean {
  const key = `${aShell ? 1 : 0}\u0000${a}\u0000${b}`;
  let v = overlaps.get(key);
  if (v === undefined) {
    if (overlaps.size > 100_000) overlaps.clear();
    v = literalPrefixesAgree(a, b) && overlapNfa(a, b, aShell);
    overlaps.set(key, v);
  }
  return v;
}

/** Two globs whose literal beginnings differ cannot overlap (a cheap test before the automaton). */
function literalPrefixesAgree(a: string, b: string): boolean {
  for (let i = 0; i < a.length && i < b.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if ('*?[\\'.includes(x) || '*?[\\'.includes(y)) return true;
    if (x !== y) return false;
  }
  return true;
}

function overlapNfa(a: string, b: string, aShell: boolean, maxStates = 200_000): boolean {
  const ta = tokenize(a, { shell: aShell });
  const tb = tokenize(b);
  const endA = at(ta.length);
  const endB = at(tb.length);
  const seen = new Set<string>();
  const stack: Array<[State, State]> = [];
  const push = (x: State, y: State) => {
    for (const cx of closure(ta, x)) for (const cy of closure(tb, y)) {
      const key = `${cx},${cy}`;
      if (!seen.has(key)) { seen.add(key); stack.push([cx, cy]); }
    }
  };
  push(0, 0);
  while (stack.length) {
    if (seen.size > maxStates) return true; // too big to decide: assume they overlap
    const [x, y] = stack.pop()!;
    if (x === endA && y === endB) return true;
    for (const [pa, na] of moves(ta, x)) for (const [pb, nb] of moves(tb, y)) {
      if (witnesses(pa, pb).some((c) => accepts(pa, c) && accepts(pb, c))) push(na, nb);
    }
  }
  return false;
}
