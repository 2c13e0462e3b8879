/**
 * ApprovalPort: how the gate asks a human about a call it may not decide alone. The worker's
 * implementation (Redis + REST API) puts the run in `awaiting_approval`, shows the pending call and
 * resolves when someone approves or denies, or when the configured time runs out (timedOut: true,
 * approved: false). Aborting `signal` (run cancelled) should reject or resolve as not approved.
 */
import type { RiskLevel } from './gate';

export interface ApprovalRequest {
  runId: string;
  callId: string;
  tool: string;
  args: Record<string, unknown>;
  /** Why the gate is asking, one sentence. */
  reason: string;
  risk?: RiskLevel;
}

export interface ApprovalResult {
  approved: boolean;
  /** Who answered, as authenticated (`acme/ci-bot`, `operator (auth off)`), or "timeout". */
  by: string;
  /** The free-text note the person gave beside the answer. */
  note?: string;
  waitedMs: number;
  timedOut: boolean;
}

export interface ApprovalPort {
  request(p: ApprovalRequest, signal?: AbortSignal): Promise<ApprovalResult>;
}
