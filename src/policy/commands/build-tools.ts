/**
 * Specs of build tools: make (the project's Makefile is project code; `--eval`, a makefile from
 * outside and overrides of SHELL/CC/MAKEFLAGS… run hidden code), cmake/ctest, C compilers (`-o`
 * writes; `-wrapper`, `-B`, `-specs=`, `-fplugin=`, `-Wl,-plugin`, `@file` hide programs or
 * arguments), javac/java, maven and gradle (deploy/publish publish; `--init-script` is hidden code).
 */
import { grammar, parseArgs } from './argv-parser';
import { MAX_SCANNED_CODE, simpleSpec, UseBuilder, type CommandSpec } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';

const MAKE_EXEC_VARS = /^(SHELL|MAKESHELL|\.SHELLFLAGS|MAKEFLAGS|MFLAGS|MAKEFILES|MAKE|MAKEOVERRIDES|CC|CXX|CPP|LD|AR|AS|FC|PC|CO|GET|LEX|YACC|TEX|WEAVE|CWEAVE|TANGLE|CTANGLE|RM|M2C|INSTALL|LINK\.\w+|COMPILE\.\w+|PREPROCESS\.\w+|OUTPUT_OPTION|LOADLIBES)$/;

/** Variables of C/C++ flags: the policy's env rules judge their values. */
const MAKE_FLAG_VARS = new Set(['CFLAGS', 'CXXFLAGS', 'CPPFLAGS', 'LDFLAGS', 'CGO_CFLAGS', 'CGO_LDFLAGS']);
/** Compilers by name: a plain name is fine (the env rule `compilers-by-name`), a path is a program run. */
const MAKE_COMPILER_VARS = new Set(['CC', 'CXX', 'CPP', 'FC']);

/** A script or target whose name says it deploys or publishes, or serves until stopped. */
export function scriptNameEffects(b: UseBuilder, tool: string, name: ShellWord): void {
  if (name.dynamic) return;
  if (/(^|[:_.-])(deploy|publish|release|upload|push|ship|distribute|pages)($|[:_.-])/i.test(name.value)) b.effect('network', `${tool} ${name.value}: its name says it deploys or publishes`);
  if (/^(start|dev|serve|server|watch|preview|storybook)($|[:_-])/i.test(name.value)) b.effect('never-ends', `${tool} ${name.value}: its name says it serves or watches until stopped`);
}

const make = simpleSpec(['make', 'gmake'], '-C|--directory=dir -f|--file|--makefile=exec -j|--jobs?any -k|--keep-going -n|--just-print|--dry-run|--recon -s|--silent|--quiet -B|--always-make -e|--environment-overrides -i|--ignore-errors -I|--include-dir=read -l|--load-average|--max-load?any -o|--old-file|--assume-old=any -W|--what-if|--new-file|--assume-new=any -p|--print-data-base -q|--question -r|--no-builtin-rules -R|--no-builtin-variables -S|--no-keep-going|--stop -t|--touch -v|--version -w|--print-directory --no-print-directory --warn-undefined-variables --trace -O|--output-sync?any -d --debug?any --eval=exec -h|--help -L|--check-symlink-times --shuffle?any', (p, b) => {
  for (const o of p.operands) {
    // a command-line variable (make's own parser: NAME, then =, :=, ::=, :::=, ?=, += or != with optional blanks)
    const m = /^([^\s=:!?+#]+)\s*(:::=|::=|:=|\?=|\+=|!=|=)(.*)$/s.exec(o.value);
    if (m) {
      const [, name, op] = m;
      if (o.dynamic && !new RegExp(`^[^=]*${op!.replace(/[?+]/g, '\\$&')}`).test(o.prefix)) { b.problem(`make: the variable ${name} gets a value computed at run time`); continue; }
      if (op === '!=') { b.effect('exec-hidden', `make ${name} != … runs a shell command while make reads its arguments`); continue; }
      const value = o.dynamic ? { ...o, value: o.value.slice(o.value.indexOf(op!) + op!.length), prefix: '', pattern: '**' } : literalWord(m[3]!);
      b.env(name!, value); // judged by the policy's env rules (CC, CFLAGS, MAKEFLAGS, SHELL, …)
      if (MAKE_FLAG_VARS.has(name!)) continue; // flags: the env rules decide on their values
      if (MAKE_EXEC_VARS.test(name!) && !MAKE_COMPILER_VARS.has(name!)) { b.effect('exec-hidden', `make ${name}=… overrides a program or the flags make runs with`); continue; }
      // any other variable is substituted into the Makefile's recipes, which the gate does not read: only plain values
      if (value.dynamic || !/^[\w.,:+@%=/-]*$/.test(value.value)) b.problem(`make ${name}=…: a value with blanks or shell characters is substituted into recipes the gate cannot see`);
      else if (value.value.includes('/')) b.path(value, 'exec', `make ${name}= may name a program the recipes run`);
      continue;
    }
    if (o.dynamic) b.problem('make: a target computed at run time');
    else scriptNameEffects(b, 'make', o);
  }
}, { project: true, cwd: { options: ['-C'], what: '-C runs the Makefile in' } });

/** `cmake -E TOOL ARGS`: the command-mode tools, each as the command it is. */
const CMAKE_E: Record<string, string[]> = {
  rm: ['rm'], remove: ['rm', '-f'], remove_directory: ['rm', '-rf'], copy: ['cp'], copy_directory: ['cp', '-r'], copy_if_different: ['cp'], rename: ['mv'],
  make_directory: ['mkdir', '-p'], touch: ['touch'], touch_nocreate: ['touch', '-c'], create_symlink: ['ln', '-s'], create_hardlink: ['ln'], echo: ['echo'], echo_append: ['echo', '-n'],
  cat: ['cat'], sha256sum: ['sha256sum'], md5sum: ['md5sum'], sha1sum: ['sha1sum'], env: ['env'], tar: ['tar'], true: ['true'], false: ['false'], sleep: ['sleep'], capabilities: ['true'],
};

const cmake = simpleSpec('cmake', '-S=read -B=write -G=any -T=any -A=any -D=any -U=any -C=exec -P=exec -E --build=read --target|-t=any -j|--parallel?any --config=any --clean-first --install=read --prefix=write --component=any --strip --preset=any --workflow --list-presets?any --fresh -L -LA -LH -LAH -N -Wdev -Wno-dev -Werror=any -Wno-error=any --warn-uninitialized --log-level=any --log-context --debug-output --trace --trace-expand --trace-source=any --toolchain=any --install-prefix=write --graphviz=write --system-information?write -h|--help --version -v|--verbose', (p, b) => {
  if (p.has('-E')) return;
  for (const d of p.values('-D')) {
    const key = d.value.split('=')[0]!.replace(/:\w+$/, ''); // -DNAME:TYPE=VALUE
    const value = d.value.slice(d.value.indexOf('=') + 1);
    if (!d.dynamic && d.value.includes('=') && cmakeProgramKnown(key, value, b)) continue;
    if (d.dynamic || /(COMPILER|LAUNCHER|LINKER|TOOLCHAIN|_SHELL|PROJECT_INCLUDE|CODE_INCLUDE|CMAKE_MAKE_PROGRAM|WRAPPER)/i.test(key)) b.effect('exec-hidden', `cmake -D${key || '(computed)'} names a program the build runs`);
  }
  for (const t of p.values('--toolchain')) b.path(t, 'exec', 'cmake --toolchain runs the toolchain file');
  for (const o of p.operands) b.read(o);
}, { project: true, abbrev: false });

/** A compiler by plain name, a known compiler cache as launcher, a toolchain file (code: checked like a script it runs). */
const PLAIN_COMPILER = /^(gcc|g\+\+|cc|c\+\+|clang|clang\+\+|cpp|gfortran|musl-gcc|tcc|clang-cl)(-\d+)?$/;
const LAUNCHERS = /^(ccache|sccache|distcc|icecc|buildcache)$/;
function cmakeProgramKnown(key: string, value: string, b: UseBuilder): boolean {
  if (/^CMAKE_(C|CXX|Fortran|OBJC|OBJCXX|ASM|CUDA|HIP)_COMPILER$/.test(key)) return PLAIN_COMPILER.test(value) || /^\/usr\/bin\/[\w+.-]+$/.test(value) && PLAIN_COMPILER.test(value.slice(9));
  if (/^CMAKE_(C|CXX|Fortran|OBJC|OBJCXX|CUDA|HIP)_COMPILER_LAUNCHER$/.test(key)) return LAUNCHERS.test(value) || /^\/usr\/bin\/[\w.-]+$/.test(value) && LAUNCHERS.test(value.slice(9));
  if (key === 'CMAKE_TOOLCHAIN_FILE' && value !== '' && !/[;$`\s]/.test(value)) { b.path(literalWord(value), 'exec', 'cmake -DCMAKE_TOOLCHAIN_FILE runs the toolchain file'); return true; }
  return false;
}

const ctest = simpleSpec('ctest', '--output-on-failure -V|--verbose -VV|--extra-verbose -j|--parallel?any -R|--tests-regex=any -E|--exclude-regex=any -L|--label-regex=any -LE|--label-exclude=any --test-dir=read --preset=any -C|--build-config=any --timeout=any --rerun-failed --stop-on-failure -N|--show-only?any -Q|--quiet -O|--output-log=write --no-tests=any --repeat=any --schedule-random -h|--help --version', 'none', { project: true, abbrev: false });

const CC_VALUED = new Set(['-o', '-I', '-L', '-l', '-D', '-U', '-isystem', '-iquote', '-idirafter', '-iprefix', '-iwithprefix', '-include', '-imacros', '-MF', '-MT', '-MQ', '-x', '-Xlinker', '-Xassembler', '-Xpreprocessor', '-Xclang', '-B', '-wrapper', '-specs', '-T', '-u', '-e', '-z', '-arch', '-target', '--target', '-isysroot', '--sysroot', '-aux-info', '-dumpdir', '-dumpbase']);
const CC_HIDDEN = /^(-wrapper|-B|-specs|--specs|-fplugin|-fplugin-arg-|-Xclang|-load|-fpass-plugin|-iprefix|-iwithprefix|-no-integrated-as)/;

/** C and C++ compilers: gcc-style options are parsed one by one (most are single-dash words). */
const cc: CommandSpec = {
  names: ['gcc', 'cc', 'g++', 'c++', 'clang', 'clang++', 'cpp', ...['11', '12', '13', '14', '15', '16', '17', '18', '19'].flatMap((v) => [`gcc-${v}`, `g++-${v}`, `clang-${v}`, `clang++-${v}`])],
  use(args, name) {
    const b = new UseBuilder(name);
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (a.dynamic && !a.prefix.startsWith('-')) { b.read(a); continue; }
      const v = a.dynamic ? a.prefix : a.value;
      if (v.startsWith('@')) { b.problem(`${name} ${v}: a response file adds arguments the gate cannot see`); continue; }
      if (!v.startsWith('-') || v === '-') { b.read(a); continue; }
      if (CC_HIDDEN.test(v)) { b.effect('exec-hidden', `${name} ${v.split('=')[0]} runs or loads another program`); if (CC_VALUED.has(v)) i++; continue; }
      if (/^-Wl,/.test(v)) {
        if (a.dynamic) { b.problem(`${name} ${v}…: linker options computed at run time`); continue; }
        const items = v.slice(4).split(',');
        if (items.some((x) => /^-?-(plugin|wrap|dynamic-linker|fuse-ld|plugin-opt)/.test(x))) { b.effect('exec-hidden', `${name} ${v} passes a plugin or wrapper to the linker`); continue; }
        items.forEach((x, k) => {
          const m = /^-?-(Map|o|output|dependency-file|version-script|dynamic-list|T|script|trace-symbol|retain-symbols-file)=(.+)$/.exec(x);
          if (m) b.path(literalWord(m[2]!), /^(version-script|dynamic-list|T|script|retain-symbols-file)$/.test(m[1]!) ? 'read' : 'write', `${name} -Wl,${m[1]}`);
          else if (/^-?-(Map|o|output|T|script)$/.test(x) && items[k + 1]) b.path(literalWord(items[k + 1]!), x.includes('Map') || x === '-o' || x.includes('output') ? 'write' : 'read', `${name} -Wl,${x}`);
        });
        continue;
      }
      if (/^-(Wp|Wa),/.test(v) || ['-Xpreprocessor', '-Xassembler', '-Xlinker'].includes(v)) {
        // options handed to the preprocessor, assembler or linker: only a few known ones; a plugin or wrapper anywhere denies
        const stage = v.startsWith('-Wp') || v === '-Xpreprocessor' ? 'preprocessor' : v.startsWith('-Wa') || v === '-Xassembler' ? 'assembler' : 'linker';
        const valueWord = v.startsWith('-X') ? args[++i] : a;
        if (!valueWord || valueWord.dynamic) { b.problem(`${name} ${v}: options computed at run time`); continue; }
        const items = v.startsWith('-X') ? [valueWord.value] : v.slice(4).split(',');
        if (items.some((x) => /plugin|wrap|dynamic-linker|fuse-ld|specs|^-B|^-?-load/.test(x))) { b.effect('exec-hidden', `${name} ${v} ${items.join(',').slice(0, 60)} passes a plugin or wrapper to the ${stage}`); continue; }
        const safe = stage === 'preprocessor' ? /^-([DUI]\S*|W[a-z-]*|C|P|undef|d[DMN]|nostdinc)$/ : stage === 'assembler' ? /^-?-(noexecstack|64|32|g|gdwarf[\w-]*|march=[\w.+-]+|mrelax[\w-]*|EL|EB|fatal-warnings|warn|no-warn)$/ : /^-?-(as-needed|no-as-needed|gc-sections|no-undefined|export-dynamic|whole-archive|no-whole-archive|start-group|end-group|rpath(=[\w./$-]+)?|O[0-3]|s|x|E|z|relro|now|noexecstack|build-id(=\w+)?|soname(=[\w.+-]+)?|strip-all|strip-debug|[\w./$-]+\.so[\w.]*)$|^[\w.$/-]+$/;
        const bad = items.find((x) => !safe.test(x));
        if (bad !== undefined) b.problem(`${name} ${v}: the ${stage} option "${bad.slice(0, 40)}" is not modelled`);
        continue;
      }
      if (v === '-o') { b.write(args[++i]); continue; }
      if (v.startsWith('-o')) { b.write({ ...a, value: v.slice(2), pattern: a.dynamic ? '**' : v.slice(2), prefix: v.slice(2) }); continue; }
      if (v === '-MF' || v === '-aux-info') { b.write(args[++i]); continue; }
      if (v === '-include' || v === '-imacros') { b.read(args[++i]); continue; }
      if (CC_VALUED.has(v)) { i++; continue; }
      if (/^-(I|L|l|D|U|O|g|f|m|W|std=|x|M|iquote|isystem|idirafter|march|mtune|pedantic|ansi|pthread|shared|static|pie|no-pie|fPIC|fpic|rdynamic|nostdlib|nostartfiles|nodefaultlibs|nostdinc|save-temps|time|print-|dump|v$|w$|s$|c$|S$|E$|P$|C$|H$|Q$|p$|pg$|r$|-version|-help|-coverage|-std|Xlinker|Wa,|Wp,|Wl,|-param|-sysroot=|isysroot)/.test(v)) continue;
      b.problem(`${name} option ${v} is not modelled`);
    }
    return b.use;
  },
};

const javac = simpleSpec('javac', '-d=write -cp|-classpath|--class-path=any -sourcepath|--source-path=any -s=write -h=write --release=any -source|--source=any -target|--target=any -encoding=any -g?any -nowarn -verbose -deprecation -Werror -parameters -processor=any -processorpath|--processor-path=any -proc=any -implicit=any -p|--module-path=any --module=any -m=any --add-modules=any -version --version -help --help', 'read*', {
  singleDashLong: true, abbrev: false,
});

const java: CommandSpec = {
  names: ['java'],
  use(args, name) {
    const b = new UseBuilder(name);
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      const v = a.value;
      if (a.dynamic) { b.problem(`${name}: an argument computed at run time`); break; }
      if (v === '-jar') { b.path(args[i + 1], 'exec', 'java -jar').project(); break; }
      if (v === '-cp' || v === '-classpath' || v === '--class-path' || v === '-p' || v === '--module-path' || v === '--add-modules') { i++; continue; }
      if (/^-(javaagent|agentpath|agentlib|Xbootclasspath|XX:OnOutOfMemoryError|XX:OnError)/.test(v)) { b.effect('exec-hidden', `${name} ${v.split(/[:=]/)[0]} loads an agent or runs a program`); continue; }
      if (/^-(D|X|ea|da|esa|dsa|server|client|verbose|showversion|version|-version|help|-help|enableassertions|disableassertions|XX:)/.test(v)) continue;
      if (v.startsWith('-')) { b.problem(`${name} option ${v} is not modelled`); continue; }
      if (v.endsWith('.java')) b.path(a, 'exec', 'java runs a source file');
      b.project();
      break;
    }
    return b.use;
  },
};

function jvmBuild(names: string[], publishGoals: RegExp): CommandSpec {
  return {
    names,
    use(args: ShellWord[], name: string) {
      const b = new UseBuilder(name).project();
      const p = parseArgs(grammar('-q|--quiet -e|--errors -X|--debug -B|--batch-mode -o|--offline -U|--update-snapshots -T|--threads=any -D=any -P=any -pl|--projects=any -am|--also-make -amd|--also-make-dependents -f|--file=read -s|--settings=read -gs|--global-settings=read -I|--init-script=exec -p|--project-dir=dir --stacktrace -S|--full-stacktrace -i|--info --warn -w --parallel --no-daemon --daemon --build-cache --no-build-cache --scan!upload --console=any --continuous|-t!never-ends -x|--exclude-task=any --rerun-tasks --refresh-dependencies --dry-run|-m -v|--version -h|--help -N|--non-recursive -ff|--fail-fast -fae|--fail-at-end -fn|--fail-never -nsu|--no-snapshot-updates -llr -ntp|--no-transfer-progress --configuration-cache --no-configuration-cache -c|--settings-file=read -b|--build-file=read', { abbrev: false }), args);
      b.options(p);
      for (const goal of p.operands) {
        if (goal.dynamic) { b.problem(`${name}: a goal computed at run time`); continue; }
        if (publishGoals.test(goal.value)) b.effect('publish', `${name} ${goal.value} publishes artifacts`);
        if (/^exec:|^(run|bootRun|appRun)$/.test(goal.value)) b.effect('never-ends', `${name} ${goal.value} may start a long-running program`);
      }
      if (!p.has('-o')) b.effect('network', `${name} downloads dependencies and plugins`);
      return b.use;
    },
  };
}

const cmakeAll: CommandSpec = {
  names: ['cmake'],
  use(args, name) {
    const e = args.findIndex((a) => a.value === '-E');
    if (e < 0) return cmake.use(args, name);
    const b = new UseBuilder(name);
    const tool = args[e + 1];
    const as = tool && !tool.dynamic ? CMAKE_E[tool.value] : undefined;
    if (!as) return b.problem(`cmake -E ${tool?.value ?? ''} is not modelled`).use;
    return b.inner([...as.map((x) => literalWord(x)), ...args.slice(e + 2)]).use;
  },
};

/**
 * perl, ruby, php: a script is project code; -e/-r code is inline; -i edits the files in place. A
 * switch cluster counts as inline code only through switches that take no value (`-ne`, `-pie`), so
 * `-MFile::Temp;unlink…` is a module argument (code, not a name: not seen), never a readable -e.
 */
function scripting(names: string[], inline: RegExp): CommandSpec {
  return {
    names,
    use(args, name) {
      const b = new UseBuilder(name);
      let inl = false;
      let inPlace = false;
      let i = 0;
      for (; i < args.length; i++) {
        const a = args[i]!;
        if (a.dynamic) { b.problem(`${name}: an argument computed at run time`); break; }
        if (!a.value.startsWith('-') || a.value === '-' || a.value === '--') break;
        if (inline.test(a.value)) { inl = true; if (/^-[a-zA-Z]*[eEr]$/.test(a.value)) i++; continue; }
        if (name === 'php' && a.value === '-S') { b.effect('server', 'php -S starts a web server'); b.effect('never-ends', 'a server runs until stopped'); i++; continue; }
        if (name === 'php' && a.value === '-t') { i++; continue; }
        if (/^-[a-zA-Z]*i/.test(a.value)) inPlace = true;
        // -M/-m (perl) and -r (ruby) load a module: its name or a path, never code; -I adds a directory modules load from
        const opt = /^-([IMmr])(.*)$/s.exec(a.value);
        if (opt && name !== 'php') {
          const value = opt[2] ? literalWord(opt[2]) : args[++i];
          if (!value || value.dynamic) { b.problem(`${name} -${opt[1]}: a value computed at run time`); continue; }
          if (opt[1] === 'I') b.path(value, 'exec', `${name} -I loads modules from`);
          else if (name === 'ruby' && /[/.]/.test(value.value)) b.path(value, 'exec', `${name} -r loads`);
          else if (!/^-?[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z0-9_]+)*(=[A-Za-z0-9_:,]*)?$/.test(value.value)) b.effect('exec-inline', `${name} -${opt[1]}${value.value.slice(0, 40)} is code, not a module name`);
          continue;
        }
        if (/^-[a-zA-Z]*d/.test(a.value) && name !== 'php' || name === 'php' && /^-d/.test(a.value)) { b.problem(`${name} ${a.value}: a debugger or setting that can load code is not modelled`); if (name === 'php' && a.value === '-d') i++; continue; }
      }
      const rest = args.slice(i);
      if (inl) {
        // the code follows -e/-E/-r; readable when every word up to the files is literal and short
        // editing files in place by a pattern or a computed list (`perl -i -ne '' src/*.rs`) can empty them all: not waved through
        const seen = args.slice(0, i).every((a) => !a.dynamic && a.value.length <= MAX_SCANNED_CODE) && !(inPlace && rest.some((f) => f.dynamic || f.glob));
        b.effect(seen ? 'exec-code-arg' : 'exec-inline', `${name} runs code given on the command line`);
        for (const f of rest) b.path(f, inPlace ? 'write' : 'read');
        return b.use;
      }
      const script = rest[0];
      if (!script || script.value === '-') return b.effect('exec-stdin', `${name} reads a program from standard input`).use;
      b.path(script, 'exec', `${name} runs a script`).project();
      return b.use;
    },
  };
}

/** GNU parallel: `parallel CMD ::: ARGS` runs CMD once per argument. */
/**
 * GNU parallel: its own options (a grammar: anything it does not list is not understood), then the
 * command and the `:::` values it is given. Remote hosts (-S/--sshlogin, --slf, --onall, files sent
 * or fetched) are the network through ssh; --ssh, --rpl and the compress programs name programs it
 * runs; --bg/--semaphore leave jobs running after the call.
 */
const PARALLEL = grammar([
  '-j|-P|--jobs|--max-procs=any -k|--keep-order -n|--max-args=any -N=any -L|-l|--max-lines=any -m -X --xargs -q|--quote -0|--null -d|--delimiter=any -E=any',
  '-I=any --colsep|-C=any --header=any -a|--arg-file|--arg-sep|--arg-file-sep=any --joblog=write --results|--res|--output-as-files|--outputasfiles|--files --tmpdir=write',
  '--progress --eta --bar --halt|--halt-on-error=any --timeout=any --retries=any --delay=any --memfree=any --load=any --nice=any --tag --tagstring=any --line-buffer|--lb',
  '-u|--ungroup --group --pipe|--spreadstdin --block|--block-size=any --recstart=any --recend=any --regexp --round-robin|--round --dry-run -v|--verbose',
  '--no-notice --will-cite --citation --plain --shuf --resume --resume-failed --retry-failed --xapply|--link --shellquote --plus --cat --fifo --tty --version -h|--help --id=any --fg',
  '-S|--sshlogin|--sshlogins=any!network --slf|--sshloginfile=read!network --onall!network --nonall!network --filter-hosts!network --transferfile|--tf=any!network --transfer!network --trc=any!network --return=any!network',
  '--basefile|--bf=read!network --cleanup --workdir|--wd=any --env=any --record-env --controlmaster|-M --sshdelay=any --ssh=exec --rpl=exec --compress --compress-program=exec',
  '--decompress-program=exec --limit=exec --termseq=any --bg!detach --semaphore|--sem!detach --semaphorename|--semaphoretimeout|--st=any',
].join(' '), { stopAtOperand: true });

const parallel: CommandSpec = {
  names: ['parallel'],
  use(args, name) {
    const b = new UseBuilder(name);
    const sep = args.findIndex((a) => !a.dynamic && (a.value === ':::' || a.value === '::::' || a.value === ':::+' || a.value === '::::+'));
    const p = parseArgs(PARALLEL, sep < 0 ? args : args.slice(0, sep));
    b.options(p);
    const cmd = p.operands;
    if (!cmd.length) return b.problem('parallel without a command').use;
    const values = sep < 0 ? [] : args.slice(sep + 1).filter((a) => !/^:{3,4}\+?$/.test(a.value));
    if (args.slice(sep + 1).some((a) => a.value.startsWith('::::'))) b.problem('parallel :::: reads its arguments from files');
    // parallel hands the command line to a shell, each {} {.} {/} … replaced by a (quoted) value
    const slot: ShellWord = values.length ? { ...values[0]!, dynamic: true, alternatives: values } : { ...literalWord(''), dynamic: true, pattern: '**' };
    if (cmd.some((a) => a.dynamic)) return b.problem('parallel: the command is computed at run time').use;
    const REPL = /\{(?:\d*[./#%]*|\/\/|\/\.|\.\.)?\}/g;
    const text = cmd.map((a) => a.value).join(' ');
    const withSlot = REPL.test(text) ? text : `${text} {}`;
    const quote = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;
    // each value it is given, put in as parallel quotes it (up to 8); otherwise the values are not known
    if (values.length && values.length <= 8 && values.every((v) => !v.dynamic)) {
      for (const v of values) b.inner([literalWord('bash'), literalWord('-c'), literalWord(withSlot.replace(REPL, quote(v.value)))]);
    } else b.inner([literalWord('bash'), literalWord('-c'), literalWord(withSlot.replace(REPL, '"$1"')), literalWord('parallel'), slot]);
    return b.use;
  },
};

export const BUILD_TOOL_SPECS: CommandSpec[] = [
  make, cmakeAll, scripting(['perl'], /^-[aclnpsStTuUvwWXi]*[eE]/), scripting(['ruby'], /^-[acdlnpsSvwWy]*e/), scripting(['php'], /^-[a-zA-Z]*r/), parallel, ctest, cc, javac, java,
  jvmBuild(['mvn', 'mvnw', './mvnw'], /^(deploy|release:|gpg:|site-deploy|nexus-staging:|wagon:)/),
  jvmBuild(['gradle', 'gradlew', './gradlew'], /^(publish|upload|bintray|artifactory|closeAndRelease)/i),
];
