/**
 * The policy file format (YAML, validated here with zod). A policy lists tools (baseline decision,
 * risk, which arguments are paths, a shell command or a patch), path rules, bash command rules,
 * environment-variable rules and raw-text patterns. Every rule carries `match` and `not_match`
 * examples, and a tool may carry example calls, that load-policy.ts checks at load time.
 */
import { z } from 'zod';
import { EFFECTS } from './commands/command-spec';
import { MAX_COMMAND_CHARS } from '../domain/tool-input';
import { PROTECTED_CLASSES, type ProtectedSet } from '../domain/protected-set';
import type { CompiledMcpRule } from './mcp-rules';

export const DecisionSchema = z.enum(['allow', 'ask', 'deny']);
export const RiskSchema = z.enum(['low', 'medium', 'high', 'critical']);
const examples = { match: z.array(z.string()).min(1), not_match: z.array(z.string()).min(1) };
const name = z.string().regex(/^[a-z0-9][a-z0-9_.-]*$/, 'rule names are lower-case kebab-case');

const ToolSchema = z.strictObject({
  decision: DecisionSchema,
  risk: RiskSchema,
  /** Argument names holding a path, and how the tool uses it. */
  paths: z.record(z.string(), z.enum(['read', 'write'])).default({}),
  /** The argument holding a bash command, analysed with the bash rules. */
  shell: z.string().optional(),
  /**
   * The argument holding a list of bash commands run later on the model's behalf (delegate's
   * `doneChecks`): each is analysed like `shell`, and the strictest decision is the call's.
   */
  shell_list: z.string().optional(),
  /**
   * The argument holding a unified diff: every file it names (`---`, `+++`, `diff --git` and rename
   * lines, with and without `a/` `b/` prefixes, never /dev/null) is checked as a write path.
   */
  patch: z.string().optional(),
  /** The tool's purpose is network use (fetch_url): a connection it opens was predicted. */
  network: z.boolean().default(false),
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
  /** Paths matching these globs are not covered (`.env.example` under a `.env.*` rule). */
  except: z.array(z.string().min(1)).default([]),
  /** Also match any command argument that looks like this path (e.g. `@~/.ssh/id_rsa`). */
  anywhere: z.boolean().default(false),
  /** An `allow` that does not cover running files from here (scratch space: code there was not seen). */
  no_exec: z.boolean().default(false),
  /**
   * An `ask` that takes the place of the outside default (`outside_write: deny`) for the paths it
   * covers, instead of adding to it: the run's home is outside the workspace, but writing there asks.
   */
  instead_of_outside: z.boolean().default(false),
  reason: z.string(),
  ...examples,
});

/** A decision by command name (after wrappers are unwrapped and `/usr/bin/` is dropped). */
const CommandRuleSchema = z.strictObject({
  name,
  /** Command names, or globs containing `/` for scripts (`./**`). */
  commands: z.array(z.string().min(1)).min(1),
  decision: DecisionSchema,
  risk: RiskSchema.default('low'),
  reason: z.string(),
  ...examples,
});

/** A decision on an effect the analyser found (commands/command-spec.ts lists them). */
const EffectRuleSchema = z.strictObject({
  name,
  effects: z.array(z.enum(EFFECTS)).min(1),
  decision: DecisionSchema,
  risk: RiskSchema.default('medium'),
  reason: z.string(),
  ...examples,
});

const EnvRuleSchema = z.strictObject({
  name,
  /** Variable-name globs (`LD_*`, `GIT_*`). */
  names: z.array(z.string().min(1)).min(1),
  /** Names that stay allowed although a glob above matches them. */
  except: z.array(z.string()).default([]),
  /** A value matching this regex (the whole value, known statically) does not fire the rule. */
  unless_value: z.string().optional(),
  decision: DecisionSchema,
  reason: z.string(),
  ...examples,
});

const PatternRuleSchema = z.strictObject({
  name,
  regex: z.string().min(1),
  ignore_case: z.boolean().default(false),
  decision: DecisionSchema,
  reason: z.string(),
  ...examples,
});

/**
 * An operator's addition to the protected set (src/domain/protected-set.ts): files whose changes the
 * effect check undoes and asks about, and that the artifacts' review flags. `match` / `not_match`
 * are workspace-relative paths the rule must (not) protect.
 */
const ProtectedRuleSchema = z.strictObject({
  name,
  class: z.enum(PROTECTED_CLASSES),
  /** Globs over the workspace-relative path, compared case- and Unicode-folded; `**` crosses directories. */
  globs: z.array(z.string().min(1).max(300).refine((g) => !g.startsWith('/') && !g.split('/').includes('..'), 'a workspace-relative glob without ..')).min(1).max(50),
  reason: z.string().min(1),
  docs: z.string().optional(),
  ...examples,
});

/** A call as an MCP rule's examples give it. */
const McpExampleSchema = z.strictObject({ server: z.string().min(1), tool: z.string().min(1), args: z.record(z.string(), z.unknown()).default({}) });
/** Globs over the values a JSON path selects in a call's arguments (policy/mcp-rules.ts: the path dialect). */
const ArgConditions = z.record(z.string().min(1).max(200), z.union([z.string().min(1).max(300), z.array(z.string().min(1).max(300)).min(1).max(50)]));

/**
 * A decision on MCP tool calls (`mcp__{server}__{tool}`) by server and tool name, with conditions on
 * the arguments. `args`: each JSON path must select at least one value and every value it selects
 * must match one of its globs. `any_arg`: the rule fires only when some value one of these paths
 * selects matches one of its globs. With `paths`, string values are read as paths first (relative to
 * the workspace, `~` the home, `.` and `..` folded) and relative globs are relative to the workspace.
 * Rules combine with the environment's defaults for the server's tools, strictest wins; a call no
 * rule and no default names asks.
 */
const McpRuleSchema = z.strictObject({
  name,
  /** Server names or globs of them (`*`: every server). */
  servers: z.array(z.string().min(1).max(64)).min(1).max(50),
  /** Tool names or globs of them. */
  tools: z.array(z.string().min(1).max(128)).min(1).max(200),
  args: ArgConditions.default({}),
  any_arg: ArgConditions.default({}),
  paths: z.boolean().default(false),
  decision: DecisionSchema,
  risk: RiskSchema.default('medium'),
  /** A connection during such a call is predicted (the effect check lets it through under the run's allowlist). */
  network: z.boolean().default(false),
  reason: z.string().min(1),
  match: z.array(McpExampleSchema).min(1),
  not_match: z.array(McpExampleSchema).min(1),
});

export const PolicyFileSchema = z.strictObject({
  version: z.literal(1),
  description: z.string().default(''),
  workspace: z.string().regex(/^\/[^*?]*[^/]$/, 'an absolute directory without a trailing slash').default('/workspace'),
  home: z.string().regex(/^\/.*[^/]$/).default('/home/agent'),
  limits: z.strictObject({
    max_commands: z.number().int().positive().default(64),
    max_length: z.number().int().positive().max(MAX_COMMAND_CHARS).default(MAX_COMMAND_CHARS),
  }).default({ max_commands: 64, max_length: MAX_COMMAND_CHARS }),
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
    effects: z.array(EffectRuleSchema).default([]),
    env: z.array(EnvRuleSchema).default([]),
    patterns: z.array(PatternRuleSchema).default([]),
  }),
  /** Decisions on MCP tool calls (policy/mcp-rules.ts). */
  mcp: z.strictObject({
    rules: z.array(McpRuleSchema).max(500).default([]),
  }).default({ rules: [] }),
  /** Additions to the built-in protected set (src/domain/protected-set.ts). */
  protected: z.strictObject({
    rules: z.array(ProtectedRuleSchema).max(200).default([]),
  }).default({ rules: [] }),
});

export type PolicyFile = z.infer<typeof PolicyFileSchema>;
export type ToolEntry = z.infer<typeof ToolSchema>;
export type PathRule = z.infer<typeof PathRuleSchema>;
export type CommandRule = z.infer<typeof CommandRuleSchema>;
export type EffectRule = z.infer<typeof EffectRuleSchema>;
export type EnvRule = z.infer<typeof EnvRuleSchema>;
export type PatternRule = z.infer<typeof PatternRuleSchema>;
export type ProtectedRuleEntry = z.infer<typeof ProtectedRuleSchema>;
export type McpRule = z.infer<typeof McpRuleSchema>;

/** A loaded policy: the validated file plus compiled matchers and where each rule was written. */
export interface Policy extends PolicyFile {
  name: string;
  file: string;
  compiled: {
    pathGlobs: Map<string, RegExp[]>;
    pathExcepts: Map<string, RegExp[]>;
    patterns: Map<string, RegExp>;
    envValues: Map<string, RegExp>;
    /** The built-in protected set with this policy's `protected.rules`. */
    protectedSet: ProtectedSet;
    /** Each MCP rule's compiled matchers (policy/mcp-rules.ts), by rule name. */
    mcp: Map<string, CompiledMcpRule>;
  };
  lines: Map<string, number>;
}
