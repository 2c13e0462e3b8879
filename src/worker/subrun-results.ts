/**
 * Sub-run results, both ends:
 * - a child, at its end, makes its ResultSheet (outcome, answer, done checks, its patch cut to
 *   CORRAL_SUBRUN_PATCH_MAX_BYTES, files changed, usage, its own sub-run tree) — its job's return value;
 * - a resuming parent reads its children's sheets (job return values, validated), makes one from the
 *   run record for a child whose job failed or was removed (cancelled before it started), logs
 *   subrun.finished per child and run.resumed, and turns each sheet into the delegate call's result.
 * Also the child's start: its parent link checked against the parent's record, and its seed (the
 * parent's checkpoint) read with a size cap.
 */
import { open, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Config } from '../config';
import { InvalidInputError } from '../domain/errors';
import type { Emit, RunEvent, RunOutcome, RunUsage } from '../domain/events';
import type { RunBudgets } from '../domain/run-spec';
import { ResultSheet, nodeOf, type ParentLink, type SubRunNode } from '../domain/subrun';
import type { WorkspaceExport } from '../domain/sandbox';
import type { RunStore } from '../queue/run-store';
import type { RunTree } from '../queue/run-tree';
import type { DelegationResult } from '../run/agent-loop';
import type { JobPort } from './subrun-start';
import type { Suspension } from './suspension';

const FINAL_ANSWER_FOR_MODEL = 8000;

/** Reads at most `max` bytes of a file, cut at the last newline when cut; null when it does not exist. */
async function readHead(path: string, max: number): Promise<{ text: string; bytes: number; truncated: boolean } | null> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    return null;
  }
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(Math.min(size, max));
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0);
    let text = buf.subarray(0, bytesRead).toString('utf8');
    const truncated = size > max;
    if (truncated) text = text.slice(0, Math.max(0, text.lastIndexOf('\n') + 1));
    return { text, bytes: size, truncated };
  } finally {
    await fh.close();
  }
}

/** The child's result sheet, at its end. */
export async function makeResultSheet(o: {
  config: Config; runId: string; task: string; runDir: string; outcome: RunOutcome; reason: string; finalAnswer: string | null;
  usage: RunUsage; budgets: RunBudgets; events: readonly RunEvent[]; exported?: WorkspaceExport; checks: number;
}): Promise<ResultSheet> {
  const doneChecks = o.events.filter((e): e is Extract<RunEvent, { type: 'done.check' }> => e.type === 'done.check').slice(-Math.max(0, o.checks))
    .map((e) => ({ command: e.command.slice(0, 2000), ok: e.ok, exitCode: e.exitCode, summary: e.summary.slice(0, 2000) }));
  const children = o.events.filter((e): e is Extract<RunEvent, { type: 'subrun.finished' }> => e.type === 'subrun.finished').map((e) => e.node).slice(0, 64);
  const patch = o.exported ? await readHead(join(o.runDir, 'workspace.patch'), o.config.CORRAL_SUBRUN_PATCH_MAX_BYTES) : null;
  return ResultSheet.parse({
    runId: o.runId, task: o.task.slice(0, 500), outcome: o.outcome, reason: o.reason.slice(0, 4000),
    finalAnswer: o.finalAnswer === null ? null : o.finalAnswer.slice(0, 50_000),
    doneChecks,
    files: (o.exported?.files ?? []).slice(0, 200).map((f) => ({ path: f.path.slice(0, 4096), change: f.change, added: f.added, removed: f.removed })),
    patch: patch ?? { text: '', bytes: 0, truncated: false },
    usage: o.usage, budgets: o.budgets, children,
  });
}

/** A sheet for a child that left none (its job failed, or it was removed before it started). */
async function sheetFromRecord(store: RunStore, child: Suspension['children'][number], failure: string | undefined): Promise<ResultSheet> {
  const run = await store.get(child.runId);
  const outcome = (run?.outcome ?? 'error') as RunOutcome;
  const reason = run?.reason ?? failure ?? 'the sub-run ended without a result';
  const usage = run?.usage ?? { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  return { runId: child.runId, task: child.task, outcome, reason: reason.slice(0, 4000), finalAnswer: null, doneChecks: [], files: [], patch: { text: '', bytes: 0, truncated: false }, usage, budgets: child.granted, children: [] };
}

/** What the parent's model sees of a sheet: JSON, the answer cut to a few thousand characters. */
export function sheetForModel(s: ResultSheet): string {
  const answer = s.finalAnswer && s.finalAnswer.length > FINAL_ANSWER_FOR_MODEL ? `${s.finalAnswer.slice(0, FINAL_ANSWER_FOR_MODEL)}\n[… ${s.finalAnswer.length - FINAL_ANSWER_FOR_MODEL} more characters not shown]` : s.finalAnswer;
  const countTree = (n: SubRunNode[]): number => n.reduce((k, c) => k + 1 + countTree(c.children), 0);
  return JSON.stringify({
    subRun: s.runId, outcome: s.outcome, reason: s.reason, finalAnswer: answer, doneChecks: s.doneChecks, files: s.files,
    patch: s.patch.text, ...(s.patch.truncated ? { patchTruncated: `the patch is ${s.patch.bytes} bytes; only the first part is shown (CORRAL_SUBRUN_PATCH_MAX_BYTES), so it cannot be applied whole` } : {}),
    used: { llmCalls: s.usage.llmCalls, toolCalls: s.usage.toolCalls, tokens: s.usage.inputTokens + s.usage.outputTokens, costUsd: Math.round(s.usage.costUsd * 1e6) / 1e6, wallTimeS: Math.round(s.usage.wallTimeMs / 100) / 10 },
    ...(s.children.length ? { itsSubRuns: countTree(s.children) } : {}),
  }, null, 2);
}

/** On resume: every child's sheet as the delegate call's result; logs subrun.finished and run.resumed. */
export async function collectSubRunResults(o: { store: RunStore; job: JobPort; emit: Emit; clock: () => number; workerId: string }, s: Suspension): Promise<DelegationResult[]> {
  const { values, failures } = await o.job.childResults();
  const out: DelegationResult[] = [];
  const outcomes: Array<{ runId: string; outcome: RunOutcome }> = [];
  for (const child of s.children) {
    const raw = values.get(child.runId) as { sheet?: unknown } | undefined;
    const parsed = raw && typeof raw === 'object' ? ResultSheet.safeParse(raw.sheet) : undefined;
    const sheet = parsed?.success && parsed.data.runId === child.runId ? parsed.data : await sheetFromRecord(o.store, child, failures.get(child.runId));
    o.emit({ type: 'subrun.finished', callId: child.callId, childRunId: child.runId, outcome: sheet.outcome, reason: sheet.reason, usage: sheet.usage, budgets: child.granted, node: nodeOf(sheet) });
    outcomes.push({ runId: child.runId, outcome: sheet.outcome });
    const { wallTimeMs: _w, ...usage } = sheet.usage;
    out.push({
      callId: child.callId, content: sheetForModel(sheet), kind: sheet.outcome === 'succeeded' ? 'ok' : 'failed', usage, granted: child.granted,
      summary: `sub-run ${child.runId} ${sheet.outcome}: ${sheet.reason.slice(0, 200)}${sheet.files.length ? ` · ${sheet.files.length} file(s) changed` : ''}`,
    });
  }
  o.emit({ type: 'run.resumed', workerId: o.workerId, children: outcomes, waitedMs: Math.max(0, o.clock() - s.suspendedAt), checkpoint: s.checkpoint });
  return out;
}

/** A child's start: its link must match what its parent recorded; returns its seed (the parent's checkpoint). */
export async function childSeed(o: { config: Config; tree: RunTree }, runId: string, parent: ParentLink, workspaceMb: number): Promise<Buffer> {
  const links = await o.tree.children(parent.runId);
  if (!links.some((l) => l.id === runId && l.callId === parent.callId)) {
    throw new InvalidInputError(`parent: run ${parent.runId} did not start ${runId} for call ${parent.callId}`, 'parent');
  }
  const path = resolve(o.config.CORRAL_DATA_DIR, 'runs', parent.runId, parent.checkpoint);
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    throw new InvalidInputError(`parent: the workspace copy ${parent.checkpoint} of ${parent.runId} is not in this worker's data dir (${path}); sub-runs need workers that share CORRAL_DATA_DIR`, 'parent.checkpoint');
  }
  if (size > workspaceMb * 1024 * 1024 + 1024 * 1024) throw new InvalidInputError(`parent: the workspace copy is ${size} bytes, more than the run's workspace (${workspaceMb} MB)`, 'parent.checkpoint');
  const fh = await open(path, 'r');
  try {
    const buf = Buffer.alloc(size);
    await fh.read(buf, 0, size, 0);
    return buf;
  } finally {
    await fh.close();
  }
}
