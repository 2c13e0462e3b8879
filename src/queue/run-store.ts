/**
 * The run store's ports: what the API and the workers need of run state, in three parts —
 *   RunRecords    one record per run (status, times, worker, outcome, report paths), listing, counts;
 *                 every worker write fenced by the job's lock token (`fence`)
 *   RunEventLog   one append-only log of RunEvents (and live deltas) per run, read by id for SSE
 *   RunApprovals  pending calls, their answers, and the per-tenant cap on parked runs
 * — and the record codec both implementations share: a record is a flat map of strings (a Redis hash),
 * validated field by field when read, so a corrupt or foreign record is an error naming the field,
 * never a cast. Implementations: RedisRunStore (redis-run-store.ts: what corral runs on) and
 * MemoryRunStore (memory-run-store.ts: the same contract in one process, for tests and embedding);
 * test/support/run-store-contract.ts runs one set of tests against both.
 * A run belongs to the tenant that submitted it (field `tenant`); runs put straight on the queue by
 * other producers belong to DEFAULT_TENANT.
 */
import type { Principal } from '../domain/principal';
import { z } from 'zod';
import { CorralError, ERROR_CODES, InvalidInputError, type ErrorCode } from '../domain/errors';
import { RUN_OUTCOMES, RUN_STATUSES, type LiveDelta, type RunEvent, type RunOutcome, type RunStatus, type RunUsage } from '../domain/events';
import type { RiskLevel } from '../domain/gate';
import { RUN_ID_BODY } from '../domain/run-id';
import type { RunSpec } from '../domain/run-spec';
import type { NotExported, ReviewFlag } from '../domain/sandbox';

/** The tenant of everything when auth is off, and of runs that other producers put on the queue. */
export const DEFAULT_TENANT = 'default';

export interface PendingApproval {
  callId: string;
  tool: string;
  args: Record<string, unknown>;
  reason: string;
  risk?: RiskLevel;
  since: string;
}

export interface RunArtifact {
  name: string;
  path: string;
  bytes: number;
}

/** What the workspace export found, for GET /v1/runs/:id (lists cut to 200; the totals count all). */
export interface RunWorkspace {
  filesChanged: number;
  /** Files changed under .git: in workspace.tar, never in workspace.patch. */
  gitFilesChanged: number;
  /** Changes the ignore rules kept out of workspace.patch (in workspace.tar). Absent in records older than the field. */
  ignoredChanges?: number;
  /** Changes workspace.patch cannot carry (too large), with why: take them from workspace.tar. */
  notInPatch?: Array<{ path: string; reason: string }>;
  /** Changes a human should review before using the artifacts. */
  needsReview: ReviewFlag[];
  needsReviewTotal: number;
  /** Every flag counted by rule; all of them are in the run's needs-review.jsonl. */
  needsReviewByRule?: Partial<Record<ReviewFlag['rule'], number>>;
  /** Workspace entries left out of the artifacts, and why. */
  notExported: NotExported[];
  notExportedTotal: number;
}

export interface RunView {
  id: string;
  status: RunStatus;
  tenant: string;
  task: string;
  labels?: Record<string, string>;
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  workerId?: string;
  containerId?: string;
  outcome?: RunOutcome;
  /** For a run that did not succeed: the class of its end (codeForOutcome), stable for programs to branch on. */
  errorCode?: ErrorCode;
  finalAnswer?: string | null;
  reason?: string;
  usage?: RunUsage;
  reportPath?: string;
  logPath?: string;
  artifacts?: RunArtifact[];
  workspace?: RunWorkspace;
  pendingApprovals: PendingApproval[];
  /** Set for a sub-run: the run that started it, the delegate call, its depth (queue/run-tree.ts). */
  parent?: { runId: string; callId: string; depth: number };
  /** The end of the run's hash-chained log (report/log-chain.ts), written when the run ends: what verify checks the stored log against. */
  logSeal?: LogSeal;
  /** The OpenTelemetry trace of the run (32 hex digits), when it was traced or its submitter sent a traceparent. */
  traceId?: string;
}

/** A finished log's final hash, its line count, and (with an operator key) the Ed25519 signature of both. */
export interface LogSeal {
  finalHash: string;
  lines: number;
  signature?: { alg: 'ed25519'; keyId: string; value: string };
  /** Set when the log could not be written whole: why, and how many lines are missing. */
  incomplete?: string;
}

/** The fields a worker (or the API, for cancel) writes as a run goes. */
export type RunUpdate = Partial<Pick<RunView,
  'status' | 'startedAt' | 'finishedAt' | 'workerId' | 'containerId' | 'outcome' | 'errorCode' | 'finalAnswer' | 'reason' | 'usage' | 'reportPath' | 'logPath' | 'artifacts' | 'workspace' | 'logSeal' | 'traceId'>>;

export interface ApprovalAnswer {
  approved: boolean;
  /** Who answered, as shown: the principal's text (`acme/ci-bot`, `operator (auth off)`). */
  by: string;
  /** The authenticated principal; absent in answers stored before it was recorded. */
  principal?: Principal;
  /** Free text the person gave beside it (`corral approve --note`, the console's note field). */
  note?: string;
}

/** A page of GET /v1/runs: newest first; `next` resumes after the last run examined (null at the end). */
export interface RunPage {
  runs: RunView[];
  next: string | null;
}

export interface ListQuery {
  tenant: string;
  limit: number;
  /** Keep only runs in one of these statuses (all when absent). */
  statuses?: readonly RunStatus[];
  /** An opaque cursor from a previous page's `next`. */
  cursor?: string;
}

/**
 * Who may record an end from outside the run loop: 'unclaimed' — only while no attempt has claimed
 * the run; `{ fence }` — only while that token owns the run; `{ fence, lockKey }` — only while the
 * job's lock (the queue's key `lockKey`) holds `fence`, i.e. this attempt holds the job now: the run
 * is claimed for it in the same step (an end decided before the claim: a refused or unresumable job).
 */
export type EndGuard = 'unclaimed' | { fence: string; lockKey?: string };

/** A run's record. Writes with `fence` land only while that token owns the run (false: discarded). */
export interface RunRecords {
  /** Records a new queued run of `tenant` (the API calls this before enqueueing); never over an existing one. */
  create(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant?: string): Promise<void>;
  /** For jobs that other producers put straight on the queue: create the record if there is none. */
  ensure(runId: string, spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant?: string): Promise<void>;
  /** The tenant a run belongs to; null when there is no such run. */
  tenantOf(runId: string): Promise<string | null>;
  /**
   * Makes `owner` (a worker's job lock token) the only writer of the run from now on: later fenced
   * writes with another token are discarded. Lands only while `lockKey` (the queue's lock of the
   * job, when given) holds `owner`, and never on a run that has ended.
   */
  claim(runId: string, owner: string, lockKey?: string): Promise<boolean>;
  /**
   * Updates an existing run. An update that sets finishedAt never lands over a different recorded end
   * (false); the same end written again (a retry after a failover) lands as a no-op.
   */
  update(runId: string, u: RunUpdate, fence?: string): Promise<boolean>;
  /**
   * Runs `write` (writes of this store) and returns what it returned once enough replicas confirmed
   * it (queue/durability.ts); NotDurableError (with the write's result) when they did not. A store
   * without replicas, or configured for none, just runs it.
   */
  durable<T>(write: () => Promise<T>): Promise<T>;
  /**
   * Records an end that no run loop reported (a malformed job, a dead worker, a cancel before the
   * start), then the finished run's expiry; never over a recorded end. `guard`: see EndGuard.
   * `code`: what broke.
   */
  end(runId: string, outcome: RunOutcome, reason: string, at: Date, guard?: EndGuard, code?: ErrorCode): Promise<boolean>;
  /** Starts the retention clock of a finished run's record and log. */
  expireFinished(runId: string): Promise<void>;
  get(runId: string): Promise<RunView | null>;
  /** The spec a run was submitted with (null when unknown or expired). */
  getSpec(runId: string): Promise<RunSpec | null>;
  /** Most recent runs first (all tenants). */
  list(limit: number): Promise<RunView[]>;
  /** One page of a tenant's runs, newest first, optionally only those in `statuses`. */
  listPage(q: ListQuery): Promise<RunPage>;
  /** Runs in each status now (all tenants, or one), kept as statuses change, never by a scan. */
  statusCounts(tenant?: string): Promise<Record<string, number>>;
  /** Counts one more time a worker found the Docker engine down for this run; returns the count. */
  countDockerWait(runId: string): Promise<number>;
}

/**
 * What appendInOrder did: appended; `duplicate` (an event of this seq is already on the log — a
 * retry after a failover); `stale` (another attempt owns the run); `gap` (the log's last event of
 * this attempt is `last`, and the events after it must be appended first: a failover lost them).
 */
export type AppendOutcome = { kind: 'appended' | 'duplicate' | 'stale' } | { kind: 'gap'; last: number };

export interface RunEventLog {
  appendEvent(e: RunEvent, fence?: string): Promise<boolean>;
  /**
   * Appends `e` only right after its predecessor: while `fence` owns the run, and only when the log's
   * last event of this attempt has seq e.seq - 1 (`base` is the seq before this attempt's first
   * event: 0, or the events a resumed run had already). So the log a watcher reads is never missing
   * an event in its middle, even when a failover lost some of the primary's last writes.
   */
  appendInOrder(e: RunEvent, fence: string, base: number): Promise<AppendOutcome>;
  /** A live delta (streamed model text), on the same log but not part of the run's history. */
  appendDelta(d: LiveDelta, fence?: string): Promise<boolean>;
  /** Events after the given id ("0" = from the start), each with its id for resuming; deltas skipped. */
  readEvents(runId: string, after?: string, count?: number): Promise<Array<{ id: string; event: RunEvent }>>;
  /** Events and live deltas after the given id, in log order (for SSE). */
  readLive(runId: string, after?: string, count?: number): Promise<Array<{ id: string; event?: RunEvent; delta?: LiveDelta }>>;
  /** The live rows of every run, shared by all of this process's subscribers (SSE). */
  liveFeed(): LiveFeed;
}

/** One row of a run's log: an event, or a live delta (streamed model text, not part of the history). */
export interface LiveRow {
  id: string;
  event?: RunEvent;
  delta?: LiveDelta;
}

/**
 * Waits for a run's log to grow: the rows after `after` (in log order, at most one read's worth)
 * as soon as there are any; [] when `timeoutMs` passes or `signal` aborts. One feed serves every
 * subscriber of a process.
 */
export interface LiveFeed {
  next(runId: string, after: string, timeoutMs: number, signal?: AbortSignal): Promise<LiveRow[]>;
}

export interface RunApprovals {
  /** Shows a call waiting for a human (status awaiting_approval); false when discarded or the run ended. */
  setPending(runId: string, p: PendingApproval, fence?: string): Promise<boolean>;
  /** Removes a pending call (status back to running when none is left). */
  clearPending(runId: string, callId: string, fence?: string): Promise<boolean>;
  /** NotFoundError when the run or the call is unknown or not pending; a conflict when already answered. */
  answer(runId: string, callId: string, a: ApprovalAnswer): Promise<void>;
  /** The answer once given; null when timeoutMs passes; rejects with the abort reason when `signal` aborts. */
  waitAnswer(runId: string, callId: string, timeoutMs: number, signal?: AbortSignal): Promise<ApprovalAnswer | null>;
  /** Parks a run of `tenant` until `untilMs` unless the tenant has `cap` parked runs (entries past their time do not count). */
  reserveParking(tenant: string, runId: string, untilMs: number, cap: number, nowMs: number): Promise<boolean>;
  releaseParking(tenant: string, runId: string): Promise<void>;
  parkedCount(tenant: string, nowMs: number): Promise<number>;
}

export interface RunStore extends RunRecords, RunEventLog, RunApprovals {
  /** Asks the worker running the run to cancel it. */
  requestCancel(runId: string): Promise<void>;
  /** Resolves when the store answers (readiness). */
  ping(): Promise<void>;
}

/** A status-filtered page examines at most this many runs; a sparse match returns a short page with `next`. */
export const LIST_SCAN_MAX = 2000;
export const FINISHED_TTL_S = 14 * 24 * 3600;
export const EVENTS_MAXLEN = 20_000;
export const ANSWER_TTL_S = 24 * 3600;

// ---- the record codec -------------------------------------------------------------------------

const JSON_FIELDS = new Set(['usage', 'artifacts', 'labels', 'finalAnswer', 'workspace', 'parent', 'logSeal']);
/** Fields of a record that are bookkeeping, never shown. */
const HIDDEN = new Set(['spec', 'dockerWaits', 'owner', 'cancelRequested', 'lastSeq', 'lastSeqOwner']);

const iso = z.string().max(40);
const Usage = z.object({ llmCalls: z.number(), toolCalls: z.number(), inputTokens: z.number(), outputTokens: z.number(), costUsd: z.number(), wallTimeMs: z.number(), setupMs: z.number().optional() });
const Pending = z.object({ callId: z.string(), tool: z.string(), args: z.record(z.string(), z.unknown()), reason: z.string(), risk: z.enum(['low', 'medium', 'high', 'critical']).optional(), since: z.string() });
const Workspace = z.object({
  filesChanged: z.number(), gitFilesChanged: z.number(), needsReview: z.array(z.looseObject({})), needsReviewTotal: z.number(),
  needsReviewByRule: z.record(z.string(), z.number()).optional(),
  notExported: z.array(z.looseObject({})), notExportedTotal: z.number(),
  ignoredChanges: z.number().optional(), notInPatch: z.array(z.object({ path: z.string(), reason: z.string() })).optional(),
});
/** What each shown field of a record may hold (after JSON decoding for the JSON fields). */
const FIELDS: Record<string, z.ZodType> = {
  status: z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]),
  tenant: z.string(), task: z.string(), createdAt: iso, startedAt: iso, finishedAt: iso, workerId: z.string(), containerId: z.string(),
  outcome: z.enum(RUN_OUTCOMES as [RunOutcome, ...RunOutcome[]]),
  errorCode: z.enum(ERROR_CODES),
  reason: z.string(), reportPath: z.string(), logPath: z.string(),
  finalAnswer: z.string().nullable(),
  usage: Usage,
  labels: z.record(z.string(), z.string()),
  artifacts: z.array(z.object({ name: z.string(), path: z.string(), bytes: z.number() })),
  workspace: Workspace,
  parent: z.object({ runId: z.string(), callId: z.string(), depth: z.number() }),
  logSeal: z.object({
    finalHash: z.string().regex(/^[0-9a-f]{64}$/), lines: z.number().int().min(0),
    signature: z.object({ alg: z.literal('ed25519'), keyId: z.string().max(64), value: z.string().max(200) }).optional(),
    incomplete: z.string().max(4000).optional(),
  }),
  traceId: z.string().regex(/^[0-9a-f]{32}$/),
};
const PrincipalSchema = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('token'), tenant: z.string(), token: z.string() }),
  z.object({ kind: z.literal('operator'), name: z.string() }),
]);
export const Answer = z.object({ approved: z.boolean(), by: z.string(), principal: PrincipalSchema.optional(), note: z.string().optional() });

function corrupt(runId: string, field: string, why: string): CorralError {
  return new CorralError('internal', `run record ${runId} is corrupt: field ${field} ${why}`, { runId, field });
}

function decodeJson(runId: string, field: string, raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    throw corrupt(runId, field, 'is not JSON');
  }
}

/** A record's fields (strings, as stored) → the run's view; null for no record. Throws naming the first bad field. */
export function viewOfRecord(runId: string, h: Record<string, string>): RunView | null {
  if (h.status === undefined) return null;
  const pendingApprovals: PendingApproval[] = [];
  const view: Record<string, unknown> = { id: runId };
  for (const [k, raw] of Object.entries(h)) {
    if (k.startsWith('pending:')) {
      const p = Pending.safeParse(decodeJson(runId, k, raw));
      if (!p.success) throw corrupt(runId, k, `is not a pending call (${p.error.issues[0]?.message})`);
      pendingApprovals.push(p.data as PendingApproval);
      continue;
    }
    if (k.startsWith('answered:') || HIDDEN.has(k)) continue;
    const schema = FIELDS[k];
    if (!schema) continue; // a field a newer version writes: not shown by this one
    const r = schema.safeParse(JSON_FIELDS.has(k) ? decodeJson(runId, k, raw) : raw);
    if (!r.success) throw corrupt(runId, k, `does not hold what it should (${r.error.issues[0]?.message})`);
    view[k] = r.data;
  }
  for (const k of ['task', 'createdAt']) if (view[k] === undefined) throw corrupt(runId, k, 'is missing');
  view.tenant ??= DEFAULT_TENANT;
  pendingApprovals.sort((a, b) => (a.since < b.since ? -1 : a.since > b.since ? 1 : a.callId < b.callId ? -1 : 1));
  view.pendingApprovals = pendingApprovals;
  return view as unknown as RunView;
}

/** The spec field of a record (null when absent); a spec that is not JSON is an error. */
export function specOfRecord(runId: string, raw: string | null | undefined): RunSpec | null {
  return raw ? (decodeJson(runId, 'spec', raw) as RunSpec) : null;
}

/** A new record's fields. */
export function recordOfSpec(spec: RunSpec | Pick<RunSpec, 'task'>, now: Date, tenant: string): Record<string, string> {
  const r: Record<string, string> = { tenant, task: spec.task, createdAt: now.toISOString() };
  if ('labels' in spec && spec.labels) r.labels = JSON.stringify(spec.labels);
  if ('workspace' in spec) r.spec = JSON.stringify(spec);
  return r;
}

/** An update's fields as stored (status apart: it moves the counts). */
export function fieldsOfUpdate(u: RunUpdate): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const [k, v] of Object.entries(u)) {
    if (v === undefined || k === 'status') continue;
    fields[k] = JSON_FIELDS.has(k) ? JSON.stringify(v) : String(v);
  }
  return fields;
}

// ---- list cursors -----------------------------------------------------------------------------

export function encodeCursor(c: { id: string; score: number }): string {
  return Buffer.from(`${c.score}:${c.id}`).toString('base64url');
}

/** Whether `cursor` is one a store writes (the API's query schema checks with this). */
export function isListCursor(cursor: string): boolean {
  return new RegExp(`^(\\d{1,16}):(${RUN_ID_BODY})$`).test(Buffer.from(cursor, 'base64url').toString('utf8'));
}

/** Throws InvalidInputError naming `cursor` for anything that is not a cursor a store wrote. */
export function decodeCursor(cursor: string): { id: string; score: number } {
  const m = new RegExp(`^(\\d{1,16}):(${RUN_ID_BODY})$`).exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  if (!m) throw new InvalidInputError('query: cursor: is not a cursor from a previous page', 'cursor');
  return { score: Number(m[1]), id: m[2]! };
}
