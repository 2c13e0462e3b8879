/**
 * Parses a command's arguments against its option grammar, the way the command itself will:
 * short-option clusters (`-rn`, `-e.` = `-e .`), attached and separate values, `--long=value`,
 * unique abbreviations of long options (GNU getopt_long, argparse, git), single-dash long options
 * (`find -name`, `go test -run`), options after operands (GNU permutation) unless the grammar stops
 * at the first operand, `--`, and `-NUM` where a grammar takes it. An option the grammar does not
 * list is a problem (the call is then not understood), never silently an operand.
 *
 * Grammar text: space-separated entries `NAMES[=KIND|?KIND][!EFFECT,…]`, NAMES joined by `|`,
 * `=` a required value, `?` an optional one (attached only). Example:
 * `-o|--output=write -f|--follow!never-ends --color?any -n|--lines=any -q`.
 */
import type { ShellWord } from '../shell-words';

export type ValueKind =
  | 'any' // data: a number, a pattern, a message, a name
  | 'read' // a path read
  | 'write' // a path created or overwritten
  | 'delete' // a path that is removed
  | 'clear' // a directory whose contents are removed (pytest --basetemp)
  | 'dir' // a directory the command works in (read; relative paths then resolve from it)
  | 'exec' // a program, a script or code the command runs
  | 'readlist'; // a `:`-separated list of paths read

export interface OptionDef {
  names: string[];
  value?: { kind: ValueKind; optional: boolean };
  effects: string[];
}

export interface Grammar {
  defs: OptionDef[];
  byName: Map<string, OptionDef>;
  longNames: string[];
  /** Accept unique prefixes of `--long` options. */
  abbrev: boolean;
  /** `-name` is one option (find, go, java), not a cluster. */
  singleDashLong: boolean;
  /** Options end at the first operand (POSIX, wrappers, interpreters). */
  stopAtOperand: boolean;
  /** `-5` is an option (head -5, nice -5). */
  numeric: boolean;
  lenient: boolean;
}

export interface GrammarOptions {
  abbrev?: boolean;
  singleDashLong?: boolean;
  stopAtOperand?: boolean;
  numeric?: boolean;
  /**
   * For linters, formatters and test runners whose plugins add options: an unlisted `--name` is a
   * harmless flag and an unlisted `--name=VALUE` writes VALUE when it looks like a path. Options
   * known to be dangerous must still be listed.
   */
  lenient?: boolean;
}

const KINDS = new Set<ValueKind>(['any', 'read', 'write', 'delete', 'clear', 'dir', 'exec', 'readlist']);

const grammars = new Map<string, Grammar>();

/** Builds (once per text and options) the grammar of a command's options. */
export function grammar(text: string, o: GrammarOptions = {}): Grammar {
  const key = `${JSON.stringify(o)}\u0000${text}`;
  let g = grammars.get(key);
  if (!g) { g = buildGrammar(text, o); grammars.set(key, g); }
  return g;
}

function buildGrammar(text: string, o: GrammarOptions): Grammar {
  const defs: OptionDef[] = [];
  for (const entry of text.split(/\s+/).filter(Boolean)) {
    const m = /^([^=?!]+)(?:([=?])([a-z]+))?(?:!([a-z,-]+))?$/.exec(entry);
    if (!m) throw new Error(`bad option grammar entry "${entry}"`);
    const kind = m[3] as ValueKind | undefined;
    if (kind && !KINDS.has(kind)) throw new Error(`bad value kind "${kind}" in "${entry}"`);
    defs.push({
      names: m[1]!.split('|'),
      ...(kind ? { value: { kind, optional: m[2] === '?' } } : {}),
      effects: m[4] ? m[4].split(',') : [],
    });
  }
  const byName = new Map<string, OptionDef>();
  for (const d of defs) for (const n of d.names) {
    if (byName.has(n)) throw new Error(`option ${n} listed twice in "${text.slice(0, 80)}…"`);
    byName.set(n, d);
  }
  return {
    defs, byName, longNames: [...byName.keys()].filter((n) => n.startsWith('--')),
    abbrev: o.abbrev ?? true, singleDashLong: o.singleDashLong ?? false, stopAtOperand: o.stopAtOperand ?? false, numeric: o.numeric ?? false,
    lenient: o.lenient ?? false,
  };
}

export interface ParsedOption { name: string; def: OptionDef; value?: ShellWord; raw: ShellWord }
export interface ParsedArgs {
  opts: ParsedOption[];
  operands: ShellWord[];
  /** Operands that came after `--` start at this index of `operands` (or -1). */
  afterDashDash: number;
  /** Dynamic operands that could turn out to be options (`$x` whose value starts with `-`). */
  maybeOptions: ShellWord[];
  problems: string[];
  has(...names: string[]): boolean;
  values(...names: string[]): ShellWord[];
}

function lit(v: string, like: ShellWord): ShellWord {
  return { ...like, value: v, pattern: like.dynamic ? '**' : v.replace(/[*?[\]\\{}]/g, '\\$&'), prefix: v };
}

/** A word `-x<rest>`: the part after `cut` characters, keeping dynamic-ness. */
function tail(w: ShellWord, cut: number): ShellWord {
  if (!w.dynamic) return lit(w.value.slice(cut), w);
  return { ...w, value: w.value.slice(cut), prefix: w.prefix.slice(cut), pattern: '**' };
}

function resolveLong(g: Grammar, name: string): { def?: OptionDef; canonical?: string; ambiguous?: string[] } {
  const exact = g.byName.get(name);
  if (exact) return { def: exact, canonical: name };
  if (!g.abbrev || name.length < 3) return {};
  const hits = g.longNames.filter((n) => n.startsWith(name));
  const defs = new Set(hits.map((h) => g.byName.get(h)!));
  if (defs.size === 1) return { def: [...defs][0]!, canonical: hits[0]! };
  if (defs.size > 1) return { ambiguous: hits };
  return {};
}

export function parseArgs(g: Grammar, args: ShellWord[]): ParsedArgs {
  const opts: ParsedOption[] = [];
  const operands: ShellWord[] = [];
  const maybeOptions: ShellWord[] = [];
  const problems: string[] = [];
  let afterDashDash = -1;
  let optionsDone = false;
  const push = (def: OptionDef, raw: ShellWord, value?: ShellWord) => opts.push({ name: def.names[0]!, def, raw, ...(value ? { value } : {}) });

  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    const v = a.value;
    const opener = a.dynamic ? a.prefix : v;
    if (optionsDone || !opener.startsWith('-') || (v === '-' && !a.dynamic)) {
      if (!optionsDone && a.dynamic && a.prefix === '' && !(a.alternatives && a.alternatives.every((x) => !x.value.startsWith('-')))) maybeOptions.push(a);
      operands.push(a);
      if (g.stopAtOperand) optionsDone = true;
      continue;
    }
    if (!a.dynamic && v === '--') {
      optionsDone = true;
      afterDashDash = operands.length;
      continue;
    }
    const long = opener.startsWith('--') || (g.singleDashLong && opener.length > 2);
    if (long) {
      const eq = opener.indexOf('=');
      const name = eq >= 0 ? opener.slice(0, eq) : a.dynamic ? '' : opener;
      if (a.dynamic && eq < 0) { problems.push(`an option computed at run time (${opener || '$…'}…)`); continue; }
      const r = resolveLong(g, name);
      if (r.ambiguous) { problems.push(`option ${name} is ambiguous (${r.ambiguous.join(', ')})`); continue; }
      if (!r.def) {
        if (g.singleDashLong && !opener.startsWith('--')) { /* fall through to a short cluster */ }
        else if (g.lenient && name.startsWith('--') && /^--[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name)) {
          const value = eq >= 0 ? tail(a, eq + 1) : undefined;
          const pathish = value && (value.dynamic || /[/~]|^\./.test(value.value));
          push({ names: [name], effects: [], ...(value ? { value: { kind: pathish ? 'write' : 'any', optional: true } } : {}) }, a, value);
          continue;
        } else { problems.push(`option ${name} is not modelled`); continue; }
      } else {
        const def = r.def;
        if (eq >= 0) {
          if (!def.value) { problems.push(`option ${name} takes no value`); continue; }
          push(def, a, tail(a, eq + 1));
        } else if (def.value && !def.value.optional) {
          const next = args[++i];
          if (!next) { problems.push(`option ${name} needs a value`); continue; }
          push(def, a, next);
        } else push(def, a);
        continue;
      }
    }
    if (g.numeric && /^-\d+$/.test(opener) && !a.dynamic) { push({ names: ['-NUM'], effects: [] }, a); continue; }
    if (opener.length < 2) { problems.push('an option computed at run time'); continue; }
    // a cluster of short options
    for (let k = 1; k < opener.length; k++) {
      const name = '-' + opener[k];
      const def = g.byName.get(name);
      if (!def) { problems.push(`option ${name} is not modelled`); break; }
      if (!def.value) {
        push(def, a);
        if (k === opener.length - 1 && a.dynamic) problems.push(`an option computed at run time (${opener}…)`);
        continue;
      }
      if (k < opener.length - 1 || a.dynamic) { push(def, a, tail(a, k + 1)); break; }
      if (def.value.optional) { push(def, a); break; }
      const next = args[++i];
      if (!next) { problems.push(`option ${name} needs a value`); break; }
      push(def, a, next);
      break;
    }
  }
  return {
    opts, operands, afterDashDash, maybeOptions, problems,
    has: (...names) => opts.some((o) => names.includes(o.name) || o.def.names.some((n) => names.includes(n))),
    values: (...names) => opts.filter((o) => o.value && o.def.names.some((n) => names.includes(n))).map((o) => o.value!),
  };
}
