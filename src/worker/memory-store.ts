/**
 * Run memory, shared by all workers (queue/redis-memory.ts): one text per memory key, loaded at the
 * start of a run that names the key and shown to the model as untrusted notes. Lines the model marks
 * `MEMORY:` in its final answer are proposed; they are appended only when the run is marked
 * trusted, or when a human approves them (runs with approvals on); unattended, they are not.
 */
import type { Emit } from '../domain/events';
import type { ApprovalPort } from '../domain/approval-port';
import type { TenantMemory } from '../queue/redis-memory';
import { appendMemory, extractMemoryProposals } from '../run/memory';

export interface ProposeMemoryInput {
  runId: string;
  memory: { key: string; trusted: boolean };
  approvals: boolean;
  finalAnswer: string | null;
  store: TenantMemory;
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
    const existing = (await i.store.read(i.memory.key)) ?? '';
    if (!(await i.store.append(i.memory.key, appendMemory(existing, lines, i.now()).slice(existing.length)))) {
      applied = false;
      reason = `memory "${i.memory.key}" is full (${i.store.maxBytes} bytes): nothing was added`;
    }
  }
  i.emit({ type: 'memory.proposed', lines, applied, reason });
}

