/**
 * A dry run's answer: what a submitted RunSpec would do, resolved the way the server would run it —
 * the tools the model is offered, the done checks and criteria, the egress allowlist, the limits and
 * budgets after defaults, the policy, approvals, the model and the isolation class — without a job,
 * a sandbox or a model call (`POST /v1/runs?dryRun=true`, `corral submit --dry-run`).
 */
import { z } from 'zod';
import type { Config } from '../config';
import { builtInDefault, type Environment } from '../domain/environment';
import type { Admitted } from '../domain/admit-spec';
import type { RunSpec } from '../domain/run-spec';
import { contractForSpec } from '../domain/task-contract';
import { resolveLimits } from '../sandbox/limits';
import { toolsFor } from '../tools/registry';

export const RunPlan = z.object({
  dryRun: z.literal(true),
  accepted: z.literal(true).meta({ description: 'the body would be accepted as it is (a refusal is a 400 naming the field, as for a real submission)' }),
  task: z.string().meta({ description: 'the task text, cut to 500 characters' }),
  tools: z.array(z.string()).meta({ description: 'the tools the model is offered' }),
  cannotDo: z.array(z.string()),
  doneChecks: z.array(z.string()).meta({ description: 'commands run in the sandbox when the model says it is done' }),
  doneCriteria: z.array(z.string()),
  egress: z.array(z.string()).meta({ description: 'names the agent may reach (empty: no network): the run\'s own allowlist, else its environment\'s default' }),
  environment: z.object({
    name: z.string(), image: z.string(),
    setup: z.array(z.string()).meta({ description: 'the setup phase\'s commands, run before the first model call' }),
    setupEgress: z.array(z.string()).meta({ description: 'where the setup phase may connect; closed before the agent starts' }),
    setupTimeoutS: z.number().meta({ description: 'the setup phase\'s own bound; the wallTimeS budget is the agent\'s and starts when setup ends' }),
    cached: z.boolean().meta({ description: 'whether setup\'s result is cached (keyed by the tenant, the environment and its lockfiles)' }),
  }),
  limits: z.object({ memoryMb: z.number(), cpus: z.number(), pids: z.number(), workspaceMb: z.number(), execTimeoutS: z.number(), isolation: z.string() }),
  budgets: z.record(z.string(), z.number()),
  policy: z.string(),
  approvals: z.boolean().meta({ description: 'asks wait for a human (true) or are refused (false)' }),
  model: z.string(),
  workspace: z.object({
    files: z.number().meta({ description: 'inline files' }),
    tarBytes: z.number().meta({ description: 'bytes of workspace.tarBase64' }),
    upload: z.object({ id: z.string(), files: z.number(), bytes: z.number().meta({ description: 'bytes of file content' }) }).optional().meta({ description: 'the upload workspace.id names (this tenant\'s, still kept)' }),
    git: z.object({ url: z.string(), ref: z.string().nullable(), depth: z.number(), bundle: z.boolean() }).optional().meta({ description: 'the remote workspace.git names, as the worker will clone it' }),
  }),
  patch: z.object({ gitignore: z.boolean(), exclude: z.array(z.string()) }).meta({ description: 'what workspace.patch leaves out' }),
  labels: z.record(z.string(), z.string()),
});
export type RunPlan = z.infer<typeof RunPlan>;

/** The plan of an admitted spec (the caller has already run every submission check on it); `admitted` adds the upload and the remote. */
export function planRun(spec: RunSpec, config: Config, environments?: ReadonlyMap<string, Environment>, admitted?: Pick<Admitted, 'upload' | 'git'>): RunPlan {
  const tools = toolsFor(config).map((t) => t.name);
  const contract = contractForSpec(spec, tools);
  const env = environments?.get(spec.environment) ?? builtInDefault(config);
  const limits = resolveLimits({ ...env.limits, ...spec.limits }, config);
  return {
    dryRun: true,
    accepted: true,
    task: spec.task.length > 500 ? `${spec.task.slice(0, 500)}…` : spec.task,
    tools: contract.allowedTools ?? tools,
    cannotDo: contract.cannotDo,
    doneChecks: contract.doneMeans.flatMap((d) => (d.kind === 'check' ? [d.command] : [])),
    doneCriteria: contract.doneMeans.flatMap((d) => (d.kind === 'criterion' ? [d.text] : [])),
    egress: spec.egress ? spec.egress.allow : env.egress,
    environment: { name: env.name, image: env.image, setup: env.setup.commands, setupEgress: env.setup.egress, setupTimeoutS: env.setup.timeoutS, cached: env.cache !== false },
    limits: { ...limits, isolation: limits.isolation ?? `server default (${config.CORRAL_SANDBOX_RUNTIME})` },
    budgets: { ...spec.budgets },
    policy: spec.policy,
    approvals: spec.approvals,
    model: config.CORRAL_REPLAY ? `replay of ${config.CORRAL_REPLAY}` : spec.model ?? config.CORRAL_MODEL,
    workspace: {
      files: Object.keys(spec.workspace.files ?? {}).length,
      tarBytes: spec.workspace.tarBase64 ? Math.floor((spec.workspace.tarBase64.length * 3) / 4) : 0,
      ...(spec.workspace.id && admitted?.upload ? { upload: { id: spec.workspace.id, files: admitted.upload.files, bytes: admitted.upload.contentBytes } } : {}),
      ...(spec.workspace.git ? { git: { url: admitted?.git?.url ?? spec.workspace.git.url, ref: spec.workspace.git.ref ?? null, depth: spec.workspace.git.depth, bundle: spec.workspace.git.bundle } } : {}),
    },
    patch: { gitignore: spec.patch?.gitignore ?? true, exclude: spec.patch?.exclude ?? [] },
    labels: spec.labels ?? {},
  };
}
