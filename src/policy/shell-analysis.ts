/**
 * Bash analysis: `analyzeShell` parses the exact string bash will run (shell-parse.ts) and returns
 * every simple command in execution order — in lists, pipelines, subshells, groups, `if`/`while`/
 * `for`/`case` bodies, `$( )`, backticks, process substitutions, here-doc bodies, function bodies,
 * `bash -c` strings — each with its redirections, the directories it may run in, and the wrappers
 * it was found inside (unwrap-command.ts), plus findings for whatever is not understood.
 *
 * What the analyser UNDERSTANDS — the closed list. A call made only of these can get a final allow;
 * anything else is at least "ask" (a finding), and what is clearly harmful is "deny":
 *   1. Lists `;` `&&` `||` and newlines; pipelines `|` `|&`; `!`; subshells `( )`; groups `{ }`.
 *   2. `if`/`elif`/`else`, `while`/`until`, `for NAME in WORDS`, `case` with word patterns, `time`.
 *   3. Simple commands whose name is a literal word (quotes and escapes removed, `/usr/bin/x` → x),
 *      with prefix assignments; `cd`/`pushd` targets tracked in order for relative paths.
 *   4. Words: literals, quotes, `$'…'` (ending at a NUL), `~` (also after `=` in assignment-like
 *      arguments), plain parameter expansions (a variable is bound only when its one setting in the
 *      call is that value; unquoted expansions are field-split and globbed again), command and process
 *      substitutions (their commands analysed like any other; echo/printf/pwd/mktemp/git ls-files
 *      output evaluated where known, shell-output.ts), globs, brace expansions also across quoted
 *      parts (shell-words.ts lists the word-level exceptions).
 *   5. Redirections `<` `>` `>>` `>|` `<>` `&>` `&>>`, fd duplication and closing (`2>&1`, `>&2`,
 *      `<&-`), here-docs and here-strings (their bodies are data, backslashes literal as in bash;
 *      expansions in them are analysed).
 *   6. Assignments with literal or plainly expanded values, `export`/`local`/`readonly`/`declare`
 *      with the flags -x -r -g -a -A -l -u -p -f -F (assignments too); `[[ … ]]` with string, regex
 *      and file tests.
 *   7. `(( … ))`, `let`, `for (( … ))`, `$(( ))` and `[[ a -eq b ]]` over literal numbers and over
 *      variables that can only hold numbers here (arithmeticNames / textValued).
 *   8. Functions: each call by name is judged as the body with that call's arguments (at most 16
 *      calls); a definition that is exported, trapped or not called by name is judged as its body.
 *   9. Symbolic links the call itself makes: later paths through them are followed (evaluate-static).
 * Not understood (ask): background jobs `&`, coprocesses, `select`, namerefs and integer variables
 * (`declare -n`/`-i`), arithmetic on variables that may hold text, subscripts with expansions in
 * name-taking builtins, `[[ -v ]]` on computed names, `${!x}`, `${x@P}`, `set -a`/`-k`, glob options
 * and extended globs, a command name computed at run time (inside wrappers, find -exec and xargs
 * too: tried by its possible names, whose denials count), a parse error, a `bash -c` whose string is
 * computed. Denied outright: a function named like a command, input longer than the limit, more
 * commands than the limit, nesting deeper than the parser or the analyser can follow.
 */
import type { ShNode } from 'mvdan-sh';
import { nodeType, opText, parseBash } from './shell-parse';
import { dashEchoOutput, echoOutput, printfOutput, substituted } from './shell-output';
import { arithmeticNames, resolveHeredoc, DYNAMIC_WORD, escapeGlob, literalWord, resolveWord, type NestedResult, type ShellWord } from './shell-words';
import { findNames, unwrapCommand, XARGS_SLOT } from './unwrap-command';
import { isInside, resolvePathIn } from './path-resolve';

export interface ShellAssign { name: string; value: ShellWord | null }
export interface ShellRedirect { op: string; target: ShellWord; access: 'read' | 'write' }
export interface SimpleCommand {
  argv: ShellWord[];
  assigns: ShellAssign[];
  /** Wrappers this command was found inside, outermost first (e.g. ["timeout", "bash -c"]). */
  wrappers: string[];
  /** Extra arguments are appended at run time (xargs). */
  dynamicTail: boolean;
  /** What the appended arguments are known to be (paths from a `find` piped in, a here-string's words). */
  tail?: ShellWord;
  /** The redirections of this command's statement. */
  redirects: ShellRedirect[];
  /** Directories it may run in (null: not known statically). */
  cwds: string[] | null;
  /** Position in execution order (substitutions run before the command holding them). */
  seq: number;
  /** A possible reading of a command whose name is computed (`${RM:-rm}`): only its denials count. */
  speculative?: boolean;
  /** Effects its wrappers add (nohup, setsid: the command outlives the call). */
  wrapperEffects: Array<{ effect: string; why: string }>;
  /** For commands run by `find -exec`: the pattern of the paths `{}` stands for. */
  placeholder?: ShellWord;
  /** xargs (without -0) appends pieces of the names piped in, split on blanks and newlines, not the names. */
  splitsNames?: boolean;
}
export interface ShellFinding { decision: 'ask' | 'deny'; reason: string; rule: string }
export interface ShellAnalysis {
  commands: SimpleCommand[];
  findings: ShellFinding[];
  /** Names of shell functions the string defines. */
  functions: Set<string>;
  /** Literal strings of the command that may be code (quoted strings, here-docs, echo's words): checked for what to deny when something asks. */
  literals: string[];
}
export interface AnalyzeOptions { home: string; workspace: string; maxCommands: number; maxLength: number }

const MAX_DEPTH = 120;
const MAX_SCRIPT_NESTING = 4;
const MAX_REDIRECTS = 32;
/** Separators, pipes, substitutions and here-docs beyond which a command is not analysed at all (no parse). */
const MAX_PARTS = 1_500;
const SAFE_DECLARE_FLAGS = /^[-+][xrgaAlupfFt]+$/;

class TooDeep extends Error {}

class Walker {
  readonly out: ShellAnalysis = { commands: [], findings: [], functions: new Set(), literals: [] };
  /** Function bodies by name: a call runs the body with its arguments as $1, $2, … */
  private readonly functionBodies = new Map<string, ShNode>();
  private functionCalls = 0;
  /** What a command wrote into a file when that content is known (`echo X > f`, `cat > f <<EOF`). */
  private readonly fileContents = new Map<string, string>();
  private seq = 0;
  private depth = 0;
  /** Possible working directories; null once a cd target is unknown. */
  private cwds: string[] | null;
  /** For-loop variables and the words they iterate over, while their loop body is walked. */
  private readonly bindings = new Map<string, ShellWord[]>();
  /** How often each variable name is assigned anywhere in the command (a bound loop variable must not be). */
  private assignedNames = new Map<string, number>();
  private positionalMutable = false;
  /** Variables arithmetic reads, and variables that may hold text (set from something other than a number). */
  private arithReads = new Set<string>();
  private textValued = new Set<string>();
  /** `shopt -s lastpipe` may be on: the last command of a pipeline runs in the current shell. */
  lastpipe = false;

  constructor(private readonly opts: AnalyzeOptions) {
    this.cwds = [opts.workspace];
  }

  finding(decision: 'ask' | 'deny', rule: string, reason: string): void {
    if (!this.out.findings.some((f) => f.rule === rule && f.reason === reason)) this.out.findings.push({ decision, rule, reason });
  }

  private enter(): void {
    if (++this.depth > MAX_DEPTH) throw new TooDeep();
  }

  private leave(): void {
    this.depth--;
  }

  /** The whole command text (for checks that look across it). */
  source = '';
  /**
   * The script being walked runs under dash (`sh -c`, `sh FILE`, a `#!/bin/sh` script; ash, zsh, ksh,
   * flock -c and script -c alike), whose echo always reads backslash escapes: `echo "\056env"` is `.env`.
   */
  private dash = false;

  private echo(args: string[]): string {
    return this.dash ? dashEchoOutput(args) : echoOutput(args);
  }

  run(src: string, wrappers: string[], inherited: ShellAssign[], nesting: number, positional?: ShellWord[], dash?: boolean): void {
    const outer = this.dash;
    if (dash !== undefined) this.dash = dash;
    try {
      this.runIn(src, wrappers, inherited, nesting, positional);
    } finally {
      this.dash = outer;
    }
  }

  private runIn(src: string, wrappers: string[], inherited: ShellAssign[], nesting: number, positional?: ShellWord[]): void {
    // How often each name may be set: assignments, and every bare word or option value that a builtin
    // could take as a variable name (read x, printf -v x, unset x, getopts o x, mapfile x, ${x:=…}).
    // A variable is bound to a known value only when that value is its one setting.
    const count = (n: string) => this.assignedNames.set(n, (this.assignedNames.get(n) ?? 0) + 1);
    for (const m of src.matchAll(/(?:^|[^A-Za-z0-9_])(?:for\s+|read\s+(?:-\S+\s+)*|printf\s+-v\s*|declare\s+\S*\s*|local\s+|export\s+|let\s+|mapfile\s+|\(\(\s*)?([A-Za-z_][A-Za-z0-9_]*)(?:=|\s+in\b|\+=|\[)/g)) count(m[1]!);
    for (const m of src.matchAll(/(?:^|(?<=[\s;|&("'`]))(?<!\b(?:for|select)\s+)([A-Za-z_]\w*)(?=$|[\s;|&)"'`<>])/g)) count(m[1]!);
    for (const m of src.matchAll(/(?:-v|\$\{)([A-Za-z_]\w*)(?::?[=?]|(?=[\s'"]))/g)) count(m[1]!);
    for (const m of src.matchAll(/\$\{([A-Za-z_]\w*):?=/g)) this.textValued.add(m[1]!);
    if (/(^|[^\w-])(shift|set\s+(?:[-+][A-Za-z]+\s+)*(?:--|[^\s;&|<>()-][^\s;&|<>()]*))(\s|;|&|\||\)|$)/.test(src)) this.positionalMutable = true;
    let r = parseBash(src);
    if (r.error !== undefined && !r.tooDeep && /\$\(\(|(^|[\s;&|(])\(\(/.test(src)) {
      // bash reads `$((x) )` and `((x) )` as a command substitution or subshell when they are not arithmetic
      const again = parseBash(src.replace(/\$\(\(/g, '$( (').replace(/(^|[\s;&|(])\(\(/g, '$1( ('));
      if (again.error === undefined) r = again;
    }
    if (r.error !== undefined) {
      if (r.tooDeep) this.finding('deny', 'shell:too-deep', 'the command is nested too deeply to analyse');
      else this.finding('ask', 'shell:parse-error', `the command does not parse as bash (${r.error})`);
      return;
    }
    const file = r.file;
    this.withPositional(positional, () => this.stmts(file.Stmts ?? [], { wrappers, inherited, nesting }));
  }

  /** Runs `fn` with `$0`, `$1`, … and `$@` bound to `positional` (a `bash -c` string's or a function's arguments). */
  private withPositional(positional: ShellWord[] | undefined, fn: () => void): void {
    if (!positional) { fn(); return; }
    // `set -- …` or `shift` anywhere: $1, $@ … are not the arguments given
    if (this.positionalMutable) positional = positional.map(() => DYNAMIC_WORD);
    const saved = new Map(this.bindings);
    for (const k of [...this.bindings.keys()]) if (/^(\d+|@|\*)$/.test(k)) this.bindings.delete(k);
    positional.forEach((w, i) => this.bindings.set(String(i), [w]));
    if (positional.length > 1) for (const k of ['@', '*']) this.bindings.set(k, positional.slice(1).flatMap((w) => w.alternatives ?? [w]));
    try { fn(); } finally { this.bindings.clear(); for (const [k, v] of saved) this.bindings.set(k, v); }
  }

  literal(s: string): void {
    if (s.length >= 3 && s.length <= 8_192 && this.out.literals.length < 96 && /[\s$`;|&<>!()]/.test(s) && !this.out.literals.includes(s)) this.out.literals.push(s);
  }

  private stmts(list: ShNode[], ctx: Ctx): void {
    for (const s of list) this.stmt(s, ctx);
  }

  private stmt(s: ShNode, ctx: Ctx): void {
    this.enter();
    try {
      if (s.Background) this.finding('ask', 'shell:background', 'starts a background job that can outlive the call');
      if (s.Coprocess) this.finding('ask', 'shell:coproc', 'starts a coprocess');
      const stdin: { text?: ShellWord } = {};
      const redirects = this.redirects(s.Redirs ?? [], stdin);
      if (s.Cmd) this.command(s.Cmd, { ...ctx, stdin: stdin.text }, redirects);
      else if (redirects.length) this.pushCommand({ argv: [], assigns: [], wrappers: ctx.wrappers, dynamicTail: false, redirects, wrapperEffects: [] });
    } finally {
      this.leave();
    }
  }

  private words(ws: ShNode[] | undefined, opts: { assignmentLike?: boolean } = {}): ShellWord[] {
    return (ws ?? []).map((w) => this.word(w, opts));
  }

  private heredoc(body: ShNode, delimiter: ShNode | undefined): ShellWord {
    const r = resolveHeredoc(body, delimiter, this.opts.home, (n) => this.nested(n), { lookup: (name) => this.lookup(name) });
    for (const u of r.unmodelled) this.finding('ask', 'shell:unmodelled', `uses ${u}, which the analyser does not model`);
    if (!r.dynamic) this.literal(r.value);
    return r;
  }

  word(w: ShNode, opts: { assignmentLike?: boolean } = {}): ShellWord {
    const r = resolveWord(w, this.opts.home, (n) => this.nested(n), { ...opts, lookup: (name) => this.lookup(name), arithmetic: (names) => this.arithmetic(names) });
    for (const u of r.unmodelled) this.finding('ask', 'shell:unmodelled', `uses ${u}, which the analyser does not model`);
    if (!r.dynamic) this.literal(r.value);
    for (const a of r.alternatives ?? []) if (!a.dynamic) this.literal(a.value);
    if (r.braces && r.alternatives) this.literal(r.alternatives.map((a) => a.value).join(' '));
    return r;
  }

  private lookup(name: string): ShellWord[] | undefined {
    if (name === 'PWD') return this.cwds && this.cwds.length === 1 && !this.assignedNames.get('PWD') ? [literalWord(this.cwds[0]!)] : undefined;
    if (SHELL_MANAGED.has(name)) return undefined;
    return this.bindings.get(name);
  }

  private nested(n: ShNode): NestedResult | undefined {
    this.enter();
    try {
      const saved = this.cwds;
      this.stmts(n.Stmts ?? [], { wrappers: [], inherited: [], nesting: 0 });
      this.cwds = saved; // a cd inside $( ) or <( ) does not change the outer shell's directory
      return this.knownOutput(n.Stmts ?? []);
    } finally {
      this.leave();
    }
  }

  /** The variable of a loop condition that is exactly `read [-r] NAME` (optionally with `IFS=`), else undefined. */
  private readLoopVariable(cond: ShNode[]): string | undefined {
    if (cond.length !== 1 || cond[0].Redirs?.length || cond[0].Negated || nodeType(cond[0].Cmd) !== 'CallExpr') return undefined;
    const call = cond[0].Cmd;
    if ((call.Assigns ?? []).some((a: ShNode) => String(a.Name?.Value) !== 'IFS' || a.Value || a.Append || a.Index || a.Array)) return undefined;
    const argv: ShellWord[] = (call.Args ?? []).map((w: ShNode) => resolveWord(w, this.opts.home, () => undefined));
    if (argv.some((a) => a.dynamic || a.glob)) return undefined;
    const v = argv.map((a) => a.value);
    if (v[0] !== 'read') return undefined;
    const rest = v.slice(1).filter((x) => x !== '-r');
    return rest.length === 1 && /^[A-Za-z_][A-Za-z0-9_]*$/.test(rest[0]!) ? rest[0] : undefined;
  }

  /** What a command substitution prints, when it is one simple command whose output is known. */
  private knownOutput(stmts: ShNode[]): NestedResult | undefined {
    if (stmts.length !== 1 || stmts[0].Redirs?.length || nodeType(stmts[0].Cmd) !== 'CallExpr' || stmts[0].Cmd.Assigns?.length) return undefined;
    const argv: ShellWord[] = (stmts[0].Cmd.Args ?? []).map((w: ShNode) => resolveWord(w, this.opts.home, () => undefined, { lookup: (name) => this.lookup(name) }));
    if (argv.some((a) => a.dynamic || a.glob)) return undefined;
    const v = argv.map((a) => a.value);
    const cwd = this.cwds && this.cwds.length === 1 ? this.cwds[0]! : undefined;
    if (v[0] === 'echo') return { value: substituted(this.echo(v.slice(1))) };
    if (v[0] === 'printf' && v[1] !== undefined && !v[1].startsWith('-')) { const o = printfOutput(v[1], v.slice(2)); return o === undefined ? undefined : { value: substituted(o) }; }
    if (v[0] === 'printf' && v[1] === '--' && v[2] !== undefined) { const o = printfOutput(v[2], v.slice(3)); return o === undefined ? undefined : { value: substituted(o) }; }
    if ((v[0] === 'pwd' || (v[0] === 'realpath' && v[1] === '.') || (v[0] === 'readlink' && v[1] === '-f' && v[2] === '.')) && cwd) return { value: cwd };
    // the repository's top is the workspace only while the shell is known to be in it (`cd ~ && git init` is not)
    if (v[0] === 'git' && v[1] === 'rev-parse' && v[2] === '--show-toplevel' && cwd && isInside(this.opts.workspace, cwd)) return { value: this.opts.workspace };
    if (v[0] === 'basename' && v.length === 2) return { value: v[1]!.replace(/\/+$/, '').split('/').pop() ?? '' };
    if (v[0] === 'dirname' && v.length === 2) { const d = v[1]!.replace(/\/+$/, '').split('/').slice(0, -1).join('/'); return { value: d || (v[1]!.startsWith('/') ? '/' : '.') }; }
    if (v[0] === 'git' && v[1] === 'ls-files' && v.slice(2).every((x) => !x.startsWith('-'))) return { word: { ...DYNAMIC_WORD, confined: true, prefix: './', pattern: v[2] ? `./**/${v[2].replace(/^\*\*?\/?/, '')}` : './**' } };
    // mktemp makes a new name in /tmp (or under -p DIR / --tmpdir=DIR)
    if (v[0] === 'mktemp') {
      let dir = '/tmp';
      const rest = v.slice(1).filter((x) => !['-d', '--directory', '-q', '--quiet', '-u', '--dry-run'].includes(x));
      if (rest[0] === '-p' && rest[1]) { dir = rest[1]; rest.splice(0, 2); } else if (rest[0]?.startsWith('--tmpdir=')) dir = rest.shift()!.slice(9);
      if (rest.length === 0 && dir.startsWith('/') && !dir.includes('..')) return { word: { ...DYNAMIC_WORD, confined: true, prefix: `${dir}/tmp.`, pattern: `${escapeGlob(dir)}/tmp.*` } };
      return undefined;
    }
    // `ls` (or `ls -1`) of the current directory prints the names a `*` matches; with -a/-A it would add
    // dot names and `..`, and `ls DIR` prints bare names relative to DIR (or DIR itself when it is a file),
    // so those are not modelled.
    if (v[0] === 'ls' && v.slice(1).every((x) => x === '-1')) return { word: { ...DYNAMIC_WORD, confined: true, prefix: '', pattern: '*' } };
    return undefined;
  }

  private redirects(rs: ShNode[], stdin: { text?: ShellWord } = {}): ShellRedirect[] {
    const out: ShellRedirect[] = [];
    if (rs.length > MAX_REDIRECTS) this.finding('deny', 'shell:too-many-redirects', `more than ${MAX_REDIRECTS} redirections on one command`);
    for (const r of rs) {
      const op = opText('redirect', r.Op);
      if (!op) { this.finding('ask', 'shell:redirect', 'an unknown redirection operator'); continue; }
      const body = r.Hdoc ? this.heredoc(r.Hdoc, r.Word) : undefined; // the body is data; substitutions in it run
      if (body && !body.dynamic) this.literal(body.value);
      const target = r.Word ? this.word(r.Word) : DYNAMIC_WORD;
      if (op === '<<' || op === '<<-') { if (!r.N || String(r.N.Value) === '0') stdin.text = body ?? DYNAMIC_WORD; continue; }
      if (op === '<<<') { if (!r.N || String(r.N.Value) === '0') stdin.text = target.dynamic ? target : literalWord(target.value + '\n'); continue; }
      if (op === '<' && (!r.N || String(r.N.Value) === '0')) stdin.text = DYNAMIC_WORD;
      if (op === '>&' || op === '<&') {
        if (!target.dynamic && /^(\d+-?|-)$/.test(target.value)) continue; // duplicate or close a descriptor
        if (op === '<&') { this.finding('ask', 'shell:redirect', `a descriptor duplication "<&${target.value}" the analyser does not model`); continue; }
        out.push({ op: '&>', target, access: 'write' });
        continue;
      }
      const access = op === '<' ? 'read' : 'write';
      out.push({ op, target, access });
    }
    return out;
  }

  private pushCommand(c: Omit<SimpleCommand, 'seq' | 'cwds'>): void {
    this.out.commands.push({ ...c, seq: this.seq++, cwds: this.cwds ? [...this.cwds] : null });
  }

  private command(cmd: ShNode, ctx: Ctx, redirects: ShellRedirect[]): void {
    const t = nodeType(cmd);
    switch (t) {
      case 'CallExpr': return this.call(cmd, ctx, redirects);
      case 'BinaryCmd': {
        const op = opText('binaryCmd', cmd.Op);
        if (!op) this.finding('ask', 'shell:unknown-operator', 'an unknown list operator');
        const piped = op === '|' || op === '|&';
        const saved = this.cwds;
        this.stmt(cmd.X, ctx);
        if (piped) this.cwds = saved; // each side of a pipe is a subshell
        const pipeIn = piped ? this.pipeSource(cmd.X, ctx.pipeIn) : undefined;
        this.stmt(cmd.Y, { ...ctx, ...(pipeIn ? { pipeIn } : {}) });
        // with lastpipe the last command of a pipeline runs in this shell: its cd sticks
        if (piped && !this.lastpipe) this.cwds = saved;
        this.redirectOnly(redirects, ctx);
        return;
      }
      case 'Subshell': {
        const saved = this.cwds;
        this.stmts(cmd.Stmts ?? [], ctx);
        this.cwds = saved;
        return this.redirectOnly(redirects, ctx);
      }
      case 'Block':
        this.stmts(cmd.Stmts ?? [], ctx);
        return this.redirectOnly(redirects, ctx);
      case 'IfClause': {
        for (let c: ShNode = cmd; c; c = c.Else) {
          this.stmts(c.Cond ?? [], ctx);
          this.stmts(c.Then ?? [], ctx);
        }
        return this.redirectOnly(redirects, ctx);
      }
      case 'WhileClause': {
        this.stmts(cmd.Cond ?? [], ctx);
        // `find … | while read -r f; do …; done`: f takes each line, a path the piped command prints.
        const readVar = !cmd.Until && ctx.pipeIn?.confined && ctx.pipeIn.pattern !== undefined ? this.readLoopVariable(cmd.Cond ?? []) : undefined;
        if (readVar && (this.assignedNames.get(readVar) ?? 0) <= 1) {
          const saved = this.bindings.get(readVar);
          this.bindings.set(readVar, [ctx.pipeIn!]);
          this.stmts(cmd.Do ?? [], ctx);
          if (saved) this.bindings.set(readVar, saved); else this.bindings.delete(readVar);
        } else this.stmts(cmd.Do ?? [], ctx);
        return this.redirectOnly(redirects, ctx);
      }
      case 'ForClause': {
        if (cmd.Select) this.finding('ask', 'shell:select', 'select reads choices from a terminal');
        const loop = cmd.Loop;
        const lt = nodeType(loop);
        if (lt === 'WordIter') {
          // `$(git ls-files)`, `$(ls dir)`: the loop variable takes the paths the substitution prints.
          if (!(loop.Items ?? []).every((it: ShNode) => it.Parts?.length === 1 && nodeType(it.Parts[0]) === 'Lit' && /^-?\d+$/.test(String(it.Parts[0].Value)))) this.textValued.add(String(loop.Name?.Value ?? ''));
          const items = this.words(loop.Items).map((w) => (w.dynamic && !w.alternatives && w.candidates?.length === 1 && w.candidates[0]!.confined && w.candidates[0]!.pattern !== undefined ? w.candidates[0]! : w));
          const name = String(loop.Name?.Value ?? '');
          this.pushCommand({ argv: [], assigns: [{ name, value: items.length === 1 ? items[0]! : DYNAMIC_WORD }], wrappers: ctx.wrappers, dynamicTail: false, redirects: [], wrapperEffects: [] });
          const knowable = items.length > 0 && items.length <= 64 && items.every((w) => !w.dynamic || w.alternatives || (w.confined && w.pattern !== undefined)) && (this.assignedNames.get(name) ?? 0) <= 1;
          if (knowable) {
            const saved = this.bindings.get(name);
            this.bindings.set(name, items.flatMap((w) => w.alternatives ?? [w]));
            this.stmts(cmd.Do ?? [], ctx);
            if (saved) this.bindings.set(name, saved); else this.bindings.delete(name);
            return this.redirectOnly(redirects, ctx);
          }
        } else if (lt === 'CStyleLoop') {
          for (const x of [loop.Init, loop.Cond, loop.Post]) if (x) this.arithNode(x);
        } else this.finding('ask', 'shell:unknown-node', `the analyser does not understand a ${lt} loop`);
        this.stmts(cmd.Do ?? [], ctx);
        return this.redirectOnly(redirects, ctx);
      }
      case 'CaseClause': {
        this.word(cmd.Word);
        for (const item of cmd.Items ?? []) {
          this.words(item.Patterns);
          this.stmts(item.Stmts ?? [], ctx);
        }
        return this.redirectOnly(redirects, ctx);
      }
      case 'FuncDecl': {
        const name = String(cmd.Name?.Value ?? '');
        this.out.functions.add(name);
        this.functionBodies.set(name, cmd.Body);
        // a new name is fine: its body is analysed here and again at each call; a name that hides a command is denied (evaluate-static)
        if (!/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(name) || name === 'command_not_found_handle') this.finding('ask', 'shell:function', `defines a shell function "${name}", which changes what later commands of that name run`);
        // A function called by name later is judged at each call, with its arguments bound; its body is walked
        // here too (a trap or `export -f` could run it), and that walk is kept only when it has no direct
        // call, since its unknown $1, $@ would only add asks (a computed call `$f` asks on its own).
        const marks = { commands: this.out.commands.length, findings: this.out.findings.length };
        this.stmt(cmd.Body, { ...ctx, wrappers: [...ctx.wrappers, `function ${name}`] });
        if ((this.assignedNames.get(name) ?? 0) >= 1 && !/\b(export|declare|typeset)\s+-[a-zA-Z]*f|\btrap\b/.test(this.source)) {
          const denials = this.out.findings.slice(marks.findings).filter((f) => f.decision === 'deny');
          this.out.commands.length = marks.commands;
          this.out.findings.length = marks.findings;
          this.out.findings.push(...denials);
        }
        return this.redirectOnly(redirects, ctx);
      }
      case 'TimeClause':
        if (cmd.Stmt) this.stmt(cmd.Stmt, ctx);
        return this.redirectOnly(redirects, ctx);
      case 'ArithmCmd':
        this.arithNode(cmd.X);
        this.pushCommand({ argv: [], assigns: [], wrappers: ctx.wrappers, dynamicTail: false, redirects: [], wrapperEffects: [] });
        return this.redirectOnly(redirects, ctx);
      case 'LetClause':
        for (const x of cmd.Exprs ?? []) this.arithNode(x);
        this.pushCommand({ argv: [], assigns: [], wrappers: ctx.wrappers, dynamicTail: false, redirects: [], wrapperEffects: [] });
        for (const x of cmd.Exprs ?? []) this.arithAssigned(x, ctx);
        return this.redirectOnly(redirects, ctx);
      case 'TestClause':
        this.test(cmd.X);
        return this.redirectOnly(redirects, ctx);
      case 'DeclClause':
        return this.decl(cmd, ctx, redirects);
      case 'CoprocClause':
        this.finding('ask', 'shell:coproc', 'starts a coprocess');
        if (cmd.Stmt) this.stmt(cmd.Stmt, ctx);
        return;
      default:
        this.finding('ask', 'shell:unknown-node', `the analyser does not understand a ${t}`);
    }
  }

  private arith(): void {
    this.finding('ask', 'shell:arithmetic', 'arithmetic on something other than numbers and variables (bash evaluates its text as arithmetic, where a[$(cmd)] runs cmd)');
  }

  /** Arithmetic over `x`: understood, as long as every variable it reads holds a number (checked at the end). */
  arithmetic(names: string[]): void {
    for (const n of names) this.arithReads.add(n);
  }

  /** An arithmetic expression node: its variables are recorded, anything else asks. */
  private arithNode(x: ShNode): void {
    const names = arithmeticNames(x);
    if (names === null) this.arith();
    else this.arithmetic(names);
  }

  /** The variables arithmetic reads that may hold text, once the whole command has been walked. */
  textInArithmetic(): string[] {
    return [...this.arithReads].filter((n) => this.textValued.has(n) || /^(\d+|@|\*)$/.test(n) && n !== '0');
  }

  /** `let x=…`: the assigned names are checked like assignments. */
  private arithAssigned(x: ShNode, ctx: Ctx): void {
    if (nodeType(x) === 'BinaryArithm' && nodeType(x.X) === 'Word') {
      const w = this.word(x.X);
      if (!w.dynamic) this.pushCommand({ argv: [], assigns: [{ name: w.value, value: DYNAMIC_WORD }], wrappers: ctx.wrappers, dynamicTail: false, redirects: [], wrapperEffects: [] });
    }
  }

  private redirectOnly(redirects: ShellRedirect[], ctx: Ctx): void {
    if (redirects.length) this.pushCommand({ argv: [], assigns: [], wrappers: ctx.wrappers, dynamicTail: false, redirects, wrapperEffects: [] });
  }

  private test(x: ShNode): void {
    const stack: ShNode[] = [x];
    while (stack.length) {
      const n = stack.pop();
      if (!n) continue;
      const t = nodeType(n);
      if (t === 'Word') { this.word(n); continue; }
      if (t === 'ParenTest') { stack.push(n.X); continue; }
      if (t === 'UnaryTest') {
        const op = opText('unaryTest', n.Op);
        if (op === undefined) this.finding('ask', 'shell:test', 'an unknown [[ ]] test');
        if (op === '-v' || op === '-R') {
          const w = this.word(n.X);
          if (w.dynamic || w.value.includes('[')) this.finding('ask', 'shell:test-v', '[[ -v ]] on a computed name or an array element (its subscript is evaluated as arithmetic)');
          continue;
        }
        stack.push(n.X);
        continue;
      }
      if (t === 'BinaryTest') {
        const op = opText('binaryTest', n.Op);
        if (op === undefined) this.finding('ask', 'shell:test', 'an unknown [[ ]] operator');
        if (op && ['-eq', '-ne', '-lt', '-le', '-gt', '-ge'].includes(op)) {
          for (const side of [n.X, n.Y]) {
            const w = nodeType(side) === 'Word' ? this.word(side) : null;
            const names = nodeType(side) === 'Word' ? arithmeticNames(side) : null;
            if (names) this.arithmetic(names); // `[[ $n -gt 0 ]]`: a variable, checked like arithmetic
            else if (!w || w.dynamic || !/^-?\d+$/.test(w.value)) this.finding('ask', 'shell:arithmetic', `[[ … ${op} … ]] evaluates its operands as arithmetic`);
          }
          continue;
        }
        stack.push(n.X, n.Y);
        continue;
      }
      this.finding('ask', 'shell:unknown-node', `the analyser does not understand a ${t} in [[ ]]`);
    }
  }

  private assign(a: ShNode): ShellAssign {
    if (a.Index && !(nodeType(a.Index) === 'Word' && /^\d+$/.test(String(a.Index.Parts?.[0]?.Value ?? '')) && a.Index.Parts.length === 1)) {
      this.finding('ask', 'shell:subscript', 'an array subscript that bash evaluates as arithmetic');
    }
    if (a.Array) {
      const elems: string[] = [];
      for (const el of a.Array.Elems ?? []) {
        if (el.Index) this.finding('ask', 'shell:subscript', 'an array subscript that bash evaluates as arithmetic');
        if (el.Value) { const w = this.word(el.Value); elems.push(w.value); }
      }
      this.literal(elems.join(' ')); // an array can become a command line ("${a[@]}")
    }
    const name = String(a.Name?.Value ?? '');
    const value = a.Array ? DYNAMIC_WORD : a.Value ? this.word(a.Value, { assignmentLike: true }) : null;
    // a number, or an arithmetic expansion (whose result is one), keeps the variable numeric
    const numeric = !a.Value || (a.Value.Parts?.length === 1 && nodeType(a.Value.Parts[0]) === 'ArithmExp') || (value !== null && !value.dynamic && /^-?\d*$/.test(value.value));
    if (!numeric || a.Array || a.Append) this.textValued.add(name);
    return { name, value };
  }

  private decl(cmd: ShNode, ctx: Ctx, redirects: ShellRedirect[]): void {
    const variant = String(cmd.Variant?.Value ?? '');
    if (!['declare', 'local', 'export', 'readonly', 'typeset'].includes(variant)) this.finding('ask', 'shell:declare', `${variant} is not modelled`);
    const assigns: ShellAssign[] = [];
    let nameref = false;
    for (const a of cmd.Args ?? []) {
      if (a.Naked && !a.Name && a.Value) {
        const w = this.word(a.Value);
        if (w.dynamic) this.finding('ask', 'shell:declare', `${variant} with an argument computed at run time`);
        else if (w.value.startsWith('-') || w.value.startsWith('+')) {
          if (w.value.startsWith('-') && w.value.includes('n')) nameref = true;
          if (!SAFE_DECLARE_FLAGS.test(w.value)) this.finding('ask', 'shell:declare', `${variant} ${w.value} (namerefs and integer variables are not modelled)`);
        } else if (w.value.includes('[') || w.value.includes('=')) this.finding('ask', 'shell:declare', `${variant} with an argument the analyser cannot read`);
        else assigns.push({ name: w.value, value: null });
        continue;
      }
      const as = this.assign(a);
      assigns.push(as);
      // a nameref makes every later assignment to its name an assignment to its target: check the target too
      if (nameref && as.value && !as.value.dynamic) assigns.push({ name: as.value.value.replace(/\[.*$/, ''), value: DYNAMIC_WORD });
    }
    // export/declare/local/readonly NAME=VALUE set variables (and the environment of later commands): assignments
    this.pushCommand({ argv: [], assigns: [...ctx.inherited, ...assigns], wrappers: ctx.wrappers, dynamicTail: false, redirects, wrapperEffects: [] });
    for (const a of assigns) if (a.value && !a.value.dynamic && !a.value.glob && !nameref && (this.assignedNames.get(a.name) ?? 0) <= 1) this.bindings.set(a.name, [a.value]);
  }

  private call(cmd: ShNode, ctx: Ctx, redirects: ShellRedirect[]): void {
    const assigns: ShellAssign[] = [...ctx.inherited, ...(cmd.Assigns ?? []).map((a: ShNode) => this.assign(a))];
    const argv = this.words(cmd.Args).flatMap((w) => (w.braces && w.alternatives ? w.alternatives : [w]));
    if (argv.length === 0) {
      this.pushCommand({ argv: [], assigns, wrappers: ctx.wrappers, dynamicTail: false, redirects, wrapperEffects: [] });
      for (const a of assigns) {
        // a variable assigned once, to a literal (or to what a known command prints: `d=$(mktemp -d)`), is that where it is used later
        if ((this.assignedNames.get(a.name) ?? 0) > 1 || !a.value) continue;
        if (!a.value.dynamic && !a.value.glob) this.bindings.set(a.name, [a.value]);
        else if (a.value.dynamic && !a.value.alternatives && a.value.candidates?.length === 1 && a.value.candidates[0]!.confined && a.value.pattern === '**') this.bindings.set(a.name, [a.value.candidates[0]!]);
      }
      return;
    }
    const head = argv[0]!;
    if (head.value === 'echo' || head.value === 'printf') this.literal(argv.slice(head.value === 'printf' ? 2 : 1).map((a) => a.value).join(' '));
    if (head.dynamic || head.glob) return this.dynamicHead(argv, assigns, ctx.wrappers, redirects);
    if (head.value === 'set' && argv.slice(1).some((a, k, all) => a.dynamic || /^-[A-Za-z]*[ak]/.test(a.value) || (all[k - 1]?.value === '-o' && ['allexport', 'keyword'].includes(a.value)))) {
      // allexport / keyword: variables set by assignments, read, printf -v or ${X:=…} (or NAME=VALUE arguments) become environment
      this.finding('ask', 'shell:export-mode', 'set -a / -k turns variables the analyser does not check as environment into environment');
    }
    if (['read', 'mapfile', 'readarray', 'getopts', 'printf', 'select'].includes(head.value)) {
      // names these builtins may set get text values
      for (const a of argv.slice(1)) if (!a.dynamic) { const m = /^(?:-v)?([A-Za-z_][A-Za-z0-9_]*)/.exec(a.value.startsWith('-') && !a.value.startsWith('-v') ? '' : a.value); if (m) this.textValued.add(m[1]!); }
    }
    this.runKnownFile(argv, ctx);
    const body = this.functionBodies.get(head.value);
    if (body && this.functionCalls < 16) {
      this.functionCalls++;
      this.withPositional(argv, () => this.stmt(body, { ...ctx, wrappers: [...ctx.wrappers, `function ${head.value}`] }));
    } else if (body) this.finding('ask', 'shell:function', `calls the function "${head.value}" more often than the analyser follows`);
    const un = unwrapCommand(argv);
    if (un.commands.length === 0 && !un.stdinScript && un.scripts.length === 0) this.pushCommand({ argv, assigns, wrappers: ctx.wrappers, dynamicTail: false, redirects, wrapperEffects: [] });
    for (const f of un.findings) this.finding(f.decision, f.rule, f.reason);
    if (un.stdinScript) this.stdinScript(un.stdinScript.via, [...ctx.wrappers, ...un.stdinScript.wrappers], [...assigns, ...un.stdinScript.assigns], un.stdinScript.effects, ctx);
    for (const inner of un.commands) {
      const head = inner.argv[0]?.value;
      const file = inner.argv[1];
      if ((head === 'source' || head === '.') && file && !file.dynamic && ['/dev/stdin', '/proc/self/fd/0', '/dev/fd/0'].includes(file.value)) {
        this.stdinScript(`${head} (standard input)`, [...ctx.wrappers, ...inner.wrappers], [...assigns, ...inner.assigns], inner.effects, ctx);
      }
    }
    for (const inner of un.commands) {
      const saved = this.cwds;
      const tail = inner.dynamicTail || inner.argv.includes(XARGS_SLOT) ? this.tailFor(ctx) : undefined;
      // names split on blanks and newlines are pieces of the names: known words split the same way, paths a command printed do not
      const splitsNames = !!inner.splitsNames && !!tail && tail === ctx.pipeIn && !tail.alternatives?.every((a) => !a.dynamic && !/[\s'"\\]/.test(a.value));
      if (tail) inner.argv = inner.argv.map((a) => (a === XARGS_SLOT ? tail : a));
      if (inner.cwd !== undefined) this.cwds = inner.cwd === null || !this.cwds ? null : this.cwds.map((d) => resolvePathIn(this.opts.workspace, inner.cwd!.value, d));
      const extra: ShellRedirect[] = [...(inner.writes ?? []).map((target): ShellRedirect => ({ op: '>', target, access: 'write' })), ...(inner.reads ?? []).map((target): ShellRedirect => ({ op: '<', target, access: 'read' }))];
      const innerHead = inner.argv[0];
      if (!innerHead || innerHead.dynamic || innerHead.glob) {
        // the wrapped command's name is itself computed (`timeout 5 $(cat f)`, `xargs -a f env`, `find -exec {} …`)
        if (innerHead) this.dynamicHead(inner.argv, [...assigns, ...inner.assigns], [...ctx.wrappers, ...inner.wrappers], [...redirects, ...extra], inner.placeholder ? { placeholder: inner.placeholder } : {});
        else this.finding('ask', 'shell:dynamic-command', `the command run by ${[...ctx.wrappers, ...inner.wrappers].join(' → ') || 'a wrapper'} is computed at run time`);
        if (inner.cwd !== undefined) this.cwds = saved;
        continue;
      }
      if (inner.dynamicTail && unwrapCommand([...inner.argv, DYNAMIC_WORD]).commands.some((u) => !u.argv[0] || u.argv[0].dynamic)) {
        // the appended arguments complete a wrapper (`xargs -a cmds env`): what it runs is computed
        this.finding('ask', 'shell:dynamic-command', `${innerHead.value} runs a command that ${[...ctx.wrappers, ...inner.wrappers].join(' → ')} appends at run time`);
      }
      this.pushCommand({
        argv: inner.argv, assigns: [...assigns, ...inner.assigns], wrappers: [...ctx.wrappers, ...inner.wrappers],
        dynamicTail: inner.dynamicTail, ...(tail && inner.dynamicTail ? { tail } : {}), redirects: [...redirects, ...extra], wrapperEffects: inner.effects, ...(inner.placeholder ? { placeholder: inner.placeholder } : {}),
        ...(splitsNames ? { splitsNames } : {}),
      });
      this.rememberContent(inner.argv, redirects, ctx);
      if (inner.cwd !== undefined) this.cwds = saved;
      this.trackCd(inner.argv);
    }
    for (const script of un.scripts) {
      for (const e of script.effects) this.finding('ask', `shell:${e.effect}`, e.why);
      if (script.word.dynamic) this.finding('ask', 'shell:dynamic-script', `${script.via} runs a string computed at run time`);
      else if (ctx.nesting + 1 > MAX_SCRIPT_NESTING) this.finding('deny', 'shell:nesting', 'nested shell commands (bash -c) are too deep to analyse');
      else {
        const saved = this.cwds;
        const args = script.wrappers.includes('xargs') ? [...script.args, this.tailFor(ctx)] : script.args;
        this.run(script.word.value, [...ctx.wrappers, ...script.wrappers, script.via], [...assigns, ...script.assigns], ctx.nesting + 1, args, dashFor(script.via));
        this.cwds = saved; // a child shell's cd does not change ours
      }
    }
    if (this.out.commands.length > this.opts.maxCommands * 4) throw new TooDeep();
  }

  /**
   * A command whose name is computed at run time (`$X …`, `find … -exec {} …`, `xargs -I{} {}`): not
   * understood (ask), and each name it may take (`${X:-rm}`, a find's `-name curl`) is tried, keeping
   * only the denials that reading gives.
   */
  private dynamicHead(argv: ShellWord[], assigns: ShellAssign[], wrappers: string[], redirects: ShellRedirect[], extra: Partial<SimpleCommand> = {}): void {
    const head = argv[0]!;
    this.finding('ask', 'shell:dynamic-command', `the command name is computed at run time${wrappers.length ? ` (inside ${wrappers.join(' → ')})` : ''}`);
    this.pushCommand({ argv, assigns, wrappers, dynamicTail: false, redirects, wrapperEffects: [], ...extra });
    const named = head.pattern !== undefined && head.dynamic ? /(?:^|\/)([A-Za-z0-9_.+-]+)$/.exec(head.pattern)?.[1] : undefined;
    const cands = [...(head.alternatives ?? []), ...(head.candidates ?? []), ...(named ? [literalWord(named)] : [])];
    for (const cand of cands.slice(0, 8)) {
      if (cand.dynamic) continue;
      const words = cand.value.split(/\s+/).filter(Boolean).map((x) => literalWord(x));
      if (words.length) this.pushCommand({ argv: [...words, ...argv.slice(1)], assigns, wrappers, dynamicTail: false, redirects, wrapperEffects: [], speculative: true, ...extra });
    }
  }

  /** Remembers what `echo …`/`printf …`/`cat <<EOF` wrote into a file, so running that file can be analysed. */
  private rememberContent(argv: ShellWord[], redirects: ShellRedirect[], ctx: Ctx): void {
    const out = redirects.filter((r) => r.access === 'write' && r.op !== '&>' && !r.target.dynamic);
    if (!out.length) return;
    const h = argv[0]?.value;
    let content: string | undefined;
    if (h === 'echo' && argv.slice(1).every((a) => !a.dynamic)) content = argv.slice(1).filter((a, i) => !(i === 0 && /^-[neE]+$/.test(a.value))).map((a) => a.value).join(' ') + '\n';
    if (h === 'printf' && argv[1] && !argv[1].dynamic && !argv[1].value.startsWith('-') && argv.slice(2).every((a) => !a.dynamic)) content = printfOutput(argv[1].value, argv.slice(2).map((a) => a.value));
    if (h === 'cat' && argv.length === 1 && ctx.stdin && !ctx.stdin.dynamic) content = ctx.stdin.value;
    for (const r of out) {
      if (content !== undefined) this.fileContents.set(r.target.value, (r.op === '>>' ? this.fileContents.get(r.target.value) ?? '' : '') + content);
      else this.fileContents.delete(r.target.value);
    }
  }

  /** `bash FILE`, `sh FILE`, `source FILE`, `./FILE` where this same call wrote FILE with known content: that content is analysed as the script. */
  private runKnownFile(argv: ShellWord[], ctx: Ctx): void {
    const h = argv[0]!.value;
    const file = ['bash', 'sh', 'dash', 'zsh', 'ksh', 'source', '.'].includes(h) ? argv.find((a, i) => i > 0 && !a.value.startsWith('-')) : h.includes('/') ? argv[0] : undefined;
    if (!file || file.dynamic) return;
    const key = [...this.fileContents.keys()].find((k) => k === file.value || k.replace(/^\.\//, '') === file.value.replace(/^\.\//, ''));
    if (key === undefined || ctx.nesting + 1 > MAX_SCRIPT_NESTING) return;
    const text = this.fileContents.get(key)!;
    const bang = /^#!([^\n]*)/.exec(text)?.[1];
    const dash = h === 'source' || h === '.' ? undefined : h.includes('/') ? (bang ? dashFor(bang.replace(/^.*\benv\s+/, '').trim().split(/\s+/)[0]!) ?? false : false) : dashFor(h);
    this.run(text, [...ctx.wrappers, `${h} ${file.value} (written in this call)`], [], ctx.nesting + 1, [file, ...argv.slice(argv.indexOf(file) + 1)], dash);
  }

  /** What xargs appends: the paths a `find`/`git ls-files`/`grep -l` piped in prints, or a literal here-string's words. */
  private tailFor(ctx: Ctx): ShellWord {
    if (ctx.pipeIn) return ctx.pipeIn;
    const text = ctx.stdin;
    if (text && !text.dynamic) {
      const words = text.value.split(/\s+/).filter(Boolean).map((w) => literalWord(w));
      if (words.length > 0 && words.length <= 64) return { ...DYNAMIC_WORD, alternatives: words };
    }
    return DYNAMIC_WORD;
  }

  /**
   * The paths a command prints, when it is one whose output is known to be paths under known roots;
   * a line filter reading the paths piped into it (`grep -v test_`, `sort`, `head`) passes them on.
   */
  private pipeSource(x: ShNode, incoming?: ShellWord): ShellWord | undefined {
    const cmd = x?.Cmd;
    // `a | b | c` nests as `(a | b) | c`: what c reads is what b prints of what a printed
    if (cmd && nodeType(cmd) === 'BinaryCmd' && !x.Redirs?.length && opText('binaryCmd', cmd.Op) === '|') return this.pipeSource(cmd.Y, this.pipeSource(cmd.X, incoming));
    if (!cmd || nodeType(cmd) !== 'CallExpr' || x.Redirs?.length) return undefined;
    const argv = (cmd.Args ?? []).map((w: ShNode) => resolveWord(w, this.opts.home, () => undefined));
    if (argv.some((a: ShellWord) => a.dynamic)) return undefined;
    const v = argv.map((a: ShellWord) => a.value);
    if (incoming && lineFilter(v)) return incoming;
    const under = (root: string, name?: string): ShellWord => ({ ...DYNAMIC_WORD, confined: true, prefix: `${root.replace(/\/+$/, '')}/`, pattern: `${escapeGlob(root.replace(/\/+$/, '') || '/')}/**${name ? `/${name}` : ''}` });
    if (v[0] === 'find') {
      const roots = v.slice(1).filter((a: string, i: number, all: string[]) => !/^[-(!),]/.test(a) && all.slice(0, i).every((p) => !/^[-(!),]/.test(p) || ['-H', '-L', '-P'].includes(p)));
      const exprAt = v.findIndex((a: string, k: number) => k > 0 && /^[-(!),]/.test(a) && !['-H', '-L', '-P'].includes(a));
      const names = exprAt > 0 ? findNames(argv.slice(exprAt)) : undefined;
      if (roots.length > 1) return undefined;
      return names && names.length > 1 ? { ...under(roots[0] ?? '.'), alternatives: names.map((n) => under(roots[0] ?? '.', n)) } : under(roots[0] ?? '.', names?.[0]);
    }
    if (v[0] === 'git' && (v[1] === 'ls-files' || (v[1] === 'diff' && v.includes('--name-only')))) return under('.');
    if (v[0] === 'echo' || v[0] === 'printf') {
      const text = v[0] === 'echo' ? this.echo(v.slice(1)) : printfOutput(v[1] ?? '', v.slice(2));
      if (text === undefined) return undefined;
      const words = text.split(/[\s\0]+/).filter(Boolean).map((x: string) => literalWord(x));
      return words.length > 0 && words.length <= 64 ? { ...DYNAMIC_WORD, alternatives: words } : undefined;
    }
    if (['grep', 'egrep', 'fgrep', 'rg'].includes(v[0]) && v.slice(1).some((a: string) => /^-[a-zA-Z]*[lL]/.test(a) || a === '--files-with-matches' || a === '--files')) {
      const ops = v.slice(1).filter((a: string) => !a.startsWith('-'));
      const roots = v[0] === 'rg' && v.includes('--files') ? ops : ops.slice(1);
      return roots.length === 1 ? under(roots[0]!) : roots.length === 0 ? under('.') : undefined;
    }
    return undefined;
  }

  /** A shell reading its commands from standard input: a literal here-doc or here-string is analysed as the script. */
  private stdinScript(via: string, wrappers: string[], assigns: ShellAssign[], effects: Array<{ effect: string; why: string }>, ctx: Ctx): void {
    for (const e of effects) this.finding('ask', `shell:${e.effect}`, e.why);
    const text = ctx.stdin;
    if (!text || text.dynamic) { this.finding('ask', 'shell:stdin-shell', `${via} runs commands read from standard input, which the gate cannot see`); return; }
    if (ctx.nesting + 1 > MAX_SCRIPT_NESTING) { this.finding('deny', 'shell:nesting', 'nested shell commands are too deep to analyse'); return; }
    const saved = this.cwds;
    this.run(text.value, [...wrappers, via], assigns, ctx.nesting + 1, undefined, dashFor(via));
    this.cwds = saved;
  }

  private trackCd(argv: ShellWord[]): void {
    const head = argv[0]?.value;
    if (head !== 'cd' && head !== 'pushd' && head !== 'popd') return;
    const target = argv.slice(1).find((a) => a.dynamic || !a.value.startsWith('-') || a.value === '-');
    if (head === 'popd' || (target && (target.dynamic || target.value === '-'))) { this.cwds = null; return; }
    const dir = target ? target.value : this.opts.home;
    if (!this.cwds) return;
    const next = new Set(this.cwds); // cd may fail, so the old directories stay possible
    for (const d of this.cwds) next.add(resolvePathIn(this.opts.workspace, dir, d));
    this.cwds = [...next];
  }
}

/** A command that prints a subset of the lines piped into it, unchanged: grep without -o/-c/files, sort, uniq, head, tail -n. */
function lineFilter(v: string[]): boolean {
  const [h, ...rest] = v;
  if (h === 'grep' || h === 'egrep' || h === 'fgrep') {
    const opts = rest.filter((a) => a.startsWith('-'));
    const ops = rest.filter((a) => !a.startsWith('-'));
    return opts.every((o) => /^-[vEFiwx]+$/.test(o)) && ops.length === 1;
  }
  if (h === 'sort' || h === 'uniq') return rest.every((a) => /^-[ruz]+$/.test(a));
  if (h === 'head' || h === 'tail') return rest.every((a, i) => /^-z$|^-n$|^-\d+$|^-n\d+$/.test(a) || (/^\+?\d+$/.test(a) && rest[i - 1] === '-n'));
  return false;
}

/** true: the shell named first in `via` (`sh -c`, `/bin/dash`, `flock -c`) echoes like dash; false: bash; undefined: the current shell (source). */
function dashFor(via: string): boolean | undefined {
  const name = /^(?:\S*\/)?([\w.+-]+)/.exec(via.trim())?.[1] ?? '';
  if (name === 'source' || name === '.') return undefined;
  return !/^(r?bash)$/.test(name);
}

interface Ctx {
  wrappers: string[];
  inherited: ShellAssign[];
  nesting: number;
  /** What the statement feeds the command on standard input, when a redirection says. */
  stdin?: ShellWord;
  /** What the command on the left of a pipe prints, when that is known (paths from find). */
  pipeIn?: ShellWord;
}

/** Variables the shell itself sets (cd sets OLDPWD, getopts OPTARG …): never bound to an assignment's value. */
const SHELL_MANAGED = new Set(['OLDPWD', 'REPLY', 'OPTARG', 'OPTIND', 'RANDOM', 'SRANDOM', 'SECONDS', 'LINENO', 'BASHPID', 'PPID', 'UID', 'EUID', 'SHLVL', '_', 'PIPESTATUS', 'MAPFILE', 'COPROC', 'DIRSTACK', 'EPOCHSECONDS', 'EPOCHREALTIME', 'FUNCNAME', 'BASH_REMATCH', 'BASH_COMMAND', 'BASH_SOURCE', 'BASH_LINENO', 'BASH_ARGV', 'BASH_ARGC', 'HISTCMD', 'COLUMNS', 'LINES']);

const GLOB_OPTIONS = /dotglob|nocaseglob|extglob|globasciiranges|globskipdots|nocasematch|BASHOPTS/;

export function analyzeShell(command: string, opts: AnalyzeOptions): ShellAnalysis {
  const w = new Walker(opts);
  if (command.length > opts.maxLength) {
    w.finding('deny', 'shell:too-long', `the command is longer than ${opts.maxLength} characters`);
    return w.out;
  }
  const parts = command.match(/[|;&(`\n]|<</g)?.length ?? 0;
  if (parts > MAX_PARTS) {
    w.finding('deny', 'shell:too-many-parts', `the command has more than ${MAX_PARTS} separators, pipes, substitutions and here-docs`);
    return w.out;
  }
  w.lastpipe = /lastpipe/.test(command);
  w.source = command;
  try {
    w.run(command, [], [], 0);
  } catch (e) {
    if (!(e instanceof TooDeep)) throw e;
    w.finding('deny', 'shell:too-deep', 'the command is nested too deeply, or has too many parts, to analyse');
  }
  const texts = w.textInArithmetic();
  if (texts.length) w.finding('ask', 'shell:arithmetic', `arithmetic reads ${texts.slice(0, 3).map((n) => `$${n}`).join(', ')}, which may hold text here (bash evaluates it as arithmetic, where a[$(cmd)] runs cmd)`);
  // Globs are matched with bash's default options; a command that may turn on options changing what a
  // glob matches (dot files, case, extended patterns, ranges) has its globs judged as not understood.
  if (GLOB_OPTIONS.test(command) && w.out.commands.some((c) => c.argv.some((a) => a.glob) || c.redirects.some((r) => r.target.glob))) {
    w.finding('ask', 'shell:glob-options', 'globs are matched under shell options (dotglob, nocaseglob, extglob, …) the analyser does not model');
  }
  if (w.out.commands.filter((c) => c.argv.length > 0).length > opts.maxCommands) {
    w.finding('deny', 'shell:too-many-commands', `more than ${opts.maxCommands} simple commands`);
  }
  return w.out;
}

/** printf with %s, %b, %d, %% and backslash escapes, enough to know what a literal printf prints. */
