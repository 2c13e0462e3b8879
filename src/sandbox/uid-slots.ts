/**
 * Per-sandbox uids, leased by container name. Linux keeps some limits per uid for the whole host
 * (RLIMIT_NPROC, inotify instances, pipe-buffer pages, …), so sandboxes that shared one uid could
 * starve each other; and an agent that shares PID 1's uid can stop or trace it. So every sandbox on
 * an engine gets a slot of its own: PID 1 (init, the deadline sleep, the egress relay) runs as
 * `base + 2n`, the agent's commands as `base + 2n + 1`.
 *
 * The lease is the sandbox container itself: it is named `corral-u<agent uid>`, and the engine refuses
 * a second container of that name (409), so two workers on one engine can never pick the same slot,
 * whatever deployment or Redis they belong to. Removing the container (dispose, the reaper) frees the
 * slot; nothing else has to be cleaned up.
 *
 * Why not user-namespace remapping: Docker 20.10 has only the daemon-wide `--userns-remap`, which maps
 * every container to the same host range (the sandboxes would again share uids), needs a daemon restart
 * and changes every other container of the engine.
 */
import { randomInt } from 'node:crypto';
import type Docker from 'dockerode';
import { SandboxError } from '../domain/errors';
import { toSandboxError } from './docker-error';

export const UID_LABEL = 'corral.uid';

export interface UidSlot {
  slot: number;
  /** PID 1's uid (and gid): not the agent's, so the agent can neither signal nor trace it. */
  initUid: number;
  /** The uid (and gid) every agent command, file tool and export runs as. */
  agentUid: number;
  /** The container name that holds the lease. */
  name: string;
}

export interface UidRange {
  base: number;
  slots: number;
}

export function uidSlot(range: UidRange, slot: number): UidSlot {
  const initUid = range.base + 2 * slot;
  return { slot, initUid, agentUid: initUid + 1, name: `corral-u${initUid + 1}` };
}

/** The slot an agent uid belongs to, or undefined when it is outside the range. */
export function slotOfAgentUid(range: UidRange, uid: number): number | undefined {
  const off = uid - range.base - 1;
  return off >= 0 && off % 2 === 0 && off / 2 < range.slots ? off / 2 : undefined;
}

function isNameConflict(err: unknown): boolean {
  const e = err as { statusCode?: number; details?: { status?: unknown } };
  return e.statusCode === 409 || e.details?.status === 409;
}

/**
 * Creates a container in a free slot: `create(slot)` must create it named `slot.name`. Slots that
 * containers on this engine already hold (by label, any deployment) are skipped; a name conflict
 * (another worker took the slot meanwhile) moves on to the next. Throws sandbox_unavailable when
 * every slot is taken.
 */
export async function createInFreeSlot(
  docker: Docker,
  range: UidRange,
  create: (slot: UidSlot) => Promise<Docker.Container>,
): Promise<{ slot: UidSlot; container: Docker.Container }> {
  let taken: Set<number>;
  try {
    const list = await docker.listContainers({ all: true, filters: { label: [UID_LABEL] } });
    taken = new Set(list.map((c) => slotOfAgentUid(range, Number(c.Labels?.[UID_LABEL]))).filter((n): n is number => n !== undefined));
  } catch (err) {
    throw toSandboxError(err, 'list sandbox slots');
  }
  // Start at a random free slot so concurrent workers rarely race for the same one.
  const free = Array.from({ length: range.slots }, (_, i) => i).filter((i) => !taken.has(i));
  const start = free.length > 0 ? randomInt(free.length) : 0;
  for (let k = 0; k < free.length; k++) {
    const slot = uidSlot(range, free[(start + k) % free.length]!);
    try {
      return { slot, container: await create(slot) };
    } catch (err) {
      if (!isNameConflict(err)) throw err;
    }
  }
  const last = uidSlot(range, range.slots - 1).agentUid;
  throw new SandboxError(
    'sandbox_unavailable',
    `every sandbox uid slot on this engine is in use (${range.slots} slots, uids ${range.base}–${last}); raise CORRAL_SANDBOX_SLOTS or wait for runs to end`,
  );
}
