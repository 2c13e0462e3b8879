/**
 * Admission: everything a RunSpec must pass before it may run, in one function that every entry
 * point calls — the API (POST /v1/runs, templates, schedules, replays) before a job exists, and the
 * worker before it runs a job, since a producer may write straight to the queue, and a job may
 * outlive the configuration it was submitted under. What it checks, in order:
 *   (the RunSpec schema comes first, where the caller parses its input: a body, a job's data)
 *   1. resource limits and the isolation class within the server's maxima (CORRAL_MAX_*);
 *   2. budgets within the operator's ceiling (CORRAL_MAX_BUDGET_*);
 *   3. the egress allowlist under the server's rules (wildcards on or off);
 *   4. a policy this server has, and an environment it has (whose limits are the run's defaults, and
 *      whose default egress is the agent's when the run names none);
 *   5. the MCP servers the run names (tools.mcp) among its environment's, a remote one's host in the
 *      agent's egress; the task contract (sections, allowed tools this server offers, and
 *      `mcp__{server}__{tool}` of those servers);
 *   6. an uploaded workspace tar, entry by entry: an archive the sandbox would take, with names that
 *      satisfy WorkspacePath like inline files' (the sandbox drops "." segments; the schema refuses them);
 *   7. a workspace.id: an upload of this tenant that is still kept, whose content fits the run's
 *      workspaceMb (its TTL counts again from this admission).
 * Every failure is an InvalidInputError naming its field; nothing here touches Redis, Docker or the
 * network. Checks that need run records (a replayOf run of the same tenant, with model turns) stay
 * with the API, which has them; the worker sees the replay fail with its reason.
 */
import type { Config } from '../config';
import { checkBudgets } from '../run/budget-limits';
import { readCheckedTar } from '../sandbox/archive';
import { checkEgressAllow } from '../sandbox/egress-allowlist';
import { resolveLimits, type ResolvedLimits } from '../sandbox/limits';
import { builtInDefault, type Environment } from './environment';
import { admitGitRemote, type GitRemote } from '../git/git-remote';
import { allowsUrl } from './egress-rules';
import { CorralError, InvalidInputError } from './errors';
import { remoteUrl } from './mcp';
import { WorkspacePath, type RunSpec } from './run-spec';
import { contractForSpec, type TaskContract } from './task-contract';

export interface AdmissionContext {
  config: Config;
  /** The policies this server has (policies/*.yaml). */
  policyNames: readonly string[];
  /** The tools this server offers. */
  toolNames: readonly string[];
  /** The environment catalogue (environments/*.yaml); absent: only the built-in `default`. */
  environments?: ReadonlyMap<string, Environment>;
  /** Put before each message, e.g. "body: " at the API; "" in the worker. */
  label?: string;
  /** Where uploads are kept (PUT /v1/workspaces), and whose run this is; without them a workspace.id is refused. */
  uploads?: UploadLookup;
  tenant?: string;
}

/** An upload as admission sees it: its clean tar on this host's disk, its size and what it holds. */
export interface FoundUpload {
  path: string;
  bytes: number;
  files: number;
  contentBytes: number;
}

/** What admission needs of the upload store (workspaces/workspace-uploads.ts). */
export interface UploadLookup {
  find(tenant: string, id: string, o?: { touch?: boolean }): Promise<FoundUpload | null>;
}

export interface Admitted {
  spec: RunSpec;
  limits: ResolvedLimits;
  contract: TaskContract;
  environment: Environment;
  /** The agent phase's egress allowlist: the run's own, else its environment's default. */
  egress: string[];
  /** The upload a workspace.id names, on this host's disk. */
  upload?: FoundUpload;
  /** workspace.git's remote, in its normal form, on the server's CORRAL_GIT_REMOTES. */
  git?: GitRemote;
  /** The environment's MCP servers this run starts (tools.mcp, else the environment's defaults). */
  mcp: string[];
}

/** Checks a parsed spec for running here; throws InvalidInputError naming the field (its message after `label`). */
export async function admitSpec(spec: RunSpec, ctx: AdmissionContext): Promise<Admitted> {
  try {
    const environments = ctx.environments ?? new Map([['default', builtInDefault(ctx.config)]]);
    const environment = environments.get(spec.environment);
    if (!environment) {
      throw new InvalidInputError(`environment: unknown environment "${spec.environment}" (this server has: ${[...environments.keys()].join(', ')})`, 'environment');
    }
    const limits = resolveLimits({ ...environment.limits, ...spec.limits }, ctx.config);
    checkBudgets(spec.budgets, ctx.config);
    if (spec.egress) checkEgressAllow(spec.egress.allow, ctx.config);
    const egress = spec.egress ? spec.egress.allow : environment.egress;
    if (!ctx.policyNames.includes(spec.policy)) {
      throw new InvalidInputError(`policy: unknown policy "${spec.policy}" (this server has: ${ctx.policyNames.join(', ')})`, 'policy');
    }
    const mcp = mcpServersFor(spec, environment, egress);
    const contract = contractForSpec(spec, ctx.toolNames, mcp);
    if (spec.workspace.tarBase64 !== undefined) await checkTar(spec.workspace.tarBase64, limits.workspaceMb);
    const upload = spec.workspace.id !== undefined ? await findUpload(spec.workspace.id, limits.workspaceMb, ctx) : undefined;
    const git = spec.workspace.git ? admitGitRemote(spec.workspace.git.url, ctx.config.CORRAL_GIT_REMOTES) : undefined;
    return { spec, limits, contract, environment, egress, mcp, ...(upload ? { upload } : {}), ...(git ? { git } : {}) };
  } catch (err) {
    if (!ctx.label || !(err instanceof InvalidInputError)) throw err;
    const { field: _field, ...details } = err.details ?? {};
    throw new InvalidInputError(`${ctx.label}${err.message}`, err.field, details, { cause: err });
  }
}

/** The MCP servers a run starts: the ones it names (each the environment's), else the environment's defaults. */
function mcpServersFor(spec: RunSpec, env: Environment, egress: readonly string[]): string[] {
  const named = spec.tools?.mcp;
  const have = Object.keys(env.mcp);
  named?.forEach((n, i) => {
    if (!have.includes(n)) {
      throw new InvalidInputError(`tools.mcp.${i}: the environment "${env.name}" has no MCP server "${n}" (it has: ${have.join(', ') || 'none'})`, `tools.mcp.${i}`);
    }
  });
  const list = named ? [...new Set(named)] : have.filter((n) => env.mcp[n]!.default);
  for (const n of list) {
    const url = env.mcp[n]!.url;
    const u = url === undefined ? null : remoteUrl(url);
    if (u !== null && typeof u !== 'string' && !allowsUrl(egress, u)) {
      const field = named ? `tools.mcp.${named.indexOf(n)}` : 'egress.allow';
      throw new InvalidInputError(`${field}: the MCP server "${n}" is remote (${u.host}), and this run's egress (${egress.join(', ') || 'none'}) does not allow it: it is reached from inside the sandbox through the egress proxy`, field);
    }
  }
  return list;
}

/** The uploaded workspace, checked like any archive the sandbox would take, and its names like inline files'. */
async function checkTar(b64: string, workspaceMb: number): Promise<void> {
  const field = 'workspace.tarBase64';
  let entries;
  try {
    ({ entries } = await readCheckedTar(Buffer.from(b64, 'base64'), { maxBytes: workspaceMb * 1024 * 1024, maxEntries: 50_000 }));
  } catch (err) {
    // The tenant's tar broke the archive rules: bad input. Anything else that broke keeps its class.
    if (err instanceof CorralError && (err.code === 'path_refused' || err.code === 'limit_exceeded' || err.code === 'invalid_input')) throw new InvalidInputError(`${field}: ${err.message}`, field, undefined, { cause: err });
    throw err;
  }
  for (const e of entries) {
    const r = WorkspacePath.safeParse(e.path);
    if (!r.success) throw new InvalidInputError(`${field}: entry ${JSON.stringify(e.path.slice(0, 200))}: ${r.error.issues.map((i) => i.message).join('; ')}`, field);
  }
}

async function findUpload(id: string, workspaceMb: number, ctx: AdmissionContext): Promise<FoundUpload> {
  const field = 'workspace.id';
  if (!ctx.uploads || ctx.tenant === undefined) throw new InvalidInputError(`${field}: this server keeps no uploaded workspaces`, field);
  const found = await ctx.uploads.find(ctx.tenant, id, { touch: true });
  if (!found) {
    throw new InvalidInputError(`${field}: no upload ${id} is kept for this tenant (never uploaded here, or expired after CORRAL_WORKSPACE_TTL_S=${ctx.config.CORRAL_WORKSPACE_TTL_S} s); PUT it to /v1/workspaces again`, field);
  }
  if (found.contentBytes > workspaceMb * 1024 * 1024) {
    throw new InvalidInputError(`${field}: the upload holds ${found.contentBytes} bytes of files, more than this run's workspace of ${workspaceMb} MB (limits.workspaceMb)`, field);
  }
  return found;
}
