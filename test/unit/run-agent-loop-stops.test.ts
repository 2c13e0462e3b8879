/** runAgentLoop over fakes of our ports: how a run ends early — budgets, cancellation, broken infrastructure, bugs. */
import { CancelledError, ModelError, SandboxError } from '../../src/domain/errors';
import type { RunEventBody } from '../../src/domain/events';
import type { RunBudgets } from '../../src/domain/run-spec';
import { MAX_BLOCKED_IN_A_ROW, MAX_MALFORMED_IN_A_ROW, runAgentLoop, type AgentLoopInput, type Prices } from '../../src/run/agent-loop';
import {
  FakeGate, FakeSandbox, ScriptedModel, allowVerdict, answers, callsTools, denyVerdict, recordEvents, toolCall, type ModelStep,
} from '../support/fake-ports';

const BUDGETS: RunBudgets = { llmCalls: 10, toolCalls: 20, tokens: 1_000_000, wallTimeS: 60, costUsd: 1 };

function harness(opts: {
  model: ScriptedModel; sandbox?: FakeSandbox; gate?: FakeGate; budgets?: Partial<RunBudgets>; prices?: Prices;
  clock?: () => number; signal?: AbortSignal;
}) {
  const rec = recordEvents();
  const sandbox = opts.sandbox ?? new FakeSandbox();
  const gate = opts.gate ?? new FakeGate();
  const input: AgentLoopInput = {
    runId: 'run_stop01', task: 'keep busy', policy: 'default', approvals: false,
    budgets: { ...BUDGETS, ...opts.budgets }, execTimeoutMs: 10_000, maxOutputBytes: 4096,
    ...(opts.signal ? { signal: opts.signal } : {}),
  };
  const deps = {
    model: opts.model, sandbox, gate, emit: rec.emit, clock: opts.clock ?? (() => 5_000),
    prices: opts.prices ?? { inputPerMtok: 0, outputPerMtok: 0 },
  };
  return { ...rec, sandbox, gate, model: opts.model, run: () => runAgentLoop(deps, input) };
}

const types = (events: RunEventBody[]) => events.map((e) => e.type);
/** A model that never stops asking for `bash`. */
const busyModel = (usage?: { inputTokens: number; outputTokens: number }) =>
  new ScriptedModel((_req, i) => callsTools([toolCall(`b${i + 1}`, 'bash', { command: `echo ${i + 1}` })], usage));

describe('runAgentLoop: budgets', () => {
  it('llmCalls: a model that keeps calling tools is stopped before call limit+1', async () => {
    const h = harness({ model: busyModel(), budgets: { llmCalls: 3 } });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'budget_exhausted', finalAnswer: null, budgetExceeded: 'llmCalls',
      reason: 'budget exhausted: LLM calls (limit 3, used 3)',
      usage: { llmCalls: 3, toolCalls: 3, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 },
    });
    expect(h.model.requests).toHaveLength(3);
    expect(h.sandbox.execs.map((c) => c.argv[2])).toEqual(['echo 1', 'echo 2', 'echo 3']);
    expect(h.events.at(-1)).toEqual({ type: 'budget.exceeded', budget: 'llmCalls', limit: 3, used: 3 });
    expect(h.ofType('budget.exceeded')).toHaveLength(1);
    expect(types(h.events)).not.toContain('run.finished'); // the caller emits it
  });

  it('toolCalls: the call over the limit is neither gated nor run, even in the middle of a turn', async () => {
    const model = new ScriptedModel([
      callsTools([toolCall('t1', 'bash', { command: 'echo 1' }), toolCall('t2', 'bash', { command: 'echo 2' }), toolCall('t3', 'bash', { command: 'echo 3' })]),
      answers('unreachable'),
    ]);
    const h = harness({ model, budgets: { toolCalls: 2 } });

    const result = await h.run();

    expect(result).toMatchObject({
      outcome: 'budget_exhausted', finalAnswer: null, budgetExceeded: 'toolCalls', reason: 'budget exhausted: tool calls (limit 2, used 2)',
      usage: { llmCalls: 1, toolCalls: 2 },
    });
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['t1', 't2']);
    expect(h.sandbox.execs).toHaveLength(2);
    expect(h.model.requests).toHaveLength(1);
    expect(types(h.events)).toEqual([
      'model.response', 'tool.call', 'policy.decision', 'tool.result', 'budget.warning', 'tool.call', 'policy.decision', 'tool.result', 'budget.exceeded',
    ]);
    expect(h.events.find((e) => e.type === 'budget.warning')).toEqual({ type: 'budget.warning', budget: 'toolCalls', limit: 2, used: 2 });
    expect(h.events.at(-1)).toEqual({ type: 'budget.exceeded', budget: 'toolCalls', limit: 2, used: 2 });
  });

  it('toolCalls 0: the first tool call ends the run; a plain answer would still have succeeded', async () => {
    const h = harness({ model: busyModel(), budgets: { toolCalls: 0 } });
    expect(await h.run()).toMatchObject({ outcome: 'budget_exhausted', budgetExceeded: 'toolCalls', usage: { llmCalls: 1, toolCalls: 0 } });
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);

    const ok = harness({ model: new ScriptedModel([answers('nothing to do')]), budgets: { toolCalls: 0 } });
    expect(await ok.run()).toMatchObject({ outcome: 'succeeded', finalAnswer: 'nothing to do' });
  });

  it('costUsd: a turn that goes over the limit has its tool calls dropped', async () => {
    // $1000 per Mtok both ways: 1000 in + 1000 out = $2 for one turn.
    const h = harness({ model: busyModel({ inputTokens: 1000, outputTokens: 1000 }), prices: { inputPerMtok: 1000, outputPerMtok: 1000 } });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'budget_exhausted', finalAnswer: null, budgetExceeded: 'costUsd', reason: 'budget exhausted: cost (USD) (limit 1, used 2.0000)',
      usage: { llmCalls: 1, toolCalls: 0, inputTokens: 1000, outputTokens: 1000, costUsd: 2, wallTimeMs: 0 },
    });
    expect(h.events).toEqual([
      expect.objectContaining({ type: 'model.response', turn: 1, costUsd: 2 }),
      // The turn crossed 80 % and 100 % at once: the warning still comes first, once.
      { type: 'budget.warning', budget: 'costUsd', limit: 1, used: 2 },
      { type: 'budget.exceeded', budget: 'costUsd', limit: 1, used: 2 },
    ]);
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
  });

  it('costUsd: the cost adds up over turns at the given prices', async () => {
    // 100k input tokens at $2/Mtok + 25k output at $8/Mtok = $0.40 a turn; the third turn makes $1.20.
    const h = harness({ model: busyModel({ inputTokens: 100_000, outputTokens: 25_000 }), prices: { inputPerMtok: 2, outputPerMtok: 8 } });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'budget_exhausted', budgetExceeded: 'costUsd', reason: 'budget exhausted: cost (USD) (limit 1, used 1.2000)' });
    expect(result.usage).toEqual({ llmCalls: 3, toolCalls: 2, inputTokens: 300_000, outputTokens: 75_000, costUsd: expect.closeTo(1.2, 10), wallTimeMs: 0 });
    expect(h.ofType('model.response').map((e) => e.costUsd)).toEqual([expect.closeTo(0.4, 10), expect.closeTo(0.4, 10), expect.closeTo(0.4, 10)]);
    expect(h.sandbox.execs).toHaveLength(2);
  });

  describe('wall time, the loop\'s own timer driven by jest fake timers', () => {
    beforeEach(() => jest.useFakeTimers({ now: 1_700_000_000_000 }));
    afterEach(() => jest.useRealTimers());

    it('wallTimeS: a model call that hangs is aborted when the wall time runs out', async () => {
      const model = new ScriptedModel([callsTools([toolCall('w1', 'bash', { command: 'true' })]), { hang: true }]);
      const h = harness({ model, budgets: { wallTimeS: 0.2 }, clock: () => Date.now() });

      const pending = h.run();
      await jest.advanceTimersByTimeAsync(199);
      expect(model.requests[1]!.signal!.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      const result = await pending;

      expect(result).toMatchObject({ outcome: 'timed_out', finalAnswer: null, budgetExceeded: 'wallTimeS', usage: { llmCalls: 1, toolCalls: 1 } });
      expect(result.reason).toBe('budget exhausted: wall time (s) (limit 0.2, used 0.2)');
      expect(result.usage.wallTimeMs).toBe(200);
      expect(model.requests).toHaveLength(2);
      expect(model.requests[1]!.signal!.aborted).toBe(true);
      const exceeded = h.ofType('budget.exceeded');
      expect(exceeded).toEqual([{ type: 'budget.exceeded', budget: 'wallTimeS', limit: 0.2, used: 0.2 }]);
      expect(h.events.at(-1)!.type).toBe('budget.exceeded');
    });

    it('wallTimeS: an exec that hangs is aborted (the sandbox kills it) and no tool.result is invented', async () => {
      const sandbox = new FakeSandbox({ exec: () => 'hang' });
      const h = harness({ model: busyModel(), sandbox, budgets: { wallTimeS: 0.2 }, clock: () => Date.now() });

      const pending = h.run();
      await jest.advanceTimersByTimeAsync(199);
      expect(sandbox.execs[0]!.signal!.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      const result = await pending;

      expect(result).toMatchObject({ outcome: 'timed_out', budgetExceeded: 'wallTimeS', usage: { llmCalls: 1, toolCalls: 1 } });
      expect(sandbox.execs).toHaveLength(1);
      expect(sandbox.execs[0]!.signal!.aborted).toBe(true);
      expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision', 'budget.warning', 'budget.exceeded']);
    });
  });

  describe('with jest fake timers', () => {
    beforeEach(() => jest.useFakeTimers({ now: 1_700_000_000_000 }));
    afterEach(() => jest.useRealTimers());

    it('wallTimeS: the limit as the schema allows it (5 s), measured on the injected clock', async () => {
      const model = new ScriptedModel([{ hang: true }]);
      const h = harness({ model, budgets: { wallTimeS: 5 }, clock: () => Date.now() });

      const pending = h.run();
      await jest.advanceTimersByTimeAsync(4_999);
      expect(model.requests[0]!.signal!.aborted).toBe(false);
      await jest.advanceTimersByTimeAsync(1);
      const result = await pending;

      expect(result).toEqual({
        outcome: 'timed_out', finalAnswer: null, budgetExceeded: 'wallTimeS', reason: 'budget exhausted: wall time (s) (limit 5, used 5.0)',
        usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 5000 },
      });
      expect(model.requests[0]!.signal!.aborted).toBe(true);
      expect(h.events).toEqual([
        { type: 'budget.warning', budget: 'wallTimeS', limit: 5, used: 4 },
        { type: 'budget.exceeded', budget: 'wallTimeS', limit: 5, used: 5 },
      ]);
    });

    it('a run that ends in time clears its wall timer', async () => {
      const h = harness({ model: new ScriptedModel([answers('quick')]), budgets: { wallTimeS: 5 } });
      expect(await h.run()).toMatchObject({ outcome: 'succeeded' });
      expect(jest.getTimerCount()).toBe(0);
    });
  });
});

describe('runAgentLoop: the tokens budget', () => {
  it('a turn that takes input + output tokens past the limit ends the run as budget_exhausted; its tool calls are dropped', async () => {
    // 300 in + 100 out = 400 tokens a turn: 400, 800 (80 %: warning), 1200 (over).
    const h = harness({ model: busyModel({ inputTokens: 300, outputTokens: 100 }), budgets: { tokens: 1000 } });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'budget_exhausted', finalAnswer: null, budgetExceeded: 'tokens', reason: 'budget exhausted: tokens (limit 1000, used 1200)',
      usage: { llmCalls: 3, toolCalls: 2, inputTokens: 900, outputTokens: 300, costUsd: 0, wallTimeMs: 0 },
    });
    expect(h.sandbox.execs.map((c) => c.argv[2])).toEqual(['echo 1', 'echo 2']);
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['b1', 'b2']);
    expect(types(h.events)).toEqual([
      'model.response', 'tool.call', 'policy.decision', 'tool.result',
      'model.response', 'budget.warning', 'tool.call', 'policy.decision', 'tool.result',
      'model.response', 'budget.exceeded',
    ]);
    expect(h.ofType('budget.warning')).toEqual([{ type: 'budget.warning', budget: 'tokens', limit: 1000, used: 800 }]);
    expect(h.ofType('budget.exceeded')).toEqual([{ type: 'budget.exceeded', budget: 'tokens', limit: 1000, used: 1200 }]);
  });

  it('using exactly the limit is not over it: the run goes on and can still succeed', async () => {
    const model = new ScriptedModel([
      callsTools([toolCall('e1', 'bash', { command: 'true' })], { inputTokens: 900, outputTokens: 100 }),
      answers('done within budget'),
    ]);
    const h = harness({ model, budgets: { tokens: 1000 } });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'succeeded', finalAnswer: 'done within budget', reason: 'the model gave its final answer',
      usage: { llmCalls: 2, toolCalls: 1, inputTokens: 900, outputTokens: 100, costUsd: 0, wallTimeMs: 0 },
    });
    expect(types(h.events)).toEqual(['model.response', 'budget.warning', 'tool.call', 'policy.decision', 'tool.result', 'model.response']);
    expect(h.ofType('budget.warning')).toEqual([{ type: 'budget.warning', budget: 'tokens', limit: 1000, used: 1000 }]);
  });

  it('a turn over both the tokens and the cost budget is reported as tokens, with one budget.exceeded', async () => {
    // 1500 + 500 tokens at $1000/Mtok = $2.
    const h = harness({
      model: busyModel({ inputTokens: 1500, outputTokens: 500 }), budgets: { tokens: 1000, costUsd: 1 },
      prices: { inputPerMtok: 1000, outputPerMtok: 1000 },
    });

    const result = await h.run();

    expect(result).toMatchObject({
      outcome: 'budget_exhausted', budgetExceeded: 'tokens', reason: 'budget exhausted: tokens (limit 1000, used 2000)',
      usage: { llmCalls: 1, toolCalls: 0, inputTokens: 1500, outputTokens: 500, costUsd: 2 },
    });
    expect(h.events.slice(1)).toEqual([
      { type: 'budget.warning', budget: 'tokens', limit: 1000, used: 2000 },
      { type: 'budget.warning', budget: 'costUsd', limit: 1, used: 2 },
      { type: 'budget.exceeded', budget: 'tokens', limit: 1000, used: 2000 },
    ]);
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
  });
});

describe('runAgentLoop: budget.warning', () => {
  it('comes right after the model.response that crossed 80 %, before that turn\'s tool calls, and only once per budget', async () => {
    const h = harness({ model: busyModel(), budgets: { llmCalls: 5 } });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'budget_exhausted', budgetExceeded: 'llmCalls', usage: { llmCalls: 5, toolCalls: 5 } });
    const turn = ['model.response', 'tool.call', 'policy.decision', 'tool.result'];
    expect(types(h.events)).toEqual([
      ...turn, ...turn, ...turn,
      'model.response', 'budget.warning', 'tool.call', 'policy.decision', 'tool.result', // 4 of 5
      ...turn, // 5 of 5: no second warning
      'budget.exceeded',
    ]);
    expect(h.ofType('budget.warning')).toEqual([{ type: 'budget.warning', budget: 'llmCalls', limit: 5, used: 4 }]);
    expect(h.ofType('model.response').map((e) => e.turn)).toEqual([1, 2, 3, 4, 5]);
  });

  it('each budget warns once on its own: LLM calls after a model.response, tool calls as the call that crosses starts', async () => {
    // toolCalls 7 warns at the 6th call (5.6), the second of turn 3; llmCalls 5 warns at turn 4; the 8th call is over.
    const model = new ScriptedModel((_req, i) => callsTools([
      toolCall(`c${i}a`, 'bash', { command: `echo ${i}a` }),
      toolCall(`c${i}b`, 'bash', { command: `echo ${i}b` }),
    ]));
    const h = harness({ model, budgets: { llmCalls: 5, toolCalls: 7 } });

    const result = await h.run();

    expect(result).toMatchObject({
      outcome: 'budget_exhausted', budgetExceeded: 'toolCalls', reason: 'budget exhausted: tool calls (limit 7, used 7)', usage: { llmCalls: 4, toolCalls: 7 },
    });
    const call = ['tool.call', 'policy.decision', 'tool.result'];
    expect(types(h.events)).toEqual([
      'model.response', ...call, ...call,
      'model.response', ...call, ...call,
      'model.response', ...call, 'budget.warning', ...call,
      'model.response', 'budget.warning', ...call,
      'budget.exceeded',
    ]);
    expect(h.ofType('budget.warning')).toEqual([
      { type: 'budget.warning', budget: 'toolCalls', limit: 7, used: 6 },
      { type: 'budget.warning', budget: 'llmCalls', limit: 5, used: 4 },
    ]);
    // The toolCalls warning comes between the 5th call's result and the 6th call (c2b).
    const i = h.events.findIndex((e) => e.type === 'budget.warning');
    expect(h.events[i - 1]).toMatchObject({ type: 'tool.result', callId: 'c2a' });
    expect(h.events[i + 1]).toMatchObject({ type: 'tool.call', callId: 'c2b' });
    expect(h.events.at(-1)).toEqual({ type: 'budget.exceeded', budget: 'toolCalls', limit: 7, used: 7 });
  });

  it('a run that stays under 80 % of every budget gets no warning', async () => {
    const model = new ScriptedModel([callsTools([toolCall('q1', 'bash', { command: 'true' })], { inputTokens: 100, outputTokens: 100 }), answers('ok')]);
    const h = harness({ model, budgets: { llmCalls: 3, toolCalls: 2, tokens: 1000 }, prices: { inputPerMtok: 1000, outputPerMtok: 1000 } });
    expect(await h.run()).toMatchObject({ outcome: 'succeeded', usage: { costUsd: 0.2 } });
    expect(h.ofType('budget.warning')).toEqual([]);
  });

  describe('wall time, with jest fake timers', () => {
    beforeEach(() => jest.useFakeTimers({ now: 1_700_000_000_000 }));
    afterEach(() => jest.useRealTimers());

    it('warns from a timer at 80 % while the model is still thinking, once, and the run can still succeed', async () => {
      // the model thinks for 4.5 s of fake time: this timer makes time pass in the loop under test
      const model = new ScriptedModel(() => new Promise<ModelStep>((resolve) => setTimeout(() => resolve(answers('just in time')), 4_500)));
      const h = harness({ model, budgets: { wallTimeS: 5 }, clock: () => Date.now() });

      const pending = h.run();
      await jest.advanceTimersByTimeAsync(3_999);
      expect(h.events).toEqual([]);
      await jest.advanceTimersByTimeAsync(1);
      expect(h.events).toEqual([{ type: 'budget.warning', budget: 'wallTimeS', limit: 5, used: 4 }]);
      await jest.advanceTimersByTimeAsync(500);
      const result = await pending;

      expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'just in time', usage: { wallTimeMs: 4_500 } });
      expect(types(h.events)).toEqual(['budget.warning', 'model.response']);
      expect(jest.getTimerCount()).toBe(0);
    });

    it('a run that ends before 80 % of its wall time never warns (the timer is cleared)', async () => {
      // 1 s of fake time: makes time pass in the loop under test
      const model = new ScriptedModel(() => new Promise<ModelStep>((resolve) => setTimeout(() => resolve(answers('quick')), 1_000)));
      const h = harness({ model, budgets: { wallTimeS: 5 }, clock: () => Date.now() });

      const pending = h.run();
      await jest.advanceTimersByTimeAsync(1_000);
      expect(await pending).toMatchObject({ outcome: 'succeeded' });
      await jest.advanceTimersByTimeAsync(10_000);
      expect(types(h.events)).toEqual(['model.response']);
    });
  });
});

describe('runAgentLoop: streaks of malformed calls end the run as error', () => {
  const bad = (id: string) => toolCall(id, 'bash', '{"command": ');
  const unknown = (id: string) => toolCall(id, 'python', { code: 'print(1)' });
  const invalid = (id: string) => toolCall(id, 'bash', { cmd: 'ls' });

  it(`${MAX_MALFORMED_IN_A_ROW} malformed calls in a row, across turns: error, the rest of the turn is not run`, async () => {
    expect(MAX_MALFORMED_IN_A_ROW).toBe(5);
    const model = new ScriptedModel([
      callsTools([bad('m1'), unknown('m2')]),
      callsTools([invalid('m3'), bad('m4'), unknown('m5'), toolCall('ok6', 'bash', { command: 'echo never' })]),
      answers('unreachable'),
    ]);
    const h = harness({ model });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'error', finalAnswer: null, reason: 'the model sent 5 malformed tool calls in a row', error: { code: 'model_failed' },
      usage: { llmCalls: 2, toolCalls: 5, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 },
    });
    expect(h.model.requests).toHaveLength(2);
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual([
      'model.response', 'tool.call', 'tool.result', 'tool.call', 'tool.result',
      'model.response', 'tool.call', 'tool.result', 'tool.call', 'tool.result', 'tool.call', 'tool.result',
    ]);
    expect(h.ofType('tool.result').map((e) => [e.callId, e.ok, e.blocked])).toEqual(
      ['m1', 'm2', 'm3', 'm4', 'm5'].map((id) => [id, false, false]),
    );
  });

  it.each([
    { name: 'a call that runs', between: toolCall('v1', 'bash', { command: 'echo fine' }), kind: 'ok' },
    { name: 'a call that exits non-zero', between: toolCall('v1', 'bash', { command: 'false' }), kind: 'failed' },
    { name: 'a call the gate blocks', between: toolCall('v1', 'bash', { command: 'curl https://example.org' }), kind: 'blocked' },
  ])('$name in between resets the count: 4 + 4 malformed calls do not end the run', async ({ between }) => {
    const model = new ScriptedModel([
      callsTools([bad('a1'), unknown('a2'), invalid('a3'), bad('a4')]),
      callsTools([between, bad('b1'), unknown('b2')]),
      callsTools([invalid('b3'), bad('b4')]),
      answers('gave up politely'),
    ]);
    const gate = new FakeGate((call) => (String(call.args.command).startsWith('curl') ? denyVerdict() : allowVerdict()));
    const sandbox = new FakeSandbox({ exec: (argv) => ({ exitCode: argv[2] === 'false' ? 1 : 0 }) });
    const h = harness({ model, gate, sandbox });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'gave up politely', usage: { llmCalls: 4, toolCalls: 9 } });
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['v1']);
  });

  it('the count restarts after a valid call: 4, a valid call, then 5 more ends the run', async () => {
    const model = new ScriptedModel([
      callsTools([bad('a1'), bad('a2'), bad('a3'), bad('a4'), toolCall('v1', 'bash', { command: 'echo fine' })]),
      callsTools([bad('b1'), bad('b2'), bad('b3'), bad('b4'), bad('b5')]),
      answers('unreachable'),
    ]);
    const h = harness({ model });

    expect(await h.run()).toMatchObject({ outcome: 'error', reason: 'the model sent 5 malformed tool calls in a row', usage: { llmCalls: 2, toolCalls: 10 } });
    expect(h.sandbox.execs.map((c) => c.argv[2])).toEqual(['echo fine']);
  });
});

describe('runAgentLoop: streaks of blocked calls end the run as policy_aborted', () => {
  const blockedGate = () => new FakeGate((call) => (String(call.args.command).startsWith('rm') ? denyVerdict('Blocked: no deleting.') : allowVerdict()));
  const rm = (id: string) => toolCall(id, 'bash', { command: `rm -rf /data/${id}` });

  it(`${MAX_BLOCKED_IN_A_ROW} blocked calls in a row: policy_aborted; the model is not asked again and nothing reaches the sandbox`, async () => {
    expect(MAX_BLOCKED_IN_A_ROW).toBe(5);
    const model = new ScriptedModel([
      callsTools([rm('d1'), rm('d2'), rm('d3')]),
      callsTools([rm('d4'), rm('d5'), rm('d6')]),
      answers('unreachable'),
    ]);
    const h = harness({ model, gate: blockedGate() });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'policy_aborted', finalAnswer: null, reason: '5 tool calls in a row were blocked by the policy; the run was stopped',
      usage: { llmCalls: 2, toolCalls: 5, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 },
    });
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['d1', 'd2', 'd3', 'd4', 'd5']);
    expect(h.sandbox.calls).toEqual([]);
    expect(h.model.requests).toHaveLength(2);
    expect(h.ofType('tool.result').map((e) => [e.callId, e.ok, e.blocked, e.summary])).toEqual(
      ['d1', 'd2', 'd3', 'd4', 'd5'].map((id) => [id, false, true, 'Blocked: no deleting.']),
    );
    expect(h.events.at(-1)).toMatchObject({ type: 'tool.result', callId: 'd5', blocked: true });
  });

  it('malformed calls in between neither reset nor count: 4 blocked, 2 malformed, then the 5th blocked ends the run', async () => {
    const model = new ScriptedModel([
      callsTools([rm('d1'), rm('d2'), rm('d3'), rm('d4')]),
      callsTools([toolCall('m1', 'bash', '{'), toolCall('m2', 'python', {})]),
      callsTools([rm('d5'), toolCall('ok', 'bash', { command: 'echo never' })]),
      answers('unreachable'),
    ]);
    const h = harness({ model, gate: blockedGate() });

    const result = await h.run();

    expect(result).toMatchObject({
      outcome: 'policy_aborted', reason: '5 tool calls in a row were blocked by the policy; the run was stopped', usage: { llmCalls: 3, toolCalls: 7 },
    });
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['d1', 'd2', 'd3', 'd4', 'd5']);
    expect(h.sandbox.calls).toEqual([]);
  });

  it.each([
    { name: 'a call that runs', command: 'echo fine' },
    { name: 'a call that exits non-zero', command: 'false' },
  ])('$name in between resets the count: 4 + 4 blocked calls do not end the run', async ({ command }) => {
    const model = new ScriptedModel([
      callsTools([rm('d1'), rm('d2'), rm('d3'), rm('d4')]),
      callsTools([toolCall('v1', 'bash', { command }), rm('e1'), rm('e2'), rm('e3'), rm('e4')]),
      answers('I will not delete anything'),
    ]);
    const sandbox = new FakeSandbox({ exec: (argv) => ({ exitCode: argv[2] === 'false' ? 1 : 0 }) });
    const h = harness({ model, gate: blockedGate(), sandbox });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'I will not delete anything', usage: { llmCalls: 3, toolCalls: 9 } });
    expect(h.sandbox.execs.map((c) => c.argv[2])).toEqual([command]);
  });
});

describe('runAgentLoop: cancellation', () => {
  it('aborting input.signal while the model call hangs: cancelled, the call was aborted, no budget event', async () => {
    const ctrl = new AbortController();
    const model = new ScriptedModel((): ModelStep => {
      setImmediate(() => ctrl.abort());
      return { hang: true };
    });
    const h = harness({ model, signal: ctrl.signal });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'cancelled', finalAnswer: null, reason: 'the run was cancelled',
      usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 },
    });
    expect(model.requests[0]!.signal!.aborted).toBe(true);
    expect(h.events).toEqual([]);
  });

  it('aborting input.signal while an exec hangs: cancelled, the exec was aborted, the model is not asked again', async () => {
    const ctrl = new AbortController();
    const sandbox = new FakeSandbox({
      exec: () => {
        setImmediate(() => ctrl.abort());
        return 'hang';
      },
    });
    const h = harness({ model: busyModel(), sandbox, signal: ctrl.signal });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'cancelled', reason: 'the run was cancelled', usage: { llmCalls: 1, toolCalls: 1 } });
    expect(result).not.toHaveProperty('budgetExceeded');
    expect(sandbox.execs[0]!.signal!.aborted).toBe(true);
    expect(h.model.requests).toHaveLength(1);
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision']);
  });

  it('a signal aborted before the start: the model is never called', async () => {
    const ctrl = new AbortController();
    ctrl.abort();
    const h = harness({ model: busyModel(), signal: ctrl.signal });
    expect(await h.run()).toMatchObject({ outcome: 'cancelled', usage: { llmCalls: 0 } });
    expect(h.model.requests).toEqual([]);
  });

  it('a cancel that lands as the model answers: its tool calls reach neither the gate nor the sandbox', async () => {
    const ctrl = new AbortController();
    const model = new ScriptedModel((): ModelStep => {
      ctrl.abort();
      return callsTools([toolCall('late1', 'bash', { command: 'make deploy' })], { inputTokens: 10, outputTokens: 5 });
    }, { ignoresAbort: true }); // the response was already on its way
    const h = harness({ model, signal: ctrl.signal });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'cancelled', usage: { llmCalls: 1, toolCalls: 0, inputTokens: 10, outputTokens: 5 } });
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual(['model.response']);
  });

  it('a cancel that lands as a tool finishes: its result is still logged, the next call of the turn is not started', async () => {
    const ctrl = new AbortController();
    const model = new ScriptedModel([
      callsTools([toolCall('k1', 'bash', { command: 'echo done' }), toolCall('k2', 'bash', { command: 'echo next' })]),
      answers('unreachable'),
    ]);
    const sandbox = new FakeSandbox({
      exec: () => {
        ctrl.abort();
        return { stdout: 'done\n' };
      },
      ignoresAbort: true, // the process had already exited
    });
    const h = harness({ model, sandbox, signal: ctrl.signal });

    const result = await h.run();

    expect(result).toMatchObject({ outcome: 'cancelled', usage: { llmCalls: 1, toolCalls: 1 } });
    expect(sandbox.execs.map((c) => c.argv[2])).toEqual(['echo done']);
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['k1']);
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision', 'tool.result']);
    expect(h.ofType('tool.result')[0]).toMatchObject({ callId: 'k1', ok: true, summary: 'exit 0 in 0 ms' });
  });

  it('a cancel that lands while the gate allows: the sandbox is not called', async () => {
    const ctrl = new AbortController();
    const gate = new FakeGate(() => {
      ctrl.abort();
      return allowVerdict();
    });
    const h = harness({ model: busyModel(), gate, signal: ctrl.signal });

    expect(await h.run()).toMatchObject({ outcome: 'cancelled', usage: { llmCalls: 1, toolCalls: 1 } });
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision']);
  });

  it('a gate waiting for approval is aborted by the cancel and the run is cancelled', async () => {
    const ctrl = new AbortController();
    const gate = new FakeGate((_call, ctx) => {
      setImmediate(() => ctrl.abort());
      return new Promise((_resolve, reject) => ctx.signal!.addEventListener('abort', () => reject(new CancelledError('approval wait cancelled'))));
    });
    const h = harness({ model: busyModel(), gate, signal: ctrl.signal });

    expect(await h.run()).toMatchObject({ outcome: 'cancelled', reason: 'the run was cancelled' });
    expect(h.gate.calls[0]!.ctx.signal!.aborted).toBe(true);
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual(['model.response', 'tool.call']);
  });
});

describe('runAgentLoop: broken infrastructure ends the run as error; bugs propagate', () => {
  it('a ModelError ends the run as error with model_failed, keeping the usage so far', async () => {
    const model = new ScriptedModel([
      callsTools([toolCall('m1', 'bash', { command: 'ls' })], { inputTokens: 7, outputTokens: 3 }),
      { throws: new ModelError('model endpoint error 503: overloaded', 503) },
    ]);
    const h = harness({ model });

    const result = await h.run();

    expect(result).toEqual({
      outcome: 'error', finalAnswer: null, reason: 'model_failed: model endpoint error 503: overloaded', error: { code: 'model_failed', cause: expect.any(ModelError) },
      usage: { llmCalls: 1, toolCalls: 1, inputTokens: 7, outputTokens: 3, costUsd: 0, wallTimeMs: 0 },
    });
    expect(result.reason).toContain('model_failed');
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision', 'tool.result']);
  });

  it('a SandboxError from exec ends the run as error (never shown to the model as command output)', async () => {
    const sandbox = new FakeSandbox({
      exec: () => {
        throw new SandboxError('sandbox_failed', 'exec in container abc failed: container is not running');
      },
    });
    const h = harness({ model: busyModel(), sandbox });

    const result = await h.run();

    expect(result).toMatchObject({
      outcome: 'error', finalAnswer: null, reason: 'sandbox_failed: exec in container abc failed: container is not running',
      usage: { llmCalls: 1, toolCalls: 1 },
    });
    expect(result).not.toHaveProperty('budgetExceeded');
    expect(h.model.requests).toHaveLength(1);
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision']);
  });

  it('a plain Error from the gate is a bug: runAgentLoop rejects with it', async () => {
    const bug = new Error('gate bug: cannot read properties of undefined');
    const gate = new FakeGate(() => {
      throw bug;
    });
    const h = harness({ model: busyModel(), gate });

    await expect(h.run()).rejects.toBe(bug);
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual(['model.response', 'tool.call']);
  });

  it('a plain Error from the model or the sandbox propagates too', async () => {
    const fromModel = harness({ model: new ScriptedModel([{ throws: new TypeError('res.usage is undefined') }]) });
    await expect(fromModel.run()).rejects.toThrow(TypeError);

    const sandbox = new FakeSandbox({
      exec: () => {
        throw new RangeError('bad offset');
      },
    });
    const fromSandbox = harness({ model: busyModel(), sandbox });
    await expect(fromSandbox.run()).rejects.toThrow('bad offset');
  });

  it('the gate verdict objects are passed through untouched', async () => {
    const verdict = { ...allowVerdict('ok'), classifier: { risk: 0.2, riskLevel: 'low' as const, authorized: 0.9, decision: 'allow' as const, latencyMs: 12, via: 'decisions' as const } };
    const h = harness({ model: new ScriptedModel([callsTools([toolCall('v1', 'bash', { command: 'ls' })]), answers('ok')]), gate: new FakeGate(() => verdict) });
    await h.run();
    expect(h.ofType('policy.decision')).toEqual([{ type: 'policy.decision', callId: 'v1', tool: 'bash', verdict }]);
  });
});
