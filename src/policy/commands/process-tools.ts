/**
 * Specs of the tools that debug, trace or signal processes inside the sandbox: strace/ltrace run
 * a command (judged on its own) and write their log with -o; gdb -batch runs the project's program
 * with a closed list of gdb commands (`run`, `bt`, `info …`; `shell`, `print f()`, `call`, `run > x`
 * are code); attaching to a running process (-p) and pkill/killall are signals, which ask.
 * Also valgrind (runs a command), ldd (runs the binary's loader), lsof and ulimit (queries), the
 * binutils readers (objdump, readelf, nm, size) and clang-format (-i rewrites its operands).
 */
import { grammar, parseArgs } from './argv-parser';
import { simpleSpec, UseBuilder, type CommandSpec, type CommandUse } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';

const HV = '--help --version';

/** strace and ltrace: options, then the command they run and trace. */
function tracer(names: string[], options: string): CommandSpec {
  const g = grammar(`${options} ${HV}`, { stopAtOperand: true, abbrev: false });
  return {
    names,
    use(args, name) {
      const b = new UseBuilder(name);
      const p = parseArgs(g, args);
      b.options(p);
      if (p.has('-p')) b.effect('signal', `${name} -p attaches to a running process`);
      if (p.has('-u')) b.effect('privilege', `${name} -u runs the command as another user`);
      for (const e of p.values('-E')) {
        const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(e.value);
        if (e.dynamic || !m) { b.problem(`${name} -E ${e.value || '(computed)'}: not a NAME=VALUE the gate can read`); continue; }
        b.env(m[1]!, literalWord(m[2]!));
      }
      if (p.operands.length) b.inner(p.operands);
      else if (!p.has('-p')) b.problem(`${name} without a command`);
      return b.use;
    },
  };
}

/** gdb commands that only run, inspect or stop the program (no arguments to `run`: gdb starts it through a shell). */
const SAFE_GDB = /^(r|run|start|c|continue|n|next|s|step|finish|bt|backtrace( full)?|where|thread apply all (bt|backtrace)( full)?|info (registers|threads|frame|locals|args|sharedlibrary|signals|breakpoints|all-registers)|list|frame \d+|up|down|quit|q|kill|set (pagination|confirm|print pretty|width|height|logging redirect) \w+|(b|break|tbreak) [\w.:]+|disassemble|p(rint)? [\w.$[\]*&>-]+|x\/\w+ [\w.$&*+-]+)$/;

const GDB = grammar(`-batch -q|-quiet|-silent -nx|-n -nh --args -ex|-eval-command=any -iex|-init-eval-command=any -x|-command=read -ix|-init-command=read -p|-pid=any -c|-core=read -tty=any --cd=any -d|-directory=read -s|-symbols=read -e|-exec=read -se=read ${HV}`, { singleDashLong: true, stopAtOperand: true, abbrev: false });

function gdbUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const p = parseArgs(GDB, args);
  b.options(p);
  if (!p.has('-batch')) b.effect('interactive', `${name} without -batch waits for debugger commands`);
  if (p.has('-p')) b.effect('signal', `${name} -p attaches to a running process`);
  if (p.has('--cd', '-tty')) b.problem(`${name} --cd/-tty is not modelled`);
  if (p.has('-x', '-ix')) b.effect('exec-inline', `${name} -x runs a gdb command file, which can run shell commands`);
  for (const c of p.values('-ex', '-iex')) {
    const sh = /^\s*(?:shell|!)\s*(.+)$/s.exec(c.value);
    if (!c.dynamic && sh) { b.inner([literalWord('sh'), literalWord('-c'), literalWord(sh[1]!)]); continue; } // judged as the shell command it is
    if (c.dynamic || !SAFE_GDB.test(c.value.trim())) b.effect('exec-inline', `${name} -ex "${c.value.slice(0, 40)}" is a gdb command that can run code or shell commands`);
  }
  const [program, ...rest] = p.operands;
  if (program) b.inner(p.has('--args') ? [program, ...rest] : [program]);
  if (!p.has('--args') && rest.length) {
    const core = rest[0]!;
    if (core.dynamic || !/^\d+$/.test(core.value)) b.read(core); else b.effect('signal', `${name} attaches to process ${core.value}`);
  }
  return b.use;
}

export const PROCESS_TOOL_SPECS: CommandSpec[] = [
  {
    names: ['valgrind'],
    use(args, name) {
      const b = new UseBuilder(name);
      let i = 0;
      for (; i < args.length && (args[i]!.dynamic || args[i]!.value.startsWith('-')); i++) {
        const a = args[i]!;
        const m = /^--([a-z0-9-]+)(?:=(.*))?$/s.exec(a.value);
        if (a.dynamic || !m) { b.problem(`${name} option ${a.value || '(computed)'} is not modelled`); continue; }
        if (/^(log|xml)-file$/.test(m[1]!) && m[2]) b.write(literalWord(m[2]));
        else if (/^(suppressions|default-suppressions)$/.test(m[1]!) && m[2]) b.read(literalWord(m[2]));
        else if (/^(tool|leak-check|show-leak-kinds|track-origins|error-exitcode|errors-for-leak-kinds|num-callers|trace-children|child-silent-after-fork|quiet|verbose|gen-suppressions|show-reachable|undef-value-errors|read-var-info|time-stamp|max-stackframe|main-stacksize|xml|leak-resolution|expensive-definedness-checks|fair-sched|vgdb)$/.test(m[1]!) || a.value === '-q' || a.value === '-v') continue;
        else b.problem(`${name} option ${a.value} is not modelled`);
      }
      if (i < args.length) b.inner(args.slice(i)); else b.problem(`${name} without a command`);
      return b.use;
    },
  },
  simpleSpec('ldd', `-v|--verbose -u|--unused -d|--data-relocs -r|--function-relocs ${HV}`, (p, b) => { for (const o of p.operands) b.path(o, 'exec', 'ldd runs the loader of'); b.project(); }),
  simpleSpec(['objdump', 'readelf', 'nm', 'size'], '-a -A -b=any -C -d -D -e -f -g -h -H -i -j=any -l -n -p -r -R -s -S -t -T -u -v -V -W -x -z --all --all-headers --demangle?any --disassemble?any --disassemble-all --dynamic --file-headers --headers --section-headers --syms --symbols --wide --line-numbers --source --section=any --full-contents --reloc --dynamic-reloc --debugging --extern-only --defined-only --undefined-only --size-sort --print-size --numeric-sort --no-sort --format=any --radix=any --help --version -M=any --disassembler-options=any --start-address=any --stop-address=any --no-show-raw-insn --segments --program-headers --notes --relocs --dyn-syms --version-info --arch-specific --string-dump=any --hex-dump=any --debug-dump?any', 'read*', { abbrev: false }),
  simpleSpec('lsof', '-i?any -n -P -p=any -u=any -c=any -t -a -l -w +D=read +d=read -F?any -s?any', 'read*', { abbrev: false }),
  simpleSpec('ulimit', '-a -H -S -b -c -d -e -f -i -k -l -m -n -p -q -r -s -t -u -v -x -P -R -T', 'any*', { abbrev: false }),
  simpleSpec('clang-format', '-i --dry-run -n --Werror --style=any --fallback-style=any --assume-filename=any --lines=any --offset=any --length=any --sort-includes --verbose --version --help --files=read --dump-config -output-replacements-xml', (p, b) => {
    for (const o of p.operands) b.path(o, p.has('-i') ? 'write' : 'read', 'clang-format');
  }, { abbrev: false }),
  tracer(['strace'], '-f -ff -c -C -w -T -t -tt -ttt -r -y -yy -v -x -xx -q -qq -k -i -n -Z -z -D -s=any -e=any -o=write -p=any -P=read -u=any -E=any -S=any -a=any -X=any -I=any -b=any -O=any --seccomp-bpf -A --output-separately'),
  tracer(['ltrace'], '-f -c -C -T -t -tt -ttt -r -i -S -b -w=any -s=any -e=any -l=read -o=write -p=any -u=any -n=any -A=any -D=any -F=read -L -x=any'),
  { names: ['gdb'], use: gdbUse },
  simpleSpec(['pkill', 'killall'], '-f|--full -x|--exact -i|--ignore-case -u|--euid=any -U|--uid=any -g|--pgroup=any -G|--group=any -P|--parent=any -n|--newest -o|--oldest -e|--echo -c|--count -q|--quiet -v|--verbose -w|--wait -I|--interactive -s|--signal=any -l|--list -r|--regexp -y|--younger-than=any -O|--older-than=any -t|--terminal=any', 'any*', {
    abbrev: false, numeric: true,
    effects: [['signal', 'pkill/killall signal every process whose name matches']],
  }),
];
