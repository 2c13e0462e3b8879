/**
 * One MCP server of a run: started in the sandbox (spawn: a long-lived docker exec), spoken to with
 * @modelcontextprotocol/sdk's Client over ExecTransport — initialize, tools/list (paginated, bounded),
 * tools/call with a timeout per call. A remote (Streamable-HTTP) server is the same from here: the
 * process in the sandbox is corral's bridge (`corral-mcp-remote URL`, in the node image), which
 * reaches the server through the run's egress proxy — the worker never connects to it.
 *
 * The client declares no capabilities: a server cannot sample the run's model, list roots or elicit
 * input (the SDK answers such requests with an error). Its `instructions` are not used. When the
 * process ends or breaks a transport limit, every pending call ends at once with `deadReason()`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ErrorCode, McpError, type CallToolResult, type Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import type { LeasedSandbox } from '../domain/sandbox';
import type { McpServerDecl } from '../domain/mcp';
import { ExecTransport, type TransportLimits, type TransportStats } from './exec-transport';
import { plainText, SafeJsonSchemaValidator, type SchemaLimits } from './safe-schema';

export interface McpLimits extends TransportLimits, SchemaLimits {
  /** Tools taken from one server (more are not offered). */
  maxTools: number;
  /** Characters of a tool's description kept. */
  maxDescriptionChars: number;
  /** Bytes of stderr kept (head and tail) for the log. */
  maxStderrBytes: number;
}

/** The program a remote server's bridge is, inside the sandbox (images/sandbox-node/mcp/remote-bridge.js). */
export const REMOTE_BRIDGE = 'corral-mcp-remote';
const LIST_PAGES = 20;

/** A call that did not produce a result: why, in words the model and the report can show. */
export class McpCallError extends Error {
  constructor(readonly kind: 'timeout' | 'dead' | 'server-error' | 'protocol', message: string, readonly stderr?: string) {
    super(message);
  }
}

export class McpConnection {
  readonly tools: McpTool[] = [];
  /** Tools past maxTools, not taken. */
  toolsOmitted = 0;
  serverInfo: { name: string; version: string } | null = null;
  protocolVersion: string | null = null;
  calls = 0;
  errors = 0;
  /** Calls not settled yet: ended() waits for them, so the totals logged at the end count them. */
  private readonly inflight = new Set<Promise<unknown>>();

  private constructor(
    readonly name: string,
    readonly decl: McpServerDecl,
    private readonly client: Client,
    private readonly transport: ExecTransport,
  ) {}

  /** The argv of its process in the sandbox. */
  static argv(decl: McpServerDecl): string[] {
    return decl.url !== undefined ? [REMOTE_BRIDGE, decl.url] : [decl.command!, ...decl.args];
  }

  /** Starts it, initializes and lists its tools within the server's start timeout; on failure it is stopped and the error thrown. */
  static async start(o: { name: string; decl: McpServerDecl; sandbox: LeasedSandbox; limits: McpLimits; signal?: AbortSignal }): Promise<McpConnection> {
    const spawn = o.sandbox.spawn?.bind(o.sandbox);
    if (!spawn) throw new McpCallError('dead', 'this sandbox cannot run processes');
    const env = { ...o.decl.env, ...(o.decl.url !== undefined ? { NODE_USE_ENV_PROXY: '1' } : {}) };
    const transport = new ExecTransport((onStdout, onStderr) => spawn({
      argv: McpConnection.argv(o.decl), env, onStdout, onStderr, maxStderrBytes: o.limits.maxStderrBytes, ...(o.signal ? { signal: o.signal } : {}),
    }), o.limits);
    const client = new Client({ name: 'corral', version: '1' }, { capabilities: {}, jsonSchemaValidator: new SafeJsonSchemaValidator(o.limits) });
    // Errors the transport reports (lines it ignored) are counted in its stats; nothing to do here.
    client.onerror = () => undefined;
    const conn = new McpConnection(o.name, o.decl, client, transport);
    const timeout = o.decl.startTimeoutS * 1000;
    const deadline = AbortSignal.timeout(timeout);
    const signal = o.signal ? AbortSignal.any([o.signal, deadline]) : deadline;
    try {
      await client.connect(transport, { timeout, signal });
      const v = client.getServerVersion();
      conn.serverInfo = v ? { name: plainText(String(v.name), 64), version: plainText(String(v.version), 32) } : null;
      let cursor: string | undefined;
      for (let page = 0; page < LIST_PAGES; page++) {
        const r = await client.listTools(cursor ? { cursor } : undefined, { timeout, signal });
        for (const t of r.tools) {
          if (conn.tools.length < o.limits.maxTools) conn.tools.push(t);
          else conn.toolsOmitted += 1;
        }
        cursor = r.nextCursor;
        if (!cursor || conn.tools.length >= o.limits.maxTools) break;
      }
      return conn;
    } catch (err) {
      const why = conn.failureText(err, deadline.aborted ? `it did not start within ${o.decl.startTimeoutS} s` : undefined);
      await conn.close('it did not start');
      throw new McpCallError('dead', why, conn.stderrText());
    }
  }

  /** Whether it still runs (a call may be made). */
  get alive(): boolean {
    return this.transport.exit === null && this.transport.failure === null;
  }

  get stats(): TransportStats {
    return this.transport.stats;
  }

  /** Why it stopped (a limit it broke, or how it exited), once it has. */
  deadReason(): string {
    if (this.transport.failure) return `corral stopped it: ${this.transport.failure}`;
    const e = this.transport.exit;
    if (!e) return 'it is running';
    return e.reason ? `it was stopped (${e.reason})` : `it exited${e.exitCode === null ? '' : ` with code ${e.exitCode}`}`;
  }

  stderrText(): string {
    return this.transport.process?.stderrText() ?? '';
  }

  get stderrBytes(): number {
    return this.transport.process?.stderrBytes ?? 0;
  }

  /** Settles when its process has ended and the calls it had open have settled (they end with it). */
  async ended(): Promise<void> {
    await this.transport.process?.exited;
    await Promise.allSettled([...this.inflight]);
  }

  get exitCode(): number | null {
    return this.transport.exit?.exitCode ?? null;
  }

  /** One tools/call; throws McpCallError when there is no result (timeout, a dead server, a JSON-RPC error). */
  call(tool: string, args: Record<string, unknown>, o: { timeoutMs: number; signal?: AbortSignal }): Promise<CallToolResult> {
    const p = this.callOnce(tool, args, o);
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p)).catch(() => undefined);
    return p;
  }

  private async callOnce(tool: string, args: Record<string, unknown>, o: { timeoutMs: number; signal?: AbortSignal }): Promise<CallToolResult> {
    this.calls += 1;
    if (!this.alive) {
      this.errors += 1;
      throw new McpCallError('dead', `the MCP server "${this.name}" is not running (${this.deadReason()})`);
    }
    try {
      return await this.client.callTool({ name: tool, arguments: args }, undefined, { timeout: o.timeoutMs, ...(o.signal ? { signal: o.signal } : {}) }) as CallToolResult;
    } catch (err) {
      this.errors += 1;
      if (o.signal?.aborted) throw err;
      if (err instanceof McpError && err.code === (ErrorCode.RequestTimeout as number)) {
        throw new McpCallError('timeout', `the MCP server "${this.name}" did not answer within ${Math.round(o.timeoutMs / 1000)} s; the call was cancelled (the server keeps running)`);
      }
      // a closed connection: wait for the process's end, so the reason says how it ended
      if (!this.alive || (err instanceof McpError && err.code === (ErrorCode.ConnectionClosed as number))) {
        await Promise.race([this.transport.process?.exited, new Promise((r) => setTimeout(r, 2000).unref())]);
        throw new McpCallError('dead', `the MCP server "${this.name}" stopped during the call: ${this.deadReason()}`);
      }
      if (err instanceof McpError) throw new McpCallError('server-error', `the MCP server "${this.name}" answered with an error (${err.code}): ${plainText(err.message, 500)}`);
      throw new McpCallError('protocol', `the call to the MCP server "${this.name}" failed: ${plainText((err as Error).message, 500)}`);
    }
  }

  /** Stops it (its process tree in the sandbox); resolves when it has ended. */
  async close(reason = 'the run ended'): Promise<void> {
    await this.transport.process?.kill(reason).catch(() => undefined);
    await Promise.race([this.transport.process?.exited, new Promise((r) => setTimeout(r, 5000).unref())]);
  }

  private failureText(err: unknown, timedOut?: string): string {
    if (this.transport.failure) return `corral stopped it: ${this.transport.failure}`;
    // before the exit: the SDK closes the transport (kills the process) when its request times out
    if (timedOut) return timedOut;
    if (this.transport.exit) return this.deadReason();
    return plainText((err as Error)?.message ?? String(err), 300);
  }
}
