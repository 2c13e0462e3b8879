/** Done checks: each `check:` command runs as `bash -c` in the sandbox; failures become a message for the model. */
import { CancelledError } from '../../src/domain/errors';
import { CHECK_OUTPUT_CHARS, describeFailedChecks, runDoneChecks } from '../../src/run/done-checks';
import { FakeSandbox } from '../support/fake-ports';

const OPTS = { timeoutMs: 60_000, maxOutputBytes: 64_000 };

describe('runDoneChecks', () => {
  it('runs every check as bash -c with the timeout and output cap, in order, even after a failure', async () => {
    const sandbox = new FakeSandbox({
      exec: ([, , cmd]) =>
        cmd === 'npm test'
          ? { exitCode: 1, stdout: 'FAIL src/sum.test.js\n', stderr: 'npm ERR! Test failed.\n', durationMs: 812 }
          : { exitCode: 0, stdout: 'ok\n', durationMs: 5 },
    });
    const results = await runDoneChecks(sandbox, ['npm test', 'test -f out.txt'], OPTS);
    expect(sandbox.execs.map((e) => [e.argv, e.timeoutMs, e.maxOutputBytes])).toEqual([
      [['bash', '-c', 'npm test'], 60_000, 64_000],
      [['bash', '-c', 'test -f out.txt'], 60_000, 64_000],
    ]);
    expect(results).toEqual([
      { command: 'npm test', ok: false, exitCode: 1, summary: 'exit 1 in 812 ms', output: 'FAIL src/sum.test.js\nnpm ERR! Test failed.' },
      { command: 'test -f out.txt', ok: true, exitCode: 0, summary: 'exit 0 in 5 ms', output: 'ok' },
    ]);
  });

  it('a timeout fails the check even with exit 0; an OOM kill and a missing exit code fail it', async () => {
    const answers = [
      { exitCode: 0, timedOut: true },
      { exitCode: null, oomKilled: true, durationMs: 40 },
      { exitCode: null, durationMs: 3, truncated: true },
    ];
    let i = 0;
    const sandbox = new FakeSandbox({ exec: () => answers[i++]! });
    const results = await runDoneChecks(sandbox, ['a', 'b', 'c'], { ...OPTS, timeoutMs: 1000 });
    expect(results.map((r) => [r.ok, r.summary])).toEqual([
      [false, 'timed out after 1000 ms'],
      [false, 'killed: out of memory after 40 ms'],
      [false, 'exit none (killed) in 3 ms, output truncated'],
    ]);
  });

  it('keeps only the tail of long output, saying how much was cut', async () => {
    const stdout = `${'x'.repeat(5000)}\nVERDICT: 3 failed`;
    const [r] = await runDoneChecks(new FakeSandbox({ exec: () => ({ exitCode: 1, stdout }) }), ['make test'], OPTS);
    expect(r!.output.length).toBeLessThanOrEqual(CHECK_OUTPUT_CHARS);
    expect(r!.output).toMatch(/^\[… \d+ characters cut …\]\n/);
    expect(r!.output.endsWith('VERDICT: 3 failed')).toBe(true);
    const cut = Number(/(\d+) characters cut/.exec(r!.output)![1]);
    expect(cut + r!.output.length - r!.output.indexOf('\n') - 1).toBe(stdout.length);
  });

  it('no checks: nothing runs', async () => {
    const sandbox = new FakeSandbox();
    expect(await runDoneChecks(sandbox, [], OPTS)).toEqual([]);
    expect(sandbox.calls).toEqual([]);
  });

  it('passes the signal down; a cancel rejects with CancelledError instead of failing the check', async () => {
    const ac = new AbortController();
    const sandbox = new FakeSandbox({ exec: () => 'hang' });
    const p = runDoneChecks(sandbox, ['sleep 100', 'true'], { ...OPTS, signal: ac.signal });
    await Promise.resolve();
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(CancelledError);
    expect(sandbox.execs).toHaveLength(1);
    expect(sandbox.execs[0]!.signal).toBe(ac.signal);
  });
});

describe('describeFailedChecks', () => {
  it('names each failed check with its exit and output, lists the passed ones, and asks to fix and retry', () => {
    const msg = describeFailedChecks([
      { command: 'npm test', ok: false, exitCode: 1, summary: 'exit 1 in 812 ms', output: 'FAIL src/sum.test.js' },
      { command: 'test -f out.txt', ok: true, exitCode: 0, summary: 'exit 0 in 5 ms', output: '' },
      { command: 'grep -q done log', ok: false, exitCode: 1, summary: 'exit 1 in 2 ms', output: '' },
    ]);
    expect(msg).toBe([
      'You said you were done, but 2 of 3 done checks failed:',
      '',
      '- `npm test`: exit 1 in 812 ms',
      '```',
      'FAIL src/sum.test.js',
      '```',
      '',
      '- `grep -q done log`: exit 1 in 2 ms',
      '  (no output)',
      '',
      'Passed: `test -f out.txt`.',
      '',
      'Fix this and say you are done again.',
    ].join('\n'));
  });

  it('fences output that itself contains backticks with a longer fence', () => {
    const msg = describeFailedChecks([{ command: 'x', ok: false, exitCode: 2, summary: 'exit 2 in 1 ms', output: 'see ```code```' }]);
    expect(msg).toContain('````\nsee ```code```\n````');
  });
});
