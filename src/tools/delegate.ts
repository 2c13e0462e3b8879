/**
 * `delegate`: hands a self-contained part of the task to a sub-run — another agent with its own
 * sandbox, starting from a copy of /workspace as this turn leaves it, with its own budgets carved out
 * of this run's. Its arguments are the task sheet (domain/subrun.ts); its result, when the sub-run
 * has ended, is the result sheet: outcome, final answer, done checks, and the patch of what it
 * changed (this run's workspace is not changed — apply the patch with apply_patch if you want it).
 *
 * The run loop and the worker do the work (deferred tool); a task must name it under its allowed
 * tools to be offered it (opt-in), and the policy gate decides each call like any other.
 */
import { TaskSheet } from '../domain/subrun';
import { defineTool } from './tool';

export const DELEGATE_TOOL = 'delegate';

export const delegateTool = defineTool({
  name: DELEGATE_TOOL,
  description: [
    'Hand a self-contained part of the task to a sub-run: another agent in its own sandbox that starts from a copy of /workspace as it is after this turn\'s other calls.',
    'Give it everything it needs in `task` (it sees nothing else), and `doneChecks` (shell commands that must pass) where you can.',
    'Its budgets come out of yours. Several delegate calls in one turn run in parallel.',
    'The result, when it has ended, is a JSON result sheet: outcome, reason, finalAnswer, doneChecks, files changed and `patch`, a unified diff of its changes against that copy. Your own workspace is not changed: apply the patch with apply_patch to take its work.',
  ].join(' '),
  schema: TaskSheet,
  optIn: true,
  deferred: true,
  async execute() {
    return { ok: false, content: 'error: this run cannot start sub-runs (no sub-run support here)', summary: 'sub-runs are not available' };
  },
});
