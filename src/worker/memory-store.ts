/**
 * Run memory on the worker's disk: one file per memory key under {data dir}/memory/{key}.md, loaded
 * at the start of a run that names the key and shown to the model as untrusted notes. Lines the
 * model marks `MEMORY:` in its final answer are proposed; they are appended only when the run is
 * marked trusted, or when a human approves them (runs with approvals on); unattended, they are not.
 */
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { Emit } from '../domain/events';
import type { ApprovalPort } from '../policy/approval-port';
import { appendMemory, extractMemoryProposals } from '../run/memory';

export function memoryPath(dataDir: string, key: string): string {
  return resolve(dataDir, 'memory', `${key}.md`);
}

export function readMemory(dataDir: string, key: string): string | null {
  try {
    return readFileSync(memoryPath(dataDir, key), 'utf8');
  } catch {
    return null;
  }
}

export interface ProposeMemoryInput {
  runId: string;
  memory: { key: string; trusted: boolean };
  approvals: boolean;
  finalAnswer: string | null;
  dataDir: string;
  port: ApprovalPort;
  emit: Emit;
  now: () => Date;
  signal?: AbortSignal;
}

export async function proposeMemory(i: ProposeMemoryInput): Promise<void> {
  const lines = extractMemoryProposals(i.finalAnswer);
  if (!lines.length) return;
  let applied = false;
  let reason: string;
  if (i.memory.trusted) {
    applied = true;
    reason = 'the run is marked trusted';
  } else if (i.approvals) {
    const a = await i.port.request(
      { runId: i.runId, callId: 'memory', tool: 'memory', args: { key: i.memory.key, lines }, reason: `the run proposes ${lines.length} line(s) for memory "${i.memory.key}"` },
      i.signal,
    );
    applied = a.approved;
    reason = a.approved ? `approved by ${a.by}` : a.timedOut ? 'nobody approved it in time' : `${a.by} denied it`;
  } else {
    reason = 'unattended run not marked trusted: proposals are kept in the log only';
  }
  if (applied) {
    const path = memoryPath(i.dataDir, i.memory.key);
    mkdirSync(dirname(path), { recursive: true });
    const existing = readMemory(i.dataDir, i.memory.key) ?? '';
    appendFileSync(path, appendMemory(existing, lines, i.now()).slice(existing.length));
  }
  i.emit({ type: 'memory.proposed', lines, applied, reason });
}

