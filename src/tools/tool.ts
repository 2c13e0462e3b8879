/**
 * What a tool is: a name, a description the model reads, a zod schema for its arguments (the model's
 * JSON is untrusted input), and execute() over the Sandbox port. Expected failures (non-zero exit,
 * missing file, refused path) are outcomes with ok=false that the model sees, not exceptions.
 */
import type { z } from 'zod';
import type { McpCallContext } from '../domain/mcp';
import type { ExecResult, Sandbox } from '../domain/sandbox';

export interface ToolContext {
  sandbox: Sandbox;
  /** Per-call exec timeout and output cap, already resolved from the run's limits. */
  execTimeoutMs: number;
  maxOutputBytes: number;
  signal?: AbortSignal;
}

export interface ToolOutcome {
  ok: boolean;
  /** What the model sees. */
  content: string;
  /** One line for logs and the report. */
  summary: string;
  exec?: ExecResult;
}

export interface Tool<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  schema: S;
  /** Offered only when the task's allowed tools name it (not part of "every tool"). */
  optIn?: boolean;
  /**
   * Its result comes from the run loop, not from execute(): once the gate allows a call, the loop
   * takes it over (`delegate` starts a sub-run and the result arrives when the sub-run ends).
   * execute() then only answers where the loop has no such support.
   */
  deferred?: boolean;
  /** The JSON Schema the model is shown, when it is not `schema`'s (an MCP tool's, from its server). */
  parameters?: Record<string, unknown>;
  /** An MCP server's tool: what the gate needs beyond the call (the environment's defaults, its description). */
  mcp?: McpCallContext;
  execute(args: z.infer<S>, ctx: ToolContext): Promise<ToolOutcome>;
}

/** Declares a tool with its argument type inferred from the schema. */
export function defineTool<S extends z.ZodType>(tool: Tool<S>): Tool<S> {
  return tool;
}
