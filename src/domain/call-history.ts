/**
 * Keeping a run's CallHistory (domain/gate.ts): what its executed calls wrote as a whole and the links
 * they made, for the gate to judge later calls with. Bounded: past MAX_HISTORY entries the oldest go.
 * A call that moved, copied or linked something onto a written file (`clobbered`) takes it out: the
 * file no longer holds only what the run wrote.
 */
import type { CallHistory } from './gate';

export const MAX_HISTORY = 2_000;

export function emptyHistory(): CallHistory {
  return { written: [], links: [] };
}

/** `base` with what one more call added. */
export function extendHistory(base: CallHistory, add: CallHistory | undefined): CallHistory {
  if (!add || (add.written.length === 0 && add.links.length === 0 && !add.clobbered?.length)) return base;
  const gone = new Set([...add.written, ...(add.clobbered ?? [])]);
  const written = [...base.written.filter((p) => !gone.has(p)), ...add.written].slice(-MAX_HISTORY);
  const links = [...base.links.filter((l) => !add.links.some((x) => x.name === l.name)), ...add.links].slice(-MAX_HISTORY);
  return { written, links };
}
