/**
 * The API's own schemas: path parameters, query strings, small bodies (parsed with them) and the
 * response shapes (used for the OpenAPI document; RunView's schema is checked against the store's
 * type at compile time so the two cannot drift apart).
 */
import { z } from 'zod';
import { ERROR_CODES } from '../domain/errors';
import { RUN_OUTCOMES, RUN_STATUSES, type RunStatus } from '../domain/events';

export { RUN_STATUSES };
import { RUN_ID } from '../domain/run-id';
import { isListCursor } from '../queue/run-store';
import { NOT_EXPORTED_CODES, REVIEW_RULES } from '../domain/sandbox';
import type { RunView } from '../queue/run-store';


export const RunParams = z.object({ id: z.string().regex(RUN_ID, 'is not a run id').meta({ description: 'run id (run_…)' }) });
export const ApprovalParams = RunParams.extend({ callId: z.string().min(1).max(200).meta({ description: 'the pending call id (pendingApprovals[].callId), or "memory"' }) });

export const ListQuery = z
  .object({
    status: z
      .string()
      .optional()
      .transform((s, ctx) => {
        if (!s) return undefined;
        const list = s.split(',').map((x) => x.trim()).filter(Boolean);
        const bad = list.filter((x) => !RUN_STATUSES.includes(x as RunStatus));
        if (bad.length) {
          ctx.addIssue({ code: 'custom', message: `unknown status ${bad.map((b) => JSON.stringify(b)).join(', ')} (one or more of ${RUN_STATUSES.join(', ')}, comma-separated)` });
          return z.NEVER;
        }
        return list as RunStatus[];
      })
      .meta({ description: `only runs in these statuses, comma-separated: ${RUN_STATUSES.join(', ')}` }),
    limit: z.coerce.number().int().min(1).max(500).default(50).meta({ description: 'runs per page (1–500)' }),
    cursor: z.string().max(200).regex(/^[A-Za-z0-9_-]+$/, 'is not a cursor from a previous page').refine(isListCursor, 'is not a cursor from a previous page').optional().meta({ description: 'the `next` value of the previous page' }),
  })
  .strict();

const U64_MAX = 2n ** 64n - 1n;
/** A Redis stream id as this API hands them out: `MS-SEQ` (each part an unsigned 64-bit number), or `0`. */
export function isStreamId(s: string): boolean {
  if (s === '0') return true;
  const m = /^(\d{1,20})-(\d{1,20})$/.exec(s);
  return !!m && BigInt(m[1]!) <= U64_MAX && BigInt(m[2]!) <= U64_MAX;
}

export const EventsQuery = z
  .object({
    after: z
      .string()
      .refine(isStreamId, 'must be a stream id from a previous page (MS-SEQ, each a number below 2^64) or 0')
      .default('0')
      .meta({ description: 'return events after this stream id (`next` of the previous page, or an SSE message id); 0 = from the start' }),
  })
  .strict();

/** A free-text note beside an approval: one short line, no control or bidi characters (it reaches reports and terminals). */
const ApprovalNote = z.string().trim().min(1).max(200)
  // eslint-disable-next-line no-control-regex
  .refine((s) => !/[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/.test(s), 'must be one line without control or bidirectional characters');

export const ApprovalBody = z
  .object({
    decision: z.enum(['approve', 'deny']),
    note: ApprovalNote.optional().meta({ description: 'free text kept beside the answer (the log and the report show it); who answered is the authenticated caller, never this' }),
    by: ApprovalNote.optional().meta({ description: 'older name of `note` (a name typed by hand is a note, not an identity)', deprecated: true }),
  })
  .strict()
  .refine((b) => !(b.note !== undefined && b.by !== undefined), { message: 'give `note` (or the older `by`), not both', path: ['by'] });

// ---- responses (documentation) ----

export const ErrorBody = z.object({
  error: z.object({
    code: z.string().meta({ description: 'stable code: invalid_input, unauthorized, not_found, conflict, payload_too_large, rate_limited, internal …' }),
    message: z.string(),
    field: z.string().optional().meta({ description: 'dotted path of the first offending input (400)' }),
    issues: z.array(z.object({ path: z.array(z.union([z.string(), z.number()])), message: z.string() })).optional().meta({ description: 'every problem found in the input, each with its path (400)' }),
    limit: z.enum([
      'submits_per_minute', 'active_runs',
      'streams_per_tenant', 'streams_global', 'uploads_per_tenant', 'uploads_global', 'upload_bytes_per_hour', 'upload_stored_per_tenant', 'upload_stored_global',
      'body_bytes_per_tenant', 'body_bytes_global',
    ]).optional().meta({ description: 'which cap was hit (429, or 413 for one request larger than a cap): per tenant, or the whole service (…_global)' }),
    max: z.number().optional().meta({ description: 'the size of that cap' }),
    retryAfterS: z.number().optional().meta({ description: 'the same as the retry-after header' }),
  }),
});

export const RunLinks = z.object({
  self: z.string(), events: z.string(), report: z.string(), logs: z.string(), workspaceTar: z.string(), patch: z.string(),
  bundle: z.string().meta({ description: 'agent.bundle: 404 unless the run\'s workspace.git asked for a bundle and one was made' }), cancel: z.string(),
  verify: z.string().meta({ description: 'recomputes the hash chain of the stored log and checks it against the run record (and the signature)' }),
});

const Usage = z.object({ llmCalls: z.number(), toolCalls: z.number(), inputTokens: z.number(), outputTokens: z.number(), costUsd: z.number(), wallTimeMs: z.number(), setupMs: z.number().optional() });
const BudgetUse = z.object({ used: z.number(), limit: z.number(), percent: z.number().meta({ description: 'used / limit × 100, rounded' }) });

export const PendingApprovalDoc = z.object({
  callId: z.string(), tool: z.string(), args: z.record(z.string(), z.unknown()), reason: z.string(),
  risk: z.enum(['low', 'medium', 'high', 'critical']).optional(), since: z.string(),
});

const ReviewFlagDoc = z.object({
  path: z.string().meta({ description: 'workspace path (refused characters never occur here: such names are not exported)' }),
  rule: z.enum(REVIEW_RULES).meta({ description: 'git-hook, git-config, git-dir, git-attributes, git-internal, ci, agent-config (a file of the protected set), executable, setuid (new permission bits), confusable-name (a name that shows as another), control-bytes (raw terminal control or bidi characters in added lines)' }),
  reason: z.string(),
  where: z.enum(['workspace', 'bundle']).optional().meta({ description: 'the artifact that carries the change: the workspace (patch and tar; the default) or the git bundle' }),
  commit: z.string().optional().meta({ description: 'for a bundle flag: the commit that makes the change' }),
});
const NotExportedDoc = z.object({
  path: z.string().meta({ description: 'workspace path as the sandbox named it; may hold control or bidi characters (bad-name): escape before showing' }),
  code: z.enum(NOT_EXPORTED_CODES),
  reason: z.string(),
  size: z.number().optional().meta({ description: 'apparent size in bytes, for entries left out by a size cap' }),
});
export const RunWorkspaceDoc = z.object({
  filesChanged: z.number().meta({ description: 'files changed outside .git (the sections of workspace.patch)' }),
  gitFilesChanged: z.number().meta({ description: 'files changed under .git: in workspace.tar, never in workspace.patch' }),
  ignoredChanges: z.number().optional().meta({ description: 'changed files the ignore rules (the seed\'s .gitignore files, the run\'s patch.exclude) kept out of workspace.patch: in workspace.tar only' }),
  notInPatch: z.array(z.object({ path: z.string(), reason: z.string() })).optional().meta({ description: 'changed files workspace.patch cannot carry (new content over 1 MiB), with why: take them from workspace.tar (at most 200)' }),
  needsReview: z.array(ReviewFlagDoc).meta({ description: 'changes to review before using the artifacts (workspace and git bundle): git hooks and config, CI files, agent and editor configs, new executable or setuid/setgid bits, confusable names, control bytes (the first 200; every one is in GET …/artifacts/needs-review.jsonl)' }),
  needsReviewTotal: z.number(),
  needsReviewByRule: z.record(z.string(), z.number()).optional().meta({ description: 'every flag counted by rule' }),
  notExported: z.array(NotExportedDoc).meta({ description: 'workspace entries left out of the artifacts and why: unexportable names, links, special files, size caps (at most 200)' }),
  notExportedTotal: z.number(),
});

export const RunViewDoc = z.object({
  id: z.string(),
  status: z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]),
  tenant: z.string(),
  task: z.string(),
  labels: z.record(z.string(), z.string()).optional(),
  createdAt: z.string(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  workerId: z.string().optional(),
  containerId: z.string().optional(),
  outcome: z.enum(RUN_OUTCOMES as [RunStatus, ...RunStatus[]]).optional(),
  errorCode: z.enum(ERROR_CODES).optional().meta({ description: 'for a run that did not succeed, the class of its end: limit_exceeded (a budget or the wall time), policy_refused, run_failed (the task was not done), cancelled, or for an error the code of what broke (sandbox_unavailable, sandbox_failed, model_failed, invalid_input, worker_lost — its worker died —, log_failed — its log could not be written whole —, internal, …)' }),
  finalAnswer: z.string().nullable().optional(),
  reason: z.string().optional(),
  usage: Usage.optional(),
  reportPath: z.string().optional(),
  logPath: z.string().optional(),
  artifacts: z.array(z.object({ name: z.string(), path: z.string(), bytes: z.number() })).optional(),
  workspace: RunWorkspaceDoc.optional().meta({ description: 'what the workspace export found, once the run has ended and its workspace was exported' }),
  pendingApprovals: z.array(PendingApprovalDoc),
  parent: z.object({ runId: z.string(), callId: z.string(), depth: z.number() }).optional().meta({ description: 'set for a sub-run: the run whose delegate call started it, and its depth' }),
  logSeal: z.object({
    finalHash: z.string().meta({ description: 'SHA-256 (hex) of the last line of the run\'s hash-chained events.jsonl' }),
    lines: z.number(),
    signature: z.object({ alg: z.literal('ed25519'), keyId: z.string(), value: z.string() }).optional().meta({ description: 'the operator key\'s Ed25519 signature of "corral-log-v1 RUN_ID LINES FINAL_HASH" (CORRAL_LOG_SIGNING_KEY_FILE)' }),
    incomplete: z.string().optional().meta({ description: 'set when the worker could not write the whole log: why, and how many lines are missing' }),
  }).optional().meta({ description: 'the end of the run\'s tamper-evident log, once the run has ended: GET …/verify checks the stored log against it' }),
  traceId: z.string().optional().meta({ description: 'the run\'s OpenTelemetry trace id (32 hex digits)' }),
});

/** Compile-time check: every RunView is a valid RunViewDoc. */
type Assignable<T, U extends T> = U;
export type RunViewMatchesDoc = Assignable<z.input<typeof RunViewDoc>, RunView>;

export const RunDetail = RunViewDoc.extend({
  budgets: z
    .object({ llmCalls: BudgetUse, toolCalls: BudgetUse, tokens: BudgetUse, wallTimeS: BudgetUse, costUsd: BudgetUse })
    .partial()
    .optional()
    .meta({ description: 'use of each budget against its limit; while the run is going, as counted so far by its worker (a sub-run\'s use counts toward its parent\'s once it has ended)' }),
  children: z
    .array(z.object({
      id: z.string(), callId: z.string(), status: z.enum(RUN_STATUSES as [RunStatus, ...RunStatus[]]), task: z.string(), createdAt: z.string(),
      startedAt: z.string().optional(), finishedAt: z.string().optional(), outcome: z.enum(RUN_OUTCOMES as [RunStatus, ...RunStatus[]]).optional(),
      reason: z.string().optional(), usage: Usage.optional(), links: RunLinks,
    }))
    .optional()
    .meta({ description: 'the sub-runs this run started with `delegate`, in start order (tasks cut to 500 characters)' }),
  traceUrl: z.string().optional().meta({ description: 'the trace in the operator\'s trace viewer (CORRAL_TRACE_URL_TEMPLATE with the trace id)' }),
  links: RunLinks,
});

export const RunListItem = RunViewDoc.extend({ taskTruncated: z.boolean().optional(), links: RunLinks });
export const RunPageDoc = z.object({
  runs: z.array(RunListItem),
  next: z.string().nullable().meta({ description: 'cursor for the next page (pass as ?cursor=); null when there is none' }),
});

/** `?dryRun=true`: check the body and answer with the plan; nothing is queued. */
export const SubmitQuery = z.object({
  dryRun: z.enum(['true', 'false']).optional().meta({ description: 'true: validate and return the resolved plan without queueing a run or calling a model' }),
});

export const RunCreated = z.object({
  id: z.string(),
  status: z.string(),
  links: RunLinks,
  replayOf: z.string().optional(),
  idempotentReplay: z.boolean().optional().meta({ description: 'true when an earlier request with the same Idempotency-Key created this run' }),
  traceId: z.string().optional().meta({ description: 'the run\'s OpenTelemetry trace id (when this API traces, or the request carried a traceparent)' }),
  traceUrl: z.string().optional().meta({ description: 'the trace in the operator\'s viewer (CORRAL_TRACE_URL_TEMPLATE)' }),
});

export const RunEventDoc = z.looseObject({ type: z.string(), runId: z.string(), seq: z.number(), ts: z.string() }).meta({ description: 'a RunEvent (src/domain/events.ts); fields depend on type' });
export const EventsPage = z.object({ events: z.array(RunEventDoc), next: z.string() });

export const ApprovalAnswered = z.object({
  id: z.string(), callId: z.string(), decision: z.enum(['approve', 'deny']),
  by: z.string().meta({ description: 'who answered, as authenticated: tenant/token-name, or operator (auth off)' }),
  principal: z.union([
    z.object({ kind: z.literal('token'), tenant: z.string(), token: z.string().meta({ description: 'the token\'s name (tenant:name=token in CORRAL_API_TOKENS; else key- and 8 hex digits of its SHA-256)' }) }),
    z.object({ kind: z.literal('operator'), name: z.string() }),
  ]),
  note: z.string().optional(),
});
export const CancelResult = z.object({ id: z.string(), status: z.enum(['cancelled', 'cancelling']) });
export const Health = z.object({ ok: z.literal(true) });
export const Ready = z.object({
  ok: z.boolean(),
  checks: z.record(z.string(), z.object({ ok: z.boolean(), ms: z.number(), error: z.string().optional() })),
  workers: z.number().optional().meta({ description: 'workers connected to the queue (information; not a check)' }),
});

export const IdempotencyKeyHeader = z
  .string()
  .regex(/^[\x21-\x7e]{1,255}$/, 'must be 1–255 visible ASCII characters')
  .meta({ description: 'the same key (per tenant) within CORRAL_IDEMPOTENCY_TTL_S returns the same run instead of creating another; a different body with the same key is a 409' });

/** GET /openapi.json: an OpenAPI 3.1 document (its paths are described by itself). */
export const OpenApiDoc = z.object({
  openapi: z.literal('3.1.0'),
  info: z.object({ title: z.string(), version: z.string(), description: z.string() }),
  paths: z.record(z.string(), z.record(z.string(), z.unknown())),
  components: z.record(z.string(), z.unknown()),
}).loose();
