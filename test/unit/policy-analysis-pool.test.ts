/**
 * The static analyser off the event loop (analysis-pool.ts), with real worker threads: inputs built to
 * be expensive cost a thread, never the caller — a call past its time is `ask` (its thread replaced),
 * one past its heap is `ask`, threads that cannot start make every call `ask`, and meanwhile another
 * run's calls and loop keep going. Facts, not durations: what finished first, what was answered.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { RunEventBody } from '../../src/domain/events';
import { runAgentLoop, type AgentLoopInput } from '../../src/run/agent-loop';
import { AnalysisPool } from '../../src/policy/analysis-pool';
import { loadPolicies } from '../../src/policy/load-policy';
import { PolicyGate } from '../../src/policy/policy-gate';
import { FakeSandbox, ScriptedModel, answers, callsTools, recordEvents, toolCall } from '../support/fake-ports';

// real threads on a shared 2-core host: starting one and exhausting a heap take seconds, not a fixed time
jest.setTimeout(90_000);

const policies = loadPolicies('policies');
const bash = (command: string) => ({ tool: 'bash', args: { command } });
const NO_APPROVALS = { request: () => Promise.reject(new Error('no approvals in this test')) };

/** Inputs built to be expensive for a shell analyser; each must get an answer. */
const HOSTILE: Record<string, string> = {
  // a glob of 100 `**/` segments: matching it against the protected paths backtracks for minutes in-process
  globstarChain: `cat ${'**/'.repeat(100)}.env`,
  // 60 functions, each calling the next with its arguments doubled / tripled (the latter exhausts a 128 MB heap in-process)
  functionFanout: `${Array.from({ length: 60 }, (_, i) => `f${i}(){ f${i + 1} "$@" "$@"; }`).join('; ')}; f0 a`,
  functionTriple: `${Array.from({ length: 60 }, (_, i) => `f${i}(){ f${i + 1} "$@" "$@" "$@"; }`).join('; ')}; f0 a`,
  braceProduct: `echo ${'{a,b}'.repeat(30)}`,
  braceRanges: 'echo {1..100000000}{1..100000000}',
  nestedSubstitutions: `echo ${'$('.repeat(150)}x${')'.repeat(150)}`,
  longPipeline: Array.from({ length: 600 }, () => 'cat').join(' | '),
  manyHeredocs: Array.from({ length: 300 }, (_, i) => `cat <<E${i}\n$(echo ${i})\nE${i}`).join('\n'),
  questionGlob: `cat ${'?'.repeat(3000)}*.env*`,
  classGlobs: `cat ${'[!a]*'.repeat(100)}.git/config`,
  wideBraceWords: `echo ${Array.from({ length: 14 }, () => `{${'a'.repeat(100)},b}`.repeat(13)).join(' ')}`,
  nestedBashC: `bash -c ${JSON.stringify(`bash -c ${JSON.stringify(`bash -c ${JSON.stringify(`echo ${'{a,b}'.repeat(16)}`)}`)}`)}`,
  paramDefaults: `echo ${'${x:-'.repeat(300)}y${'}'.repeat(300)}`,
  arithmetic: `echo $((${'1+'.repeat(5000)}1))`,
};

describe('AnalysisPool', () => {
  const pools: AnalysisPool[] = [];
  const start = async (o: Partial<Parameters<typeof AnalysisPool.start>[0]> = {}) => {
    const p = await AnalysisPool.start({ policies, threads: 2, timeoutMs: 1500, heapMb: 96, ...o });
    pools.push(p);
    return p;
  };
  afterAll(async () => { await Promise.all(pools.map((p) => p.close())); });

  it('answers every hostile input (a decision, or ask when it could not finish) and still answers ordinary calls after', async () => {
    const pool = await start();
    const answers = await Promise.all(Object.entries(HOSTILE).map(async ([name, command]) => [name, await pool.analyze('default', bash(command))] as const));
    for (const [name, r] of answers) {
      expect([name, ['allow', 'ask', 'deny'].includes(r.decision)]).toEqual([name, true]);
      if (r.rule?.startsWith('gate:')) expect([name, r.decision]).toEqual([name, 'ask']);
    }
    expect(answers.find(([n]) => n === 'globstarChain')![1]).toMatchObject({ decision: 'ask', rule: 'gate:analysis-timeout', reason: expect.stringMatching(/could not finish analysing this call within 1500 ms/) });
    expect(pool.stats().timeouts).toBeGreaterThanOrEqual(1);
    await expect(pool.analyze('default', bash('pytest -q'))).resolves.toMatchObject({ decision: 'allow' });
    await expect(pool.analyze('default', bash('rm -rf .git'))).resolves.toMatchObject({ decision: 'deny' });
    expect(pool.stats()).toMatchObject({ threads: 2, busy: 0, queued: 0 });
  }, 60_000);

  it('a thread that runs out of heap is replaced and its call asks', async () => {
    // (the same input aborts a whole Node process with a 128 MB heap when analysed in-process)
    const pool = await start({ threads: 1, heapMb: 48, timeoutMs: 60_000 });
    await expect(pool.analyze('default', bash(HOSTILE.functionTriple!))).resolves.toMatchObject({ decision: 'ask', rule: 'gate:analysis-memory', reason: expect.stringMatching(/ran out of memory/) });
    expect(pool.stats()).toMatchObject({ outOfMemory: 1, replaced: 1 });
    await expect(pool.analyze('default', bash('ls -la'))).resolves.toMatchObject({ decision: 'allow' });
  });

  it('threads that cannot start make every call ask, never hang', async () => {
    const pool = await start({ threads: 1, heapMb: 4 });
    const r = await Promise.all([pool.analyze('default', bash('ls')), pool.analyze('default', bash('pytest -q'))]);
    for (const x of r) expect(x).toMatchObject({ decision: 'ask', rule: expect.stringMatching(/^gate:analysis-(unavailable|memory|crashed)$/) });
    await expect(pool.analyze('default', bash('ls'))).resolves.toMatchObject({ decision: 'ask', rule: 'gate:analysis-unavailable' });
  });

  it('past its queue bound a call asks at once; close rejects what still waits', async () => {
    const pool = await start({ threads: 1, maxQueued: 2, timeoutMs: 60_000 });
    const slow = pool.analyze('default', bash(HOSTILE.globstarChain!)); // holds the only thread
    const waiting = [pool.analyze('default', bash('ls')), pool.analyze('default', bash('ls'))];
    await expect(pool.analyze('default', bash('ls'))).resolves.toMatchObject({ decision: 'ask', rule: 'gate:analysis-busy' });
    const rejected = Promise.allSettled([slow, ...waiting]);
    await pool.close();
    const settled = await rejected;
    expect(settled.map((s) => s.status)).toEqual(['rejected', 'rejected', 'rejected']);
    await expect(pool.analyze('default', bash('ls'))).rejects.toThrow(/closed/);
  });

  it('another run keeps working, its event loop free, while one call is analysed for as long as the limit allows', async () => {
    // the hostile call runs for minutes unbounded; here until its 8 s limit — the other run needs well under that
    const pool = await start({ threads: 2, timeoutMs: 8_000 });
    const gate = new PolicyGate({ policies, analyzer: pool, approvals: NO_APPROVALS });
    const input = (runId: string): AgentLoopInput => ({
      runId, task: 'work on the project', policy: 'default', approvals: false,
      budgets: { llmCalls: 40, toolCalls: 40, tokens: 1_000_000, wallTimeS: 600, costUsd: 10 }, execTimeoutMs: 30_000, maxOutputBytes: 65_536,
    });
    const run = (runId: string, commands: string[], events: { emit: (e: RunEventBody) => void }) => runAgentLoop({
      model: new ScriptedModel([...commands.map((c, i) => callsTools([toolCall(`${runId}-${i}`, 'bash', { command: c })])), answers('done')]),
      sandbox: new FakeSandbox(), gate, emit: events.emit, clock: Date.now, prices: { inputPerMtok: 0, outputPerMtok: 0 },
    }, input(runId));

    const hostileRun = recordEvents();
    const ordinaryRun = recordEvents();
    const lag = monitorEventLoopDelay({ resolution: 10 });
    lag.enable();
    const a = run('run_hostile', [HOSTILE.globstarChain!], hostileRun);
    const ordinary = Array.from({ length: 25 }, (_, i) => (i % 2 ? 'pytest -q tests/test_x.py' : `grep -rn TODO src | head -${i + 1}`));
    const b = await run('run_ordinary', ordinary, ordinaryRun);
    lag.disable();
    // the other run finished all its calls while the hostile call was still being analysed
    expect(b.outcome).toBe('succeeded');
    expect(ordinaryRun.ofType('policy.decision').filter((e) => e.verdict.decision === 'allow')).toHaveLength(25);
    expect(hostileRun.ofType('policy.decision')).toHaveLength(0);
    const ra = await a;
    expect(ra.outcome).toBe('succeeded');
    const [decision] = hostileRun.ofType('policy.decision');
    expect(decision!.verdict).toMatchObject({ decision: 'deny', static: { decision: 'ask', rule: 'gate:analysis-timeout' }, reason: expect.stringMatching(/unattended/) });
    // recorded for the report, not asserted: a duration is not a fact this test can rely on
    process.stderr.write(`event-loop delay while a call was analysed for 8 s: p99 ${(lag.percentile(99) / 1e6).toFixed(1)} ms, max ${(lag.max / 1e6).toFixed(1)} ms\n`);
  }, 60_000);
});
