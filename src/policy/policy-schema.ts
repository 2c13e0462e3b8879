/**
 * The policy file format (YAML, validated here with zod). A policy lists tools (baseline decision,
 * risk, which arguments are paths, a shell command or a patch), path rules, bash command rules,
 * environment-variable rules and raw-text patterns. Every rule carries `match` and `not_match`
 * examples, and a tool may carry example calls, that load-policy.ts checks at load time.
 */
import { z } from 'zod';

export const DecisionSchema = z.enum(['allow', 'ask', 'deny']);
export const RiskSchema = z.enum(['low', 'medium', 'high', 'critical']);
const examples = { match: z.array(z.string()).min(1), not_match: z.array(z.string()).min(1) };
const name = z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/, 'rule names are lower-case kebab-case');

const ToolSchema = z.strictObject({
  decision: DecisionSchema,
  risk: RiskSchema,
  read_only: z.boolean().default(false),
  /** Argument names holding a path, and how the tool uses it. */
  paths: z.record(z.string(), z.enum(['read', 'write'])).default({}),
  /** The argument holding a bash command, analysed with the bash rules. */
  shell: z.string().optional(),
  /**
   * The argument holding a unified diff: every file it names (`---`, `+++`, `diff --git` and rename
   * lines, with and without `a/` `b/` prefixes, never /dev/null) is checked as a write path.
   */
  patch: z.string().optional(),
  /** Example calls, run through the static layer at load: `expect` is its decision (`not_allow` = ask or deny). */
  examples: z.array(z.strictObject({
    args: z.record(z.string(), z.unknown()),
    expect: z.enum(['allow', 'ask', 'deny', 'not_allow']),
  })).default([]),
});

const PathRuleSchema = z.strictObject({
  name,
  /** Globs: absolute, `~/`-relative, or relative to the workspace. `**` crosses directories. */
  globs: z.array(z.string().min(1)).min(1),
  access: z.enum(['read', 'write', 'any']),
  decision: DecisionSchema,
  /** Also match any command argument that looks like this path (e.g. `@~/.ssh/id_rsa`). */
  anywhere: z.boolean().default(false),
  reason: z.string(),
  ...examples,
});

const CommandRuleSchema = z.strictObject({
  name,
  /** Command names, or globs containing `/` for scripts (`./**`). */
  commands: z.array(z.string().min(1)).min(1),
  /** The first positional argument must be one of these (after skipping `global_value_flags`). */
  subcommands: z.array(z.string()).optional(),
  global_value_flags: z.array(z.string()).default([]),
  /** The rule fires only if one of these flags is present. */
  flags: z.array(z.string()).optional(),
  /** The rule does not fire if any of these flags is present (or any argument is dynamic). */
  unless_flags: z.array(z.string()).default([]),
  /** Facts computed by command-facts.ts (e.g. `sed.exec`). */
  facts: z.array(z.string()).optional(),
  unless_facts: z.array(z.string()).default([]),
  /** Tested against the arguments joined by single spaces. */
  args_regex: z.string().optional(),
  unless_args_regex: z.string().optional(),
  max_positionals: z.number().int().min(0).optional(),
  /** Which positional arguments are paths: none, all, only the first (a script), or all after the first (a pattern). */
  paths: z.enum(['none', 'all', 'first', 'after_first']).default('none'),
  path_access: z.enum(['read', 'write']).default('read'),
  /** Wrapped by a shell/xargs/find -exec is fine unless this is false. */
  decision: DecisionSchema,
  risk: RiskSchema.default('low'),
  read_only: z.boolean().default(false),
  reason: z.string(),
  ...examples,
});

const EnvRuleSchema = z.strictObject({
  name,
  /** Variable-name globs (`LD_*`, `GIT_*`). */
  names: z.array(z.string().min(1)).min(1),
  /** Names that stay allowed although a glob above matches them. */
  except: z.array(z.string()).default([]),
  decision: DecisionSchema,
  reason: z.string(),
  ...examples,
});

const PatternRuleSchema = z.strictObject({
  name,
  regex: z.string().min(1),
  decision: DecisionSchema,
  reason: z.string(),
  ...examples,
});

export const PolicyFileSchema = z.strictObject({
  version: z.literal(1),
  description: z.string().default(''),
  workspace: z.string().regex(/^\/[^*?]*[^/]$/, 'an absolute directory without a trailing slash').default('/workspace'),
  home: z.string().regex(/^\/.*[^/]$/).default('/home/agent'),
  limits: z.strictObject({
    max_commands: z.number().int().positive().default(64),
    max_length: z.number().int().positive().default(20_000),
  }).default({ max_commands: 64, max_length: 20_000 }),
  tools: z.record(z.string(), ToolSchema),
  paths: z.strictObject({
    outside_read: DecisionSchema.default('ask'),
    outside_write: DecisionSchema.default('deny'),
    /** A path that depends on run-time expansion. */
    unknown: z.enum(['ask', 'deny']).default('ask'),
    rules: z.array(PathRuleSchema).default([]),
  }),
  bash: z.strictObject({
    commands: z.array(CommandRuleSchema).default([]),
    env: z.array(EnvRuleSchema).default([]),
    patterns: z.array(PatternRuleSchema).default([]),
  }),
});

export type PolicyFile = z.infer<typeof PolicyFileSchema>;
export type ToolEntry = z.infer<typeof ToolSchema>;
export type PathRule = z.infer<typeof PathRuleSchema>;
export type CommandRule = z.infer<typeof CommandRuleSchema>;
export type EnvRule = z.infer<typeof EnvRuleSchema>;
export type PatternRule = z.infer<typeof PatternRuleSchema>;

/** A loaded policy: the validated file plus compiled matchers and where each rule was written. */
export interface Policy extends PolicyFile {
  name: string;
  file: string;
  compiled: {
    pathGlobs: Map<string, RegExp[]>;
    patterns: Map<string, RegExp>;
    argsRegex: Map<string, { args?: RegExp; unless?: RegExp }>;
  };
  lines: Map<string, number>;
}
