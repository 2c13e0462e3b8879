/**
 * The worker's ApprovalPort: puts the run in `awaiting_approval` with the pending call visible in
 * GET /v1/runs/:id, emits approval.pending, and waits for POST /v1/runs/:id/approvals/:callId (or
 * `corral approve`). No answer within the configured time is a deny (timedOut: true).
 *
 * Parking: while it waits, the run gives its worker slot back (slots.ts) so other runs — other
 * tenants' first — can start; its sandbox stays as it is. When the answer comes it takes a slot again,
 * ahead of new runs, and goes on. A tenant may have at most `maxParked` runs parked at once across all
 * workers; past that the call is refused at once with the reason (a tenant cannot fill the host
 * with runs that wait for it).
 *
 * Every write is fenced by the attempt's job lock token: an attempt that lost its run writes nothing.
 */
import { CorralError } from '../domain/errors';
import type { Emit } from '../domain/events';
import type { ApprovalPort, ApprovalRequest, ApprovalResult } from '../domain/approval-port';
import type { RunStore } from '../queue/run-store';
import type { SlotLease } from './slots';

export interface ApprovalParking {
  lease: SlotLease;
  tenant: string;
  /** Parked runs a tenant may have at once (CORRAL_MAX_PARKED_PER_TENANT). */
  maxParked: number;
}

export interface RedisApprovalPortOptions {
  timeoutMs: number;
  clock?: () => number;
  /** The attempt's job lock token. */
  fence?: string;
  parking?: ApprovalParking;
}

export class RedisApprovalPort implements ApprovalPort {
  private readonly clock: () => number;

  constructor(
    private readonly store: RunStore,
    private readonly emit: Emit,
    private readonly o: RedisApprovalPortOptions,
  ) {
    this.clock = o.clock ?? Date.now;
  }

  async request(p: ApprovalRequest, signal?: AbortSignal): Promise<ApprovalResult> {
    const t0 = this.clock();
    const parking = this.o.parking;
    if (parking) {
      const ok = await this.store.reserveParking(parking.tenant, p.runId, t0 + this.o.timeoutMs + 60_000, parking.maxParked, t0);
      if (!ok) {
        throw new CorralError('limit_exceeded', `tenant ${parking.tenant} already has ${parking.maxParked} run(s) waiting for a human (CORRAL_MAX_PARKED_PER_TENANT); answer or cancel one of them first`);
      }
    }
    try {
      const shown = await this.store.setPending(p.runId, {
        callId: p.callId, tool: p.tool, args: p.args, reason: p.reason, ...(p.risk ? { risk: p.risk } : {}), since: new Date(t0).toISOString(),
      }, this.o.fence);
      if (!shown) throw new CorralError('conflict', `run ${p.runId} is no longer this attempt's (another attempt owns it, or it ended)`);
      this.emit({ type: 'approval.pending', callId: p.callId, tool: p.tool, args: p.args, reason: p.reason, ...(p.risk ? { risk: p.risk } : {}) });
      parking?.lease.park();
      try {
        const a = await this.store.waitAnswer(p.runId, p.callId, this.o.timeoutMs, signal);
        const waitedMs = this.clock() - t0;
        if (!a) return { approved: false, by: 'timeout', waitedMs, timedOut: true };
        return { approved: a.approved, by: a.by, ...(a.note ? { note: a.note } : {}), waitedMs, timedOut: false };
      } finally {
        await this.store.clearPending(p.runId, p.callId, this.o.fence);
        // Back in a slot before anything runs again (a cancelled run goes on to clean up either way).
        await parking?.lease.unpark(signal).catch(() => undefined);
      }
    } finally {
      if (parking) await this.store.releaseParking(parking.tenant, p.runId).catch(() => undefined);
    }
  }
}
