/**
 * RunEvent: the single log vocabulary. The JSONL log, the progress stream and report.md are all
 * derived from these. Every event carries the run id, a sequence number and an ISO timestamp.
 */
import type { ExecResult, EgressAttempt } from './sandbox';
import type { GateVerdict } from './gate';
import type { ModelUsage } from './model';

export type RunStatus = 'queued' | 'running' | 'awaiting_approval' | 'succeeded' | 'failed' | 'cancelled';

export type RunOutcome = 'succeeded' | 'failed' | 'cancelled';

export type BudgetName = 'llmCalls' | 'toolCalls' | 'wallTimeS' | 'costUsd';

export type RunEventBody =
  | { type: 'run.started'; workerId: string; task: string; policy: string; approvals: boolean; model: string; budgets: Record<BudgetName, number> }
  | { type: 'sandbox.ready'; containerId: string; image: string; ms: number; egressAllow: string[] }
  | { type: 'model.response'; turn: number; content: string | null; toolCalls: { id: string; name: string }[]; usage: ModelUsage; costUsd: number; ms: number }
  | { type: 'tool.call'; callId: string; tool: string; args: unknown }
  | { type: 'policy.decision'; callId: string; tool: string; verdict: GateVerdict }
  | { type: 'approval.pending'; callId: string; tool: string; args: unknown; reason: string; risk?: string }
  | { type: 'tool.result'; callId: string; tool: string; ok: boolean; blocked: boolean; summary: string; exec?: Omit<ExecResult, 'stdout' | 'stderr'>; ms: number }
  | ({ type: 'egress'; callId: string | null } & EgressAttempt)
  | { type: 'budget.exceeded'; budget: BudgetName; limit: number; used: number }
  | { type: 'sandbox.removed'; containerId: string }
  | { type: 'artifact'; name: string; path: string; bytes: number }
  | { type: 'run.finished'; outcome: RunOutcome; finalAnswer: string | null; reason: string; usage: RunUsage };

export interface RunUsage {
  llmCalls: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  wallTimeMs: number;
}

export type RunEvent = RunEventBody & { runId: string; seq: number; ts: string };

/** Where events go: the JSONL file, the Redis stream, the report builder. */
export type Emit = (event: RunEventBody) => void;
