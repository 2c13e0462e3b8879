/**
 * What a command does with its arguments — the analyser's knowledge of each tool, separate from
 * the policy's judgement of it. A spec turns an argv into a `CommandUse`: the paths it reads,
 * writes, deletes or runs, the effects it has (network, install, detach, …), the commands it runs
 * itself (`npx jest`, `python -m pytest`), and `problems` — anything it does not model, which makes
 * the call "ask". The policy (policies/*.yaml) then decides on names, effects and paths.
 *
 * `simpleSpec` covers most tools: an option grammar (argv-parser.ts) whose value kinds and effects
 * are applied automatically, and an operand layout ("read*", ["any", "read*"], or a function).
 */
import { grammar, parseArgs, type Grammar, type GrammarOptions, type ParsedArgs, type ValueKind } from './argv-parser';
import type { ShellWord } from '../shell-words';

/** The effects a command can have; policies decide on each (policy-schema.ts lists them). */
export const EFFECTS = [
  'network', 'install', 'publish', 'upload', 'server', 'detach', 'signal', 'privilege', 'discard-work',
  'delete', 'setuid', 'exec-inline', 'exec-code-arg', 'exec-stdin', 'exec-hidden', 'exec-written', 'config-code',
  'interactive', 'never-ends', 'shell-state', 'destroy-history', 'secrets', 'tunnel',
] as const;
export type Effect = (typeof EFFECTS)[number];

/**
 * Inline code the gate can read (`python3 -c '…'`, `node -e '…'`, `perl -e '…'`): a literal of at most
 * this many characters is `exec-code-arg` (scanned by evaluate-static for what the policy denies);
 * computed or longer code is `exec-inline` (not seen).
 */
export const MAX_SCANNED_CODE = 8_192;

/** The effect of running `code` given on the command line: readable (scanned) or not. */
export function inlineCodeEffect(code: ShellWord | undefined): 'exec-code-arg' | 'exec-inline' {
  return code && !code.dynamic && code.value.length <= MAX_SCANNED_CODE ? 'exec-code-arg' : 'exec-inline';
}

export type Access = 'read' | 'write' | 'delete' | 'clear' | 'exec' | 'link';
export interface PathUse {
  word: ShellWord;
  access: Access;
  what: string;
  /** Resolve a relative path from this directory (a symlink's target, from the link's directory). */
  base?: ShellWord;
}
export interface CommandUse {
  label: string;
  problems: string[];
  paths: PathUse[];
  effects: Array<{ effect: Effect; why: string }>;
  /** It runs the workspace's own code (tests, builds, scripts). */
  runsProjectCode: boolean;
  /** Commands it runs itself, judged on their own. */
  inner: ShellWord[][];
  /** It only reads (reporting). */
  readOnly: boolean;
  /** Variables it hands to the programs it runs (`make CC=clang`, `go env -w X=…`), judged by the policy's env rules. */
  env?: Array<{ name: string; value: ShellWord }>;
}

export class UseBuilder {
  readonly use: CommandUse;
  constructor(label: string) {
    this.use = { label, problems: [], paths: [], effects: [], runsProjectCode: false, inner: [], readOnly: true };
  }
  path(word: ShellWord | undefined, access: Access, what = this.use.label, base?: ShellWord): this {
    if (!word) return this;
    this.use.paths.push({ word, access, what, ...(base ? { base } : {}) });
    if (access !== 'read') this.use.readOnly = false;
    return this;
  }
  read(w: ShellWord | undefined): this { return this.path(w, 'read'); }
  write(w: ShellWord | undefined): this { return this.path(w, 'write'); }
  effect(effect: Effect, why: string): this {
    if (!this.use.effects.some((e) => e.effect === effect && e.why === why)) this.use.effects.push({ effect, why });
    if (effect !== 'interactive' && effect !== 'never-ends') this.use.readOnly = false;
    return this;
  }
  problem(msg: string): this {
    this.use.problems.push(msg);
    return this;
  }
  project(): this {
    this.use.runsProjectCode = true;
    this.use.readOnly = false;
    return this;
  }
  inner(argv: ShellWord[]): this {
    this.use.inner.push(argv);
    return this;
  }
  env(name: string, value: ShellWord): this {
    (this.use.env ??= []).push({ name, value });
    return this;
  }
  /**
   * The command works in `dir` (`make -C`, `git -C`, `patch -d`, `npm --prefix`): every relative
   * path it was given resolves from there, and the directory itself is where the code it runs
   * (a Makefile, a repository's hooks and config, package.json scripts) comes from.
   */
  within(dir: ShellWord | undefined, what: string, access: Access = 'exec'): this {
    if (!dir) return this;
    for (const p of this.use.paths) if (!p.base && p.word !== dir) p.base = dir;
    this.use.paths.push({ word: dir, access, what });
    return this;
  }
  /** Applies the parsed options' value kinds and effects. */
  options(p: ParsedArgs): this {
    for (const pr of p.problems) this.problem(pr);
    for (const o of p.opts) {
      for (const e of o.def.effects) this.effect(e as Effect, `${this.use.label} ${o.name}`);
      if (o.value) this.value(o.value, o.def.value!.kind, `${this.use.label} ${o.name}`);
      // a directory in /tmp is scratch: emptying it loses no work (the path check still judges where it is)
      if (o.value && o.def.value!.kind === 'clear' && !(!o.value.dynamic && /^\/tmp\/(?!(.*\/)?\.\.(\/|$))./.test(o.value.value))) this.effect('delete', `${this.use.label} ${o.name} removes what is in ${o.value.dynamic ? 'a computed directory' : `"${o.value.value}"`}`);
    }
    return this;
  }
  value(w: ShellWord, kind: ValueKind | 'none', what: string): this {
    switch (kind) {
      case 'read': case 'dir': return this.path(w, 'read', what);
      case 'write': return this.path(w, 'write', what);
      case 'delete': return this.path(w, 'delete', what);
      case 'clear': return this.path(w, 'clear', what);
      case 'exec':
        this.effect('exec-hidden', `${what} names a program or code to run`);
        return this.path(w, 'exec', what);
      case 'readlist':
        if (w.dynamic) return this.path(w, 'read', what);
        for (const part of w.value.split(':').filter(Boolean)) this.path({ ...w, value: part, pattern: part, prefix: part }, 'read', what);
        return this;
      case 'none': return this.problem(`${what} takes no operands`);
      default: return this;
    }
  }
}

export type OperandLayout = string | string[] | ((p: ParsedArgs, b: UseBuilder) => void);

export interface CommandSpec {
  names: string[];
  /** `env`: the variables set for this command by prefixes (`GIT_EDITOR=true git …`), null when computed. */
  use(args: ShellWord[], name: string, env?: ReadonlyMap<string, ShellWord | null>): CommandUse;
}

/** Lays operands out by kind: "read*" (all), ["any", "read*"] (first data, rest read), "none". */
export function layOperands(layout: string | string[], operands: ShellWord[], b: UseBuilder, what: string): void {
  const kinds = Array.isArray(layout) ? layout : [layout];
  let k = 0;
  for (let i = 0; i < operands.length; i++) {
    if (k >= kinds.length) { b.problem(`${what}: more operands than it takes`); return; }
    const spec = kinds[k]!;
    const kind = spec.replace(/[*?]$/, '') as ValueKind | 'none';
    b.value(operands[i]!, kind, what);
    if (!spec.endsWith('*')) k++;
  }
}

export interface SimpleSpecOptions extends GrammarOptions {
  effects?: Array<[Effect, string]>;
  /** Options that name the directory the command works in (see UseBuilder.within). */
  cwd?: { options: string[]; what: string; access?: Access };
  project?: boolean;
  /** Extra checks after the automatic ones. */
  check?: (p: ParsedArgs, b: UseBuilder) => void;
}

export function simpleSpec(names: string | string[], options: string, operands: OperandLayout, o: SimpleSpecOptions = {}): CommandSpec {
  const g: Grammar = grammar(options, o);
  const list = Array.isArray(names) ? names : [names];
  const risky = g.defs.some((d) => d.effects.length > 0 || (d.value && d.value.kind !== 'any'));
  return {
    names: list,
    use(args, name) {
      const b = new UseBuilder(name);
      const p = parseArgs(g, args);
      b.options(p);
      if (risky && p.maybeOptions.length) b.problem(`${name}: an argument computed at run time could be an option`);
      if (typeof operands === 'function') operands(p, b);
      else layOperands(operands, p.operands, b, name);
      for (const [e, why] of o.effects ?? []) b.effect(e, why);
      if (o.project) b.project();
      o.check?.(p, b);
      if (o.cwd) {
        const dirs = p.values(...o.cwd.options);
        if (dirs.length > 1) b.problem(`${name}: more than one working directory option`);
        b.within(dirs[0], `${name} ${o.cwd.what}`, o.cwd.access);
      }
      return b.use;
    },
  };
}

/** A command with subcommands (git, npm, go, cargo, pip): global options, then one spec per subcommand. */
export function subcommandSpec(names: string[], globals: string, subs: Record<string, CommandSpec | ((args: ShellWord[], label: string) => CommandUse)>, o: GrammarOptions & { onGlobals?: (p: ParsedArgs, b: UseBuilder) => void; bare?: (b: UseBuilder) => void } = {}): CommandSpec {
  const g = grammar(globals, { ...o, stopAtOperand: true });
  return {
    names,
    use(args, name) {
      const p = parseArgs(g, args);
      const b = new UseBuilder(name);
      b.options(p);
      o.onGlobals?.(p, b);
      const sub = p.operands[0];
      if (!sub) { o.bare?.(b); return b.use; }
      if (sub.dynamic) return b.problem(`${name}: the subcommand is computed at run time`).use;
      const s = subs[sub.value];
      if (!s) return b.problem(`${name} ${sub.value} is not modelled`).use;
      const rest = p.operands.slice(1);
      const inner = typeof s === 'function' ? s(rest, `${name} ${sub.value}`) : s.use(rest, `${name} ${sub.value}`);
      return mergeUse(b.use, inner);
    },
  };
}

export function mergeUse(outer: CommandUse, inner: CommandUse): CommandUse {
  return {
    label: inner.label,
    problems: [...outer.problems, ...inner.problems],
    paths: [...outer.paths, ...inner.paths],
    effects: [...outer.effects, ...inner.effects],
    runsProjectCode: outer.runsProjectCode || inner.runsProjectCode,
    inner: [...outer.inner, ...inner.inner],
    readOnly: outer.readOnly && inner.readOnly,
    ...(outer.env || inner.env ? { env: [...outer.env ?? [], ...inner.env ?? []] } : {}),
  };
}
