/**
 * The operator's ceiling on a run's budgets (CORRAL_MAX_BUDGET_*): a run asking for more is refused
 * with InvalidInputError naming `budgets.<name>` (the API turns it into a 400, the worker fails the job)
 * — never silently lowered. Pure, so the API and the worker check the same way.
 */
import type { Config } from '../config';
import { InvalidInputError } from '../domain/errors';
import type { BudgetName } from '../domain/events';
import type { RunBudgets } from '../domain/run-spec';

type BudgetConfig = Pick<Config,
  'CORRAL_MAX_BUDGET_LLM_CALLS' | 'CORRAL_MAX_BUDGET_TOOL_CALLS' | 'CORRAL_MAX_BUDGET_TOKENS' | 'CORRAL_MAX_BUDGET_WALL_S' | 'CORRAL_MAX_BUDGET_COST_USD'>;

export function checkBudgets(budgets: RunBudgets, config: BudgetConfig): void {
  const max: Record<BudgetName, number> = {
    llmCalls: config.CORRAL_MAX_BUDGET_LLM_CALLS,
    toolCalls: config.CORRAL_MAX_BUDGET_TOOL_CALLS,
    tokens: config.CORRAL_MAX_BUDGET_TOKENS,
    wallTimeS: config.CORRAL_MAX_BUDGET_WALL_S,
    costUsd: config.CORRAL_MAX_BUDGET_COST_USD,
  };
  for (const name of Object.keys(max) as BudgetName[]) {
    if (budgets[name] > max[name]) {
      throw new InvalidInputError(`budgets.${name} is ${budgets[name]}, above this server's maximum of ${max[name]}`, `budgets.${name}`, { max: max[name], requested: budgets[name] });
    }
  }
}
