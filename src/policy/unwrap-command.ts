/**
 * Unwraps commands that run other commands, so the inner command is checked on its own:
 * env, command, builtin, exec, nice, nohup, setsid, stdbuf, timeout, time, ionice, xargs, and the
 * `-exec/-execdir/-ok/-okdir` actions of find. `sh|bash|dash|zsh|ksh -c STRING` hands STRING back
 * as a script to parse. An option a wrapper has that is not understood is a deny finding.
 * sudo/doas/su are not unwrapped: the policy denies them by name.
 */
import type { ShellWord } from './shell-words';
import type { ShellAssign, ShellFinding } from './shell-analysis';

export interface UnwrappedCommand { argv: ShellWord[]; assigns: ShellAssign[]; wrappers: string[]; dynamicTail: boolean }
export interface UnwrapResult {
  commands: UnwrappedCommand[];
  scripts: Array<{ word: ShellWord; via: string; wrappers: string[]; assigns: ShellAssign[] }>;
  findings: ShellFinding[];
}

const BIN_DIRS = /^\/(usr\/)?(local\/)?s?bin\//;
const SHELLS = new Set(['sh', 'bash', 'dash', 'zsh', 'ksh', 'ash', 'busybox-sh']);
const DYN: ShellWord = { value: '', dynamic: true, glob: false };

/** `/usr/bin/ls` → `ls`; other paths are kept as written. */
export function commandName(word: ShellWord): string {
  return BIN_DIRS.test(word.value) ? word.value.replace(BIN_DIRS, '') : word.value;
}

/** Wrapper option specs: flags without a value, and flags that take the next argument as value. */
const WRAPPERS: Record<string, { flags: string[]; valued: string[]; positionals?: number }> = {
  command: { flags: ['-p'], valued: [] },
  builtin: { flags: [], valued: [] },
  exec: { flags: ['-c', '-l'], valued: ['-a'] },
  nice: { flags: [], valued: ['-n', '--adjustment'] },
  nohup: { flags: [], valued: [] },
  setsid: { flags: ['-c', '-f', '-w', '--ctty', '--fork', '--wait'], valued: [] },
  stdbuf: { flags: [], valued: ['-i', '-o', '-e', '--input', '--output', '--error'] },
  timeout: { flags: ['--preserve-status', '--foreground', '-v', '--verbose'], valued: ['-s', '-k', '--signal', '--kill-after'], positionals: 1 },
  time: { flags: ['-p', '-v', '--portability', '--verbose', '-a', '--append', '-q', '--quiet'], valued: ['-f', '--format'] },
  ionice: { flags: ['-t'], valued: ['-c', '-n', '--class', '--classdata'] },
};
const XARGS_FLAGS = ['-0', '--null', '-r', '--no-run-if-empty', '-t', '--verbose', '-x', '--exit', '--open-tty', '-o'];
const XARGS_VALUED = ['-I', '-L', '-n', '-P', '-s', '-d', '-E', '-a', '--arg-file', '--delimiter', '--max-args', '--max-procs', '--max-lines', '--max-chars', '--eof', '--replace'];

/** Splits leading options per spec; returns the index of the first non-option argument, or an error. */
function skipOptions(argv: ShellWord[], start: number, flags: string[], valued: string[]): { index: number; error?: string } {
  let i = start;
  while (i < argv.length) {
    const a = argv[i]!;
    if (a.dynamic) return { index: i, error: 'an option computed at run time' };
    const v = a.value;
    if (v === '--') return { index: i + 1 };
    if (!v.startsWith('-') || v === '-') return { index: i };
    if (flags.includes(v)) { i++; continue; }
    const eq = v.indexOf('=');
    if (v.startsWith('--') && eq > 0 && valued.includes(v.slice(0, eq))) { i++; continue; }
    if (valued.includes(v)) { i += 2; continue; }
    const short = valued.find((f) => f.length === 2 && v.startsWith(f) && v.length > 2);
    if (short) { i++; continue; }
    if (/^-\d+$/.test(v) && valued.includes('-n')) { i++; continue; } // nice -5
    return { index: i, error: `option ${v}` };
  }
  return { index: i };
}

export function unwrapCommand(argv0: ShellWord[]): UnwrapResult {
  const res: UnwrapResult = { commands: [], scripts: [], findings: [] };
  let argv = argv0;
  const wrappers: string[] = [];
  const assigns: ShellAssign[] = [];
  let dynamicTail = false;
  for (let guard = 0; guard < 12 && argv.length > 0; guard++) {
    const name = commandName(argv[0]!);
    const deny = (why: string) => res.findings.push({ decision: 'deny', rule: `shell:wrapper-${name}`, reason: `${name}: ${why} is not understood` });
    if (name === 'env') {
      let i = 1;
      for (; i < argv.length; i++) {
        const a = argv[i]!;
        if (a.dynamic) { deny('an argument computed at run time'); return res; }
        if (['-i', '--ignore-environment', '-0', '--null', '-'].includes(a.value)) continue;
        if (a.value === '-u' || a.value === '--unset') { i++; continue; }
        if (a.value.startsWith('--unset=') || /^-u./.test(a.value)) continue;
        if (a.value === '--') { i++; break; }
        const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(a.value);
        if (m) { assigns.push({ name: m[1]!, value: { value: m[2]!, dynamic: false, glob: false } }); continue; }
        if (a.value.startsWith('-')) { deny(`option ${a.value}`); return res; }
        break;
      }
      for (; i < argv.length; i++) {
        const m = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/s.exec(argv[i]!.value);
        if (!m || argv[i]!.dynamic) break;
        assigns.push({ name: m[1]!, value: { value: m[2]!, dynamic: false, glob: false } });
      }
      if (i >= argv.length) break; // plain `env`: prints the environment
      wrappers.push('env');
      argv = argv.slice(i);
      continue;
    }
    if (name === 'command' && argv.slice(1).some((a) => a.value === '-v' || a.value === '-V')) break;
    const spec = WRAPPERS[name];
    if (spec) {
      const r = skipOptions(argv, 1, spec.flags, spec.valued);
      if (r.error) { deny(r.error); return res; }
      const start = r.index + (spec.positionals ?? 0);
      if (start >= argv.length) break; // e.g. bare `exec` or `time`
      wrappers.push(name);
      argv = argv.slice(start);
      continue;
    }
    if (name === 'xargs') {
      const r = skipOptions(argv, 1, XARGS_FLAGS, XARGS_VALUED);
      if (r.error) { deny(r.error); return res; }
      const iIdx = argv.findIndex((a, k) => k < r.index && (a.value === '-I' || a.value === '--replace' || a.value.startsWith('-I')));
      const repl = iIdx >= 0 ? (argv[iIdx]!.value === '-I' || argv[iIdx]!.value === '--replace' ? argv[iIdx + 1]?.value : argv[iIdx]!.value.slice(2)) : undefined;
      wrappers.push('xargs');
      dynamicTail = true;
      argv = r.index >= argv.length ? [{ value: 'echo', dynamic: false, glob: false }] : argv.slice(r.index);
      if (repl) argv = argv.map((a) => (a.value.includes(repl) ? DYN : a));
      continue;
    }
    if (SHELLS.has(name)) {
      let i = 1;
      let script: ShellWord | undefined;
      let hasC = false;
      for (; i < argv.length; i++) {
        const a = argv[i]!;
        if (a.dynamic) { deny('an argument computed at run time'); return res; }
        if (a.value === '-c') { hasC = true; continue; }
        if (['--rcfile', '--init-file', '-O', '+O', '-o', '+o'].includes(a.value)) {
          if (a.value === '--rcfile' || a.value === '--init-file') { deny(`option ${a.value}`); return res; }
          i++;
          continue;
        }
        if (a.value === '--') { i++; break; }
        if (/^[-+][A-Za-z]+$/.test(a.value)) {
          if (a.value.includes('c') && a.value.startsWith('-')) hasC = true;
          if (/^-.*[is]/.test(a.value)) { deny(`option ${a.value} (interactive or stdin shell)`); return res; }
          continue;
        }
        if (a.value.startsWith('--')) { if (['--norc', '--noprofile', '--posix', '--login', '--restricted'].includes(a.value)) continue; deny(`option ${a.value}`); return res; }
        break;
      }
      if (hasC) {
        script = argv[i];
        if (!script) { deny('-c without a command string'); return res; }
        res.scripts.push({ word: script, via: `${name} -c`, wrappers: [...wrappers], assigns: [...assigns] });
        return res;
      }
      if (i >= argv.length) {
        res.findings.push({ decision: 'deny', rule: 'shell:stdin-shell', reason: `${name} would run commands read from standard input` });
        return res;
      }
      break; // `bash script.sh`: the policy decides about running a script file
    }
    if (name === 'find') {
      const findArgv: ShellWord[] = [];
      for (let i = 0; i < argv.length; i++) {
        const a = argv[i]!;
        findArgv.push(a);
        if (['-exec', '-execdir', '-ok', '-okdir'].includes(a.value)) {
          const end = argv.findIndex((x, k) => k > i && (x.value === ';' || x.value === '+'));
          if (end < 0) { deny(`${a.value} without a terminating ; or +`); return res; }
          // `{}` alone is a file under the (checked) search roots; `{}` inside a word (sh -c 'cat {}') is code injection.
          const inner = argv.slice(i + 1, end).map((x) => (x.value === '{}' && !x.dynamic ? x : x.value.includes('{}') ? DYN : x));
          const sub = unwrapCommand(inner);
          res.findings.push(...sub.findings);
          res.scripts.push(...sub.scripts.map((x) => ({ ...x, wrappers: [...wrappers, `find ${a.value}`, ...x.wrappers] })));
          for (const c of sub.commands) res.commands.push({ ...c, wrappers: [...wrappers, `find ${a.value}`, ...c.wrappers] });
          findArgv.push(...argv.slice(i + 1, end + 1).map((x) => ({ ...x, value: x.value.startsWith('-') ? '\u0000' + x.value : x.value })));
          i = end;
        }
      }
      argv = findArgv;
      break;
    }
    break;
  }
  res.commands.push({ argv, assigns, wrappers, dynamicTail });
  return res;
}
