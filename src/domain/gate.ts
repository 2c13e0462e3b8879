/**
 * The Gate port: before every tool call the run loop asks it for a verdict. The gate combines the
 * static policy, the risk classifier and (when the run allows it) a human approval, and returns a
 * final allow/deny together with the record of how it got there.
 */
import type { McpCallContext } from './mcp';

export type Decision = 'allow' | 'ask' | 'deny';
export type RiskLevel = 'low' | 'medium' | 'high' | 'critical';

export interface ToolCallRequest {
  callId: string;
  tool: string;
  /** Parsed and schema-validated arguments. */
  args: Record<string, unknown>;
  /** For an MCP tool (`mcp__{server}__{tool}`): the environment's defaults and the tool's description (untrusted). */
  mcp?: McpCallContext;
}

/** A link a call made: its absolute path, and where it points (absolute; null when computed at run time). */
export interface MadeLink {
  name: string;
  target: string | null;
}

/**
 * What a run's earlier calls did that later calls depend on: the files they wrote (deleting one is
 * deleting the run's own scratch, not the project's work) and the links they made (`rm -rf build/`
 * after `ln -s . build` is judged where the link points). Literal paths only; bounded by the keeper.
 */
export interface CallHistory {
  /** Files the run wrote as a whole (truncating redirections, write_file, tee): absolute paths. */
  written: string[];
  links: MadeLink[];
  /** In what one call adds: files it changed otherwise (moved, copied or linked onto) — no longer the run's own writing. */
  clobbered?: string[];
}

export interface GateContext {
  runId: string;
  /** The task as submitted: the only trusted statement of what the user authorized. */
  task: string;
  policy: string;
  /** true: an ask waits for a human; false: an ask is a deny. */
  approvals: boolean;
  /** Untrusted evidence (recent tool output, file contents); never widens what is authorized. */
  evidence?: string[];
  /** What this run's earlier (allowed, executed) calls wrote and linked. */
  history?: CallHistory;
  signal?: AbortSignal;
}

export interface ClassifierAnswer {
  /** Expected risk on a 0..3 scale (low=0 … critical=3). */
  risk: number;
  riskLevel: RiskLevel;
  /** Probability the user authorized this call, 0..1. */
  authorized: number;
  decision: Decision;
  latencyMs: number;
  via: 'decisions' | 'chat' | 'none';
  /** Set when the classifier failed (timeout, refusal, outage); the decision is then "ask". */
  error?: string;
}

export interface GateVerdict {
  decision: 'allow' | 'deny';
  /** What the static layer said, and which rule said it (null when no rule matched). */
  static: {
    decision: Decision; rule: string | null; reason: string; risk?: RiskLevel;
    /** The analysis predicts network use (a connection the call opens is then expected). */
    network?: boolean;
  };
  classifier?: ClassifierAnswer;
  /** Present when a human was asked. */
  approval?: { approved: boolean; by: string; note?: string; waitedMs: number; timedOut: boolean };
  /** One sentence the model and the report see: why this call was allowed or blocked. */
  reason: string;
  /** On an allow: what the call adds to the run's history once it has run. */
  adds?: CallHistory;
}

export interface Gate {
  decide(call: ToolCallRequest, ctx: GateContext): Promise<GateVerdict>;
}
