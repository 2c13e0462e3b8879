/** bash: runs one command string with `bash -c` inside the sandbox, in /workspace. */
import { z } from 'zod';
import { MAX_COMMAND_CHARS } from '../domain/tool-input';
import { defineTool } from './tool';
import { formatExec } from './format-exec';

export const bashTool = defineTool({
  name: 'bash',
  description:
    'Run a bash command in the sandbox (working directory /workspace, no network unless the run allows some hosts). ' +
    'Output is capped: long output keeps its head and tail. Use it to inspect files, run programs and tests.',
  schema: z.object({ command: z.string().min(1).max(MAX_COMMAND_CHARS).describe('the bash command line to run') }).strict(),
  async execute(args, ctx) {
    const exec = await ctx.sandbox.exec({
      argv: ['bash', '-c', args.command],
      timeoutMs: ctx.execTimeoutMs,
      maxOutputBytes: ctx.maxOutputBytes,
      signal: ctx.signal,
    });
    const ok = exec.exitCode === 0 && !exec.timedOut;
    return { ok, content: formatExec(exec, ctx.execTimeoutMs), summary: summarizeExec(exec), exec };
  },
});

function summarizeExec(e: { exitCode: number | null; timedOut: boolean; oomKilled: boolean; durationMs: number; truncated: boolean }): string {
  const state = e.timedOut ? 'timed out' : e.oomKilled ? 'killed: out of memory' : `exit ${e.exitCode ?? 'none'}`;
  return `${state} in ${e.durationMs} ms${e.truncated ? ', output truncated' : ''}`;
}
