/**
 * The worker's ApprovalPort: puts the run in `awaiting_approval` with the pending call visible in
 * GET /v1/runs/:id, emits approval.pending, and waits for POST /v1/runs/:id/approvals/:callId (or
 * `corral approve`). No answer within the configured time is a deny (timedOut: true).
 */
import type { Emit } from '../domain/events';
import type { ApprovalPort, ApprovalRequest, ApprovalResult } from '../policy/approval-port';
import type { RunStore } from '../queue/run-store';

export class RedisApprovalPort implements ApprovalPort {
  constructor(
    private readonly store: RunStore,
    private readonly emit: Emit,
    private readonly timeoutMs: number,
    private readonly clock: () => number = Date.now,
  ) {}

  async request(p: ApprovalRequest, signal?: AbortSignal): Promise<ApprovalResult> {
    const t0 = this.clock();
    await this.store.setPending(p.runId, {
      callId: p.callId, tool: p.tool, args: p.args, reason: p.reason, ...(p.risk ? { risk: p.risk } : {}), since: new Date(t0).toISOString(),
    });
    this.emit({ type: 'approval.pending', callId: p.callId, tool: p.tool, args: p.args, reason: p.reason, ...(p.risk ? { risk: p.risk } : {}) });
    try {
      const a = await this.store.waitAnswer(p.runId, p.callId, this.timeoutMs, signal);
      const waitedMs = this.clock() - t0;
      if (!a) return { approved: false, by: 'timeout', waitedMs, timedOut: true };
      return { approved: a.approved, by: a.by, waitedMs, timedOut: false };
    } finally {
      await this.store.clearPending(p.runId, p.callId);
    }
  }
}
