/**
 * Specs of the search and text tools whose danger hides in an argument language: grep and rg
 * (a pattern attached to an option — `-re.` — leaves every operand a path), sed scripts (`e`, `w`,
 * `r`, `s///e`, `s///w`), awk programs (system(), pipes, `print > file`, `getline < file`, `@load`,
 * indirect calls), find expressions (-delete, -fprint*, -exec handled by unwrap-command.ts), jq.
 */
import { grammar, parseArgs } from './argv-parser';
import { findNames } from '../unwrap-command';
import { cheapDelete } from './file-tools';
import { simpleSpec, UseBuilder, type CommandSpec } from './command-spec';
import { escapeGlob, literalWord, type ShellWord } from '../shell-words';

const HV = '--help --version';

const GREP_OPTS = '-E|--extended-regexp -F|--fixed-strings -G|--basic-regexp -P|--perl-regexp -i|-y|--ignore-case --no-ignore-case -v|--invert-match -w|--word-regexp -x|--line-regexp -c|--count --color?any --colour?any -L|--files-without-match -l|--files-with-matches -o|--only-matching -q|--quiet|--silent -s|--no-messages -b|--byte-offset -H|--with-filename -h|--no-filename --label=any -n|--line-number -T|--initial-tab -Z|--null -z|--null-data -a|--text -I -r|--recursive -R|--dereference-recursive -U|--binary --line-buffered -e|--regexp=any -f|--file=read -m|--max-count=any -A|--after-context=any -B|--before-context=any -C|--context=any --include=any --exclude=any --exclude-from=read --exclude-dir=any --binary-files=any -d|--directories=any -D|--devices=any --no-group-separator --group-separator=any';

/**
 * A recursive search narrowed by name (`grep -r --include='*.env*'`, `rg -g '.env'`) reads the files
 * that filter names under each directory searched: each filter is also read as the path pattern
 * `DIR/**\/FILTER`, so the path rules see `.env` files chosen by a filter as they see them named.
 * Negated rg globs (`!x`) exclude, so they are not read.
 */
function filteredReads(b: UseBuilder, dirs: ShellWord[], filters: ShellWord[]): void {
  for (const f of filters) {
    if (f.dynamic) { b.problem(`${b.use.label}: a file filter computed at run time`); continue; }
    if (f.value.startsWith('!') || f.value === '') continue;
    for (const d of dirs.length ? dirs : [literalWord('.')]) {
      if (d.dynamic) continue;
      const root = d.value.replace(/\/+$/, '') || '/';
      const glob = f.value.replace(/^\/+/, '');
      b.read({ value: '', dynamic: true, glob: false, confined: true, splits: false, unmodelled: [], prefix: `${root}/`, pattern: `${escapeGlob(root)}/**/${glob}` });
    }
  }
}

const grep = simpleSpec(['grep', 'egrep', 'fgrep', 'zgrep', 'zegrep', 'zfgrep'], `${GREP_OPTS} ${HV}`, (p, b) => {
  const ops = p.has('-e', '-f') ? p.operands : p.operands.slice(1);
  for (const o of ops) b.read(o);
  if (p.has('-r', '-R')) filteredReads(b, ops, p.values('--include'));
}, { numeric: true });

const RG_OPTS = '-e|--regexp=any -f|--file=read -i|--ignore-case -S|--smart-case -s|--case-sensitive -w|--word-regexp -x|--line-regexp -v|--invert-match -c|--count --count-matches -l|--files-with-matches --files-without-match -n|--line-number -N|--no-line-number -H|--with-filename -I|--no-filename -o|--only-matching -p|--pretty -q|--quiet -u|--unrestricted -g|--glob=any --iglob=any -t|--type=any -T|--type-not=any --type-add=any --type-clear=any --type-list -A|--after-context=any -B|--before-context=any -C|--context=any -m|--max-count=any -d|--max-depth=any -L|--follow --hidden --no-hidden --no-ignore --no-ignore-vcs --no-ignore-parent --no-ignore-dot --no-ignore-global --no-ignore-exclude --ignore-file=read --files --json --no-heading --heading --column --no-column --color=any --colors=any -M|--max-columns=any --max-columns-preview --max-filesize=any -j|--threads=any -F|--fixed-strings -P|--pcre2 -U|--multiline --multiline-dotall -r|--replace=any --sort=any --sortr=any --stats --trim -0|--null --vimgrep -a|--text --binary --passthru --context-separator=any --field-match-separator=any --field-context-separator=any --path-separator=any --no-config --no-messages --debug --trace -b|--byte-offset --crlf --encoding=any -E --engine=any --null-data --one-file-system --line-buffered --block-buffered -z|--search-zip --pre=exec --pre-glob=any --hostname-bin=exec --hyperlink-format=any --include-zero';

const rg = simpleSpec('rg', `${RG_OPTS} -h|--help -V|--version`, (p, b) => {
  const ops = p.has('-e', '-f', '--files', '--type-list') ? p.operands : p.operands.slice(1);
  for (const o of ops) b.read(o);
  filteredReads(b, ops, p.values('-g', '--iglob'));
});

// ---- sed -----------------------------------------------------------------------------------

interface SedFacts { exec: boolean; reads: string[]; writes: string[]; unparsed: boolean; /** a d/D/z that applies to every line (no address, 1,$, a negated one) */ deletesAll: boolean }

/** End of a bracket expression starting at `[` (index i), or -1: `[]…]`, `[^]…]` and `[:class:]` / `[.x.]` / `[=x=]` inside. */
export function bracketEnd(s: string, i: number): number {
  let j = i + 1;
  if (s[j] === '^') j++;
  if (s[j] === ']') j++;
  while (j < s.length && s[j] !== ']') {
    if (s[j] === '[' && /[:.=]/.test(s[j + 1] ?? '')) { const close = s.indexOf(`${s[j + 1]}]`, j + 2); if (close < 0) return -1; j = close + 2; continue; }
    j++;
  }
  return j < s.length ? j : -1;
}

/** Index after the closing delimiter; in a regex (GNU sed, gawk) a delimiter inside `[…]` does not close it. */
function readDelimited(s: string, i: number, delim: string, regex = false): number {
  while (i < s.length && s[i] !== delim) {
    if (regex && s[i] === '[') { const e = bracketEnd(s, i); if (e > 0) { i = e + 1; continue; } }
    i += s[i] === '\\' ? 2 : 1;
  }
  return i + 1;
}

/** An address that selects every line, or may: none, `1,$`, `0,$`, `1~1`, or any negated one (`/x/!`). */
const wholeAddress = (a: string) => a === '' || /^[01],\$$|^[01]~1$/.test(a) || a.endsWith('!');

/** Scans a sed script for commands that run programs or touch files (GNU sed syntax). */
export function scanSed(s: string): SedFacts {
  const f: SedFacts = { exec: false, reads: [], writes: [], unparsed: false, deletesAll: false };
  let i = 0;
  let addr = ''; // the address of the command being read
  const blocks: string[] = []; // addresses of the enclosing { … } blocks
  const restOfLine = () => { const st = i; while (i < s.length && s[i] !== '\n') i++; return s.slice(st, i).trim(); };
  while (i < s.length) {
    const c = s[i]!;
    if (c === '{') { blocks.push(addr); addr = ''; i++; continue; }
    if (c === '}') { blocks.pop(); addr = ''; i++; continue; }
    if (c === ';' || c === '\n') { addr = ''; i++; continue; }
    if (/\s/.test(c)) { i++; continue; }
    if (/[0-9$,~+!]/.test(c)) { addr += c; i++; continue; }
    if (c === '/') { const st = i; i = readDelimited(s, i + 1, '/', true); while (/[IM]/.test(s[i] ?? '')) i++; addr += s.slice(st, i); continue; }
    if (c === '\\') { const st = i; const d = s[i + 1] ?? ''; i = readDelimited(s, i + 2, d, true); addr += s.slice(st, i); continue; }
    if (c === '#') { restOfLine(); continue; }
    i++;
    const address = addr;
    addr = '';
    if ('dDz'.includes(c) && [address, ...blocks].every(wholeAddress)) f.deletesAll = true;
    if (c === 's' || c === 'y') {
      const d = s[i];
      if (!d || d === '\n' || d === '\\') { f.unparsed = true; return f; }
      i = readDelimited(s, i + 1, d, c === 's');
      i = readDelimited(s, i, d);
      if (c === 'y') continue;
      const flagStart = i;
      while (i < s.length && /[0-9gpiImMe]/.test(s[i]!)) i++;
      if (s.slice(flagStart, i).includes('e')) f.exec = true;
      if (s[i] === 'w') { i++; f.writes.push(restOfLine()); }
      continue;
    }
    if (c === 'e') { f.exec = true; restOfLine(); continue; }
    if (c === 'w' || c === 'W') { f.writes.push(restOfLine()); continue; }
    if (c === 'r' || c === 'R') { f.reads.push(restOfLine()); continue; }
    if ('aic'.includes(c)) { while (i < s.length && s[i] !== '\n') i += s[i] === '\\' ? 2 : 1; continue; }
    if ('btT:'.includes(c)) { while (i < s.length && !/[;\n}]/.test(s[i]!)) i++; continue; }
    if (c === 'v') { while (i < s.length && !/[;\n}]/.test(s[i]!)) i++; continue; }
    if ('qQlL'.includes(c)) { while (i < s.length && /[0-9 ]/.test(s[i]!)) i++; continue; }
    if ('=dDgGhHnNpPxzF'.includes(c)) continue;
    f.unparsed = true;
    return f;
  }
  return f;
}

const SED = grammar(`-n|--quiet|--silent -e|--expression=any -f|--file=read -i|--in-place?any -E|-r|--regexp-extended -s|--separate -u|--unbuffered -z|--null-data -l|--line-length=any --posix --debug --sandbox --follow-symlinks -b|--binary ${HV}`);

const sed: CommandSpec = {
  names: ['sed', 'gsed'],
  use(args, name) {
    const b = new UseBuilder(name);
    const p = parseArgs(SED, args);
    b.options(p);
    const scripts = p.values('-e');
    let empties = false;
    let files = p.operands;
    if (!scripts.length && !p.has('-f')) { const first = files[0]; if (first) scripts.push(first); files = files.slice(1); }
    if (p.has('-f')) b.problem('sed -f runs a script file the gate cannot see');
    for (const s of scripts) {
      if (s.dynamic) { b.problem('sed: the script is computed at run time'); continue; }
      const f = scanSed(s.value);
      if (p.has('-i') && (f.deletesAll || p.has('-n'))) { b.effect('delete', p.has('-n') ? 'sed -n -i keeps only the lines the script prints' : 'sed -i with a script that deletes every line empties the files'); empties = true; }
      if (f.unparsed) b.problem('sed: the script could not be read');
      if (f.exec) b.effect('exec-hidden', 'the sed script runs commands (e, s///e)');
      for (const r of f.reads) b.path(literalWord(r), 'read', 'sed r/R');
      for (const w of f.writes) b.path(literalWord(w), 'write', 'sed w');
    }
    for (const file of files) b.path(file, empties ? 'delete' : p.has('-i') ? 'write' : 'read');
    return b.use;
  },
};

// ---- awk -----------------------------------------------------------------------------------

interface AwkFacts { exec: string[]; writes: ShellWord[]; reads: ShellWord[]; argv?: boolean }

/** Strips strings, regexes and comments (keeping string literals aside) so operators can be read. */
function awkTokens(program: string): { code: string; strings: string[] } {
  const strings: string[] = [];
  let code = '';
  let lastSignificant = '';
  for (let i = 0; i < program.length; i++) {
    const c = program[i]!;
    if (c === '"') {
      let j = i + 1;
      let s = '';
      while (j < program.length && program[j] !== '"') { if (program[j] === '\\') { s += program[j + 1] ?? ''; j += 2; } else s += program[j++]; }
      strings.push(s);
      code += `"${strings.length - 1}"`;
      i = j;
      lastSignificant = '"';
      continue;
    }
    if (c === '/' && (lastSignificant === '' || /[(,~!{};&|\n=?:]/.test(lastSignificant))) {
      let j = i + 1;
      while (j < program.length && program[j] !== '/' && program[j] !== '\n') {
        if (program[j] === '[') { const e = bracketEnd(program, j); if (e > 0 && !program.slice(j, e).includes('\n')) { j = e + 1; continue; } }
        j += program[j] === '\\' ? 2 : 1;
      }
      code += '//';
      i = j;
      lastSignificant = '/';
      continue;
    }
    if (c === '#') { while (i < program.length && program[i] !== '\n') i++; code += '\n'; lastSignificant = '\n'; continue; }
    code += c;
    if (!/\s/.test(c)) lastSignificant = c;
  }
  return { code, strings };
}

export function scanAwk(program: string): AwkFacts {
  const f: AwkFacts = { exec: [], writes: [], reads: [] };
  const tokens = awkTokens(program);
  // a statement goes on after `\` + newline and after a newline that follows `,`, `&&` or `||`
  const code = tokens.code.replace(/\\\r?\n/g, ' ').replace(/(,|&&|\|\|)[ \t]*\r?\n/g, '$1 ');
  const strings = tokens.strings;
  // ARGV/ARGC written by the program: the files it reads are decided at run time
  if (/\bARGV\s*\[[^\]]*\]\s*(?:[-+*/%^]?=(?!=)|\+\+|--)|\bARGC\s*(?:[-+*/%^]?=(?!=)|\+\+|--)|(?:\+\+|--)\s*ARG[CV]\b|\bdelete\s+ARGV|\b(?:split|sub|gsub|patsplit|asort|asorti|getline)\b[^;}\n]*\bARGV\b/.test(code)) f.argv = true;
  const target = (after: string): ShellWord => {
    const m = /^\s*"(\d+)"\s*(?:[;}\n]|$)/.exec(after);
    return m ? literalWord(strings[Number(m[1])]!) : { ...literalWord(''), dynamic: true, pattern: '**' };
  };
  if (/\bsystem\s*\(/.test(code)) f.exec.push('system()');
  if (/\|&/.test(code)) f.exec.push('a coprocess (|&)');
  if (/(^|[^|])\|(?![|&])/.test(code)) f.exec.push('a pipe to or from a command');
  if (/@\s*(load|include|namespace)\b/.test(code)) f.exec.push('@load/@include');
  if (/@[A-Za-z_][A-Za-z0-9_]*\s*\(/.test(code)) f.exec.push('an indirect function call');
  // print > "file", print >> "file", printf … > file: at top level of a print statement (not inside parentheses)
  for (const m of code.matchAll(/\b(print|printf)\b/g)) {
    let depth = 0;
    for (let i = m.index! + m[0].length; i < code.length; i++) {
      const c = code[i]!;
      if (c === '(') depth++;
      else if (c === ')') depth--;
      else if (depth <= 0 && /[;}\n]/.test(c)) break;
      else if (depth <= 0 && c === '>') {
        const rest = code.slice(i + (code[i + 1] === '>' ? 2 : 1));
        f.writes.push(target(rest));
        break;
      }
    }
  }
  for (const m of code.matchAll(/\bgetline\b[^;}\n<]*<([^;}\n]*)/g)) f.reads.push(target(m[1]!));
  return f;
}

const AWK = grammar(`-F|--field-separator=any -v|--assign=any -f|--file=read -e|--source=any -E|--exec=read -i|--include=read -l|--load=exec -b|--characters-as-bytes -c|--traditional -C|--copyright -d|--dump-variables?write -D|--debug?any -g|--gen-pot -L|--lint?any -M|--bignum -N|--use-lc-numeric -n|--non-decimal-data -o|--pretty-print?write -O|--optimize -p|--profile?write -P|--posix -r|--re-interval -s|--no-optimize -S|--sandbox -t|--lint-old -h|--help -V|--version --usage --dump --interactive --sprintf=any --posix_space --random=any`, { stopAtOperand: false });

/**
 * `-W name[=value]` is gawk's and mawk's spelling of `--name[=value]` (`-W source='BEGIN{…}'` is a
 * program, `-W exec file` a program file, `-W load=x` an extension): rewritten to the long option so the
 * grammar judges it like one. A computed `-W` argument stays as it is (the grammar's problem).
 */
function awkLongOptions(args: ShellWord[]): ShellWord[] {
  const out: ShellWord[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.dynamic || !a.value.startsWith('-W') || a.value === '--') { out.push(a); if (!a.dynamic && a.value === '--') { out.push(...args.slice(i + 1)); break; } continue; }
    const rest = a.value === '-W' ? args[++i] : literalWord(a.value.slice(2));
    if (!rest || rest.dynamic) { out.push(a); if (rest) out.push(rest); continue; }
    out.push(literalWord(`--${rest.value}`));
  }
  return out;
}

const awk: CommandSpec = {
  names: ['awk', 'gawk', 'mawk', 'nawk'],
  use(rawArgs, name) {
    const b = new UseBuilder(name);
    const args = awkLongOptions(rawArgs);
    const p = parseArgs(AWK, args);
    b.options(p);
    const programs = p.values('-e');
    let ops = p.operands;
    if (p.has('-f', '-E', '-i')) b.problem(`${name} runs a program file the gate cannot see`);
    else if (!programs.length) { const first = ops[0]; if (first) programs.push(first); ops = ops.slice(1); }
    for (const prog of programs) {
      if (prog.dynamic) { b.problem(`${name}: the program is computed at run time`); continue; }
      const f = scanAwk(prog.value);
      for (const e of f.exec) b.effect('exec-hidden', `the ${name} program uses ${e}`);
      for (const w of f.writes) {
        if (!w.dynamic && /^\/dev\/(stdout|stderr)$/.test(w.value)) continue;
        b.path(w, 'write', `${name} print >`);
      }
      for (const r of f.reads) b.path(r, 'read', `${name} getline <`);
      if (f.argv) b.problem(`the ${name} program changes ARGV/ARGC, so which files it reads is decided at run time`);
    }
    for (const o of ops) {
      if (!o.dynamic && /^[A-Za-z_][A-Za-z0-9_]*=/.test(o.value)) continue; // var=value assignment operand
      b.read(o);
    }
    return b.use;
  },
};

// ---- find ----------------------------------------------------------------------------------

const FIND_VALUED = new Set(['-name', '-iname', '-path', '-ipath', '-wholename', '-iwholename', '-regex', '-iregex', '-lname', '-ilname', '-type', '-xtype', '-size', '-mtime', '-mmin', '-atime', '-amin', '-ctime', '-cmin', '-perm', '-user', '-group', '-uid', '-gid', '-links', '-inum', '-maxdepth', '-mindepth', '-fstype', '-regextype', '-used', '-printf', '-context']);
const FIND_PATH_VALUED = new Set(['-newer', '-anewer', '-cnewer', '-samefile']);
const FIND_FLAGS = new Set(['-empty', '-executable', '-readable', '-writable', '-nouser', '-nogroup', '-prune', '-print', '-print0', '-ls', '-quit', '-true', '-false', '-depth', '-d', '-xdev', '-mount', '-daystart', '-follow', '-noleaf', '-ignore_readdir_race', '-noignore_readdir_race', '-not', '!', '(', ')', '-a', '-and', '-o', '-or', ',', '-exec', '-nowarn', '-warn', '-help', '--help', '-version', '--version']);
const FIND_WRITES = new Set(['-fprint', '-fprint0', '-fls']);

const find: CommandSpec = {
  names: ['find'],
  use(args, name) {
    const b = new UseBuilder(name);
    let i = 0;
    while (i < args.length && !args[i]!.dynamic && ['-H', '-L', '-P'].includes(args[i]!.value)) i++;
    if (args[i]?.value === '-D' || args[i]?.value === '-O') i += 2;
    const roots: ShellWord[] = [];
    for (; i < args.length && (args[i]!.dynamic || !/^[-(!),]/.test(args[i]!.value)); i++) roots.push(args[i]!);
    const exprStart = i;
    for (const r of roots.length ? roots : [literalWord('.')]) b.read(r);
    for (; i < args.length; i++) {
      const a = args[i]!;
      if (a.dynamic) { b.problem('find: an expression term computed at run time'); continue; }
      const v = a.value;
      if (FIND_FLAGS.has(v)) continue;
      if (FIND_VALUED.has(v) || /^-newer[amBct][amBct]$/.test(v)) { i++; continue; }
      if (FIND_PATH_VALUED.has(v)) { b.read(args[++i]); continue; }
      if (FIND_WRITES.has(v)) { b.write(args[++i]); continue; }
      if (v === '-fprintf') { b.write(args[++i]); i++; continue; }
      if (v === '-delete') {
        // a lone -name (no -o, no -prune) narrows what is deleted to that name under the roots
        // what -delete removes: everything under the roots, or the names every branch of the expression requires
        const names = args.some((x) => !x.dynamic && x.value === '-prune') ? undefined : findNames(args.slice(exprStart));
        const under = (r: ShellWord, n?: string): ShellWord => ({ ...r, dynamic: true, confined: true, pattern: `${r.pattern.replace(/\/+$/, '')}/**${n ? `/${n}` : ''}` });
        const targets = (roots.length ? roots : [literalWord('.')]).map((r) => (r.dynamic ? r : names && names.length > 1 ? { ...under(r), alternatives: names.map((n) => under(r, n)) } : under(r, names?.[0])));
        const cheapTarget = (t: ShellWord) => (t.alternatives ?? [t]).every((x) => cheapDelete(x, true));
        if (!targets.every(cheapTarget)) b.effect('delete', 'find -delete deletes what it finds');
        for (const t of targets) b.path(t, 'delete', 'find -delete');
        continue;
      }
      b.problem(`find: ${v} is not modelled`);
    }
    return b.use;
  },
};

// ---- jq ------------------------------------------------------------------------------------

const JQ = grammar('-r|--raw-output --raw-output0 -j|--join-output -a|--ascii-output -c|--compact-output -n|--null-input -e|--exit-status -s|--slurp -S|--sort-keys -C|--color-output -M|--monochrome-output --tab --indent=any --unbuffered --stream --stream-errors --seq -R|--raw-input -f|--from-file=read -L=any --args --jsonargs -h|--help -V|--version --build-configuration');
const JQ_TWO = new Set(['--arg', '--argjson', '--slurpfile', '--rawfile']);

const jq: CommandSpec = {
  names: ['jq', 'gojq'],
  use(args, name) {
    const b = new UseBuilder(name);
    const rest: ShellWord[] = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (!a.dynamic && JQ_TWO.has(a.value)) {
        if (a.value === '--slurpfile' || a.value === '--rawfile') b.read(args[i + 2]);
        i += 2;
        continue;
      }
      rest.push(a);
    }
    const p = parseArgs(JQ, rest);
    b.options(p);
    const ops = p.has('-f') ? p.operands : p.operands.slice(1);
    if (!p.has('--args', '--jsonargs')) for (const o of ops) b.read(o);
    return b.use;
  },
};

export const TEXT_TOOL_SPECS: CommandSpec[] = [grep, rg, sed, awk, find, jq];
