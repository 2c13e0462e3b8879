/**
 * Resolves a parsed bash word to what bash would pass, as far as that is knowable without running
 * anything. Quotes and escapes are removed, ANSI-C `$'…'` escapes decoded, `~`, `$HOME` and
 * `${HOME}` become the policy's home, `$PWD`/`~+` the directories the analyser tracks, brace
 * expansions are expanded (a word that becomes several), and a few command substitutions whose
 * output is known are evaluated (`$(echo x)`, `$(printf …)`, `$(pwd)`). Any other expansion makes the
 * word `dynamic`; its `pattern` (a glob: literal text escaped, the word's own unquoted globs kept,
 * each expansion as `**`) still covers every value it can take, so a path check can ask "could this
 * be ~/.ssh/id_rsa?". `alternatives` are every value it can take when the analyser knows them all (a
 * for-loop variable, a brace expansion); `candidates` are values it may take (a `${X:-default}`), used
 * to deny, never to allow.
 *
 * What a word may contain and still count as understood: literals, quotes, `$'…'`, the plain
 * parameter forms (`$x`, `${x}`, `$1`, `$@`, `${x:-w}`, `${x#p}`, `${x/a/b}`, `${#x}`, `${x^^}`, …),
 * command and process substitutions (their commands are analysed by the caller through `nested`),
 * arithmetic over literal numbers, extglobs, brace expansions. Anything that evaluates text as code
 * at run time is listed in `unmodelled` and makes the whole call at least "ask": indirection
 * `${!x}`, prompt expansion `${x@P}`, array subscripts, slices and arithmetic that read variables
 * (bash evaluates their contents as arithmetic, where `a[$(cmd)]` runs cmd), `$"…"` translations.
 */
import type { ShNode } from 'mvdan-sh';
import { globToRegExp } from './path-glob';
import { nodeType, opText } from './shell-parse';

export interface ShellWord {
  /** What bash passes when the word is static; for a dynamic word only a hint (expansions as ''). */
  value: string;
  /** The value depends on run-time expansion. */
  dynamic: boolean;
  /** Contains an unquoted glob (`*`, `?`, `[…]`, extglob) or brace expansion. */
  glob: boolean;
  /** A glob covering every value: literal characters escaped with `\`, expansions as `**`. */
  pattern: string;
  /** Literal text before the first expansion (`-j` of `-j$(nproc)`). */
  prefix: string;
  /** An unquoted expansion: word splitting may make several arguments of it. */
  splits: boolean;
  /** Constructs in the word the analyser does not model (each a short description). */
  unmodelled: string[];
  /** Its expansions never contain a `..` segment (find's `{}`): its literal prefix bounds where it is. */
  confined?: boolean;
  /** It is one of these words (a for-loop variable over known words, one word of a brace expansion). */
  alternatives?: ShellWord[];
  /** A brace expansion: bash passes every alternative, as separate arguments. */
  braces?: boolean;
  /** Values it may take (a default, a known command's output); checked only for what to deny. */
  candidates?: ShellWord[];
  /** A process substitution's `/dev/fd/N`. */
  pipe?: boolean;
}

/** What a command substitution is known to print (its commands are analysed by the caller either way). */
export interface NestedResult { value?: string; word?: ShellWord }
/** Called for each command substitution, process substitution or arithmetic inside a word. */
export type NestedVisitor = (node: ShNode, kind: 'cmdsubst' | 'procsubst') => NestedResult | void;

export function literalWord(value: string): ShellWord {
  return { value, dynamic: false, glob: false, pattern: escapeGlob(value), prefix: value, splits: false, unmodelled: [] };
}

export const DYNAMIC_WORD: ShellWord = { value: '', dynamic: true, glob: false, pattern: '**', prefix: '', splits: true, unmodelled: [] };

export function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\{}]/g, '\\$&');
}

const SAFE_AT_OPS = new Set(['Q', 'E', 'U', 'u', 'L', 'a', 'K', 'k']);
const MAX_BRACE_WORDS = 10_000;
const MAX_ALTERNATIVES = 64;

/** How many words one `{…}` expands to: alternatives, or a `{a..b[..step]}` range. */
function braceCount(body: string): number {
  const r = /^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(\.\.(-?\d+))?$/.exec(body);
  if (r) {
    const num = (s: string) => (/^-?\d+$/.test(s) ? Number(s) : s.charCodeAt(0));
    const step = Math.max(1, Math.abs(Number(r[4] ?? 1)));
    return Math.floor(Math.abs(num(r[2]!) - num(r[1]!)) / step) + 1;
  }
  return body.split(',').length;
}

/** Bash brace expansion of an unquoted literal; null when it has none or expands past `cap` words. */
export function expandBraces(raw: string, cap = MAX_ALTERNATIVES): string[] | null {
  if (braceCountOf(raw) > cap) return null;
  return expandWithin(raw, cap);
}

function expandWithin(raw: string, cap: number): string[] | null {
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] === '\\') { i++; continue; }
    if (raw[i] !== '{') continue;
    let depth = 0;
    let close = -1;
    const commas: number[] = [];
    for (let j = i; j < raw.length; j++) {
      if (raw[j] === '\\') { j++; continue; }
      if (raw[j] === '{') depth++;
      else if (raw[j] === '}') { depth--; if (depth === 0) { close = j; break; } }
      else if (raw[j] === ',' && depth === 1) commas.push(j);
    }
    if (close < 0) return null;
    const body = raw.slice(i + 1, close);
    let alts: string[] | null = null;
    if (commas.length) alts = [i, ...commas].map((c, k) => raw.slice(c + 1, k < commas.length ? commas[k] : close));
    else {
      const r = /^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(\.\.(-?\d+))?$/.exec(body);
      if (r) {
        if (braceCount(body) > cap) return null;
        const numeric = /^-?\d/.test(r[1]!);
        const a = numeric ? Number(r[1]) : r[1]!.charCodeAt(0);
        const z = numeric ? Number(r[2]) : r[2]!.charCodeAt(0);
        const step = Math.max(1, Math.abs(Number(r[4] ?? 1))) * (z >= a ? 1 : -1);
        alts = [];
        for (let v = a; step > 0 ? v <= z : v >= z; v += step) alts.push(numeric ? String(v) : String.fromCharCode(v));
      }
    }
    if (!alts) continue; // `{}` or `{x}`: a literal brace
    const out: string[] = [];
    for (const alt of alts) {
      const next = raw.slice(0, i) + alt + raw.slice(close + 1);
      const rest = /[{]/.test(next) ? expandWithin(next, cap) : null;
      out.push(...(rest ?? [next]));
      if (out.length > cap) return null;
    }
    return out;
  }
  return null;
}

class WordBuilder {
  /** The word with every expansion replaced by its default (`${x:-d}`), or null when some expansion has none. */
  withDefaults: string | null = '';
  confined = false;
  braceWords = 1;
  value = '';
  pattern = '';
  prefix = '';
  dynamic = false;
  glob = false;
  splits = false;
  unmodelled: string[] = [];
  candidates: ShellWord[] = [];
  private sawDynamic = false;

  lit(s: string): void {
    if (this.withDefaults !== null) this.withDefaults += s;
    this.value += s;
    this.pattern += escapeGlob(s);
    if (!this.sawDynamic) this.prefix += s;
  }
  globChar(s: string): void {
    if (this.withDefaults !== null) this.withDefaults += s;
    this.value += s;
    this.pattern += s;
    this.glob = true;
    if (!this.sawDynamic) this.prefix += s;
  }
  /** Every computed part so far is a known pattern (`$d` after `d=$(mktemp -d)`). */
  onlyKnown = true;
  /** Appends a variable known to be a confined pattern: the word stays a pattern of known shape. */
  known(w: ShellWord): void {
    this.withDefaults = null;
    this.dynamic = true;
    if (!this.sawDynamic) this.prefix += w.prefix;
    this.sawDynamic = true;
    this.pattern += w.pattern;
  }
  dyn(unquoted: boolean, fallback?: string): void {
    this.onlyKnown = false;
    this.withDefaults = fallback !== undefined && this.withDefaults !== null ? this.withDefaults + fallback : null;
    this.dynamic = true;
    this.sawDynamic = true;
    if (unquoted) this.splits = true;
    if (!this.pattern.endsWith('**')) this.pattern += '**';
  }
}

/** Decodes the escapes of a `$'…'` string the way bash does. */
export function decodeAnsiC(raw: string): string {
  const simple: Record<string, string> = { a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== '\\' || i + 1 >= raw.length) { out += c; continue; }
    const n = raw[++i]!;
    if (n in simple) { out += simple[n]; continue; }
    const hex = (len: number) => {
      const m = /^[0-9a-fA-F]+/.exec(raw.slice(i + 1, i + 1 + len));
      if (!m) return null;
      i += m[0].length;
      return parseInt(m[0], 16);
    };
    if (n === 'x') { const v = hex(2); out += v === null ? '\\x' : String.fromCharCode(v); continue; }
    if (n === 'u' || n === 'U') { const v = hex(n === 'u' ? 4 : 8); out += v === null || v > 0x10ffff ? `\\${n}` : String.fromCodePoint(v); continue; }
    if (/[0-7]/.test(n)) {
      const m = /^[0-7]{1,3}/.exec(raw.slice(i))!;
      i += m[0].length - 1;
      out += String.fromCharCode(parseInt(m[0], 8) & 0xff);
      continue;
    }
    if (n === 'c' && i + 1 < raw.length) { out += String.fromCharCode(raw.charCodeAt(++i) & 0x1f); continue; }
    out += '\\' + n;
  }
  return out;
}

export interface ResolveOptions {
  assignmentLike?: boolean;
  /** The values a variable is known to take (loop variables, single literal assignments, PWD). */
  lookup?: (name: string) => ShellWord[] | undefined;
  /** Told the variables an arithmetic expansion reads (the walker checks that each holds a number). */
  arithmetic?: (names: string[]) => void;
}

interface Ctx { home: string; nested: NestedVisitor; opts: ResolveOptions }

/** Adds an unquoted literal: backslash escapes, glob characters, a leading tilde. */
function addUnquoted(b: WordBuilder, raw: string, first: boolean, c: Ctx): void {
  let i = 0;
  if (first && raw.startsWith('~')) {
    const m = /^~([^/:]*)/.exec(raw)!;
    if (m[1] === '') b.lit(c.home);
    else if (m[1] === '+' && c.opts.lookup?.('PWD')?.length === 1) b.lit(c.opts.lookup('PWD')![0]!.value);
    else b.dyn(false); // ~user, ~+, ~-: another directory
    i = m[0].length;
  }
  // bash also expands ~ after the = (and each :) of an argument that looks like an assignment (`dd of=~/x`)
  const assignmentLike = c.opts.assignmentLike || (first && /^[A-Za-z_][A-Za-z0-9_]*=/.test(raw));
  for (; i < raw.length; i++) {
    const ch = raw[i]!;
    if (ch === '\\') {
      i++;
      if (i < raw.length && raw[i] !== '\n') b.lit(raw[i]!);
      continue;
    }
    if (ch === '*' || ch === '?') { b.globChar(ch); continue; }
    if (ch === '[') {
      const end = raw.indexOf(']', i + 2);
      if (end > i) { b.globChar(raw.slice(i, end + 1)); i = end; continue; }
      b.lit(ch);
      continue;
    }
    if (assignmentLike && (ch === '=' || ch === ':') && raw[i + 1] === '~' && (raw[i + 2] === undefined || raw[i + 2] === '/' || raw[i + 2] === ':')) {
      b.lit(ch + c.home);
      i++;
      continue;
    }
    b.lit(ch);
  }
}

/**
 * A here-document's body: with a quoted delimiter (`<<'EOF'`, `<<"EOF"`, `<<\EOF`) the text as written;
 * otherwise expansions run and only \$, \`, \\ and \newline are escapes (`\'` and `\"` stay as written).
 */
export function resolveHeredoc(body: ShNode, delimiter: ShNode | undefined, home: string, nested: NestedVisitor, opts: ResolveOptions = {}): ShellWord {
  const parts: ShNode[] = body?.Parts ?? [];
  const quotedDelim = (delimiter?.Parts ?? []).some((p: ShNode) => nodeType(p) !== 'Lit' || String(p.Value).includes('\\'));
  const b = new WordBuilder();
  const c: Ctx = { home, nested, opts };
  for (const p of parts) {
    if (nodeType(p) === 'Lit') b.lit(quotedDelim ? String(p.Value) : String(p.Value).replace(/\\([$`\\\n])/g, (_m, ch: string) => (ch === '\n' ? '' : ch)));
    else if (quotedDelim) { b.unmodelled.push('an expansion in a quoted here-document'); b.dyn(false); }
    else addPart(b, p, false, true, c);
  }
  return { value: b.value, dynamic: b.dynamic, glob: false, pattern: b.pattern, prefix: b.prefix, splits: false, unmodelled: b.unmodelled };
}

function unescapeDouble(raw: string): string {
  return raw.replace(/\\([$`"\\\n])/g, (_m, ch: string) => (ch === '\n' ? '' : ch));
}

/** Arithmetic that reads no variable (only literal numbers and operators) is understood. */
export function arithmeticReadsVariables(x: ShNode): boolean {
  const stack: ShNode[] = [x];
  while (stack.length) {
    const n = stack.pop();
    if (!n) continue;
    const t = nodeType(n);
    if (t === 'Word') {
      for (const p of n.Parts ?? []) {
        const pt = nodeType(p);
        if (pt === 'Lit') { if (!/^(0[xX][0-9a-fA-F]+|[0-9]+(#[0-9a-zA-Z@_]+)?)$/.test(String(p.Value))) return true; }
        else return true;
      }
    } else if (t === 'BinaryArithm') { stack.push(n.X, n.Y); }
    else if (t === 'UnaryArithm') { stack.push(n.X); }
    else if (t === 'ParenArithm') { stack.push(n.X); }
    else return true;
  }
  return false;
}

/**
 * The variables an arithmetic expression reads (`i+1` → [i], `$n*2` → [n], `${#a}` → []), or null when it
 * holds anything else (a substitution, a subscript, an operator on a parameter): bash evaluates each
 * variable's text as arithmetic again, so the caller decides whether every one of them holds a number.
 */
export function arithmeticNames(x: ShNode): string[] | null {
  const names: string[] = [];
  const stack: ShNode[] = [x];
  while (stack.length) {
    const n = stack.pop();
    if (!n) continue;
    const t = nodeType(n);
    if (t === 'Word') {
      for (const p of n.Parts ?? []) {
        const pt = nodeType(p);
        if (pt === 'Lit') {
          const v = String(p.Value);
          if (/^(0[xX][0-9a-fA-F]+|[0-9]+(#[0-9a-zA-Z@_]+)?)$/.test(v)) continue;
          if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(v)) { names.push(v); continue; }
          return null;
        }
        if (pt === 'ParamExp' && !p.Excl && !p.Index && !p.Slice && !p.Repl && !p.Exp && !p.Names) {
          if (!p.Length) names.push(String(p.Param?.Value ?? ''));
          continue;
        }
        return null;
      }
    } else if (t === 'BinaryArithm') stack.push(n.X, n.Y);
    else if (t === 'UnaryArithm' || t === 'ParenArithm') stack.push(n.X);
    else return null;
  }
  return names;
}

function isSimpleIndex(idx: ShNode): boolean {
  if (!idx) return true;
  if (nodeType(idx) !== 'Word') return false;
  const parts = idx.Parts ?? [];
  return parts.length === 1 && nodeType(parts[0]) === 'Lit' && /^([0-9]+|@|\*)$/.test(String(parts[0].Value));
}

function addParam(b: WordBuilder, p: ShNode, quoted: boolean, c: Ctx): void {
  const name = String(p.Param?.Value ?? '');
  let fallback: string | undefined;
  if (p.Excl) { b.unmodelled.push(`\${!${name}…} indirection`); b.dyn(!quoted); return; }
  if (p.Width) { b.unmodelled.push('a ${%…} expansion'); b.dyn(!quoted); return; }
  if (!isSimpleIndex(p.Index)) { b.unmodelled.push(`an array subscript in \${${name}[…]} (evaluated as arithmetic)`); b.dyn(!quoted); return; }
  if (p.Slice) {
    for (const x of [p.Slice.Offset, p.Slice.Length]) if (x && arithmeticReadsVariables(x)) b.unmodelled.push(`a slice of \${${name}} computed from variables`);
  }
  if (p.Repl) { for (const w of [p.Repl.Orig, p.Repl.With]) if (w) b.unmodelled.push(...resolveWord(w, c.home, c.nested, c.opts).unmodelled); }
  if (p.Exp) {
    const op = opText('paramExp', p.Exp.Op);
    if (op === undefined) b.unmodelled.push('an unknown parameter operator');
    else if (op === '@') {
      const w = String(p.Exp.Word?.Parts?.[0]?.Value ?? '');
      if (!SAFE_AT_OPS.has(w)) b.unmodelled.push(`\${${name}@${w}} (prompt or declaration expansion)`);
    } else if (p.Exp.Word) {
      const inner = resolveWord(p.Exp.Word, c.home, c.nested, c.opts);
      b.unmodelled.push(...inner.unmodelled);
      if ([':-', '-', ':=', '='].includes(op) && !inner.dynamic) { b.candidates.push(inner); fallback = inner.value; }
    }
  }
  const bound = !p.Length && !p.Index && !p.Slice && !p.Names ? c.opts.lookup?.(name) : undefined;
  if (bound && bound.length === 1 && bound[0]!.dynamic && bound[0]!.confined && !bound[0]!.alternatives && !p.Exp && !p.Repl && !p.Excl) { b.known(bound[0]!); return; }
  const value = bound && bound.length === 1 && !bound[0]!.dynamic && !bound[0]!.glob ? bound[0]!.value : name === 'HOME' ? c.home : undefined;
  if (value !== undefined) {
    const op = p.Exp ? opText('paramExp', p.Exp.Op) : undefined;
    const pat = p.Exp?.Word ? resolveWord(p.Exp.Word, c.home, () => undefined, c.opts) : undefined;
    let v: string | undefined = value;
    if (p.Repl) v = undefined;
    else if (op && [':-', '-', ':=', '=', ':?', '?'].includes(op)) v = value === '' && op.startsWith(':') ? pat?.value : value;
    else if (op && ['#', '##', '%', '%%'].includes(op) && pat && !pat.dynamic) v = trimPattern(value, pat.pattern, op);
    else if (op) v = undefined;
    // unquoted, a value with wildcards is globbed again by bash: the analyser does not follow that
    if (v !== undefined && !quoted && /[*?[]/.test(v)) { b.dyn(true); return; }
    if (v !== undefined) { b.lit(v); if (!quoted && /\s/.test(v)) b.splits = true; return; }
  }
  b.dyn(!quoted, fallback);
}

/** `${v#p}`, `${v##p}`, `${v%p}`, `${v%%p}` on a known value. */
function trimPattern(value: string, pattern: string, op: string): string {
  const re = (s: string) => { try { return globToRegExp(s, { shell: false }); } catch { return null; } };
  const r = re(pattern);
  if (!r) return value;
  const cuts = [...Array(value.length + 1).keys()];
  if (op === '#' || op === '##') { for (const i of op === '#' ? cuts : cuts.reverse()) if (r.test(value.slice(0, i))) return value.slice(i); }
  else { for (const i of op === '%' ? cuts.reverse() : cuts) if (r.test(value.slice(i))) return value.slice(0, i); }
  return value;
}

export function resolveWord(word: ShNode, home: string, nested: NestedVisitor, opts: ResolveOptions = {}): ShellWord {
  const parts: ShNode[] = word?.Parts ?? [];
  const c: Ctx = { home, nested, opts };
  // Brace expansion works on the word's unquoted text; quoted parts and expansions are opaque pieces of it
  // (`{".git",x}/config` is .git/config and x/config). Each piece stands as one private-use character.
  const template = parts.map((p, i) => (nodeType(p) === 'Lit' ? String(p.Value) : String.fromCharCode(0xe000 + Math.min(i, 0x17ff)))).join('');
  if (parts.length <= 0x1800 && /\{[^{}]*(,|\.\.)[^{}]*\}/.test(template) && !/[\ue000-\uf7ff]/.test(parts.filter((p) => nodeType(p) === 'Lit').map((p) => String(p.Value)).join(''))) {
    const raw = template;
    const alts = expandBraces(raw);
    const toParts = (alt: string): ShNode[] => {
      const out: ShNode[] = [];
      let lit = '';
      for (const ch of alt) {
        const code = ch.charCodeAt(0);
        if (code >= 0xe000 && code < 0xe000 + 0x1800) { if (lit) out.push({ ...LIT_NODE, Value: lit }); lit = ''; out.push(parts[code - 0xe000]); }
        else lit += ch;
      }
      if (lit) out.push({ ...LIT_NODE, Value: lit });
      return out;
    };
    if (alts && alts.length > 1) {
      const words = alts.map((a, k) => resolveParts(toParts(a), k === 0 ? c : { ...c, nested: () => undefined }));
      const all = words.flatMap((w) => w.alternatives ?? [w]);
      return { ...DYNAMIC_WORD, glob: true, splits: false, unmodelled: words.flatMap((w) => w.unmodelled), alternatives: all.slice(0, MAX_ALTERNATIVES), braces: true, prefix: commonPrefix(all.map((w) => w.prefix)) };
    }
    if (!alts && braceCountOf(raw) > MAX_BRACE_WORDS) {
      const w = resolveParts(parts, c);
      return { ...w, dynamic: true, pattern: '**', unmodelled: [...w.unmodelled, `a brace expansion into more than ${MAX_BRACE_WORDS} words`] };
    }
    if (!alts && braceCountOf(raw) > 1) {
      const w = resolveParts(parts, c);
      return { ...w, dynamic: true, glob: true, pattern: '**' }; // expands to many words: each unknown
    }
  }
  return resolveParts(parts, c);
}

/** A literal word part, as the parser gives them (what `toParts` rebuilds brace alternatives from). */
const LIT_NODE = { $type: 'Lit' } as unknown as ShNode;

function braceCountOf(raw: string): number {
  let n = 1;
  for (const m of raw.matchAll(/\{([^{}]*(,|\.\.)[^{}]*)\}/g)) n *= braceCount(m[1]!);
  return n;
}

function commonPrefix(xs: string[]): string {
  if (!xs.length) return '';
  let p = xs[0]!;
  for (const x of xs) while (!x.startsWith(p)) p = p.slice(0, -1);
  return p;
}

function resolveParts(parts: ShNode[], c: Ctx): ShellWord {
  const b = new WordBuilder();
  parts.forEach((p, idx) => addPart(b, p, idx === 0, false, c));
  const w: ShellWord = { value: b.value, dynamic: b.dynamic, glob: b.glob, pattern: b.pattern, prefix: b.prefix, splits: b.splits, unmodelled: b.unmodelled };
  if (w.splits && !w.dynamic) {
    // an unquoted expansion of a known value with blanks (`x='a .git/config'; tee $x`) is split into fields
    const fields = w.value.split(/[ \t\n]+/).filter(Boolean);
    if (parts.length !== 1 || fields.length > MAX_ALTERNATIVES) return { ...w, dynamic: true, pattern: '**' };
    if (fields.length !== 1) return { ...DYNAMIC_WORD, splits: false, unmodelled: w.unmodelled, alternatives: fields.map(literalWord), braces: true, prefix: commonPrefix(fields) };
    return literalWord(fields[0]!);
  }
  if (b.dynamic && b.withDefaults !== null) b.candidates.push(literalWord(b.withDefaults));
  if (b.confined && parts.length === 1) { w.confined = true; if (nodeType(parts[0]) === 'ProcSubst') w.pipe = true; }
  // known patterns joined with literal text that does not climb: still a pattern of known shape
  if (b.dynamic && b.onlyKnown && !b.confined && !w.pattern.split('/').includes('..')) w.confined = true;
  if (b.candidates.length) w.candidates = b.candidates;
  const bound = parts.length === 1 && c.opts.lookup ? boundVariable(parts[0], c.opts.lookup) : undefined;
  if (bound && (bound.length > 1 || bound[0]!.dynamic || bound[0]!.glob || bound.many)) {
    w.alternatives = bound;
    if (bound.many) w.braces = true; // "$@": one argument per value
  }
  return w;
}

/** `$f` / `"$f"` / `${f}` alone, when the analyser knows every value f can have; `$@` and `$*` stand for several arguments. */
function boundVariable(p: ShNode, lookup: (name: string) => ShellWord[] | undefined): (ShellWord[] & { many?: boolean }) | undefined {
  const t = nodeType(p);
  const param = t === 'ParamExp' ? p : t === 'DblQuoted' && p.Parts?.length === 1 && nodeType(p.Parts[0]) === 'ParamExp' ? p.Parts[0] : undefined;
  if (!param || param.Excl || param.Length || param.Index || param.Slice || param.Repl || param.Exp || param.Names) return undefined;
  const name = String(param.Param?.Value ?? '');
  const v: (ShellWord[] & { many?: boolean }) | undefined = lookup(name)?.slice();
  if (v && (name === '@' || name === '*')) v.many = true;
  return v;
}

function addPart(b: WordBuilder, p: ShNode, first: boolean, quoted: boolean, c: Ctx): void {
  const t = nodeType(p);
  switch (t) {
    case 'Lit':
      if (quoted) b.lit(unescapeDouble(String(p.Value)));
      else addUnquoted(b, String(p.Value), first, c);
      return;
    case 'SglQuoted':
      // bash's $'…' is a C string: a NUL ends it ($'.git/config\0/../x' is .git/config)
      b.lit(p.Dollar ? decodeAnsiC(String(p.Value)).split('\0')[0]! : String(p.Value));
      return;
    case 'DblQuoted':
      if (p.Dollar) b.unmodelled.push('a $"…" translated string');
      for (const q of p.Parts ?? []) addPart(b, q, false, true, c);
      return;
    case 'ParamExp':
      addParam(b, p, quoted, c);
      return;
    case 'CmdSubst': {
      const r = c.nested(p, 'cmdsubst');
      if (r && r.value !== undefined && (quoted || !/\s/.test(r.value))) { b.lit(r.value); return; }
      if (r && r.word) { b.candidates.push(r.word); b.dyn(!quoted); return; }
      if (r && r.value !== undefined) b.candidates.push(literalWord(r.value));
      b.dyn(!quoted);
      return;
    }
    case 'ProcSubst':
      c.nested(p, 'procsubst');
      b.lit('/dev/fd/'); // bash passes a /dev/fd/N path; its commands are analysed on their own
      b.globChar('[0-9]*');
      b.dynamic = true;
      b.confined = true;
      return;
    case 'ArithmExp': {
      const names = arithmeticNames(p.X);
      if (names === null) b.unmodelled.push('arithmetic on something other than numbers and variables (its text is evaluated as arithmetic)');
      else if (names.length) c.opts.arithmetic?.(names);
      b.dyn(!quoted);
      return;
    }
    case 'ExtGlob':
      if (opText('globOp', p.Op) === undefined) b.unmodelled.push('an unknown extended glob');
      b.globChar('**'); // `?(.)git` matches `.git`: an extended glob may match a leading dot (and is not narrowed further)
      return;
    default:
      b.unmodelled.push(`a ${t} in a word`);
      b.dyn(!quoted);
  }
}
