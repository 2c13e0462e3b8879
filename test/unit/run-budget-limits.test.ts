import { loadConfig } from '../../src/config';
import { InvalidInputError } from '../../src/domain/errors';
import { RunBudgets } from '../../src/domain/run-spec';
import { checkBudgets } from '../../src/run/budget-limits';

const config = loadConfig({ CORRAL_MAX_BUDGET_LLM_CALLS: '50', CORRAL_MAX_BUDGET_COST_USD: '2.5' });

test('the schema defaults fit the default maxima', () => {
  expect(() => checkBudgets(RunBudgets.parse({}), loadConfig({}))).not.toThrow();
});

test('a budget above the operator maximum is refused naming the budget, never lowered', () => {
  const budgets = RunBudgets.parse({ llmCalls: 51 });
  let err: unknown;
  try {
    checkBudgets(budgets, config);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(InvalidInputError);
  expect(err).toMatchObject({ field: 'budgets.llmCalls', message: "budgets.llmCalls is 51, above this server's maximum of 50" });
  expect(budgets.llmCalls).toBe(51);
  expect(() => checkBudgets(RunBudgets.parse({ llmCalls: 50, costUsd: 2.5 }), config)).not.toThrow();
  expect(() => checkBudgets(RunBudgets.parse({ costUsd: 2.6 }), config)).toThrow(/budgets\.costUsd is 2\.6, above this server's maximum of 2\.5/);
});
