/** Renders an ExecResult as the text the model reads: status line, then stdout and stderr. */
import type { ExecResult } from '../domain/sandbox';

export function formatExec(e: ExecResult, timeoutMs: number): string {
  const lines: string[] = [];
  if (e.timedOut) lines.push(`[timed out after ${Math.round(timeoutMs / 1000)} s; the process was killed]`);
  else if (e.oomKilled) lines.push('[killed: out of memory]');
  lines.push(`exit code: ${e.exitCode ?? 'none'}`);
  if (e.stdout) lines.push(`stdout:\n${e.stdout}`);
  if (e.stderr) lines.push(`stderr:\n${e.stderr}`);
  if (!e.stdout && !e.stderr) lines.push('(no output)');
  if (e.truncated) lines.push(`[output truncated: stdout ${e.stdoutBytes} bytes, stderr ${e.stderrBytes} bytes in total]`);
  return lines.join('\n');
}
