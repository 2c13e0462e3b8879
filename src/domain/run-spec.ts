/**
 * RunSpec: what a client submits (the REST body) and what a queue job carries — one schema for both.
 * Security invariants live here as refinements (egress allowlist shape, workspace paths), so every
 * entry point rejects the same bad input with the same message.
 */
import { z } from 'zod';
import { MAX_NAME_LENGTH, parseEgressEntry } from './egress-rules';
import { nameProblem } from './export-names';
import { TENANT_NAME } from './principal';
import { RunId } from './run-id';
import { ParentLink } from './subrun';
import { TaskContractJson } from './task-contract';

/**
 * A relative POSIX path inside the workspace: no absolute paths, no `..`, no empty segments, no
 * control characters (a newline or escape in a file name would garble logs, reports and terminals),
 * segments of at most 255 bytes (the filesystem's limit).
 */
/** How many labels a run may carry (each key ≤ 64 characters, each value ≤ 256). */
export const MAX_LABELS = 32;

export const WorkspacePath = z
  .string()
  .min(1)
  .max(1024)
  .refine((p) => !p.startsWith('/'), 'must be relative to /workspace')
  .refine((p) => !p.split('/').some((s) => s === '..' || s === '.' || s === ''), 'must not contain ".", ".." or empty segments')
  .refine((p) => !p.includes('\0'), 'must not contain NUL')
  // eslint-disable-next-line no-control-regex
  .refine((p) => !/[\x00-\x1f\x7f]/.test(p), 'must not contain control characters')
  // C1 controls (U+0085 is a line break to some terminals) and bidi overrides/isolates (which make a
  // name read differently from what it is).
  .refine((p) => !/[\u0080-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/.test(p), 'must not contain C1 control characters or bidirectional overrides')
  .refine((p) => p.split('/').every((s) => Buffer.byteLength(s) <= 255), 'each path segment may be at most 255 bytes')
  // Whatever else the workspace export refuses (export-names.ts: line and paragraph separators,
  // U+FFFD for bytes that were not UTF-8, lone surrogates), so a name accepted here can leave the
  // sandbox again; the characters named above are not reported twice.
  // eslint-disable-next-line no-control-regex -- the characters the refinements above already name
  .refine((p) => /[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/.test(p) || nameProblem(p) === null, {
    error: (iss) => `must be a name the workspace export keeps: ${(nameProblem(String(iss.input)) ?? '').replace(/^its name /, 'it ')}`,
  });

/**
 * Public suffixes a wildcard may never cover (`*.com` would allow the whole internet under it).
 * Not the whole Public Suffix List: the common ones plus any single label; a wildcard needs at least
 * two labels after `*.` unless its suffix is listed in neither set.
 */
const MULTI_LABEL_PUBLIC_SUFFIXES = new Set([
  'co.uk', 'org.uk', 'ac.uk', 'gov.uk', 'com.au', 'net.au', 'org.au', 'co.jp', 'ne.jp', 'or.jp', 'co.nz', 'com.br', 'com.cn',
  'com.mx', 'co.in', 'co.za', 'com.tr', 'com.sg', 'com.hk', 'github.io', 'herokuapp.com', 'appspot.com', 'vercel.app',
  'netlify.app', 'pages.dev', 'workers.dev', 'cloudfront.net', 'amazonaws.com', 's3.amazonaws.com', 'blogspot.com',
]);

/** Why a wildcard may not cover `suffix` (a public suffix); null when it may. */
function publicSuffixProblem(suffix: string): string | null {
  return suffix.split('.').length < 2 || MULTI_LABEL_PUBLIC_SUFFIXES.has(suffix) ? 'a wildcard may not cover a public suffix' : null;
}

/**
 * An egress allowlist entry: an exact host name or `*.suffix`, optionally `:port` (without a port:
 * 443 for HTTPS, 80 for plain HTTP). Never `*` alone, never a public suffix by wildcard, never an IP
 * literal in any spelling, `localhost`, a single-label name or a private-use domain (egress-rules.ts).
 */
export const EgressPattern = z
  .string()
  .min(1)
  .max(MAX_NAME_LENGTH + 8)
  .transform((s, ctx) => {
    const e = parseEgressEntry(s, publicSuffixProblem);
    if (typeof e === 'string') {
      ctx.addIssue({ code: 'custom', message: e });
      return z.NEVER;
    }
    return e.text;
  });

export const RunLimits = z
  .object({
    memoryMb: z.number().int().min(64).optional(),
    cpus: z.number().min(0.1).optional(),
    pids: z.number().int().min(16).optional(),
    workspaceMb: z.number().int().min(1).optional(),
    execTimeoutS: z.number().int().min(1).optional(),
    /**
     * `runc`: namespaces and corral's seccomp profile on the host kernel; `gvisor`: gVisor's user-space
     * kernel in between. Absent: the server's default. The server lists which classes it permits.
     */
    isolation: z.enum(['runc', 'gvisor']).optional(),
  })
  .strict();
export type RunLimits = z.infer<typeof RunLimits>;

export const RunBudgets = z
  .object({
    llmCalls: z.number().int().min(1).max(1000).default(30),
    toolCalls: z.number().int().min(0).max(5000).default(50),
    /** Input + output tokens over all model calls. */
    tokens: z.number().int().min(1000).max(100_000_000).default(2_000_000),
    wallTimeS: z.number().int().min(5).max(24 * 3600).default(600),
    costUsd: z.number().min(0).max(1000).default(1),
  })
  .strict();
export type RunBudgets = z.infer<typeof RunBudgets>;

/**
 * Model routing: which model each turn goes to, decided at dispatch by a heuristic over what just
 * happened (src/run/model-router.ts), never by another model. A turn goes to `strong` when one of the
 * `strongOn` rules holds for it, otherwise to `cheap`.
 */
export const ROUTING_RULES = ['first-turn', 'after-failed-check', 'after-failed-tool', 'after-blocked-call', 'after-malformed-call', 'after-sub-run', 'after-compaction'] as const;
export type RoutingRule = (typeof ROUTING_RULES)[number];
export const DEFAULT_STRONG_ON: readonly RoutingRule[] = ['first-turn', 'after-failed-check', 'after-failed-tool', 'after-blocked-call', 'after-malformed-call', 'after-sub-run'];

export const Routing = z
  .object({
    strong: z.string().min(1).max(200),
    cheap: z.string().min(1).max(200),
    strongOn: z.array(z.enum(ROUTING_RULES)).max(ROUTING_RULES.length).default([...DEFAULT_STRONG_ON]),
  })
  .strict()
  .refine((r) => r.strong !== r.cheap, { message: 'strong and cheap must be different models (for one model, set `model` instead)', path: ['cheap'] });
export type Routing = z.infer<typeof Routing>;

export const MAX_INLINE_WORKSPACE_BYTES = 4 * 1024 * 1024;
/** An uploaded workspace's id (PUT /v1/workspaces): `ws_` and the SHA-256 of its clean tar. */
export const WORKSPACE_ID = /^ws_[0-9a-f]{64}$/;
export const MAX_WORKSPACE_TAR_BYTES = 8 * 1024 * 1024;
/** A git ref a run may name: a branch or tag name (no option-like or `..` forms), or a full commit id. */
export const GIT_REF = /^(?!-)(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)(?!.*\/$)[A-Za-z0-9._/-]{1,200}$/;

export const GitWorkspace = z.strictObject({
  /** https://, http://, git:// or ssh:// (or scp-like user@host:path); never with a password in it. */
  url: z.string().min(1).max(2000),
  /** A branch, a tag or a commit id; default: the remote's HEAD. */
  ref: z.string().regex(GIT_REF, 'must be a branch, a tag or a commit id (letters, digits, . _ / -; no "..")').optional(),
  /** History fetched (commits); default 1. */
  depth: z.number().int().min(1).max(100_000).default(1),
  /** Also return the agent's commits as a git bundle (artifact agent.bundle), beside the patch. */
  bundle: z.boolean().default(false),
});
export type GitWorkspace = z.infer<typeof GitWorkspace>;

/**
 * One line of gitignore syntax (patch.exclude): what a .gitignore line may hold, without control
 * characters; comments and blank lines are refused here (they would mean nothing).
 */
export const IgnorePattern = z
  .string()
  .min(1)
  .max(1024)
  // eslint-disable-next-line no-control-regex
  .refine((p) => !/[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029]/.test(p), 'must not contain control characters or line breaks')
  .refine((p) => !p.startsWith('#') && p.trim() !== '' && p.trim() !== '!', 'must be a gitignore pattern (not a comment or blank)');

/** What workspace.patch leaves out (the changes stay in workspace.tar). */
export const PatchSpec = z.strictObject({
  /** Honour the workspace's .gitignore files and .git/info/exclude, as they were in the seed (default true). */
  gitignore: z.boolean().default(true),
  /** More gitignore patterns, root-based, applied after the workspace's own (a `!pattern` brings a path back). */
  exclude: z.array(IgnorePattern).max(200).default([]),
});
export type PatchSpec = z.infer<typeof PatchSpec>;

/** An environment's name (environments/NAME.yaml). */
export const ENVIRONMENT_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

export const RunSpec = z
  .object({
    /**
     * The task as the user wrote it: the only trusted statement of intent. Plain text, or Markdown with
     * `# Task`, `# Allowed tools`, `# Cannot do` and `# Done means` sections (see domain/task-contract).
     */
    task: z.string().trim().min(1, 'must not be empty').max(50_000).refine((t) => !t.includes('\0'), 'must not contain NUL (other control characters are kept)'),
    /**
     * The same contract as JSON. When present it wins: `task` is not parsed for sections, and the run's
     * task text, allowed tools, cannot-do list and done-means items all come from here. Only its shape is
     * checked in this schema; tool names are checked against the registry by contractForSpec().
     */
    contract: TaskContractJson.optional(),
    workspace: z
      .object({
        /** Inline files: workspace-relative path → UTF-8 content (written after the tar, so they win). */
        files: z.record(WorkspacePath, z.string()).default({}),
        /**
         * An uploaded workspace: an uncompressed tar, base64. Checked entry by entry when the sandbox is
         * made (regular files and directories under the workspace only, size and entry caps).
         */
        tarBase64: z
          .string()
          .max(Math.ceil((MAX_WORKSPACE_TAR_BYTES * 4) / 3) + 4, `the tar may be at most ${MAX_WORKSPACE_TAR_BYTES} bytes`)
          .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64')
          .optional(),
        /**
         * A workspace uploaded before with PUT /v1/workspaces by the same tenant (any size up to the
         * server's CORRAL_MAX_WORKSPACE_MB): extracted before `files`. Either this or `tarBase64`.
         */
        id: z.string().regex(WORKSPACE_ID, 'must be a workspace id from PUT /v1/workspaces (ws_ and 64 hex digits)').optional(),
        /**
         * A git remote the worker clones (on one of the server's CORRAL_GIT_REMOTES, with the tenant's
         * credentials from the operator's configuration): the checkout, with its .git, is the workspace.
         */
        git: GitWorkspace.optional(),
      })
      .strict()
      .default({ files: {} })
      .refine(
        (w) => Object.values(w.files).reduce((n, c) => n + Buffer.byteLength(c), 0) <= MAX_INLINE_WORKSPACE_BYTES,
        `inline files may total at most ${MAX_INLINE_WORKSPACE_BYTES} bytes`,
      )
      .refine((w) => !(w.id !== undefined && w.tarBase64 !== undefined), { message: 'give either `id` (an upload) or `tarBase64`, not both', path: ['id'] })
      .refine((w) => !(w.git !== undefined && (w.id !== undefined || w.tarBase64 !== undefined)), { message: 'give either `git` or an upload (`id`, `tarBase64`), not both', path: ['git'] }),
    policy: z.string().regex(/^[a-z0-9][a-z0-9_-]{0,63}$/, 'must be a policy name such as "default"').default('default'),
    /** true: an "ask" decision waits for a human; false (unattended): every "ask" is a deny. */
    approvals: z.boolean().default(false),
    /**
     * Where the agent may connect (through the run's proxy). Absent: its environment's default egress
     * (none for `default`); `{ allow: [] }`: none, whatever the environment says.
     */
    egress: z.object({ allow: z.array(EgressPattern).max(100).default([]) }).strict().optional(),
    /** What workspace.patch leaves out: the seed's .gitignore rules and these patterns (default: .gitignore only). */
    patch: PatchSpec.optional(),
    /**
     * Extra tools of the run. `mcp`: the environment's MCP servers to start (names from GET
     * /v1/environments); absent: the ones the environment starts by default; `[]`: none. Their tools are
     * `mcp__{server}__{tool}`, and a task's allowed tools may name them (or `mcp__{server}__*`).
     */
    tools: z.strictObject({
      mcp: z.array(z.string().regex(/^[a-z][a-z0-9-]{0,23}$/, 'must be an MCP server name of the environment')).max(16).optional(),
    }).optional(),
    /** The environment the sandbox starts from (image, setup phase, cache): a name from GET /v1/environments. */
    environment: z.string().regex(ENVIRONMENT_NAME, 'must be an environment name such as "node"').default('default'),
    limits: RunLimits.default({}),
    budgets: RunBudgets.default({ llmCalls: 30, toolCalls: 50, tokens: 2_000_000, wallTimeS: 600, costUsd: 1 }),
    /**
     * Memory shared by runs with the same key (a team, a repository): loaded at the start as untrusted
     * notes; `MEMORY:` lines of the final answer are appended when the run is trusted or a human approves.
     */
    memory: z
      .object({ key: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'must be a name such as "team-a.repo-x"'), trusted: z.boolean().default(false) })
      .strict()
      .optional(),
    /** Re-run with the model turns of this finished run (from its log on the worker): no model is called. */
    replayOf: RunId.optional(),
    /** Overrides the configured model name for this run. */
    model: z.string().min(1).max(200).optional(),
    /** Per-turn model choice between a strong and a cheap model (overrides the server's CORRAL_ROUTING_*). */
    routing: Routing.optional(),
    /** Free-form labels for the submitter (team, ticket); echoed in the report. */
    labels: z
      .record(z.string().min(1).max(64), z.string().max(256))
      .refine((l) => Object.keys(l).length <= MAX_LABELS, `at most ${MAX_LABELS} labels`)
      .optional(),
  })
  .strict()
  .refine((s) => !(s.model && s.routing), { message: 'give either `model` (one model for every turn) or `routing`, not both', path: ['routing'] });
export type RunSpec = z.infer<typeof RunSpec>;
export type RunSpecInput = z.input<typeof RunSpec>;

/**
 * Job data on the queue: the validated spec plus the id the API assigned. `tenant` is whose run it
 * is (the API writes it; another producer names it, and absent means `default`); a run record that
 * exists already (the API's) must name the same tenant. `parent` is set only on the child runs a
 * worker submits for a parent's `delegate` call (see domain/subrun.ts).
 */
export const RunJob = z.object({
  runId: RunId,
  spec: RunSpec,
  /** W3C Trace Context of the submission (the API's submit span, or the producer's): the run's trace joins it. */
  traceparent: z.string().max(55).regex(/^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/, 'must be a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)').optional(),
  tracestate: z.string().max(512).optional(),
  tenant: z.string().regex(TENANT_NAME, 'must be a tenant name (letters, digits, ".", "_", "-"; at most 64)').optional(),
  parent: ParentLink.optional(),
}).strict();
export type RunJob = z.infer<typeof RunJob>;
