/**
 * Unwraps commands that run other commands, so the inner command is judged on its own: command,
 * builtin, exec, env, nice, nohup, setsid, stdbuf, timeout, time, ionice, busybox, xargs, and the
 * `-exec/-execdir/-ok/-okdir` actions of find. Each wrapper's options are parsed with its own grammar
 * up to its command operand, so an option of the inner command (`command rm -v …`) is never read as
 * the wrapper's. `sh|bash|… -c STRING` hands STRING back as a script to analyse; `bash FILE` is a
 * script run, judged by the policy. An option a wrapper has that is not modelled is an "ask" finding.
 * nohup and setsid add the effect `detach`; `env -C DIR` changes the inner command's directory.
 * sudo, doas, su and friends are not unwrapped: the policy denies them by name.
 */
import { grammar, parseArgs, type Grammar } from './commands/argv-parser';
import { DYNAMIC_WORD, literalWord, type ShellWord } from './shell-words';
import { resolvePathIn } from './path-resolve';
import type { ShellAssign, ShellFinding } from './shell-analysis';

export interface UnwrappedCommand {
  argv: ShellWord[];
  assigns: ShellAssign[];
  wrappers: string[];
  dynamicTail: boolean;
  effects: Array<{ effect: string; why: string }>;
  /** `env -C DIR`: the directory the command runs in (null: computed at run time). */
  cwd?: ShellWord | null;
  /** For a command run by find -exec: the paths `{}` stands for. */
  placeholder?: ShellWord;
  /** Files its wrappers write (`time -o FILE`). */
  writes?: ShellWord[];
  /** Files its wrappers read (`xargs -a FILE`). */
  reads?: ShellWord[];
  /**
   * xargs without -0 splits what it reads on blanks and newlines (and reads quotes): the arguments it
   * appends are pieces of the names piped in (`x src y.pyc` → `src`), not the names.
   */
  splitsNames?: boolean;
}
export interface UnwrapResult {
  commands: UnwrappedCommand[];
  scripts: Array<{ word: ShellWord; via: string; wrappers: string[]; assigns: ShellAssign[]; effects: Array<{ effect: string; why: string }>; /** $0, $1, … of the script */ args: ShellWord[] }>;
  /** A shell that runs what it reads on standard input (`bash`, `bash -s`, `bash /dev/stdin`). */
  stdinScript?: { via: string; wrappers: string[]; assigns: ShellAssign[]; effects: Array<{ effect: string; why: string }> };
  findings: ShellFinding[];
}

/** Stands for the argument xargs -I puts in place of its replacement string; the walker fills it in. */
export const XARGS_SLOT: ShellWord = { ...DYNAMIC_WORD };

const BIN_DIRS = /^\/(usr\/)?(local\/)?s?bin\/[^/]+$/;
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'mksh', 'rbash']);

/** `/usr/bin/ls` (and `/usr/bin/../bin/ls`) → `ls`; other paths are kept as written. */
export function commandName(word: ShellWord): string {
  const v = word.value;
  if (!v.startsWith('/')) return v;
  const abs = resolvePathIn('/', v, '/');
  return BIN_DIRS.test(abs) ? abs.slice(abs.lastIndexOf('/') + 1) : v;
}

interface WrapperSpec { g: Grammar; positionals?: number; effect?: string }
const g = (text: string) => grammar(text, { stopAtOperand: true, abbrev: true });
const WRAPPERS: Record<string, WrapperSpec> = {
  command: { g: g('-p -v -V') },
  builtin: { g: g('') },
  exec: { g: g('-c -l -a=any') },
  nice: { g: grammar('-n|--adjustment=any --help --version', { stopAtOperand: true, numeric: true }) },
  nohup: { g: g('--help --version'), effect: 'detach' },
  setsid: { g: g('-c|--ctty -f|--fork -w|--wait --help --version'), effect: 'detach' },
  stdbuf: { g: g('-i|--input=any -o|--output=any -e|--error=any --help --version') },
  timeout: { g: g('--preserve-status --foreground -v|--verbose -s|--signal=any -k|--kill-after=any --help --version'), positionals: 1 },
  time: { g: g('-p|--portability -v|--verbose -q|--quiet -a|--append -f|--format=any -o|--output=write --help --version') },
  ionice: { g: g('-c|--class=any -n|--classdata=any -t|--ignore -p|--pid=any -P|--pgid=any -u|--uid=any --help --version') },
  busybox: { g: g('') },
  fakeroot: { g: g('-l|--lib=any --faked=any -s=write -i=read -u|--unknown-is-real -b=any -h|--help -v|--version') },
  taskset: { g: g('-a|--all-tasks -c|--cpu-list -p|--pid -h|--help -V|--version'), positionals: 1 },
  chrt: { g: g('-a -b -d=any -D -f -i -m -o -p -P=any -r -R -T=any -v --help --version'), positionals: 1 },
  flock: { g: g('-s|--shared -x|-e|--exclusive -u|--unlock -n|--nb|--nonblock -w|--timeout=any -o|--close -E|--conflict-exit-code=any -F|--no-fork -c|--command=any -h|--help -V|--version'), positionals: 1 },
  prlimit: { g: g('-p|--pid=any -o|--output=any --noheadings --raw --verbose --as?any --core?any --cpu?any --data?any --fsize?any --locks?any --memlock?any --msgqueue?any --nice?any --nofile?any --nproc?any --rss?any --rtprio?any --rttime?any --sigpending?any --stack?any -h|--help -V|--version') },
  unbuffer: { g: g('-p') },
  faketime: { g: g('-f -m -p=any --exclude-monotonic --date-prog=exec'), positionals: 1 },
  watch: { g: grammar('-n|--interval=any -d|--differences?any -g|--chgexit -e|--errexit -b|--beep -t|--no-title -c|--color -C|--no-color -x|--exec -p|--precise -w|--no-wrap -q|--equexit=any -r|--no-rerun -h|--help -v|--version', { stopAtOperand: true }), effect: 'never-ends' },
  script: { g: g('-a|--append -c|--command=any -e|--return -f|--flush -q|--quiet -t|--timing?write -T|--log-timing=write -I|--log-in=write -O|--log-out=write -B|--log-io=write -m|--logging-format=any -E|--echo=any -h|--help -V|--version') },
};
const ENV = g('-i|--ignore-environment -0|--null -u|--unset=any -C|--chdir=dir -S|--split-string=exec -v|--debug --default-signal?any --ignore-signal?any --block-signal?any --list-signal-handling --help --version');
const XARGS = grammar(
  '-0|--null -r|--no-run-if-empty -t|--verbose -x|--exit -p|--interactive -o|--open-tty -I=any -i|--replace?any -L|--max-lines=any -l?any ' +
  '-n|--max-args=any -P|--max-procs=any -s|--max-chars=any -d|--delimiter=any -E=any -e|--eof?any -a|--arg-file=read --process-slot-var=any --show-limits --help --version',
  { stopAtOperand: true },
);
const SHELL = grammar(
  '-c -e -u -x -v -n -f -h -m -B -C -H -P -T -a -b -k -t -E -l -r -p --login --norc --noprofile --posix --restricted --verbose --noediting --debugger ' +
  '-o=any +o=any -O=any +O=any -s -i --rcfile=exec --init-file=exec --help --version --dump-strings --dump-po-strings --pretty-print',
  { stopAtOperand: true, abbrev: false },
);
/** Shell options (-o/-O) that change how later code is read; anything else asks. */
const SAFE_SHELL_OPTIONS = new Set(['errexit', 'nounset', 'pipefail', 'xtrace', 'verbose', 'noglob', 'noclobber', 'posix', 'globstar', 'nullglob', 'failglob', 'dotglob', 'extglob', 'lastpipe', 'inherit_errexit', 'nocaseglob']);

/**
 * GNU env's -S splitting: whitespace separates words; '…' keeps everything but \\ and \'; "…" takes
 * the escapes; \_ is a separator outside quotes and a space inside; \t \n \v \f \r \# \$ \\ \" \'
 * stand for their characters; \c ends the string; # at the start of a word comments out the rest;
 * ${NAME} is the variable (a computed word). Returns the words, or why the string is refused.
 */
export function splitEnvString(src: string): ShellWord[] | string {
  const out: ShellWord[] = [];
  let cur = '';
  let has = false;
  let dynamic = false;
  let q: '' | "'" | '"' = '';
  const flush = () => { if (has) out.push(dynamic ? { ...DYNAMIC_WORD, prefix: cur, value: cur } : literalWord(cur)); cur = ''; has = false; dynamic = false; };
  const ESC: Record<string, string> = { t: '\t', n: '\n', v: '\v', f: '\f', r: '\r', '#': '#', $: '$', '\\': '\\', '"': '"', "'": "'" };
  for (let i = 0; i < src.length; i++) {
    const c = src[i]!;
    if (q === "'") {
      if (c === "'") { q = ''; continue; }
      if (c === '\\' && (src[i + 1] === '\\' || src[i + 1] === "'")) { cur += src[++i]; continue; }
      cur += c; continue;
    }
    if (c === '\\') {
      const n = src[++i];
      if (n === undefined) return 'a trailing backslash';
      if (n === 'c') { if (q) return '\\c inside quotes'; flush(); return out; }
      if (n === '_') { if (q) { cur += ' '; has = true; } else flush(); continue; }
      const e = ESC[n];
      if (e === undefined) return `an unknown escape \\${n}`;
      cur += e; has = true; continue;
    }
    if (c === '"') { if (q) q = ''; else { q = '"'; has = true; } continue; }
    if (!q && c === "'") { q = "'"; has = true; continue; }
    if (!q && /\s/.test(c)) { flush(); continue; }
    if (!q && c === '#' && !has) return out.length ? (flush(), out) : out;
    if (c === '$') {
      const m = /^\$\{([A-Za-z_][A-Za-z0-9_]*)\}/.exec(src.slice(i));
      if (!m) return 'a $ that is not ${NAME}';
      dynamic = true; has = true; i += m[0].length - 1; continue;
    }
    cur += c; has = true;
  }
  if (q) return 'an unterminated quote';
  flush();
  return out;
}

export function unwrapCommand(argv0: ShellWord[]): UnwrapResult {
  const res: UnwrapResult = { commands: [], scripts: [], findings: [] };
  let argv = argv0;
  const wrappers: string[] = [];
  const assigns: ShellAssign[] = [];
  const effects: Array<{ effect: string; why: string }> = [];
  let dynamicTail = false;
  let splitsNames = false;
  let cwd: ShellWord | null | undefined;
  const writes: ShellWord[] = [];
  const reads: ShellWord[] = [];
  const ask = (name: string, why: string) => res.findings.push({ decision: 'ask', rule: `shell:wrapper-${name}`, reason: `${name}: ${why}` });

  for (let guard = 0; guard < 16 && argv.length > 0; guard++) {
    const head = argv[0]!;
    if (head.dynamic) break;
    const name = commandName(head);
    if (name === 'env') {
      const p = parseArgs(ENV, argv.slice(1));
      if (p.problems.length) { ask(name, p.problems[0]!); return res; }
      const split = p.values('-S')[0];
      if (split) {
        // env -S splits its string by its own rules (not a shell's): the words it gives lead the command line
        if (split.dynamic) { ask(name, '-S splits a string computed at run time'); return res; }
        const words = splitEnvString(split.value);
        if (typeof words === 'string') { ask(name, `-S: ${words}`); return res; }
        wrappers.push('env -S');
        argv = [...words, ...p.operands];
        continue;
      }
      const dir = p.values('-C')[0];
      if (dir) cwd = dir.dynamic ? null : dir;
      let i = 0;
      for (; i < p.operands.length; i++) {
        const a = p.operands[i]!;
        const m = /^([^=/]+)=(.*)$/s.exec(a.value);
        if (!m || (a.dynamic && !/^[^=/]+=/.test(a.prefix))) break;
        assigns.push({ name: m[1]!, value: a.dynamic ? DYNAMIC_WORD : literalWord(m[2]!) });
      }
      if (i >= p.operands.length) break; // plain `env`: prints the environment
      wrappers.push('env');
      argv = p.operands.slice(i);
      continue;
    }
    if (name === 'xargs') {
      const p = parseArgs(XARGS, argv.slice(1));
      if (p.problems.length) { ask(name, p.problems[0]!); return res; }
      if (p.has('-p', '-o')) { ask(name, 'reads answers from a terminal'); return res; }
      if (p.has('--process-slot-var')) { ask(name, '--process-slot-var sets an environment variable'); return res; }
      reads.push(...p.values('-a'));
      const repl = p.values('-I', '-i')[0]?.value ?? (p.has('-i') ? '{}' : undefined);
      wrappers.push('xargs');
      dynamicTail = !repl;
      const delim = p.values('-d')[0];
      if (!p.has('-0') && !(delim && !delim.dynamic && /^(\\0|\\x00|\\000)$/.test(delim.value))) splitsNames = true;
      argv = p.operands.length ? p.operands : [literalWord('echo')];
      if (repl) argv = argv.map((a, k) => (k > 0 && a.value === repl && !a.dynamic ? XARGS_SLOT : k > 0 && a.value.includes(repl) ? DYNAMIC_WORD : a));
      continue;
    }
    if (SHELLS.has(name)) {
      const rest = argv.slice(1);
      const p = parseArgs(SHELL, rest);
      if (p.problems.length) { ask(name, p.problems[0]!); return res; }
      if (p.has('--rcfile', '--init-file')) { ask(name, 'runs a start-up file named on the command line'); return res; }
      if (p.has('-a', '-k') || p.values('-o', '+o').some((o) => o.value === 'allexport' || o.value === 'keyword')) {
        ask(name, '-a / -k export variables the analyser does not see as environment (assignments, NAME=VALUE arguments)');
        return res;
      }
      for (const o of p.values('-o', '+o', '-O', '+O')) {
        if (o.dynamic || !SAFE_SHELL_OPTIONS.has(o.value)) { ask(name, `shell option ${o.value || '(computed)'} changes how code is read`); return res; }
      }
      if (p.has('-i')) { ask(name, 'starts an interactive shell'); return res; }
      if (p.has('-c')) {
        const script = p.operands[0];
        if (!script) { ask(name, '-c without a command string'); return res; }
        res.scripts.push({ word: script, via: `${name} -c`, wrappers: [...wrappers], assigns: [...assigns], effects: [...effects], args: p.operands.slice(1) });
        return res;
      }
      const first = p.operands[0];
      if (p.has('-s') || !first || (!first.dynamic && ['/dev/stdin', '-', '/proc/self/fd/0', '/dev/fd/0'].includes(first.value))) {
        res.stdinScript = { via: `${name} (standard input)`, wrappers: [...wrappers], assigns: [...assigns], effects: [...effects] };
        return res;
      }
      argv = [head, ...rest.slice(rest.length - p.operands.length)];
      break; // `bash script.sh`: a script run, judged by the policy
    }
    if (name === 'find') {
      const found = unwrapFind(argv, res, wrappers);
      if (!found) return res;
      argv = found.argv;
      for (const c of found.inner) res.commands.push({ ...c, assigns: [...assigns, ...c.assigns], effects: [...effects, ...c.effects] });
      break;
    }
    const spec = WRAPPERS[name];
    if (!spec) break;
    const p = parseArgs(spec.g, argv.slice(1));
    if (p.problems.length) { ask(name, p.problems[0]!); return res; }
    if (name === 'command' && p.has('-v', '-V')) break; // a lookup: nothing runs
    if (name === 'time') writes.push(...p.values('-o'));
    // flock creates its lock file; script writes its typescript (default ./typescript) and timing logs
    if (name === 'flock' && p.operands[0] && !p.has('-u')) writes.push(p.operands[0]);
    if (name === 'script') {
      const file = p.operands[0] ?? literalWord('typescript');
      res.commands.push({ argv: [literalWord('true')], assigns: [...assigns], wrappers: [...wrappers, 'script'], dynamicTail: false, effects: [], writes: [file, ...p.values('-t', '-T', '-I', '-O', '-B').filter((w) => w.value !== '')] });
    }
    if (name === 'flock' && p.values('-c').length) {
      res.commands.push({ argv: [literalWord('true')], assigns: [...assigns], wrappers: [...wrappers, 'flock'], dynamicTail: false, effects: [], writes: [...writes] });
      res.scripts.push({ word: p.values('-c')[0]!, via: 'flock -c', wrappers: [...wrappers], assigns: [...assigns], effects: [...effects], args: [] });
      return res;
    }
    if (name === 'script') {
      const c = p.values('-c')[0];
      if (c) res.scripts.push({ word: c, via: 'script -c', wrappers: [...wrappers], assigns: [...assigns], effects: [...effects], args: [] });
      else res.findings.push({ decision: 'ask', rule: 'shell:wrapper-script', reason: 'script starts an interactive shell' });
      return res;
    }
    if (name === 'prlimit' && p.has('-p')) break;
    const start = argv.length - p.operands.length + (spec.positionals ?? 0);
    if (start >= argv.length) break; // a bare `exec` or `time`
    if (spec.effect) effects.push({ effect: spec.effect, why: spec.effect === 'detach' ? `${name} lets the command outlive the call` : `${name} repeats the command until stopped` });
    wrappers.push(name);
    argv = argv.slice(start);
  }
  res.commands.push({ argv, assigns, wrappers, dynamicTail, effects, ...(cwd !== undefined ? { cwd } : {}), ...(writes.length ? { writes } : {}), ...(reads.length ? { reads } : {}), ...(splitsNames ? { splitsNames } : {}) });
  return res;
}

const FIND_ACTIONS = ['-exec', '-execdir', '-ok', '-okdir'];

/**
 * The names a find expression can match, when every alternative of it requires a `-name NAME` test:
 * `-name '*.pyc'`, `-type f -name a -o -name b`, `\( -name a -o -name b \) -delete`. Undefined when
 * some branch matches other names (no -name, a negated one, -iname, -regex, nested groups).
 */
export function findNames(expr: ShellWord[]): string[] | undefined {
  if (expr.some((a) => a.dynamic)) return undefined;
  let v = expr.map((a) => a.value);
  const open = v.indexOf('(');
  if (open >= 0) {
    // one group of pure name alternatives, anded with the rest
    const close = v.indexOf(')', open);
    if (close < 0 || v.indexOf('(', open + 1) >= 0 && v.indexOf('(', open + 1) < close || v.lastIndexOf('(') !== open) return undefined;
    const inner = v.slice(open + 1, close);
    const outside = [...v.slice(0, open), ...v.slice(close + 1)];
    if (outside.some((x) => ['-o', '-or', ',', '!', '-not'].includes(x)) || (open > 0 && ['!', '-not'].includes(v[open - 1]!))) return undefined;
    v = inner;
  }
  if (v.some((x) => ['-iname', '-ipath', '-regex', '-iregex', '-path', '-wholename', '-lname', '-ilname', ','].includes(x))) return undefined;
  const names: string[] = [];
  let branch: string[] = [];
  const close = (): boolean => {
    const k = branch.indexOf('-name');
    if (k < 0 || branch[k + 1] === undefined || ['!', '-not'].includes(branch[k - 1] ?? '')) return false;
    names.push(branch[k + 1]!);
    branch = [];
    return true;
  };
  for (const x of v) {
    if (x === '-o' || x === '-or') { if (!close()) return undefined; continue; }
    branch.push(x);
  }
  if (!close() || names.length > 16 || names.some((n) => n.includes('/'))) return undefined;
  return names;
}

/**
 * Splits find's -exec actions out: the find command keeps its expression (actions replaced by a
 * `-exec` marker), and each action becomes an inner command where `{}` stands for a path under the
 * search roots (its pattern: root/**, narrowed by a lone -name). `{}` inside a larger word
 * (`sh -c 'cat {}'`) is code injection: that word becomes dynamic.
 */
function unwrapFind(argv: ShellWord[], res: UnwrapResult, wrappers: string[]): { argv: ShellWord[]; inner: UnwrappedCommand[] } | null {
  const outer: ShellWord[] = [];
  const inner: UnwrappedCommand[] = [];
  const roots: ShellWord[] = [];
  let i = 1;
  while (i < argv.length && ['-H', '-L', '-P'].includes(argv[i]!.value)) outer.push(argv[i++]!);
  for (; i < argv.length && !argv[i]!.dynamic && !/^[-(!),]/.test(argv[i]!.value); i++) roots.push(argv[i]!);
  const actionAt = argv.findIndex((a, k) => k >= i && FIND_ACTIONS.includes(a.value));
  const names = findNames(argv.slice(i, actionAt < 0 ? argv.length : actionAt));
  const root = roots.length === 1 && !roots[0]!.dynamic ? roots[0]!.value.replace(/\/+$/, '') || '/' : roots.length === 0 ? '.' : null;
  // every path find prints starts with its root: not an option when the root is not one (`find . -exec grep -l x {} +`)
  const under = (name?: string): ShellWord => ({ ...DYNAMIC_WORD, prefix: root === '/' ? '/' : `${root!}/`, confined: true, pattern: `${root!.replace(/[*?[\]\\{}]/g, '\\$&')}/**${name ? `/${name}` : ''}` });
  const placeholder: ShellWord = root === null ? DYNAMIC_WORD : names && names.length > 1 ? { ...under(), alternatives: names.map(under) } : under(names?.[0]);
  outer.unshift(argv[0]!, ...roots);
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (!FIND_ACTIONS.includes(a.value) || a.dynamic) { outer.push(a); continue; }
    const end = argv.findIndex((x, k) => k > i && !x.dynamic && (x.value === ';' || (x.value === '+' && argv[k - 1]!.value === '{}')));
    if (end < 0) { res.findings.push({ decision: 'ask', rule: 'shell:wrapper-find', reason: `find: ${a.value} without a terminating ; or +` }); return null; }
    // `{}` in a larger word (`{}/.git/config`) is that path pattern; inside a script (`sh -c 'cat {}'`) it is code, and the script is computed
    const within = (x: ShellWord): ShellWord => ({ ...DYNAMIC_WORD, confined: true, prefix: x.value.slice(0, x.value.indexOf('{}')), pattern: x.value.split('{}').map((p) => p.replace(/[*?[\]\\{}]/g, '\\$&')).join(placeholder.pattern) });
    // -execdir runs in the directory of each file found: a relative word there names a path anywhere below the roots
    const inDir = (x: ShellWord): ShellWord => (root === null ? DYNAMIC_WORD : { ...DYNAMIC_WORD, confined: true, prefix: '', pattern: `${root.replace(/[*?[\]\\{}]/g, '\\$&')}/**/${x.value.replace(/[*?[\]\\{}]/g, '\\$&')}` });
    const relative = (x: ShellWord, k: number) => a.value.endsWith('dir') && k > 0 && !x.dynamic && x.value !== '{}' && !x.value.includes('{}') && !/^[/~-]/.test(x.value) && x.value !== '';
    const words = argv.slice(i + 1, end).map((x, k) => (x.value === '{}' && !x.dynamic ? placeholder : relative(x, k) ? inDir(x) : !x.dynamic && x.value.includes('{}') ? within(x) : x));
    if (words.length === 0) { res.findings.push({ decision: 'ask', rule: 'shell:wrapper-find', reason: `find: ${a.value} without a command` }); return null; }
    const sub = unwrapCommand(words);
    res.findings.push(...sub.findings);
    res.scripts.push(...sub.scripts.map((x) => ({ ...x, wrappers: [...wrappers, `find ${a.value}`, ...x.wrappers] })));
    if (sub.stdinScript) res.findings.push({ decision: 'ask', rule: 'shell:stdin-shell', reason: `find ${a.value} runs a shell that reads commands from standard input` });
    for (const c of sub.commands) {
      inner.push({ ...c, wrappers: [...wrappers, `find ${a.value}`, ...c.wrappers], placeholder });
      if (a.value === '-ok' || a.value === '-okdir') res.findings.push({ decision: 'ask', rule: 'shell:wrapper-find', reason: `find ${a.value} asks a terminal before each command` });
    }
    outer.push(literalWord('-exec'));
    i = end;
  }
  return { argv: outer, inner };
}
