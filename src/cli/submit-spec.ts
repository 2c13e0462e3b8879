/**
 * `corral submit`'s arguments and the RunSpec they make: TASK.md (or any non-JSON file) is the task
 * text, SPEC.json a whole RunSpec; --workspace packs a directory into workspace.tarBase64; the other
 * flags override what the spec file says. The API validates the result; here only what the flags
 * themselves must look like is checked, so mistakes are caught before anything is packed or sent.
 */
import { readFile } from 'node:fs/promises';
import type { BudgetName } from '../domain/events';
import { EgressPattern, ENVIRONMENT_NAME, GitWorkspace, IgnorePattern, ROUTING_RULES, RunBudgets, type RoutingRule } from '../domain/run-spec';
import { parseArgs, UsageError } from './cli-args';
import type { Readable } from 'node:stream';
import { INLINE_WORKSPACE_MAX_BYTES, packPlanned, planWorkspace, streamWorkspace, workspaceId, type PackedWorkspace } from './workspace-tar';

/** What PUT /v1/workspaces answered. */
export interface UploadedWorkspace {
  id: string;
  bytes: number;
  files: number;
  deduplicated: boolean;
  expiresAt: string;
}
/** Sends a workspace tar to the API (ApiClient.uploadWorkspace). */
export type UploadWorkspace = (tar: Readable) => Promise<UploadedWorkspace>;

/** The server's uploads, as buildSpec uses them: ask for an id first (nothing sent), send the tar only when it is not kept. */
export interface WorkspaceUploads {
  put: UploadWorkspace;
  /** The kept upload with this id (its TTL refreshed), or null. */
  find: (id: string) => Promise<{ id: string; expiresAt: string } | null>;
}

/** What --workspace became, for the dry run's text: the directory, what it holds and its upload id. */
export interface WorkspaceSummary {
  dir: string;
  files: number;
  dirs: number;
  links: number;
  bytes: number;
  /** Sent inline (tarBase64), or an upload: `sent` now, `kept` (the server had it; nothing sent), or not sent by a dry run. */
  how: 'inline' | 'sent' | 'kept' | 'not-sent';
  id?: string;
  skipped: Array<{ path: string; why: string }>;
}

export const BUDGET_NAMES: readonly BudgetName[] = ['llmCalls', 'toolCalls', 'tokens', 'wallTimeS', 'costUsd'];

export interface SubmitOptions {
  /** A file (TASK.md or SPEC.json), the text of --task, or a server template with --set values. */
  source: { file: string } | { task: string } | { template: string; params: Record<string, string> };
  /** Validate and print the resolved plan; nothing is queued. */
  dryRun: boolean;
  workspace?: string;
  /** workspace.git: a remote the worker clones (--git URL [--ref R] [--depth N] [--bundle]). */
  git?: { url: string; ref?: string; depth?: number; bundle: boolean };
  exclude: string[];
  /** patch.exclude (--patch-exclude PATTERN, repeatable). */
  patchExclude: string[];
  allowDomains: string[];
  approvals: boolean;
  policy?: string;
  /** spec.environment: a name from GET /v1/environments. */
  environment?: string;
  budgets: Partial<Record<BudgetName, number>>;
  /** One model for every turn (spec.model). */
  model?: string;
  /** Model routing (spec.routing): `--route STRONG,CHEAP[,on=RULE+RULE]`. */
  routing?: { strong: string; cheap: string; strongOn?: RoutingRule[] };
  watch: boolean;
  plain: boolean;
  api?: string;
  token?: string;
}

/** `llmCalls=10,costUsd=0.5` (repeatable) → budgets; UsageError for unknown names or bad numbers. */
export function parseBudgets(values: readonly string[]): Partial<Record<BudgetName, number>> {
  const out: Partial<Record<BudgetName, number>> = {};
  for (const item of values.flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean)) {
    const m = /^([A-Za-z]+)\s*=\s*(.+)$/.exec(item);
    if (!m) throw new UsageError(`--budget: "${item}" is not NAME=VALUE (e.g. --budget llmCalls=10,costUsd=0.5)`);
    const name = BUDGET_NAMES.find((b) => b.toLowerCase() === m[1]!.toLowerCase());
    if (!name) throw new UsageError(`--budget: unknown budget "${m[1]}" (known: ${BUDGET_NAMES.join(', ')})`);
    const n = Number(m[2]);
    if (!Number.isFinite(n) || n < 0 || m[2]!.trim() === '') throw new UsageError(`--budget: ${name} must be a number ≥ 0, got "${m[2]}"`);
    // The server's own schema decides the limits (one source): e.g. llmCalls is 1–1000.
    const checked = RunBudgets.shape[name].safeParse(n);
    if (!checked.success) throw new UsageError(`--budget: ${name}=${m[2]!.trim()} is refused: ${checked.error.issues.map((i) => i.message).join('; ')}`);
    out[name] = n;
  }
  return out;
}

/** `--route big,small` or `--route big,small,on=first-turn+after-failed-check` → spec.routing. */
export function parseRoute(value: string): NonNullable<SubmitOptions['routing']> {
  const parts = value.split(',').map((p) => p.trim());
  const on = parts.length === 3 && parts[2]!.startsWith('on=') ? parts[2]!.slice(3) : undefined;
  if (parts.length < 2 || parts.length > 3 || !parts[0] || !parts[1] || (parts.length === 3 && on === undefined)) {
    throw new UsageError(`--route ${value}: give STRONG,CHEAP or STRONG,CHEAP,on=RULE+RULE (e.g. --route gpt-4.1,gpt-4.1-mini)`);
  }
  if (parts[0] === parts[1]) throw new UsageError(`--route ${value}: the strong and the cheap model must differ (for one model use --model)`);
  const strongOn = on === undefined ? undefined : on.split('+').map((r) => r.trim()).filter(Boolean);
  const bad = strongOn?.filter((r) => !(ROUTING_RULES as readonly string[]).includes(r)) ?? [];
  if (bad.length) throw new UsageError(`--route: unknown rule(s) ${bad.join(', ')} (known: ${ROUTING_RULES.join(', ')})`);
  return { strong: parts[0], cheap: parts[1], ...(strongOn ? { strongOn: strongOn as RoutingRule[] } : {}) };
}

export function parseSubmitArgs(argv: readonly string[]): SubmitOptions {
  const { opts, positionals } = parseArgs(argv, {
    task: 'string', workspace: 'string', exclude: 'list', git: 'string', ref: 'string', depth: 'string', bundle: 'flag', 'patch-exclude': 'list', 'allow-domain': 'list', approvals: 'flag', policy: 'string', environment: 'string',
    budget: 'list', model: 'string', route: 'string', watch: 'flag', 'dry-run': 'flag', template: 'string', set: 'list', 'no-watch': 'flag', 'no-follow': 'flag', plain: 'flag', api: 'string', token: 'string',
  });
  if (positionals.length > 1) throw new UsageError(`unexpected argument "${positionals[1]}" (give one TASK.md or SPEC.json)`);
  const file = positionals[0];
  const sources = [file !== undefined, opts.task !== undefined, opts.template !== undefined].filter(Boolean).length;
  if (sources > 1) throw new UsageError('give one of a TASK.md / SPEC.json file, --task TEXT or --template NAME');
  if (sources === 0) throw new UsageError('missing the task: give TASK.md, SPEC.json, --task TEXT or --template NAME');
  if (opts.set.length && opts.template === undefined) throw new UsageError('--set only applies with --template NAME');
  if (opts.template !== undefined) {
    const other = (['allow-domain', 'budget'] as const).find((k) => opts[k].length)
      ?? (opts.approvals ? 'approvals' : opts.policy !== undefined ? 'policy' : opts.environment !== undefined ? 'environment' : undefined);
    if (other) throw new UsageError(`--${other} does not apply with --template: the template sets the run's spec (only --set, --workspace and --dry-run do)`);
  }
  if (opts.task !== undefined && !opts.task.trim()) throw new UsageError('--task is empty');
  if (opts.watch && (opts['no-watch'] || opts['no-follow'])) throw new UsageError('--watch and --no-watch contradict each other');
  if (opts.exclude.length && opts.workspace === undefined) throw new UsageError('--exclude only applies with --workspace DIR');
  if (opts.git !== undefined && opts.workspace !== undefined) throw new UsageError('give either --workspace DIR or --git URL, not both');
  if (opts.git === undefined && (opts.ref !== undefined || opts.depth !== undefined || opts.bundle)) throw new UsageError(`--${opts.ref !== undefined ? 'ref' : opts.depth !== undefined ? 'depth' : 'bundle'} only applies with --git URL`);
  let git: SubmitOptions['git'];
  if (opts.git !== undefined) {
    const checked = GitWorkspace.safeParse({ url: opts.git, ...(opts.ref !== undefined ? { ref: opts.ref } : {}), ...(opts.depth !== undefined ? { depth: Number(opts.depth) } : {}), bundle: opts.bundle });
    if (!checked.success) throw new UsageError(`--git: ${checked.error.issues.map((i) => `${i.path.length ? `${i.path.join('.') === 'url' ? '--git' : `--${String(i.path[0])}`} ` : ''}${i.message}`).join('; ')}`);
    git = { url: checked.data.url, ...(checked.data.ref !== undefined ? { ref: checked.data.ref } : {}), ...(opts.depth !== undefined ? { depth: checked.data.depth } : {}), bundle: checked.data.bundle };
  }
  const patchExclude = opts['patch-exclude'].map((p) => {
    const r = IgnorePattern.safeParse(p);
    if (!r.success) throw new UsageError(`--patch-exclude ${p}: ${r.error.issues.map((i) => i.message).join('; ')}`);
    return r.data;
  });
  if (opts.model !== undefined && opts.route !== undefined) throw new UsageError('give either --model (one model for every turn) or --route (a strong and a cheap one), not both');
  if (opts.model !== undefined && !opts.model.trim()) throw new UsageError('--model is empty');
  if (opts.environment !== undefined && !ENVIRONMENT_NAME.test(opts.environment)) {
    throw new UsageError(`--environment ${opts.environment}: not an environment name (lower case letters, digits, - and _; corral environments lists them)`);
  }
  const allowDomains = opts['allow-domain'].map((d) => {
    const r = EgressPattern.safeParse(d);
    if (!r.success) throw new UsageError(`--allow-domain ${d}: ${r.error.issues.map((i) => i.message).join('; ')}`);
    return r.data;
  });
  return {
    source: opts.template !== undefined ? { template: opts.template, params: parseSets(opts.set) } : file !== undefined ? { file } : { task: opts.task! },
    dryRun: opts['dry-run'],
    ...(opts.workspace !== undefined ? { workspace: opts.workspace } : {}),
    ...(git ? { git } : {}),
    exclude: opts.exclude,
    patchExclude,
    allowDomains,
    approvals: opts.approvals,
    ...(opts.policy !== undefined ? { policy: opts.policy } : {}),
    ...(opts.environment !== undefined ? { environment: opts.environment } : {}),
    budgets: parseBudgets(opts.budget),
    ...(opts.model !== undefined ? { model: opts.model.trim() } : {}),
    ...(opts.route !== undefined ? { routing: parseRoute(opts.route) } : {}),
    watch: opts.watch,
    plain: opts.plain,
    ...(opts.api !== undefined ? { api: opts.api } : {}),
    ...(opts.token !== undefined ? { token: opts.token } : {}),
  };
}

/** `--set k=v` (repeatable; the value may hold "=" and ","): the template's parameters. */
export function parseSets(values: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const item of values) {
    const i = item.indexOf('=');
    if (i <= 0) throw new UsageError(`--set: "${item}" is not NAME=VALUE (e.g. --set focus=src)`);
    const name = item.slice(0, i).trim();
    if (Object.hasOwn(out, name)) throw new UsageError(`--set: ${name} is given twice`);
    out[name] = item.slice(i + 1);
  }
  return out;
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The spec from the file or --task, before the flags are applied. */
async function baseSpec(source: SubmitOptions['source']): Promise<Json> {
  if ('template' in source) return { params: source.params };
  if ('task' in source) return { task: source.task };
  let text: string;
  try {
    text = await readFile(source.file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UsageError(`cannot read ${source.file} (${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'a directory; give a TASK.md file, and the directory as --workspace' : code ?? (err as Error).message})`, false);
  }
  if (!/\.json$/i.test(source.file)) {
    if (!text.trim()) throw new UsageError(`${source.file} is empty; write the task in it`, false);
    return { task: text };
  }
  let spec: unknown;
  try {
    spec = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${source.file} is not valid JSON (${(err as Error).message}); a .json file must be a whole RunSpec, a .md file is the task text`);
  }
  if (!isObject(spec)) throw new UsageError(`${source.file} must hold a JSON object (a RunSpec such as {"task": "…"})`);
  return spec;
}

/**
 * The RunSpec to POST. Packs --workspace (calling `note` with what was skipped and packed); throws
 * UsageError for unusable input and WorkspacePackError when the directory cannot be packed.
 */
export async function buildSpec(
  o: SubmitOptions,
  note: (line: string) => void = () => undefined,
  uploads?: WorkspaceUploads,
): Promise<{ spec: Json; packed?: PackedWorkspace; uploaded?: UploadedWorkspace; workspace?: WorkspaceSummary }> {
  const spec = await baseSpec(o.source);
  let packed: PackedWorkspace | undefined;
  let uploaded: UploadedWorkspace | undefined;
  let summary: WorkspaceSummary | undefined;
  if (o.workspace !== undefined) {
    const ws = isObject(spec.workspace) ? spec.workspace : {};
    if (ws.tarBase64 !== undefined || ws.id !== undefined || ws.git !== undefined) throw new UsageError(`the spec already has workspace.${ws.id !== undefined ? 'id' : ws.git !== undefined ? 'git' : 'tarBase64'}; drop it or --workspace`);
    const plan = await planWorkspace(o.workspace, { exclude: o.exclude });
    for (const s of plan.skipped) note(`skipped ${s.path}: ${s.why}`);
    const counts = `${plan.files} file(s), ${plan.dirs} director${plan.dirs === 1 ? 'y' : 'ies'}${plan.links ? `, ${plan.links} symbolic link(s)` : ''}`;
    const left = `${plan.excluded.length ? `; excluded ${plan.excluded.length} path(s)` : ''}${plan.skipped.length ? `; skipped ${plan.skipped.length}` : ''}`;
    const base = { dir: o.workspace, files: plan.files, dirs: plan.dirs, links: plan.links, bytes: plan.bytes, skipped: plan.skipped };
    if (plan.estimate > INLINE_WORKSPACE_MAX_BYTES && uploads) {
      // Large: named by its id. The id is the digest of the tar, so it is known before a byte is
      // sent: a directory the server keeps already is not sent again, and a dry run sends nothing.
      const id = await workspaceId(plan);
      const kept = await uploads.find(id);
      if (kept) {
        note(`${o.workspace}: ${counts}, ${plan.bytes} bytes of files — the server keeps it already as ${id} (nothing sent; kept until ${kept.expiresAt})${left}`);
        spec.workspace = { ...ws, id };
        summary = { ...base, how: 'kept', id };
      } else if (o.dryRun) {
        note(`${o.workspace}: ${counts}, ${plan.bytes} bytes of files — would be uploaded as ${id} (a dry run sends nothing)${left}`);
        summary = { ...base, how: 'not-sent', id };
      } else {
        // Streamed to PUT /v1/workspaces (never the whole tar in memory).
        uploaded = await uploads.put(streamWorkspace(plan));
        note(`uploaded ${o.workspace}: ${counts}, ${plan.bytes} bytes of files as ${uploaded.id}${uploaded.deduplicated ? ' (already there)' : ''}, kept until ${uploaded.expiresAt}${left}`);
        spec.workspace = { ...ws, id: uploaded.id };
        summary = { ...base, how: 'sent', id: uploaded.id };
      }
    } else {
      packed = await packPlanned(plan);
      note(`packed ${o.workspace}: ${counts}, ${packed.tar.length} bytes of tar${left}`);
      spec.workspace = { ...ws, tarBase64: packed.tar.toString('base64') };
      summary = { ...base, how: 'inline' };
    }
  }
  if (o.git) {
    const ws = isObject(spec.workspace) ? spec.workspace : {};
    if (ws.tarBase64 !== undefined || ws.id !== undefined) throw new UsageError(`the spec already has workspace.${ws.id !== undefined ? 'id' : 'tarBase64'}; drop it or --git`);
    spec.workspace = { ...ws, git: o.git };
  }
  if (o.patchExclude.length) {
    const patch = isObject(spec.patch) ? spec.patch : {};
    const before = Array.isArray(patch.exclude) ? (patch.exclude as unknown[]) : [];
    spec.patch = { ...patch, exclude: [...new Set([...before, ...o.patchExclude])] };
  }
  if (o.allowDomains.length) {
    const egress = isObject(spec.egress) ? spec.egress : {};
    const before = Array.isArray(egress.allow) ? (egress.allow as unknown[]) : [];
    spec.egress = { ...egress, allow: [...new Set([...before, ...o.allowDomains])] };
  }
  if (o.approvals) spec.approvals = true;
  if (o.policy !== undefined) spec.policy = o.policy;
  if (o.environment !== undefined) spec.environment = o.environment;
  if (o.model !== undefined) {
    spec.model = o.model;
    delete spec.routing;
  }
  if (o.routing) {
    spec.routing = o.routing;
    delete spec.model;
  }
  if (Object.keys(o.budgets).length) spec.budgets = { ...(isObject(spec.budgets) ? spec.budgets : {}), ...o.budgets };
  return { spec, ...(packed ? { packed } : {}), ...(uploaded ? { uploaded } : {}), ...(summary ? { workspace: summary } : {}) };
}
