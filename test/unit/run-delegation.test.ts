/**
 * The budget carve-out of delegate calls (grantBudgets over BudgetMeter.left/reserve) and model
 * routing (routeTurn, routingFor): pure, so every rule is tried directly, including the attempts to
 * get more than there is (asking past what is left, several calls in one turn adding up, a share of
 * nothing, a wall time stacked by siblings).
 */
import { loadConfig } from '../../src/config';
import { BudgetMeter } from '../../src/run/budget-meter';
import { grantBudgets } from '../../src/run/delegation';
import { NO_SIGNALS, routeTurn, routingFor } from '../../src/run/model-router';
import type { RunBudgets } from '../../src/domain/run-spec';
import { Routing, RunSpec } from '../../src/domain/run-spec';
import { TaskSheet } from '../../src/domain/subrun';

const B: RunBudgets = { llmCalls: 10, toolCalls: 20, tokens: 100_000, wallTimeS: 600, costUsd: 1 };
const PRICES = { inputPerMtok: 1, outputPerMtok: 1 };

function meter(budgets = B, now = { t: 0 }) {
  return new BudgetMeter(budgets, PRICES, () => undefined, () => now.t);
}

describe('grantBudgets', () => {
  test('an omitted budget gets a share of what was left at the turn start: 1/(k+1) for k delegate calls', () => {
    const m = meter();
    const left = m.left();
    expect(left).toEqual({ ...B, llmCalls: 9 }); // one LLM call is kept for reading the results
    const g = grantBudgets({}, left, left, 2);
    expect(g).toEqual({ ok: true, budgets: { llmCalls: 3, toolCalls: 6, tokens: 33_333, wallTimeS: 450, costUsd: 0.333333 } });
  });

  test('named budgets are granted as asked when they fit', () => {
    const left = meter().left();
    expect(grantBudgets({ llmCalls: 9, costUsd: 1 }, left, left, 1)).toMatchObject({ ok: true, budgets: { llmCalls: 9, costUsd: 1 } });
  });

  test.each([
    [{ llmCalls: 10 }, 'asks for 10 LLM calls but this run has only 9 LLM calls left to give (one LLM call is kept for this run to read the results)'],
    [{ toolCalls: 21 }, 'asks for 21 tool calls but this run has only 20 tool calls left'],
    [{ tokens: 100_001 }, 'asks for 100001 tokens but this run has only 100000 tokens left'],
    [{ costUsd: 1.0001 }, 'asks for $1.0001 but this run has only $1.0000 left'],
    [{ wallTimeS: 601 }, 'asks for 601 s of wall time but this run has only 600 s of wall time left'],
  ])('asking for more than is left is refused: %j', (asked, why) => {
    const left = meter().left();
    const g = grantBudgets(asked, left, left, 1);
    expect(g.ok).toBe(false);
    expect(!g.ok && g.reason).toContain(why);
  });

  test('several calls in one turn cannot add up to more than the run has: reservations count as spent', () => {
    const m = meter();
    const start = m.left();
    const grants = [];
    for (let i = 0; i < 4; i++) {
      const g = grantBudgets({ llmCalls: 4, costUsd: 0.4 }, m.left(), start, 4);
      if (g.ok) m.reserve(g.budgets);
      grants.push(g.ok);
    }
    expect(grants).toEqual([true, true, false, false]); // 4 + 4 of 9 LLM calls; the third would make 12
    expect(m.left()).toMatchObject({ llmCalls: 1, costUsd: expect.closeTo(0.2, 9) });
    m.release({ llmCalls: 4, toolCalls: 0, tokens: 0, wallTimeS: 0, costUsd: 0.4 });
    expect(m.left()).toMatchObject({ llmCalls: 5 });
  });

  test('what a sub-run spent is this run\'s usage: after it ended, less is left', () => {
    const m = meter();
    m.addChildUsage({ llmCalls: 3, toolCalls: 5, inputTokens: 1000, outputTokens: 500, costUsd: 0.25 });
    expect(m.left()).toEqual({ llmCalls: 6, toolCalls: 15, tokens: 98_500, wallTimeS: 600, costUsd: 0.75 });
    expect(m.usage).toMatchObject({ llmCalls: 3, toolCalls: 5, costUsd: 0.25 });
  });

  test('wall time is shared by siblings, not carved: four sub-runs of a turn may each run until the deadline', () => {
    const m = meter();
    const start = m.left();
    for (let i = 0; i < 4; i++) {
      const g = grantBudgets({ wallTimeS: 500, llmCalls: 1 }, m.left(), start, 4);
      expect(g.ok).toBe(true);
      if (g.ok) m.reserve(g.budgets);
    }
    expect(m.left().wallTimeS).toBe(600);
  });

  test('wall time left counts down with the clock from the run\'s start', () => {
    const now = { t: 0 };
    const m = meter(B, now);
    now.t = 590_000;
    const left = m.left();
    expect(left.wallTimeS).toBeCloseTo(10, 6);
    expect(grantBudgets({}, left, left, 1)).toMatchObject({ ok: true, budgets: { wallTimeS: 7 } });
    now.t = 596_000;
    const late = m.left();
    const g = grantBudgets({}, late, late, 1);
    expect(g.ok).toBe(false);
    expect(!g.ok && g.reason).toContain('too little budget is left for a sub-run: 4 s of wall time left, and a sub-run needs at least 5 s of wall time');
  });

  test('a share of nothing is refused, not granted as zero', () => {
    const m = meter({ ...B, llmCalls: 2 });
    m.addModelCall({ inputTokens: 10, outputTokens: 10 });
    const left = m.left();
    expect(left.llmCalls).toBe(0);
    const g = grantBudgets({}, left, left, 1);
    expect(!g.ok && g.reason).toBe('too little budget is left for a sub-run: 0 LLM calls left after the one this run keeps, and a sub-run needs at least 1 LLM calls');
    const spent = meter({ ...B, costUsd: 0 });
    const l2 = spent.left();
    expect(grantBudgets({ llmCalls: 1 }, l2, l2, 1)).toMatchObject({ ok: false, reason: expect.stringContaining('a sub-run needs at least $0.0000') });
  });

  test('the task sheet is strict: unknown fields, empty tasks and out-of-range budgets are refused', () => {
    expect(TaskSheet.safeParse({ task: 'x', policy: 'permissive' }).success).toBe(false);
    expect(TaskSheet.safeParse({ task: '   ' }).success).toBe(false);
    expect(TaskSheet.safeParse({ task: 'x', budgets: { llmCalls: 0 } }).success).toBe(false);
    expect(TaskSheet.safeParse({ task: 'x', budgets: { approvals: false } }).success).toBe(false);
    expect(TaskSheet.safeParse({ task: 'x', allowedTools: [] }).success).toBe(false);
    expect(TaskSheet.parse({ task: 'x' })).toEqual({ task: 'x', doneChecks: [], cannotDo: [], budgets: {} });
  });
});

describe('model routing', () => {
  const routing = Routing.parse({ strong: 'big', cheap: 'small' });

  test('the first turn and turns after a failure go to the strong model; routine turns to the cheap one', () => {
    expect(routeTurn(routing, 1, NO_SIGNALS)).toEqual({ model: 'big', tier: 'strong', rule: 'first-turn' });
    expect(routeTurn(routing, 2, NO_SIGNALS)).toEqual({ model: 'small', tier: 'cheap', rule: null });
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, failedCheck: true })).toMatchObject({ tier: 'strong', rule: 'after-failed-check' });
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, failedTool: true })).toMatchObject({ tier: 'strong', rule: 'after-failed-tool' });
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, blockedCall: true })).toMatchObject({ tier: 'strong', rule: 'after-blocked-call' });
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, malformedCall: true })).toMatchObject({ tier: 'strong', rule: 'after-malformed-call' });
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, subRunResults: true })).toMatchObject({ tier: 'strong', rule: 'after-sub-run' });
    // after-compaction is not among the defaults.
    expect(routeTurn(routing, 5, { ...NO_SIGNALS, compacted: true })).toMatchObject({ tier: 'cheap' });
  });

  test('only the rules in strongOn send a turn to the strong model', () => {
    const r = Routing.parse({ strong: 'big', cheap: 'small', strongOn: ['after-failed-check'] });
    expect(routeTurn(r, 1, NO_SIGNALS).tier).toBe('cheap');
    expect(routeTurn(r, 3, { ...NO_SIGNALS, failedTool: true }).tier).toBe('cheap');
    expect(routeTurn(r, 3, { ...NO_SIGNALS, failedCheck: true }).tier).toBe('strong');
    expect(routeTurn(Routing.parse({ strong: 'big', cheap: 'small', strongOn: [] }), 1, NO_SIGNALS).tier).toBe('cheap');
  });

  test('routingFor: the run\'s own routing, else none when it names a model, else the server\'s', () => {
    const server = { CORRAL_ROUTING_STRONG_MODEL: 'S', CORRAL_ROUTING_CHEAP_MODEL: 'C', CORRAL_ROUTING_STRONG_ON: ['first-turn' as const] };
    expect(routingFor({ routing }, server)).toBe(routing);
    expect(routingFor({ model: 'one' }, server)).toBeUndefined();
    expect(routingFor({}, server)).toEqual({ strong: 'S', cheap: 'C', strongOn: ['first-turn'] });
    expect(routingFor({}, {})).toBeUndefined();
  });

  test('a run spec refuses routing with one model twice, with `model` beside it, and unknown rules', () => {
    const base = { task: 'x' };
    expect(RunSpec.safeParse({ ...base, routing: { strong: 'a', cheap: 'a' } }).success).toBe(false);
    expect(RunSpec.safeParse({ ...base, model: 'a', routing: { strong: 'a', cheap: 'b' } }).success).toBe(false);
    expect(RunSpec.safeParse({ ...base, routing: { strong: 'a', cheap: 'b', strongOn: ['every-turn'] } }).success).toBe(false);
    expect(RunSpec.safeParse({ ...base, routing: { strong: 'a', cheap: 'b', extra: 1 } }).success).toBe(false);
    expect(RunSpec.parse({ ...base, routing: { strong: 'a', cheap: 'b' } }).routing?.strongOn).toContain('first-turn');
  });

  test('server-wide routing: both models or neither, different ones, known rules — else start-up stops naming the variable', () => {
    expect(loadConfig({ CORRAL_ROUTING_STRONG_MODEL: 'S', CORRAL_ROUTING_CHEAP_MODEL: 'C', CORRAL_ROUTING_STRONG_ON: 'first-turn, after-failed-check,first-turn' }).CORRAL_ROUTING_STRONG_ON).toEqual(['first-turn', 'after-failed-check']);
    expect(() => loadConfig({ CORRAL_ROUTING_STRONG_MODEL: 'S' })).toThrow('CORRAL_ROUTING_STRONG_MODEL and CORRAL_ROUTING_CHEAP_MODEL go together');
    expect(() => loadConfig({ CORRAL_ROUTING_STRONG_MODEL: 'S', CORRAL_ROUTING_CHEAP_MODEL: 'S' })).toThrow('CORRAL_ROUTING_CHEAP_MODEL must differ');
    expect(() => loadConfig({ CORRAL_ROUTING_STRONG_ON: 'first-turn,always' })).toThrow(/CORRAL_ROUTING_STRONG_ON.*unknown rule\(s\) always/);
    expect(() => loadConfig({ CORRAL_SUBRUN_MAX_DEPTH: '9' })).toThrow(/CORRAL_SUBRUN_MAX_DEPTH/);
  });
});
