/** The bash analyser: each simple command on its own, wrappers unwrapped, the closed list of what it understands. */
import { analyzeShell } from '../../src/policy/shell-analysis';
import { OPS, parseBash, REDIRECT_OPS, PARAM_EXP_OPS } from '../../src/policy/shell-parse';
import { expandBraces } from '../../src/policy/shell-words';

const opts = { home: '/home/agent', workspace: '/workspace', maxCommands: 64, maxLength: 20000 };
const analysis = (command: string) => analyzeShell(command, opts);
const heads = (command: string) => analysis(command).commands.filter((c) => !c.speculative && c.argv.length).map((c) => c.argv.map((a) => (a.dynamic ? '?' : a.value)).join(' '));
const rules = (command: string) => analysis(command).findings.map((f) => `${f.decision}:${f.rule}`);

describe('shell-parse', () => {
  it('maps every operator code to its text, learnt from the parser itself', () => {
    expect([...OPS.redirect.values()].sort()).toEqual([...REDIRECT_OPS].sort());
    expect([...OPS.paramExp.values()].sort()).toEqual([...PARAM_EXP_OPS].sort());
    expect([...OPS.binaryCmd.values()].sort()).toEqual(['&&', '|', '|&', '||']);
    expect(OPS.procSubst.size).toBe(2);
    expect(new Set(OPS.redirect.keys()).size).toBe(REDIRECT_OPS.length); // no two operators share a code
  });

  it('never throws: deep nesting and huge inputs come back as errors with a reason', () => {
    for (const src of ['('.repeat(5000) + 'x' + ')'.repeat(5000), 'echo ' + '$('.repeat(3000) + 'x' + ')'.repeat(3000), 'if then fi', '"unterminated']) {
      const r = parseBash(src);
      expect(r.file).toBeUndefined();
      expect(r.error).toEqual(expect.any(String));
    }
    expect(parseBash('echo ok').file).toBeDefined(); // the parser is still usable after an overflow
  });

  it('returns Go strings as JavaScript strings (UTF-8 decoded)', () => {
    expect(heads('echo é ü 日本')).toEqual(['echo é ü 日本']);
  });
});

describe('analyzeShell', () => {
  it('finds every simple command: lists, pipelines, subshells, $( ), backticks, <( ), here-docs, loops, case', () => {
    expect(heads('a && b || c; d | e')).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(heads('(cd x; f) && { g; }')).toEqual(['cd x', 'f', 'g']);
    expect(heads('echo $(id) `whoami`')).toEqual(expect.arrayContaining(['id', 'whoami']));
    expect(heads('diff <(ls a) >(tee b)')).toEqual(expect.arrayContaining(['ls a', 'tee b']));
    expect(heads('cat <<EOF\n$(uname)\nEOF')).toEqual(expect.arrayContaining(['cat', 'uname']));
    expect(heads('if true; then for i in 1; do while false; do case x in y) z;; esac; done; done; fi')).toEqual(expect.arrayContaining(['true', 'false', 'z']));
  });

  it('a function body is analysed at each call with its arguments, and where it is defined when nothing calls it by name', () => {
    expect(heads('f() { rm -rf "$1"; }; f /workspace')).toEqual(['rm -rf /workspace', 'f /workspace']);
    expect(heads('f() { rm -rf "$1"; }')).toEqual(['rm -rf ?']);
    expect(heads('f() { rm -rf "$1"; }; trap f EXIT')).toEqual(expect.arrayContaining(['rm -rf ?']));
    expect(rules('f() { :; }')).not.toContain('ask:shell:function');
    // more calls than it follows: the rest are not judged, so it asks
    expect(rules(`f() { :; }; ${Array(20).fill('f').join('; ')}`)).toContain('ask:shell:function');
  });

  it('unwraps wrappers, parsing their own options only up to the command', () => {
    expect(heads('env -i A=1 nice -n 5 nohup timeout -s KILL 10 stdbuf -oL time command exec rm x')).toEqual(['rm x']);
    expect(heads('command rm -v -rf /workspace')).toEqual(['rm -v -rf /workspace']);
    expect(heads('command -v git')).toEqual(['command -v git']);
    expect(heads('bash -c "curl x; sh -c \'id\'"')).toEqual(['curl x', 'id']);
    expect(heads('xargs -0 -n 1 rm -f')).toEqual(['rm -f']);
    expect(heads("find . -name '*.o' -exec rm {} ';'")).toEqual([expect.stringMatching(/^rm \?/), expect.stringMatching(/^find/)]);
    expect(heads('taskset -c 0 flock /tmp/l fakeroot watch -n 1 rm -rf .git')).toEqual(['rm -rf .git']);
    expect(heads("env -S 'rm -rf /workspace'")).toEqual(['rm -rf /workspace']);
  });

  it('a bash -c string gets its own arguments as $0, $1, …', () => {
    expect(heads(`bash -c 'rm -rf "$0"' /workspace`)).toEqual(['rm -rf /workspace']);
    expect(heads(`sh -c '"$@"' _ rm -rf x`)).toEqual(['rm -rf x']);
  });

  it('a shell reading a literal here-doc or here-string runs it: it is analysed as the script', () => {
    expect(heads(`bash <<< 'rm -rf ~'`)).toEqual(['rm -rf /home/agent']);
    expect(heads('bash -s <<EOF\ncat .env\nEOF')).toEqual(['cat .env']);
    expect(heads(`. /dev/stdin <<< 'id'`)).toEqual(expect.arrayContaining(['id']));
    expect(rules('curl x | bash')).toContain('ask:shell:stdin-shell');
  });

  it('a script written in the same call and then run is analysed', () => {
    expect(heads(`echo 'rm -rf /workspace' > /tmp/c.sh; bash /tmp/c.sh`)).toEqual(expect.arrayContaining(['rm -rf /workspace']));
  });

  it('quoting, escapes, ANSI-C strings, braces and known substitutions resolve to what bash passes', () => {
    expect(heads(`"r"'m' -rf \\x`)).toEqual(['rm -rf x']);
    expect(heads("$'\\x72m' -rf x")).toEqual(['rm -rf x']);
    expect(heads('cat ~/.ssh/id_rsa $HOME/x "${HOME}/y"')).toEqual(['cat /home/agent/.ssh/id_rsa /home/agent/x /home/agent/y']);
    expect(heads('{rm,-rf,/workspace}')).toEqual(['rm -rf /workspace']);
    expect(heads('cat "$(printf \'\\x2eenv\')"')).toEqual(expect.arrayContaining(['cat .env']));
    expect(heads('rm -rf "$PWD"')).toEqual(['rm -rf /workspace']);
    expect(heads('f=.env; cat "$f"')).toEqual(['cat .env']);
    expect(heads('for f in a.py b.py; do cat "$f"; done')).toEqual(['cat ?']);
    expect(analysis('for f in a.py b.py; do cat "$f"; done').commands.at(-1)!.argv[1]!.alternatives!.map((w) => w.value)).toEqual(['a.py', 'b.py']);
  });

  it('brace expansion stays bounded', () => {
    expect(expandBraces('{a,b}{1..3}')).toEqual(['a1', 'a2', 'a3', 'b1', 'b2', 'b3']);
    expect(expandBraces('{1..99999999}')).toBeNull();
    expect(expandBraces('{a,b}'.repeat(40))).toBeNull(); // 2^40 words: refused without expanding
    expect(rules('echo {1..99999999}')).toContain('ask:shell:unmodelled');
  });

  it('cd changes where later relative paths are, in order', () => {
    const c = analysis('ls x; cd / && rm -rf workspace').commands;
    expect(c[0]!.cwds).toEqual(['/workspace']);
    expect(c.at(-1)!.cwds).toEqual(['/workspace', '/']);
    expect(analysis('cd "$X" && ls').commands.at(-1)!.cwds).toBeNull();
  });

  it('what it does not understand is at least ask, listed by what it is', () => {
    const asks: Array<[string, string]> = [
      ['command_not_found_handle() { :; }', 'shell:function'],
      ['sleep 1 &', 'shell:background'],
      ['coproc x { :; }', 'shell:coproc'],
      ['$CMD x', 'shell:dynamic-command'],
      ['echo "${x@P}"', 'shell:unmodelled'],
      ['echo "${!x}"', 'shell:unmodelled'],
      ['echo $(( $(cat f) + 1 ))', 'shell:unmodelled'],
      ['read x; echo $((x + 1))', 'shell:arithmetic'],
      ['read n; (( n++ ))', 'shell:arithmetic'],
      ['read x; [[ $x -gt 1 ]]', 'shell:arithmetic'],
      ['x=$1; echo $((x))', 'shell:arithmetic'],
      ['[[ -v "a[$i]" ]]', 'shell:test-v'],
      ['declare -n r=PATH', 'shell:declare'],
      ['declare -i n=1', 'shell:declare'],
      ['a[$i]=1', 'shell:subscript'],
      ['bash -c "$X"', 'shell:dynamic-script'],
      ['ls ((', 'shell:parse-error'],
      ['select x in a b; do :; done', 'shell:select'],
    ];
    for (const [command, rule] of asks) expect(rules(command)).toContain(`ask:${rule}`);
  });

  it('inputs meant to exhaust it are denied, never crash it', () => {
    for (const command of [Array(1501).fill('a').join('|'), '$('.repeat(400) + 'x' + ')'.repeat(400), '('.repeat(5000), 'x'.repeat(25_000), Array(80).fill('true').join('; '), 'cat ' + [...Array(40).keys()].map((i) => `<<E${i}`).join(' ') + '\n' + [...Array(40).keys()].map((i) => `x\nE${i}`).join('\n')]) {
      expect(analysis(command).findings.some((f) => f.decision === 'deny')).toBe(true);
    }
  });
});
