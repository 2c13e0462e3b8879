/**
 * MCP (Model Context Protocol) servers as an environment declares them, and the names their tools
 * get in a run. A server runs inside the run's sandbox as the agent's user (stdio: `command` and
 * `args`), or is a remote Streamable-HTTP server (`url`) reached from inside the sandbox through the
 * run's egress proxy. Its tools are offered to the model as `mcp__{server}__{tool}`: server names
 * have no `_`, so the first `__` after the prefix always ends the server's name.
 *
 * Pure vocabulary: the client (src/mcp/), the gate's rules (src/policy/mcp-rules.ts) and admission
 * use it.
 */
import { z } from 'zod';
import { EnvName } from './env-name';
import type { Decision } from './gate';

export const MCP_PREFIX = 'mcp__';
/** A server's name in an environment: lower-case letters, digits and `-`, at most 24. */
export const MCP_SERVER_NAME = /^[a-z][a-z0-9-]{0,23}$/;
/** A tool name as corral accepts it from a server (the MCP spec's characters minus `.`, which model APIs refuse). */
export const MCP_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** What model APIs accept as a function name (OpenAI: 64 characters of this set). */
export const MODEL_TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** At most this many servers per environment. */
export const MAX_MCP_SERVERS = 16;

/** A decision the environment gives a server's tools by default (the policy's mcp rules add to it; strictest wins). */
export const McpDefaultDecision = z.enum(['allow', 'ask', 'deny']);

/** A glob over a server's tool names (`*` and `?`), as in the environment's `tools:` map. */
export const McpToolGlob = z.string().regex(/^[A-Za-z0-9_*?-]{1,64}$/, 'must be a tool name or a glob of one (letters, digits, _ - * ?)');

/** Names that look like they carry a credential: their value must be a placeholder, never the secret. */
const SECRET_NAME = /(TOKEN|SECRET|PASSW(OR)?D|API_?KEY|PRIVATE_?KEY|CREDENTIAL|AUTH)/i;
/** The placeholder form such a variable holds: passed as is (a later egress binding may substitute it on the way out). */
export const SECRET_PLACEHOLDER = /^corral-placeholder:[A-Za-z0-9_.-]{1,64}$/;

const EnvValue = z.string().max(4096).refine((v) => !v.includes('\0'), 'must not contain NUL');

export const McpServerDecl = z.strictObject({
  description: z.string().min(1).max(500).optional(),
  /** stdio: the program (a name on the sandbox's PATH or an absolute path), run without a shell as the agent's user in /workspace. */
  command: z.string().min(1).max(4096).refine((v) => !v.includes('\0'), 'must not contain NUL').optional(),
  args: z.array(EnvValue).max(64).default([]),
  /** Streamable HTTP: a remote server, reached from inside the sandbox through the run's egress proxy. */
  url: z.string().max(2000).optional(),
  /** Variables of the server's process, on top of the sandbox's (visible to the agent: never secrets). */
  env: z.record(EnvName, EnvValue).default({}),
  /** Started for a run that names no `tools.mcp`; false: only when a run names it. */
  default: z.boolean().default(true),
  /**
   * The policy defaults for its tools: a tool name or glob → allow / ask / deny. An exact name wins
   * over globs; among globs the first that matches. The run's policy (its `mcp.rules`) adds to this,
   * strictest wins; a tool neither names asks.
   */
  tools: z.record(McpToolGlob, McpDefaultDecision).default({}),
  /** Its tools use the network: a connection during one of its calls was predicted (a remote server always is). */
  network: z.boolean().default(false),
  /** Bound of one call, and of the server's start (initialize and the tool list). */
  timeoutS: z.number().int().min(1).max(600).default(60),
  startTimeoutS: z.number().int().min(1).max(300).default(30),
}).superRefine((d, ctx) => {
  if ((d.command === undefined) === (d.url === undefined)) {
    ctx.addIssue({ code: 'custom', path: ['command'], message: 'give either `command` (a stdio server in the sandbox) or `url` (a remote Streamable-HTTP server), not both and not neither' });
  }
  if (d.url !== undefined) {
    if (d.args.length) ctx.addIssue({ code: 'custom', path: ['args'], message: 'a remote server (`url`) takes no args' });
    const u = remoteUrl(d.url);
    if (typeof u === 'string') ctx.addIssue({ code: 'custom', path: ['url'], message: u });
  }
  for (const [k, v] of Object.entries(d.env)) {
    if (SECRET_NAME.test(k) && !SECRET_PLACEHOLDER.test(v)) {
      ctx.addIssue({ code: 'custom', path: ['env', k], message: 'looks like a credential: the server runs as the agent\'s user, which can read its environment — give a placeholder (corral-placeholder:NAME), never the secret' });
    }
  }
});
export type McpServerDecl = z.infer<typeof McpServerDecl>;

/** The servers of an environment, by name. */
export const McpServers = z.record(z.string().regex(MCP_SERVER_NAME, 'must be a server name (lower-case letters, digits and -, at most 24; no _)'), McpServerDecl)
  .refine((m) => Object.keys(m).length <= MAX_MCP_SERVERS, `at most ${MAX_MCP_SERVERS} servers`)
  .default({});

/** A remote server's URL: https (or http) with a host name; the parsed URL, or why not. */
export function remoteUrl(text: string): URL | string {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return 'must be an absolute http(s) URL';
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') return 'must be an http(s) URL';
  if (u.username || u.password) return 'must not carry credentials';
  return u;
}

/** `mcp__{server}__{tool}`. */
export function mcpToolName(server: string, tool: string): string {
  return `${MCP_PREFIX}${server}__${tool}`;
}

/** The server and tool of an MCP tool's name; null for any other name. */
export function parseMcpToolName(name: string): { server: string; tool: string } | null {
  if (!name.startsWith(MCP_PREFIX)) return null;
  const rest = name.slice(MCP_PREFIX.length);
  const i = rest.indexOf('__');
  if (i <= 0) return null;
  const server = rest.slice(0, i);
  const tool = rest.slice(i + 2);
  return MCP_SERVER_NAME.test(server) && tool !== '' ? { server, tool } : null;
}

/**
 * Whether a task's allowed-tools list admits a tool: its exact name, or `mcp__{server}__*` for every
 * tool of that server.
 */
export function toolAllowed(allowed: ReadonlySet<string>, name: string): boolean {
  if (allowed.has(name)) return true;
  const m = parseMcpToolName(name);
  return m !== null && allowed.has(mcpToolName(m.server, '*'));
}

/**
 * Whether a name in a task's allowed tools is one this run can have: one of `known`, or an MCP tool
 * (or `mcp__{server}__*`) of one of `servers` (its tools are known only once the server runs).
 */
export function knownToolName(name: string, known: readonly string[], servers: readonly string[]): boolean {
  if (known.includes(name)) return true;
  const m = parseMcpToolName(name);
  return m !== null && servers.includes(m.server) && (m.tool === '*' || MCP_TOOL_NAME.test(m.tool));
}

/** What the gate knows of an MCP call beyond its name and arguments (ToolCallRequest.mcp). */
export interface McpCallContext {
  server: string;
  tool: string;
  /** The environment's defaults for this server's tools, in file order. */
  defaults: ReadonlyArray<{ tools: string; decision: Decision }>;
  /** A connection during the call is predicted (a remote server, or one declared `network: true`). */
  network: boolean;
  /** The tool's description as the server wrote it (capped): untrusted, shown to the classifier as evidence only. */
  description: string;
}
