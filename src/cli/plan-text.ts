/**
 * A dry run's plan (POST /v1/runs/plan) as the lines a person checks before submitting: the task's
 * first line, the tools, each done check on its own line, the environment and its setup phase, egress,
 * limits, budgets (the wall time is the agent's, setup has its own bound), policy, model, and the
 * workspace — inline files, an upload's id and size, a git remote and ref — with what the CLI knows
 * of a directory it did not send (a dry run uploads nothing). Strings from the server are made safe
 * for the terminal (terminal-text.ts).
 */
import type { WorkspaceSummary } from './submit-spec';
import { terminalSafe as terminalText } from './terminal-text';

const list = (v: unknown): string[] => (Array.isArray(v) ? v.map((x) => terminalText(String(x))) : []);
const pairs = (v: unknown): string => Object.entries((v ?? {}) as Record<string, unknown>).map(([k, x]) => `${k} ${terminalText(String(x))}`).join(', ');
const mb = (n: number) => (n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${n} bytes`);

/** `label` then the first item on one line, the others aligned under it. */
function block(label: string, items: string[], none: string): string[] {
  if (!items.length) return [`  ${label.padEnd(11)} ${none}`];
  return items.map((item, i) => `  ${(i === 0 ? label : '').padEnd(11)} ${item}`);
}

interface PlanWorkspace {
  files?: number;
  tarBytes?: number;
  upload?: { id: string; files: number; bytes: number };
  git?: { url: string; ref: string | null; depth: number; bundle: boolean };
}

function workspaceLines(ws: PlanWorkspace, local?: WorkspaceSummary): string[] {
  const lines: string[] = [];
  if (ws.git) {
    const g = ws.git;
    lines.push(`git ${terminalText(g.url)} at ${g.ref ? terminalText(g.ref) : "the remote's HEAD"} (depth ${g.depth}${g.bundle ? '; the agent\'s commits come back as agent.bundle' : ''}), cloned by the worker`);
  }
  if (ws.upload) lines.push(`upload ${ws.upload.id}: ${ws.upload.files} file(s), ${mb(ws.upload.bytes)} (kept on the server)`);
  if (local && !ws.upload && local.how === 'not-sent') {
    lines.push(`${terminalText(local.dir)}: ${local.files} file(s), ${local.links} link(s), ${mb(local.bytes)} — would be uploaded as ${local.id} (a dry run sends nothing)`);
  }
  if (ws.tarBytes || !lines.length) lines.push(`${ws.files ?? 0} inline file(s), ${ws.tarBytes ?? 0} bytes of tar`);
  else if (ws.files) lines.push(`${ws.files} inline file(s) on top`);
  return lines;
}

export function planText(plan: Record<string, unknown>, local?: WorkspaceSummary): string {
  const task = terminalText(String(plan.task ?? '')).split('\n').find((l) => l.trim() && !/^#\s/.test(l.trim())) ?? '';
  const criteria = list(plan.doneCriteria);
  const egress = list(plan.egress);
  const env = (plan.environment ?? {}) as { name?: string; image?: string; setup?: string[]; setupEgress?: string[]; setupTimeoutS?: number; cached?: boolean };
  const setup = list(env.setup).map((c) => c.trim().replace(/\s*\n\s*/g, ' ⏎ '));
  const patch = (plan.patch ?? {}) as { gitignore?: boolean; exclude?: string[] };
  const budgets = (plan.budgets ?? {}) as Record<string, unknown>;
  const lines = [
    'dry run: the server would accept this run (nothing was queued, no model was called)',
    `  task        ${task.trim().slice(0, 100)}`,
    `  tools       ${list(plan.tools).join(', ')}`,
    ...block('done checks', list(plan.doneChecks), 'none'),
    ...(criteria.length ? block('criteria', criteria, '') : []),
    ...(list(plan.cannotDo).length ? block('cannot do', list(plan.cannotDo), '') : []),
    `  environment ${terminalText(String(env.name ?? 'default'))} (${terminalText(String(env.image ?? '?'))})`,
    ...(setup.length
      ? [...block('setup', setup, ''), `  ${''.padEnd(11)} egress ${list(env.setupEgress).join(', ') || 'none'}; at most ${env.setupTimeoutS ?? '?'} s, apart from wallTimeS; ${env.cached ? 'cached by its lockfiles' : 'not cached'}`]
      : ['  setup       none']),
    `  egress      ${egress.length ? egress.join(', ') : 'none (no network)'}`,
    `  limits      ${pairs(plan.limits)}`,
    `  budgets     ${pairs(budgets)}${setup.length ? ' (wallTimeS is the agent\'s, from the end of setup)' : ''}`,
    `  policy      ${terminalText(String(plan.policy))}${plan.approvals ? ', asks wait for approval' : ', asks are refused (unattended)'}`,
    `  model       ${terminalText(String(plan.model))}`,
    ...block('workspace', workspaceLines((plan.workspace ?? {}) as PlanWorkspace, local), ''),
    ...(local?.skipped.length ? [`  ${''.padEnd(11)} skipped: ${local.skipped.map((s) => terminalText(s.path)).join(', ')}`] : []),
    `  patch       ${patch.gitignore === false ? 'the workspace\'s .gitignore not applied' : 'leaves out what the workspace\'s .gitignore names'}${patch.exclude?.length ? `; and ${list(patch.exclude).join(', ')}` : ''}`,
    ...(Object.keys((plan.labels ?? {}) as object).length ? [`  labels      ${pairs(plan.labels)}`] : []),
  ];
  return `${lines.join('\n')}\n`;
}
