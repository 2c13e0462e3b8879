/**
 * RunEvent: the single log vocabulary. The JSONL log, the progress stream and report.md are all
 * derived from these. Every event carries the run id, a sequence number and an ISO timestamp.
 */
import type { ExecResult, EgressAttempt, EgressCode, EgressStats, FileChange, NotExported, NotExportedCode, ReviewFlag, ReviewRule } from './sandbox';
import type { GateVerdict } from './gate';
import type { EffectDecision, MaskedSecret } from './effects';
import type { ModelToolCall, ModelUsage } from './model';
import type { RoutingRule } from './run-spec';
import type { SubRunNode } from './subrun';

/**
 * How a run ended, one typed set: `succeeded`; `failed` (its done checks did not pass); `budget_exhausted`
 * (LLM calls, tool calls, tokens or cost ran out); `timed_out` (the wall-time budget); `policy_aborted`
 * (the model kept asking for blocked calls); `cancelled`; `error` (infrastructure, a malformed job, or a
 * model that keeps sending malformed calls); `setup_failed` (a command of the environment's setup phase
 * failed: the agent never started). Every end carries a reason.
 */
export type RunOutcome = 'succeeded' | 'failed' | 'budget_exhausted' | 'policy_aborted' | 'cancelled' | 'timed_out' | 'setup_failed' | 'error';
export const RUN_OUTCOMES: readonly RunOutcome[] = ['succeeded', 'failed', 'budget_exhausted', 'policy_aborted', 'cancelled', 'timed_out', 'setup_failed', 'error'];

/** `awaiting_children`: the run delegated to sub-runs and waits for them without a worker slot or a sandbox. */
export type RunStatus = 'queued' | 'running' | 'awaiting_approval' | 'awaiting_children' | RunOutcome;
export const RUN_STATUSES: readonly RunStatus[] = ['queued', 'running', 'awaiting_approval', 'awaiting_children', ...RUN_OUTCOMES];

export type BudgetName = 'llmCalls' | 'toolCalls' | 'tokens' | 'wallTimeS' | 'costUsd';

export type RunEventBody =
  | {
    type: 'run.started'; workerId: string; task: string; policy: string; approvals: boolean; model: string; budgets: Record<BudgetName, number>; attempt?: number; note?: string;
    /** Model routing in force (a strong and a cheap model, and when the strong one is used). */
    routing?: { strong: string; cheap: string; strongOn: RoutingRule[] };
    /** Set for a sub-run: the run and the delegate call it answers, and its depth (1 = child of a top-level run). */
    parent?: { runId: string; callId: string; depth: number };
  }
  | { type: 'sandbox.ready'; containerId: string; image: string; ms: number; egressAllow: string[]; isolation?: 'runc' | 'gvisor'; environment?: string }
  /** workspace.git: what the worker cloned (the URL as given to git: never a credential). */
  | { type: 'workspace.cloned'; url: string; ref: string | null; commit: string; depth: number; files: number; bytes: number; ms: number; credential: boolean }
  /** workspace.git.bundle: the agent's commits since the clone, as a bundle of branch `branch` (path null: none to bundle, `note` says why). */
  | {
    type: 'git.bundle'; branch: string; commits: number; path: string | null; bytes: number; note?: string;
    /** The review of its commits: the first flags (all are in needs-review.jsonl), how many in all, what it could not do. */
    needsReview?: ReviewFlag[]; needsReviewTotal?: number; reviewNotes?: string[];
  }
  /** The environment's setup phase (environments/setup-phase.ts): `cache` hit skips the commands. */
  | { type: 'setup.started'; environment: string; commands: number; egressAllow: string[]; cache: 'hit' | 'miss' | 'off'; key?: string }
  | { type: 'setup.command'; index: number; command: string; exitCode: number | null; timedOut: boolean; ms: number; output: string; truncated: boolean }
  | {
    type: 'setup.finished'; ok: boolean; ms: number; reason?: string;
    /** What setup wrote (or the cache restored): files added to the patch's baseline, and the capture's size. */
    baselineFiles?: number; bytes?: number; cached?: 'stored' | 'restored' | 'not stored'; note?: string;
  }
  /**
   * An MCP server of the run (environments' `mcp`) started in its sandbox: the tools offered to the
   * model, and those not offered with why. `serverInfo` is the server's own claim (untrusted).
   */
  | {
    type: 'mcp.started'; server: string; argv: string[]; ms: number; serverInfo: { name: string; version: string } | null;
    tools: Array<{ name: string; tool: string; descriptionChars: number; schemaBytes: number }>; refused: Array<{ tool: string; reason: string }>; toolsOmitted?: number;
  }
  /** An MCP server could not be started (the run goes on without its tools); its stderr's end, secrets masked. */
  | { type: 'mcp.failed'; server: string; argv: string[]; ms: number; reason: string; stderr?: string }
  /** An MCP server's process ended (it exited or crashed, corral stopped it for a limit, or the run ended): its totals. */
  | {
    type: 'mcp.stopped'; server: string; reason: string; exitCode: number | null; calls: number; errors: number;
    frames: number; bytesIn: number; stderrBytes: number; maxBufferedBytes: number; stderr?: string;
  }
  /** The egress allowlist changed for the agent phase: connections open then were closed. */
  | { type: 'egress.narrowed'; allow: string[]; connectionsClosed: number; proxyKilled: boolean }
  | {
    type: 'model.response'; turn: number; content: string | null; toolCalls: ModelToolCall[]; usage: ModelUsage; costUsd: number; ms: number; model: string; finishReason: string;
    /** With model routing: the model asked for, its tier, the rule that chose the strong one, and what the turn would have cost on the strong model. */
    route?: { model: string; tier: 'strong' | 'cheap'; rule: RoutingRule | null; strongCostUsd: number };
  }
  | { type: 'tool.call'; callId: string; tool: string; args: unknown }
  | { type: 'policy.decision'; callId: string; tool: string; verdict: GateVerdict }
  | { type: 'approval.pending'; callId: string; tool: string; args: unknown; reason: string; risk?: string }
  | { type: 'tool.result'; callId: string; tool: string; ok: boolean; blocked: boolean; summary: string; exec?: Omit<ExecResult, 'stdout' | 'stderr'>; ms: number; /** What the model was shown, cut to a head and tail excerpt. */ output?: string }
  | ({ type: 'egress'; callId: string | null } & EgressAttempt)
  /** Repeats of one kind of attempt, counted by the proxy instead of logged one by one. */
  | { type: 'egress.aggregate'; callId: string | null; method: string; decision: 'allow' | 'deny'; code: EgressCode; count: number; sample: string; reason: string }
  /** The run's egress proxy process started, failed (the run has no egress from then on) or stopped. */
  | { type: 'egress.proxy'; state: 'started' | 'failed' | 'stopped'; detail: string; pid?: number; user?: string; limits?: Record<string, number> }
  | ({ type: 'egress.stats' } & EgressStats)
  /**
   * An effect observed at an exit and what was decided about it: a protected file a call changed
   * (effect `file`: undone unless the call's decision covered it, it is harmless by rule, or a human
   * approved it) or a connection a call opened although the gate predicted none (effect `network`).
   */
  | ({ type: 'effect.decision' } & EffectDecision)
  /** The protected files could not be read after a call (the next read tries again; twice in a row ends the run). */
  | { type: 'effect.unchecked'; callId: string | null; reason: string }
  /**
   * Secrets masked in text bound for the transcript (tool output before the model, the log, the
   * report and the console see it; done-check and setup output): which rules, how often, a print of
   * each (never the secret). `coarse`: the full scan could not finish, a coarser mask was applied.
   */
  | { type: 'secret.masked'; callId: string | null; where: 'tool-output' | 'done-check' | 'setup' | 'effect-diff'; found: MaskedSecret[]; coarse?: string }
  /** The run's per-call effect checks: how many, how they read, what they cost. */
  | { type: 'effect.stats'; checks: number; mode: 'full' | 'targeted'; p50Ms: number; maxMs: number; totalMs: number; bytes: number; requests: number; restores: number; decisions: number }
  /** The log reached a cap: later events are counted, not kept (only the run's end still is). `final` is the count at the end. */
  | { type: 'log.truncated'; reason: string; maxEvents: number; maxBytes: number; final: boolean; dropped: Record<string, number>; droppedBytes: number }
  | { type: 'budget.warning'; budget: BudgetName; limit: number; used: number }
  | { type: 'budget.exceeded'; budget: BudgetName; limit: number; used: number }
  | { type: 'context.loaded'; agentsMd: string | null; skills: { name: string; description: string; path: string }[]; memory: string | null }
  | { type: 'context.compacted'; messagesBefore: number; messagesAfter: number; tokensBefore: number; tokensAfter: number }
  | { type: 'done.check'; command: string; ok: boolean; exitCode: number | null; summary: string }
  | { type: 'memory.proposed'; lines: string[]; applied: boolean; reason: string }
  | { type: 'sandbox.removed'; containerId: string }
  | { type: 'artifact'; name: string; path: string; bytes: number }
  | ({ type: 'workspace.changes' } & WorkspaceChanges)
  | { type: 'run.finished'; outcome: RunOutcome; finalAnswer: string | null; reason: string; usage: RunUsage }
  /** A delegate call started a sub-run (its own run, queue job and sandbox) from the workspace copy `checkpoint`. */
  | { type: 'subrun.started'; callId: string; childRunId: string; task: string; budgets: Record<BudgetName, number>; depth: number; checkpoint: string }
  /** A sub-run ended; `node` is its tree (its own sub-runs below it) with each run's use of its budgets. */
  | { type: 'subrun.finished'; callId: string; childRunId: string; outcome: RunOutcome; reason: string; usage: RunUsage; budgets: Record<BudgetName, number>; node: SubRunNode }
  /** The run gave up its worker slot and sandbox to wait for its sub-runs (its workspace is kept as `checkpoint`). */
  | { type: 'run.suspended'; children: string[]; checkpoint: string; sandboxKept: false }
  /** Every sub-run ended: the run continues on `workerId`, in a new sandbox seeded from its checkpoint. */
  | { type: 'run.resumed'; workerId: string; children: Array<{ runId: string; outcome: RunOutcome }>; waitedMs: number; checkpoint: string };

/**
 * What the workspace export found: the changed files (exactly the patch's sections), how many files
 * changed under .git (never in the patch), what was not exported and why, and what needs review.
 * Lists are cut to a few hundred entries; the *Omitted counts say how many more there were.
 * Logs written before the export grew these fields have only `files`.
 */
export interface WorkspaceChanges {
  files: FileChange[];
  filesOmitted?: number;
  gitFiles?: number;
  /** Changes the ignore rules (.gitignore, patch.exclude) kept out of the patch: how many, and the first paths. */
  ignored?: { count: number; paths: string[] };
  /** Changes the patch cannot carry (new content over 1 MiB): in workspace.tar only. */
  notInPatch?: Array<{ path: string; reason: string }>;
  notExported?: NotExported[];
  notExportedOmitted?: Partial<Record<NotExportedCode, number>>;
  needsReview?: ReviewFlag[];
  /** Flags past the listed ones (all of them are in `needsReviewFile`). */
  needsReviewOmitted?: number;
  /** Every flag counted by rule (the workspace's and the bundle's). */
  needsReviewByRule?: Partial<Record<ReviewRule, number>>;
  /** The run file that lists every flag (needs-review.jsonl). */
  needsReviewFile?: string;
  notes?: string[];
  stats?: { files: number; dirs: number; bytes: number; ms: number };
}

export interface RunUsage {
  llmCalls: number;
  toolCalls: number;
  inputTokens: number;
  outputTokens: number;
  costUsd: number;
  /** The agent's time: from the end of the setup phase (if any) to the run's end. */
  wallTimeMs: number;
  /** The environment's setup phase, apart from the wall-time budget (absent when there was none). */
  setupMs?: number;
}

export type RunEvent = RunEventBody & { runId: string; seq: number; ts: string };

/**
 * A piece of a model answer while it streams, for live views only: it goes on the run's Redis stream
 * (SSE, `event: model.delta`) and nowhere else — not the JSONL log, not the report, not GET …/events
 * pages. The assembled answer is the turn's model.response. Pieces are coalesced (`text` is what
 * arrived since the previous delta); `tools` gives the tool calls being written so far.
 */
export interface LiveDelta {
  type: 'model.delta';
  runId: string;
  turn: number;
  ts: string;
  text?: string;
  tools?: Array<{ index: number; name: string; argumentsChars: number }>;
  /** Set on the last delta a run publishes when it reached its cap (CORRAL_STREAM_MAX_DELTAS). */
  note?: string;
}

/** Where events go: the JSONL file, the Redis stream, the report builder. */
export type Emit = (event: RunEventBody) => void;
