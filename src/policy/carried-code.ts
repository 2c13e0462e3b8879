/**
 * What a call carries as code — quoted strings, here-docs, inline programs (`python3 -c '…'`), echoed
 * text — read for what the policy denies, because that text may run: `hiddenDenials` (fragments read
 * as shell commands and as paths), `codeEffects` (setuid modes, processes that outlive the call, files
 * it runs from outside the workspace). evaluate-static.ts decides when to read them and passes its own
 * judgement of a shell fragment and of an effect.
 */
import { checkPath, type Verdict } from './path-check';
import type { Policy } from './policy-schema';
import { literalWord } from './shell-words';

/**
 * The literal re-read: when a call asks because something in it is not understood, or when it runs
 * code it carries (`python3 -c '…'`, a here-doc it writes and runs), its literal strings are read as
 * the code they may become (`x='$(rm -rf .git)'; echo "${x@P}"`, `os.system("…")`, `vim -c '!…'`):
 * a fragment the policy would deny, as a command or as a path, makes the call deny. This only ever
 * turns an allow or an ask into a deny.
 *
 * A literal that reads as a program (Python, JavaScript, Ruby, Perl) is not split into shell lines:
 * `pass`, `print`, `import` are its own statements, not commands. Only what it hands to a shell
 * (system/popen/subprocess/exec calls, backticks, `$( )`) is read as shell; its path-like strings are
 * checked as paths.
 */
export function hiddenDenials(policy: Policy, literals: string[], judgeShell: (fragment: string) => Verdict[]): Verdict[] {
  const all = literals.join('\n');
  const accesses: Array<'read' | 'write' | 'delete'> = ['read'];
  if (/rmtree|unlink|rmSync|rmdir|remove|rm_rf|rm -|delete|truncate|unlinkSync|FileUtils\.rm/i.test(all)) accesses.push('delete');
  if (/open\([^)]*['"][wa]|write|writeFile|appendFile|copy|move|rename|symlink|chmod|>\s*['"]?[~/.]/i.test(all)) accesses.push('write');
  const { shell, paths } = fragments(literals);
  for (const frag of paths) {
    const word = literalWord(frag.startsWith('~') ? policy.home + frag.slice(1) : frag);
    const v = accesses.flatMap((acc) => checkPath(policy, word, acc, [policy.workspace], 'a string in the command')).find((x) => x.decision === 'deny');
    if (v) return [{ ...v, reason: `${v.reason} (named in a string the command uses as code)` }];
  }
  for (const frag of shell) {
    const v = judgeShell(frag).find((x) => x.decision === 'deny' && !x.rule.startsWith('shell:') && !x.rule.startsWith('input:'));
    if (v) return [{ ...v, rule: v.rule, reason: `a string in the command is code the policy forbids: ${v.reason}` }];
  }
  return [];
}

/**
 * Effects the code a call carries has that no exit check sees afterwards: a setuid or setgid mode
 * (os.chmod(p, 0o4755), chmodSync, perl's chmod 04755) and a process that outlives the call (fork and
 * setsid, start_new_session, detached children). Judged by the policy's rules for those effects.
 */
const CODE_EFFECTS: Array<{ effect: 'setuid' | 'detach'; re: RegExp; why: string }> = [
  { effect: 'setuid', re: /\b(?:f|l)?chmod(?:Sync)?\b[^;\n]*?(?:\b0o?|\b)[2-7][0-7]{3}\b|S_IS[UG]ID|\bchmod\b[^;\n]*[ugo]*\+[rwx]*s/, why: 'the code it carries sets a setuid or setgid mode' },
  { effect: 'detach', re: /\bos\.fork\s*\(|\bsetsid\b|start_new_session\s*=\s*True|\bdaemon(?:ize)?\s*\(|daemon\s*=\s*True|detached\s*:\s*true|\.unref\s*\(\s*\)|\bnohup\b|\bdisown\b|\bdouble[-_ ]?fork/, why: 'the code it carries starts a process that outlives the call' },
];

/** Calls that run a file as code: a path they are given is judged as a program run from there. */
const RUNS_FILE = /\b(run_path|run_module|exec\s*\(\s*open|execfile|spec_from_file_location|SourceFileLoader|load_source|import_module|__import__|require|import\s*\(|Module\._load|vm\.runIn\w*|dofile|loadfile)\b/;

export function codeEffects(policy: Policy, literals: string[], judgeEffect: (effect: 'setuid' | 'detach', why: string) => Verdict[]): Verdict[] {
  const all = literals.join('\n');
  const out = CODE_EFFECTS.filter((c) => c.re.test(all)).flatMap((c) => judgeEffect(c.effect, c.why));
  if (RUNS_FILE.test(all)) {
    for (const frag of fragments(literals).paths) {
      const word = literalWord(frag.startsWith('~') ? policy.home + frag.slice(1) : frag);
      for (const v of checkPath(policy, word, 'exec', [policy.workspace], 'the code it carries')) {
        if (v.decision !== 'allow') out.push({ ...v, reason: `${v.reason} (a file the code it carries may run)` });
      }
    }
  }
  return out;
}

const MAX_FRAGMENTS = 96;

/** Statements that only a program in another language has (not a shell script). */
const PROGRAM = /(^|\n)[ \t]*(import [\w.]+|from [\w.]+ import |def \w+\(|class \w+[(:]|print\(|if __name__|for \w+ in .*:\s*$|with .*:\s*$|try:\s*$|except\b.*:\s*$|const \w+ ?=|let \w+ ?=|function \w+\(|require\(|console\.log\(|use strict;|my \$\w+|puts )/m;

/** What follows an exec-like call: the command it hands to a shell. */
const EXEC_CALL = /(?:system|popen|exec|execSync|spawnSync|spawn|shell-command|syscmd|esyscmd|\.shell|os\.system|subprocess\.\w+|Popen|check_output)\s*\(?\s*([^)]*)\)?/g;
const QUOTED = /"((?:\\.|[^"\\])*)"|'([^']*)'|`([^`]*)`/g;
const PATHLIKE = /^[~/.][^\s]*$|^[^\s]*\/[^\s]*$/;

/**
 * Fragments of the literals: `shell` — a literal, the quoted strings inside it, what follows a `!`
 * (editors, pagers, dc), the arguments of exec-like calls, `$( )` contents, option values, lines;
 * `paths` — the path-like ones. A program's literal gives only its exec-like arguments, backticks and
 * `$( )` as shell, and its path-like quoted strings as paths.
 */
function fragments(literals: string[]): { shell: string[]; paths: string[] } {
  const shell = new Set<string>();
  const paths = new Set<string>();
  const add = (s: string, asShell = true) => {
    const t = s.trim();
    if (t.length < 2 || t.length > 8_192 || shell.size + paths.size >= MAX_FRAGMENTS) return;
    if (PATHLIKE.test(t)) paths.add(t);
    if (asShell) shell.add(t);
  };
  for (const l of literals) {
    const program = PROGRAM.test(l);
    for (const m of l.matchAll(EXEC_CALL)) {
      add(m[1]!.replace(/^["'[]+|["'\]]+$/g, ''));
      // the strings handed over: a command line, or argv items joined back into one
      const strings = [...m[1]!.matchAll(QUOTED)].map((q) => (q[1] ?? q[2] ?? q[3] ?? '').replace(/\\(.)/g, '$1'));
      for (const q of strings) add(q);
      if (strings.length > 1) add(strings.join(' '));
    }
    for (const m of l.matchAll(/\$\(((?:[^()]|\([^()]*\))*)\)/g)) add(m[1]!);
    if (program) {
      for (const m of l.matchAll(QUOTED)) {
        const q = (m[1] ?? m[2] ?? m[3] ?? '').replace(/\\(.)/g, '$1');
        add(q, m[3] !== undefined);
        // a path inside a longer string ('cat ~/.ssh/id_rsa', f'{HOME}/.aws/credentials')
        for (const t of q.split(/[\s'"=,;:(){}]+/)) if (t !== q && PATHLIKE.test(t)) add(t, false);
      }
      continue;
    }
    add(l);
    for (const m of l.matchAll(QUOTED)) add((m[1] ?? m[2] ?? m[3] ?? '').replace(/\\(.)/g, '$1'));
    for (const m of l.matchAll(/(?:^|[^\w=!])!([^|\n'"]+)/g)) add(m[1]!);
    for (const m of l.matchAll(/^-[-\w]*=(.+)$/gs)) add(m[1]!);
    for (const part of l.split(/\\n|\n|;|\||&&|\//)) add(part);
  }
  return { shell: [...shell], paths: [...paths] };
}
