/**
 * Specs of shell builtins and small informational commands: echo/printf (data), test/[ (a `-v` on
 * an array element evaluates its subscript), cd and shell state, read/printf -v (the variables they
 * set are checked by the policy's environment rules), source/. (runs a file in this shell), kill
 * (a job of this shell is fine; a process id is `signal`), sleep, date, uname and friends.
 */
import { grammar, parseArgs } from './argv-parser';
import { simpleSpec, UseBuilder, type CommandSpec } from './command-spec';
import { literalWord } from '../shell-words';

const HV = '--help --version';

/** Arguments are data whatever they look like (echo prints `-x` as it is). */
const data = (names: string[]): CommandSpec => ({ names, use: (_args, name) => new UseBuilder(name).use });

const printf: CommandSpec = {
  names: ['printf'],
  use(args, name) {
    const b = new UseBuilder(name);
    if (args[0]?.value === '-v') {
      const v = args[1];
      if (!v || v.dynamic || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.value)) b.problem('printf -v into a computed name or an array element (its subscript is evaluated as arithmetic)');
    }
    return b.use;
  },
};

const test: CommandSpec = {
  names: ['test', '['],
  use(args, name) {
    const b = new UseBuilder(name);
    for (let i = 0; i < args.length; i++) {
      if (!args[i]!.dynamic && (args[i]!.value === '-v' || args[i]!.value === '-R')) {
        const v = args[i + 1];
        if (v && (v.dynamic || v.value.includes('['))) b.problem(`${name} -v on a computed name or an array element (its subscript is evaluated as arithmetic)`);
      }
    }
    return b.use;
  },
};

const READ = grammar('-a=any -d=any -e -E -i=any -n=any -N=any -p=any -r -s -t=any -u=any', { abbrev: false });
const read: CommandSpec = {
  names: ['read'],
  use(args, name) {
    const b = new UseBuilder(name);
    const p = parseArgs(READ, args);
    b.options(p);
    for (const v of [...p.operands, ...p.values('-a')]) {
      if (v.dynamic || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(v.value)) b.problem('read into a computed name or an array element (its subscript is evaluated as arithmetic)');
    }
    return b.use;
  },
};

const kill: CommandSpec = {
  names: ['kill'],
  use(args, name) {
    const b = new UseBuilder(name);
    const p = parseArgs(grammar('-s=any -n=any -l -L --list?any --signal=any --table -q=any --timeout=any', { abbrev: false, numeric: true }), args.map((a) => (!a.dynamic && /^-[A-Z]+[0-9]*$/.test(a.value) ? { ...a, value: '-9' } : a)));
    b.options(p);
    if (p.has('-l', '-L', '--list', '--table')) return b.use;
    for (const t of p.operands) {
      if (!t.dynamic && /^%(\d+|[+-]|%)?$/.test(t.value)) continue; // a job of this shell
      b.effect('signal', `kill ${t.dynamic ? '(a computed process id)' : t.value} signals a process`);
    }
    return b.use;
  },
};

const source: CommandSpec = {
  names: ['source', '.'],
  use(args, name) {
    const b = new UseBuilder(name);
    const [file] = args;
    if (!file) return b.problem(`${name} without a file`).use;
    b.path(file, 'exec', `${name} runs the file in this shell`).project();
    if (file.dynamic || !/(^|\/)bin\/activate$/.test(file.value)) b.problem(`${name} ${file.value || '(computed)'} loads a file into this shell: its functions, aliases and variables change what later commands run`);
    return b.use;
  },
};

/** `trap HANDLER SIG…`: the handler is shell code, analysed like `sh -c HANDLER`; listing and resetting are data. */
const trap: CommandSpec = {
  names: ['trap'],
  use(args, name) {
    const b = new UseBuilder(name);
    let ops = args;
    if (ops[0] && !ops[0].dynamic && /^-[lp]+$/.test(ops[0].value)) return b.use;
    if (ops[0] && !ops[0].dynamic && ops[0].value === '--') ops = ops.slice(1);
    const [handler, ...signals] = ops;
    if (!handler) return b.use;
    if (signals.some((s) => s.dynamic)) b.problem(`${name}: a signal computed at run time`);
    if (handler.dynamic) return b.problem(`${name}: the handler is computed at run time`).use;
    if (signals.length === 0 || handler.value === '' || handler.value === '-') return b.use; // resets the signal
    return b.inner([literalWord('sh'), literalWord('-c'), handler]).use;
  },
};

/**
 * `bash FILE ARGS` (what unwrap-command.ts leaves of a shell after -c and standard-input scripts):
 * the file is a script run, like `./FILE`. Options left here are ones unwrapping did not model.
 */
const shellScript: CommandSpec = {
  names: ['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'mksh'],
  use(args, name) {
    const b = new UseBuilder(name);
    const script = args[0];
    if (!script || script.dynamic || script.value.startsWith('-') || script.value.startsWith('+')) return b.problem(`${name}: options or input the analyser did not model`).use;
    return b.path(script, 'exec', `${name} runs a script`).project().use;
  },
};

/** `hash`: lists, forgets (-r, -d) or looks up (-t, NAME) remembered program paths; `-p PATH NAME` binds a name to any program. */
const hash = simpleSpec('hash', '-r -d -t -l -p=any', 'any*', { abbrev: false, check: (p, b) => { if (p.has('-p')) b.effect('shell-state', 'hash -p makes a command name run another program'); } });

const cd = simpleSpec(['cd', 'pushd'], '-L -P -e -@', 'any*', { abbrev: false });

const shellcheck = simpleSpec('shellcheck', '-a|--check-sourced -C|--color?any -i|--include=any -e|--exclude=any --extended-analysis=any -f|--format=any --list-optional -o|--enable=any -P|--source-path=any -s|--shell=any -S|--severity=any -V|--version -W|--wiki-link-count=any -x|--external-sources --norc --rcfile=read -h|--help', 'read*');

export const SHELL_BUILTIN_SPECS: CommandSpec[] = [
  data(['echo', 'true', 'false', ':', 'pwd', 'dirs', 'wait', 'return', 'exit', 'break', 'continue', 'shift', 'times', 'jobs', 'popd', 'umask', 'unset', 'getopts', 'caller', 'logout']),
  printf, test, read, kill, source, cd, shellcheck,
  simpleSpec('set', '-e -u -x -v -o=any -f -C -n -h -b -m -B -H -P -T -E -a -k', 'any*', { abbrev: false, stopAtOperand: true, check: (p, b) => {
    for (const o of p.values('-o', '+o')) if (o.dynamic || !['errexit', 'nounset', 'pipefail', 'xtrace', 'verbose', 'noglob', 'noclobber', 'posix', 'errtrace', 'functrace', 'hashall', 'noexec', 'monitor', 'notify', 'braceexpand', 'histexpand', 'emacs', 'vi', 'allexport', 'keyword', 'onecmd', 'physical', 'privileged', 'ignoreeof', 'interactive-comments', 'history'].includes(o.value)) b.problem(`set -o ${o.value || '(computed)'} is not modelled`);
  } }),
  // glob options (dotglob, nocaseglob, extglob, …) are not here: the analyser judges globs under them (shell:glob-options)
  simpleSpec('shopt', '-s -u -q -p -o', 'any*', { abbrev: false, check: (p, b) => {
    const risky = new Set(['expand_aliases', 'extdebug', 'sourcepath', 'execfail', 'xpg_echo', 'login_shell', 'restricted_shell', 'cdable_vars', 'promptvars', 'varredir_close', 'assoc_expand_once', 'localvar_inherit']);
    for (const o of p.operands) if (o.dynamic || (p.has('-s') && risky.has(o.value))) b.effect('shell-state', `shopt -s ${o.value || '(computed)'} changes how commands are found or run`);
  } }),
  trap, hash, shellScript,
  simpleSpec('sleep', HV, 'any*'),
  simpleSpec('date', `-d|--date=any -f|--file=read -I|--iso-8601?any -R|--rfc-email --rfc-3339=any -r|--reference=read -u|--utc|--universal --debug ${HV}`, 'any*', { check: (p, b) => {
    for (const o of p.operands) if (!o.dynamic && !o.value.startsWith('+')) b.effect('privilege', 'date with an operand sets the clock');
  } }),
  simpleSpec('uname', `-a|--all -s|--kernel-name -n|--nodename -r|--kernel-release -v|--kernel-version -m|--machine -p|--processor -i|--hardware-platform -o|--operating-system ${HV}`, 'none'),
  simpleSpec('hostname', `-f|--fqdn|--long -s|--short -i|--ip-address -I|--all-ip-addresses -d|--domain -A|--all-fqdns -y|--yp|--nis ${HV}`, 'none'),
  simpleSpec(['whoami', 'tty', 'nproc', 'logname', 'arch', 'users'], `--all --ignore=any -s|--silent|--quiet ${HV}`, 'none'),
  simpleSpec('id', `-a -Z|--context -g|--group -G|--groups -n|--name -r|--real -u|--user -z|--zero ${HV}`, 'any*'),
  simpleSpec('groups', HV, 'any*'),
  simpleSpec(['env', 'printenv'], `-0|--null ${HV}`, 'any*'),
  simpleSpec('which', '-a -s', 'any*', { abbrev: false }),
  simpleSpec('type', '-a -f -p -P -t', 'any*', { abbrev: false }),
  simpleSpec('command', '-p -v -V', 'any*', { abbrev: false, stopAtOperand: true }),
  simpleSpec('seq', `-f|--format=any -s|--separator=any -w|--equal-width ${HV}`, 'any*', { numeric: true }),
  simpleSpec('yes', HV, 'any*', { effects: [['never-ends', 'yes prints forever']] }),
  simpleSpec('locale', `-a|--all-locales -m|--charmaps -c|--category-name -k|--keyword-name -v|--verbose ${HV}`, 'any*'),
  simpleSpec('cal', '-1 -3 -m -y -j -s -w -n=any --months=any', 'any*'),
  simpleSpec(['df', 'free', 'uptime', 'ps', 'lsb_release'], `-a -h -H -k -m -g -l -T -i -t=any -x=any --total -s -e -f -F -u=any -p=any -o=any --sort=any -w -b -c -d -r --si --human --wide --mega --giga --kilo --bytes --output?any ${HV}`, 'any*'),
];
