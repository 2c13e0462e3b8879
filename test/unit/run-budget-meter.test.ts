/** BudgetMeter: usage counting, exhausted budgets with their reasons, and one budget.warning per budget at 80 %. */
import type { RunBudgets } from '../../src/domain/run-spec';
import { BudgetMeter, WARN_AT, budgetLabel, type Prices } from '../../src/run/budget-meter';
import { recordEvents } from '../support/fake-ports';

const BUDGETS: RunBudgets = { llmCalls: 10, toolCalls: 10, tokens: 10_000, wallTimeS: 60, costUsd: 1 };

function meter(budgets: Partial<RunBudgets> = {}, prices: Prices = { inputPerMtok: 2, outputPerMtok: 8 }) {
  const rec = recordEvents();
  let now = 1_000_000;
  const m = new BudgetMeter({ ...BUDGETS, ...budgets }, prices, rec.emit, () => now);
  return { ...rec, m, advance: (ms: number) => void (now += ms) };
}

describe('BudgetMeter: counting', () => {
  it('addModelCall counts the call and its tokens, returns its cost at the given prices, and emits nothing', () => {
    const h = meter();
    expect(h.m.addModelCall({ inputTokens: 1000, outputTokens: 200 })).toBeCloseTo(0.0036, 10);
    expect(h.m.addModelCall({ inputTokens: 500, outputTokens: 50 })).toBeCloseTo(0.0014, 10);
    expect(h.m.usage).toEqual({ llmCalls: 2, toolCalls: 0, inputTokens: 1500, outputTokens: 250, costUsd: expect.closeTo(0.005, 10), wallTimeMs: 0 });
    expect(h.m.used('tokens')).toBe(1750);
    expect(h.m.used('llmCalls')).toBe(2);
    expect(h.events).toEqual([]);
  });

  it('addHousekeeping counts tokens and cost but not an LLM call', () => {
    const h = meter();
    h.m.addHousekeeping({ inputTokens: 100, outputTokens: 10 });
    expect(h.m.usage).toEqual({ llmCalls: 0, toolCalls: 0, inputTokens: 100, outputTokens: 10, costUsd: expect.closeTo(0.00028, 10), wallTimeMs: 0 });
  });

  it('wall time is measured on the injected clock from construction; finish() stamps it and returns a copy', () => {
    const h = meter();
    h.advance(2_500);
    expect(h.m.used('wallTimeS')).toBe(2.5);
    const usage = h.m.finish();
    expect(usage).toEqual({ llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 2_500 });
    usage.llmCalls = 99;
    expect(h.m.usage.llmCalls).toBe(0);
  });
});

describe('BudgetMeter: exhausted budgets', () => {
  it('full(): one more LLM or tool call would go past the limit', () => {
    const h = meter({ llmCalls: 2, toolCalls: 1 });
    expect(h.m.full('llmCalls')).toBe(false);
    h.m.addModelCall({ inputTokens: 0, outputTokens: 0 });
    expect(h.m.full('llmCalls')).toBe(false);
    h.m.addModelCall({ inputTokens: 0, outputTokens: 0 });
    expect(h.m.full('llmCalls')).toBe(true);
    expect(h.m.full('toolCalls')).toBe(false);
    h.m.addToolCall();
    expect(h.m.full('toolCalls')).toBe(true);
  });

  it('overspent(): tokens or cost strictly past the limit; tokens first when both are', () => {
    const h = meter({ tokens: 1000, costUsd: 1 }, { inputPerMtok: 1000, outputPerMtok: 0 });
    h.m.addModelCall({ inputTokens: 900, outputTokens: 100 }); // 1000 tokens, $0.90
    expect(h.m.overspent()).toBeNull();
    h.m.addModelCall({ inputTokens: 0, outputTokens: 1 });
    expect(h.m.overspent()).toBe('tokens');
    h.m.addModelCall({ inputTokens: 200, outputTokens: 0 }); // $1.10
    expect(h.m.overspent()).toBe('tokens');

    const cost = meter({ tokens: 1_000_000, costUsd: 1 }, { inputPerMtok: 1000, outputPerMtok: 0 });
    cost.m.addModelCall({ inputTokens: 1000, outputTokens: 0 }); // exactly $1
    expect(cost.m.overspent()).toBeNull();
    cost.m.addModelCall({ inputTokens: 1, outputTokens: 0 });
    expect(cost.m.overspent()).toBe('costUsd');
  });

  it('exceeded(): emits budget.exceeded and returns the reason, rounded per budget', () => {
    const h = meter({ llmCalls: 1, tokens: 1000, costUsd: 0.001, wallTimeS: 5 }, { inputPerMtok: 1, outputPerMtok: 1 });
    h.m.addModelCall({ inputTokens: 1234, outputTokens: 0 });
    h.advance(5_049);
    expect(h.m.exceeded('llmCalls')).toBe('budget exhausted: LLM calls (limit 1, used 1)');
    expect(h.m.exceeded('tokens')).toBe('budget exhausted: tokens (limit 1000, used 1234)');
    expect(h.m.exceeded('costUsd')).toBe('budget exhausted: cost (USD) (limit 0.001, used 0.0012)');
    expect(h.m.exceeded('wallTimeS')).toBe('budget exhausted: wall time (s) (limit 5, used 5.0)');
    expect(h.events).toEqual([
      { type: 'budget.exceeded', budget: 'llmCalls', limit: 1, used: 1 },
      { type: 'budget.exceeded', budget: 'tokens', limit: 1000, used: 1234 },
      { type: 'budget.exceeded', budget: 'costUsd', limit: 0.001, used: expect.closeTo(0.001234, 10) },
      { type: 'budget.exceeded', budget: 'wallTimeS', limit: 5, used: 5.049 },
    ]);
  });

  it('labels every budget', () => {
    expect((['llmCalls', 'toolCalls', 'tokens', 'wallTimeS', 'costUsd'] as const).map(budgetLabel)).toEqual(['LLM calls', 'tool calls', 'tokens', 'wall time (s)', 'cost (USD)']);
  });
});

describe('BudgetMeter: budget.warning', () => {
  it('warns at 80 %', () => {
    expect(WARN_AT).toBe(0.8);
  });

  it('checkWarnings(): once per budget that reached 80 %, never again', () => {
    const h = meter({ llmCalls: 5, tokens: 1000 }, { inputPerMtok: 0, outputPerMtok: 0 });
    for (let i = 0; i < 3; i++) h.m.addModelCall({ inputTokens: 100, outputTokens: 100 });
    h.m.checkWarnings();
    expect(h.events).toEqual([]); // 3 of 5 calls, 600 of 1000 tokens
    h.m.addModelCall({ inputTokens: 100, outputTokens: 100 });
    h.m.checkWarnings();
    expect(h.events).toEqual([
      { type: 'budget.warning', budget: 'llmCalls', limit: 5, used: 4 },
      { type: 'budget.warning', budget: 'tokens', limit: 1000, used: 800 },
    ]);
    h.m.addModelCall({ inputTokens: 100, outputTokens: 100 });
    h.m.addModelCall({ inputTokens: 100, outputTokens: 100 });
    h.m.checkWarnings();
    h.m.checkWarnings();
    expect(h.events).toHaveLength(2);
  });

  it('a model call only warns once checkWarnings() is called (after its model.response goes out)', () => {
    const h = meter({ costUsd: 1 }, { inputPerMtok: 1000, outputPerMtok: 0 });
    h.m.addModelCall({ inputTokens: 900, outputTokens: 0 }); // $0.90
    expect(h.events).toEqual([]);
    h.m.checkWarnings();
    expect(h.events).toEqual([{ type: 'budget.warning', budget: 'costUsd', limit: 1, used: expect.closeTo(0.9, 10) }]);
  });

  it('addToolCall() warns as the call that reaches 80 % is counted', () => {
    const h = meter({ toolCalls: 5 });
    for (let i = 0; i < 3; i++) h.m.addToolCall();
    expect(h.events).toEqual([]);
    h.m.addToolCall();
    expect(h.events).toEqual([{ type: 'budget.warning', budget: 'toolCalls', limit: 5, used: 4 }]);
    h.m.addToolCall();
    expect(h.events).toHaveLength(1);
  });

  it('addHousekeeping() warns for the tokens it adds', () => {
    const h = meter({ tokens: 1000 });
    h.m.addHousekeeping({ inputTokens: 700, outputTokens: 100 });
    expect(h.events).toEqual([{ type: 'budget.warning', budget: 'tokens', limit: 1000, used: 800 }]);
  });

  it('warnWallTime(): once, with the wall time used so far', () => {
    const h = meter({ wallTimeS: 10 });
    h.advance(8_000);
    h.m.warnWallTime();
    h.advance(1_000);
    h.m.warnWallTime();
    h.m.checkWarnings();
    expect(h.events).toEqual([{ type: 'budget.warning', budget: 'wallTimeS', limit: 10, used: 8 }]);
  });

  it('checkWarnings() leaves the wall time to the timer, even past 80 %', () => {
    const h = meter({ wallTimeS: 10 });
    h.advance(9_000);
    h.m.checkWarnings();
    h.m.addToolCall();
    expect(h.events).toEqual([]);
  });
});
