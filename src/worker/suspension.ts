/**
 * The suspension record of a run that waits for its sub-runs (stored by RunTree, read back by
 * whichever worker resumes the run): the agent loop's state, the workspace checkpoint the run's new
 * sandbox starts from, the children it waits for and what each was granted, and when it stopped.
 * Parsed with SuspensionSchema when read: it comes out of Redis.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { InvalidInputError, describeZodIssues } from '../domain/errors';
import { RunId } from '../domain/run-id';
import { RunBudgets } from '../domain/run-spec';
import { LoopStateSchema } from '../run/loop-state';

export const CHECKPOINT_NAME = /^checkpoint-([0-9]{1,4})\.tar$/;

export const SuspensionSchema = z
  .object({
    v: z.literal(1),
    loop: LoopStateSchema,
    /** The workspace copy (in the run's directory) that the sub-runs and the resumed run start from. */
    checkpoint: z.string().regex(CHECKPOINT_NAME),
    children: z
      .array(z.object({ runId: RunId, callId: z.string().max(256), granted: RunBudgets, task: z.string().max(500) }).strict())
      .min(1)
      .max(64),
    suspendedAt: z.number().int().positive(),
  })
  .strict();
export type Suspension = z.infer<typeof SuspensionSchema>;

/** Parses a stored record; InvalidInputError naming the field when it is not one. */
export function parseSuspension(text: string, runId: string): Suspension {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new InvalidInputError(`the suspension record of ${runId} is not JSON: ${(err as Error).message}`, undefined, undefined, { cause: err });
  }
  const r = SuspensionSchema.safeParse(raw);
  if (!r.success) throw new InvalidInputError(`the suspension record of ${runId} is malformed: ${describeZodIssues(r.error.issues).message}`);
  return r.data;
}

/** The next checkpoint's file name after `previous` (checkpoint-1.tar first). */
export function nextCheckpoint(previous: string | undefined): string {
  const n = previous ? Number(CHECKPOINT_NAME.exec(previous)?.[1] ?? 0) : 0;
  return `checkpoint-${n + 1}.tar`;
}

/** Added to the resumed turn's last tool result: the sandbox is new. */
export const RESUME_NOTE = 'Note: while the sub-runs worked, this run waited without a sandbox. It now runs in a new sandbox whose /workspace is the copy taken when you delegated; anything outside /workspace (such as /tmp) and running processes are gone.';

/** Reads a checkpoint of the run's own workspace (at most the workspace size). */
export function readCheckpoint(runDir: string, name: string, workspaceMb: number): Buffer {
  if (!CHECKPOINT_NAME.test(name)) throw new InvalidInputError(`not a checkpoint name: ${name}`);
  const path = join(runDir, name);
  if (!existsSync(path)) throw new InvalidInputError(`the run's workspace copy ${path} is not in this worker's data dir; resuming a run needs workers that share CORRAL_DATA_DIR`);
  if (statSync(path).size > workspaceMb * 1024 * 1024 + 1024 * 1024) throw new InvalidInputError(`the run's workspace copy ${name} is larger than its workspace (${workspaceMb} MB)`);
  return readFileSync(path);
}
