/**
 * Sub-runs (planner → executor): the fixed JSON a parent run and its child runs exchange.
 *
 * - TaskSheet: what the parent's `delegate` call asks for — the child's task, its done checks, what it
 *   must not do, the tools it may use (a subset of the parent's) and the budgets it wants (each at
 *   most what the parent has left; omitted ones get a share of it).
 * - ResultSheet: what comes back as the tool's result — the child's outcome and reason, its final
 *   answer, its done checks, its patch against the workspace it started from (cut to a cap), the files
 *   it changed, its usage against its budgets, and the tree of its own sub-runs.
 * - ParentLink: in a child's queue job, who its parent is, the checkpoint of the parent's workspace it
 *   starts from, its depth and the absolute deadline it must end by (the parent's wall time).
 *
 * All three cross a trust boundary (the model's arguments; job data and job return values in Redis)
 * and are parsed with these schemas wherever they are read.
 */
import { z } from 'zod';
import { RUN_OUTCOMES, type RunOutcome } from './events';
import { RUN_ID } from './run-id';


export const SheetBudgets = z
  .object({
    llmCalls: z.number().int().min(1).max(1000).optional().describe('model turns the sub-run may take'),
    toolCalls: z.number().int().min(0).max(5000).optional().describe('tool calls the sub-run may make'),
    tokens: z.number().int().min(1000).max(100_000_000).optional().describe('input + output tokens'),
    wallTimeS: z.number().int().min(5).max(24 * 3600).optional().describe('seconds, counted from when it is submitted'),
    costUsd: z.number().min(0).max(1000).optional().describe('USD'),
  })
  .strict();
export type SheetBudgets = z.infer<typeof SheetBudgets>;

export const TaskSheet = z
  .object({
    task: z.string().trim().min(1, 'must not be empty').max(20_000).describe('what the sub-run must do, self-contained: it sees only this sheet and a copy of /workspace'),
    doneChecks: z.array(z.string().trim().min(1).max(2000)).max(10).default([]).describe('shell commands that must exit 0 in the sub-run\'s sandbox when it says it is done'),
    cannotDo: z.array(z.string().trim().min(1).max(2000)).max(20).default([]).describe('things the sub-run must not do (added to this run\'s own list)'),
    allowedTools: z.array(z.string().trim().min(1).max(100)).min(1).max(50).optional().describe('tools the sub-run may use (a subset of yours); default: the same as yours'),
    budgets: SheetBudgets.default({}).describe('what the sub-run may spend, carved out of what this run has left; omitted: a share of it'),
  })
  .strict();
export type TaskSheet = z.infer<typeof TaskSheet>;

const Usage = z
  .object({
    llmCalls: z.number().int().min(0),
    toolCalls: z.number().int().min(0),
    inputTokens: z.number().int().min(0),
    outputTokens: z.number().int().min(0),
    costUsd: z.number().min(0),
    wallTimeMs: z.number().min(0),
  })
  .strict();

const Limits = z
  .object({ llmCalls: z.number(), toolCalls: z.number(), tokens: z.number(), wallTimeS: z.number(), costUsd: z.number() })
  .strict();

const Outcome = z.enum(RUN_OUTCOMES as [RunOutcome, ...RunOutcome[]]);

/** One run of a sub-run tree, without patches: for reports and the parent's view of grandchildren. */
export interface SubRunNode {
  runId: string;
  task: string;
  outcome: RunOutcome;
  reason: string;
  usage: z.infer<typeof Usage>;
  budgets: z.infer<typeof Limits>;
  children: SubRunNode[];
}

export const SubRunNode: z.ZodType<SubRunNode> = z.lazy(() =>
  z
    .object({
      runId: z.string().regex(RUN_ID),
      task: z.string().max(500),
      outcome: Outcome,
      reason: z.string().max(4000),
      usage: Usage,
      budgets: Limits,
      children: z.array(SubRunNode).max(64),
    })
    .strict(),
);

export const ResultSheet = z
  .object({
    runId: z.string().regex(RUN_ID),
    task: z.string().max(500),
    outcome: Outcome,
    reason: z.string().max(4000),
    finalAnswer: z.string().max(50_000).nullable(),
    doneChecks: z.array(z.object({ command: z.string().max(2000), ok: z.boolean(), exitCode: z.number().nullable(), summary: z.string().max(2000) }).strict()).max(50),
    files: z.array(z.object({ path: z.string().max(4096), change: z.enum(['added', 'modified', 'deleted']), added: z.number(), removed: z.number() }).strict()).max(200),
    /** The child's workspace.patch (against the parent's checkpoint it started from), cut to a cap. */
    patch: z.object({ text: z.string(), bytes: z.number().int().min(0), truncated: z.boolean() }).strict(),
    usage: Usage,
    budgets: Limits,
    children: z.array(SubRunNode).max(64),
  })
  .strict();
export type ResultSheet = z.infer<typeof ResultSheet>;

export const ParentLink = z
  .object({
    runId: z.string().regex(RUN_ID),
    /** The parent's delegate call this child answers. */
    callId: z.string().min(1).max(256),
    /** 1 for a child of a top-level run. */
    depth: z.number().int().min(1).max(16),
    /** The parent's workspace copy the child starts from: a file in the parent's run directory. */
    checkpoint: z.string().regex(/^checkpoint-[0-9]{1,4}\.tar$/, 'must be checkpoint-N.tar'),
    /** Epoch ms: the parent's wall-time deadline; the child ends by then whatever its own budget says. */
    deadlineAt: z.number().int().positive(),
    /**
     * The task as the submitter wrote it, at the root of the tree: what the child's gate takes as the
     * user's authorization. The child's own task is the parent model's writing, never authorization.
     */
    authorizedTask: z.string().max(50_000).optional(),
    /** What the parent's calls wrote and linked before it delegated (the gate judges the child's calls with it). */
    history: z.object({
      written: z.array(z.string().max(4096)).max(500),
      links: z.array(z.object({ name: z.string().max(4096), target: z.string().max(4096).nullable() }).strict()).max(500),
    }).strict().optional(),
  })
  .strict();
export type ParentLink = z.infer<typeof ParentLink>;

/** The tree node of a result sheet (what a parent keeps of its child in its own tree). */
export function nodeOf(sheet: ResultSheet): SubRunNode {
  return { runId: sheet.runId, task: sheet.task, outcome: sheet.outcome, reason: sheet.reason, usage: sheet.usage, budgets: sheet.budgets, children: sheet.children };
}
