/**
 * Environments: what a run's sandbox starts from — an image (from the operator's allowlist), the
 * commands of its setup phase and where that phase may reach (package registries), what setup's
 * result is cached by (the lockfiles), default limits and isolation class, and the agent phase's
 * default egress. An operator's catalogue (environments/*.yaml, loaded by environments/load-environments.ts);
 * a run names one (`environment: "node"`), `default` is today's image with no setup.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { Config } from '../config';
import { EnvName } from './env-name';
import { McpServers } from './mcp';
import { EgressPattern, RunLimits, WorkspacePath } from './run-spec';

export { ENVIRONMENT_NAME } from './run-spec';
export const DEFAULT_ENVIRONMENT = 'default';

export const EnvironmentExample = z.strictObject({
  /** Which phase's allowlist the example is checked against. */
  phase: z.enum(['setup', 'agent']),
  /** host or host:port (a CONNECT to port 443 when no port is given). */
  target: z.string().min(1).max(300),
  expect: z.enum(['allow', 'deny']),
});

export const EnvironmentFile = z.strictObject({
  version: z.literal(1),
  description: z.string().min(1).max(500),
  /** The sandbox image; must be one of the server's sandbox images (CORRAL_SANDBOX_IMAGE, CORRAL_SANDBOX_IMAGES). */
  image: z.string().min(1).max(200),
  /** Extra variables in every process of the sandbox (not secrets: the agent sees them). */
  env: z.record(EnvName, z.string().max(4096).refine((v) => !v.includes('\0'), 'must not contain NUL')).default({}),
  /** Directories put before PATH in every process of the sandbox (a virtualenv's bin, a toolchain's). */
  path: z.array(z.string().regex(/^\/[A-Za-z0-9._/-]{1,255}$/, 'must be an absolute directory (letters, digits, . _ / -)').refine((p) => !p.split('/').includes('..'), 'must not contain ".."')).max(8).default([]),
  setup: z.strictObject({
    /** Run in order with bash in /workspace as the agent's user, before the first model call; the first that fails ends the run setup_failed. */
    commands: z.array(z.string({
      // `- echo a: b` is a mapping to YAML: the commonest mistake in such a file, so it gets its own message.
      error: (iss) => (iss.input !== null && typeof iss.input === 'object' ? 'YAML read this command as a mapping (it contains ": "): quote it, or write it as a block (- |)' : undefined),
    }).min(1).max(10_000)).max(50).default([]),
    /** Where the setup phase may connect (through the run's proxy); closed before the agent starts. */
    egress: z.array(EgressPattern).max(100).default([]),
    /** For the whole phase. */
    timeoutS: z.number().int().min(1).max(3600).default(600),
  }).default({ commands: [], egress: [], timeoutS: 600 }),
  /**
   * What setup's result is kept for: workspace files whose content keys the cache (lockfiles); the
   * key is the tenant, the environment as written and these files' digests. `false`: never cached.
   */
  cache: z.union([z.literal(false), z.strictObject({ files: z.array(WorkspacePath).min(1).max(32) })]).default(false),
  /** Defaults for runs in this environment (a run's own limits win); execTimeoutS is the run's to set. */
  limits: RunLimits.omit({ execTimeoutS: true }).default({}),
  /** The agent phase's egress when the run names none. */
  egress: z.array(EgressPattern).max(100).default([]),
  /**
   * MCP servers the agent's runs may use (domain/mcp.ts): run in the sandbox after setup, as the
   * agent's user, each tool call through the gate. A run names a subset with `tools.mcp`.
   */
  mcp: McpServers,
  /** Checked when the file loads: each target must get `expect` from its phase's allowlist. */
  examples: z.array(EnvironmentExample).max(100).default([]),
});
export type EnvironmentFile = z.infer<typeof EnvironmentFile>;

export interface Environment extends EnvironmentFile {
  name: string;
  /** Where it came from (`(built in)` for the default when no file defines it). */
  file: string;
  /** sha256 of the definition as loaded (part of the cache key: a changed setup never reuses an old result). */
  digest: string;
}

/** What GET /v1/environments shows of one (no file paths). */
export function describeEnvironment(e: Environment): Record<string, unknown> {
  return {
    name: e.name, description: e.description, image: e.image,
    setup: { commands: e.setup.commands, egress: e.setup.egress, timeoutS: e.setup.timeoutS },
    cache: e.cache === false ? false : { files: e.cache.files },
    limits: e.limits, egress: e.egress, env: Object.keys(e.env), path: e.path,
    mcp: Object.fromEntries(Object.entries(e.mcp).map(([name, m]) => [name, {
      ...(m.description ? { description: m.description } : {}),
      ...(m.url !== undefined ? { url: m.url } : { command: m.command, args: m.args }),
      default: m.default, tools: m.tools, network: m.network, timeoutS: m.timeoutS,
    }])),
  };
}

export type ImageConfig = Pick<Config, 'CORRAL_SANDBOX_IMAGE' | 'CORRAL_SANDBOX_IMAGES'>;

/** The images an environment may name: the default sandbox image and CORRAL_SANDBOX_IMAGES. */
export function allowedImages(config: ImageConfig): string[] {
  return [...new Set([config.CORRAL_SANDBOX_IMAGE, ...config.CORRAL_SANDBOX_IMAGES])];
}

export function digestOf(def: EnvironmentFile): string {
  return createHash('sha256').update(JSON.stringify(def)).digest('hex');
}

/** `default` when no default.yaml defines it: the server's sandbox image, no setup, no egress. */
export function builtInDefault(config: ImageConfig): Environment {
  const def = EnvironmentFile.parse({ version: 1, description: 'the sandbox image with no setup phase and no egress', image: config.CORRAL_SANDBOX_IMAGE });
  return { ...def, name: DEFAULT_ENVIRONMENT, file: '(built in)', digest: digestOf(def) };
}
