/**
 * Starting a turn's sub-runs, on the parent's worker: copy the parent's workspace (the streamed
 * export, to `checkpoint-N.tar` in its run directory), make each child's RunSpec from its task sheet
 * (the parent's policy, approvals, egress, limits and model; the granted budgets; the sheet's task,
 * done checks, tools and cannot-do list on top of the parent's), record the children, store the
 * parent's suspension record, and add the children as BullMQ flow children of the parent's job.
 * The caller then removes the parent's sandbox and moves its job to waiting-children.
 *
 * If the workspace cannot be copied, or a child spec is refused, the delegate calls get error
 * results instead (the parent goes on in the same sandbox).
 */
import { join } from 'node:path';
import type { Config } from '../config';
import type { Emit } from '../domain/events';
import { RunSpec, type RunJob } from '../domain/run-spec';
import type { Sandbox } from '../domain/sandbox';
import { describeZodIssues } from '../domain/errors';
import type { TaskContract } from '../domain/task-contract';
import type { RunStore } from '../queue/run-store';
import type { RunTree } from '../queue/run-tree';
import type { DelegationResult, RunLoopSuspended } from '../run/agent-loop';
import type { Suspension } from './suspension';

/** The queue operations a run needs for its sub-runs (queue/subrun-jobs.ts implements them over BullMQ). */
export interface JobPort {
  /** Adds the children as flow children of this run's job (same queue; the job waits for them). */
  addChildren(children: RunJob[]): Promise<void>;
  /** Moves this run's job to waiting-children; false when every child has already ended. */
  waitForChildren(): Promise<boolean>;
  /** What the ended children returned (by run id), and the failure reasons of failed ones. */
  childResults(): Promise<{ values: Map<string, unknown>; failures: Map<string, string> }>;
}

export interface SubRunDeps {
  config: Config;
  store: RunStore;
  tree: RunTree;
  job: JobPort;
  newRunId: () => string;
  clock: () => number;
  emit: Emit;
  /** The parent's owner token: its writes land only while it owns the run. */
  fence?: string;
}

export interface ParentRun {
  runId: string;
  spec: RunSpec;
  tenant: string;
  runDir: string;
  /** 0 for a top-level run. */
  depth: number;
  contract: TaskContract;
  /** The submitter's task at the root of the tree (a top-level run's own task). */
  authorizedTask: string;
  /** The trace context a child started by a delegate call carries (that call's span): the child's trace is the parent's. */
  traceparentFor?: (callId: string) => string | undefined;
}

function failAll(s: RunLoopSuspended, why: string): { failed: DelegationResult[] } {
  return {
    failed: s.delegations.map((d) => ({
      callId: d.callId, content: `error: the sub-run was not started: ${why}`, summary: `not started: ${why}`, kind: 'failed',
      usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 }, granted: d.budgets,
    })),
  };
}

/** The child's spec: the sheet's work under the parent's rules, with the granted budgets. */
export function childSpec(p: ParentRun, d: RunLoopSuspended['delegations'][number]): RunSpec {
  const { sheet } = d;
  const allowedTools = sheet.allowedTools ?? p.contract.allowedTools ?? undefined;
  const r = RunSpec.safeParse({
    task: sheet.task,
    contract: {
      task: sheet.task,
      ...(allowedTools ? { allowedTools } : {}),
      cannotDo: [...p.contract.cannotDo, ...sheet.cannotDo].slice(0, 100),
      doneMeans: sheet.doneChecks.map((c) => `check: ${c}`),
    },
    policy: p.spec.policy,
    approvals: p.spec.approvals,
    ...(p.spec.egress ? { egress: p.spec.egress } : {}),
    // The same image; a sub-run starts from its parent's workspace, so it has no setup phase of its own.
    environment: p.spec.environment,
    // the same MCP servers (its own, in its own sandbox)
    ...(p.spec.tools ? { tools: p.spec.tools } : {}),
    limits: p.spec.limits,
    budgets: d.budgets,
    ...(p.spec.model ? { model: p.spec.model } : {}),
    ...(p.spec.routing ? { routing: p.spec.routing } : {}),
    labels: { ...(p.spec.labels ?? {}), 'corral.parent': p.runId },
  });
  if (!r.success) throw new RangeError(describeZodIssues(r.error.issues).message);
  return r.data;
}

export async function startSubRuns(
  d: SubRunDeps, p: ParentRun, sandbox: Sandbox, s: RunLoopSuspended, checkpoint: string,
): Promise<{ suspension: Suspension } | { failed: DelegationResult[] }> {
  try {
    await sandbox.exportWorkspace({ tarPath: join(p.runDir, checkpoint), patchPath: join(p.runDir, checkpoint.replace(/\.tar$/, '.patch')) });
  } catch (err) {
    return failAll(s, `this run's workspace could not be copied for it (${(err as Error).message})`);
  }
  const deadlineAt = s.state.meter.startedAt + p.spec.budgets.wallTimeS * 1000;
  const children: Array<{ job: RunJob; callId: string; task: string }> = [];
  for (const del of s.delegations) {
    let spec: RunSpec;
    try {
      spec = childSpec(p, del);
    } catch (err) {
      return failAll(s, `a task sheet made an invalid run (${(err as Error).message})`);
    }
    const runId = d.newRunId();
    const h = s.state.history;
    const history = h ? { history: { written: h.written.slice(-500), links: h.links.slice(-500) } } : {};
    const traceparent = p.traceparentFor?.(del.callId);
    children.push({
      callId: del.callId, task: del.sheet.task.slice(0, 500),
      job: { runId, spec, ...(traceparent ? { traceparent } : {}), parent: { runId: p.runId, callId: del.callId, depth: p.depth + 1, checkpoint, deadlineAt, authorizedTask: p.authorizedTask, ...history } },
    });
  }
  const now = new Date(d.clock());
  for (const c of children) await d.store.create(c.job.runId, c.job.spec, now, p.tenant);
  await d.tree.addChildren(p.runId, children.map((c) => ({ id: c.job.runId, callId: c.callId, depth: p.depth + 1 })));
  const suspension: Suspension = {
    v: 1, loop: s.state, checkpoint, suspendedAt: d.clock(),
    children: children.map((c) => ({ runId: c.job.runId, callId: c.callId, granted: c.job.spec.budgets, task: c.task })),
  };
  await d.tree.saveSuspension(p.runId, JSON.stringify(suspension), d.fence);
  for (const c of children) {
    d.emit({ type: 'subrun.started', callId: c.callId, childRunId: c.job.runId, task: c.task, budgets: c.job.spec.budgets, depth: p.depth + 1, checkpoint });
  }
  await d.store.update(p.runId, { status: 'awaiting_children' }, d.fence);
  await d.job.addChildren(children.map((c) => c.job));
  d.emit({ type: 'run.suspended', children: children.map((c) => c.job.runId), checkpoint, sandboxKept: false });
  return { suspension };
}
