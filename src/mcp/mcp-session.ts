/**
 * A run's MCP servers in one sandbox: started one after the other once setup has ended (so setup can
 * install them, and the end of setup — which kills every agent process — does not kill them), their
 * tools collected, each server's end logged when it comes (a crash mid-run, a limit broken, the run's
 * end). A server that cannot start is logged (`mcp.failed`) and the run goes on without its tools; the
 * model is told in a note. stop() ends them all; the sandbox's disposal would too.
 */
import Ajv from 'ajv';
import type { Config } from '../config';
import type { Emit } from '../domain/events';
import type { Environment } from '../domain/environment';
import type { LeasedSandbox } from '../domain/sandbox';
import type { Tool } from '../tools/tool';
import { McpConnection, type McpLimits } from './mcp-connection';
import { mcpTools } from './mcp-tools';
import { newAjv } from './safe-schema';

export type McpSessionLimits = McpLimits & { maxArgsBytes: number };

/** The limits of a deployment (CORRAL_MCP_*), and the fixed ones. */
export function mcpLimits(config: Pick<Config, 'CORRAL_MCP_MAX_MESSAGE_KB' | 'CORRAL_MCP_MAX_TOTAL_MB' | 'CORRAL_MCP_MAX_TOOLS' | 'CORRAL_MCP_MAX_DESCRIPTION_CHARS' | 'CORRAL_MCP_MAX_SCHEMA_KB' | 'CORRAL_MCP_MAX_ARGS_KB'>): McpSessionLimits {
  return {
    maxFrameBytes: config.CORRAL_MCP_MAX_MESSAGE_KB * 1024,
    maxTotalBytes: config.CORRAL_MCP_MAX_TOTAL_MB * 1024 * 1024,
    maxServerMessages: 5000,
    maxBadLines: 100,
    maxPendingStdinBytes: Math.max(1024 * 1024, 4 * config.CORRAL_MCP_MAX_ARGS_KB * 1024),
    maxTools: config.CORRAL_MCP_MAX_TOOLS,
    maxDescriptionChars: config.CORRAL_MCP_MAX_DESCRIPTION_CHARS,
    maxSchemaBytes: config.CORRAL_MCP_MAX_SCHEMA_KB * 1024,
    maxTextChars: 300,
    maxStderrBytes: 16 * 1024,
    maxArgsBytes: config.CORRAL_MCP_MAX_ARGS_KB * 1024,
  };
}

export interface McpSessionOptions {
  sandbox: LeasedSandbox;
  environment: Environment;
  /** The servers to start (admitted: names of the environment's). */
  servers: readonly string[];
  emit: Emit;
  clock: () => number;
  limits: McpSessionLimits;
  maxOutputBytes: number;
  /** Masks secrets in a server's stderr before the log sees it. */
  mask: (text: string) => Promise<string>;
  signal?: AbortSignal;
}

const STDERR_LOGGED = 4000;

export class McpSession {
  readonly tools: Tool[] = [];
  /** What the model is told about servers that are not there (in its first message). */
  readonly notes: string[] = [];
  private readonly connections: McpConnection[] = [];
  private readonly ended: Promise<void>[] = [];
  private readonly ajv: Ajv = newAjv();

  private constructor(private readonly o: McpSessionOptions) {}

  static async start(o: McpSessionOptions): Promise<McpSession> {
    const s = new McpSession(o);
    for (const name of o.servers) {
      if (o.signal?.aborted) break;
      await s.startOne(name);
    }
    return s;
  }

  private async startOne(name: string): Promise<void> {
    const { o } = this;
    const decl = o.environment.mcp[name];
    if (!decl) return;
    const argv = McpConnection.argv(decl);
    const t0 = o.clock();
    let conn: McpConnection;
    try {
      conn = await McpConnection.start({ name, decl, sandbox: o.sandbox, limits: o.limits, ...(o.signal ? { signal: o.signal } : {}) });
    } catch (err) {
      if (o.signal?.aborted) throw err;
      const reason = (err as Error).message;
      o.emit({ type: 'mcp.failed', server: name, argv, ms: o.clock() - t0, reason, ...(await this.stderrOf(err)) });
      this.notes.push(`The MCP server "${name}" could not be started (${reason}): its tools (mcp__${name}__…) are not available in this run.`);
      return;
    }
    const { tools, offered, refused } = mcpTools(conn, { limits: o.limits, maxOutputBytes: o.maxOutputBytes, ajv: this.ajv });
    this.connections.push(conn);
    this.tools.push(...tools);
    o.emit({
      type: 'mcp.started', server: name, argv, ms: o.clock() - t0, serverInfo: conn.serverInfo, tools: offered, refused,
      ...(conn.toolsOmitted ? { toolsOmitted: conn.toolsOmitted } : {}),
    });
    this.ended.push(conn.ended().then(async () => {
      const st = conn.stats;
      const stderr = conn.stderrText();
      o.emit({
        type: 'mcp.stopped', server: name, reason: conn.deadReason(), exitCode: conn.exitCode, calls: conn.calls, errors: conn.errors,
        frames: st.frames, bytesIn: st.bytesIn, stderrBytes: conn.stderrBytes, maxBufferedBytes: st.maxBufferedBytes,
        ...(stderr.trim() ? { stderr: await o.mask(tail(stderr)) } : {}),
      });
    }));
  }

  private async stderrOf(err: unknown): Promise<{ stderr?: string }> {
    const text = (err as { stderr?: string }).stderr;
    return text && text.trim() ? { stderr: await this.o.mask(tail(text)) } : {};
  }

  /** Stops every server and waits until each one's end is logged. */
  async stop(): Promise<void> {
    await Promise.all(this.connections.map((c) => c.close()));
    await Promise.all(this.ended);
  }
}

function tail(s: string): string {
  return s.length > STDERR_LOGGED ? `…${s.slice(-STDERR_LOGGED)}` : s;
}
