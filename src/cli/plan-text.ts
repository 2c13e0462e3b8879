/**
 * A dry run's plan (POST /v1/runs?dryRun=true) as the few lines a person checks before submitting:
 * the task's first line, the tools, the done checks, egress, limits, budgets, policy and model.
 * Strings from the server are made safe for the terminal (terminal-text.ts).
 */
import { terminalSafe as terminalText } from './terminal-text';

const list = (v: unknown): string[] => (Array.isArray(v) ? v.map((x) => terminalText(String(x))) : []);
const pairs = (v: unknown): string => Object.entries((v ?? {}) as Record<string, unknown>).map(([k, x]) => `${k} ${terminalText(String(x))}`).join(', ');

export function planText(plan: Record<string, unknown>): string {
  const task = terminalText(String(plan.task ?? '')).split('\n').find((l) => l.trim() && !/^#\s/.test(l.trim())) ?? '';
  const checks = list(plan.doneChecks);
  const criteria = list(plan.doneCriteria);
  const egress = list(plan.egress);
  const ws = (plan.workspace ?? {}) as { files?: number; tarBytes?: number };
  const lines = [
    'dry run: the server would accept this run (nothing was queued, no model was called)',
    `  task        ${task.trim().slice(0, 100)}`,
    `  tools       ${list(plan.tools).join(', ')}`,
    `  done checks ${checks.length ? checks.join(' | ') : 'none'}`,
    ...(criteria.length ? [`  criteria    ${criteria.join(' | ')}`] : []),
    ...(list(plan.cannotDo).length ? [`  cannot do   ${list(plan.cannotDo).join(' | ')}`] : []),
    `  egress      ${egress.length ? egress.join(', ') : 'none (no network)'}`,
    `  limits      ${pairs(plan.limits)}`,
    `  budgets     ${pairs(plan.budgets)}`,
    `  policy      ${terminalText(String(plan.policy))}${plan.approvals ? ', asks wait for approval' : ', asks are refused (unattended)'}`,
    `  model       ${terminalText(String(plan.model))}`,
    `  workspace   ${ws.files ?? 0} inline file(s), ${ws.tarBytes ?? 0} bytes of tar`,
    ...(Object.keys((plan.labels ?? {}) as object).length ? [`  labels      ${pairs(plan.labels)}`] : []),
  ];
  return `${lines.join('\n')}\n`;
}
