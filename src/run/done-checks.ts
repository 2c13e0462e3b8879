/**
 * Done checks: the `check: <command>` items of a task contract's `# Done means`, run in the sandbox
 * when the model says it is done. A check passes when it exits 0 without timing out. A failing check
 * is an outcome (the model is told and may continue); a cancel or a broken sandbox still throws.
 *
 * Checks a model wrote (a sub-run's, from its parent's delegate call) come with `gate`: each is
 * decided like a bash tool call first, and one the gate does not allow fails without running — the
 * submitter's own checks are the submitter's commands and run as they are.
 */
import type { GateVerdict } from '../domain/gate';
import type { ExecResult, Sandbox } from '../domain/sandbox';

/** Characters of combined output kept per check (the tail, where test runners put their verdict). */
export const CHECK_OUTPUT_CHARS = 2000;

export interface DoneCheckResult {
  command: string;
  ok: boolean;
  exitCode: number | null;
  /** One line: "exit 0 in 120 ms", "timed out after 60000 ms", … */
  summary: string;
  /** The tail of stdout then stderr, at most CHECK_OUTPUT_CHARS characters. */
  output: string;
}

export interface DoneCheckOptions {
  /** Per check. */
  timeoutMs: number;
  /** Per stream, passed to the sandbox. */
  maxOutputBytes: number;
  signal?: AbortSignal;
  /** Decides each check before it runs (model-written checks); absent: every check runs. */
  gate?: (command: string, index: number) => Promise<GateVerdict>;
}

/** Runs each command as `bash -c <command>` in /workspace, one after another; all run even if one fails. */
export async function runDoneChecks(sandbox: Sandbox, checks: readonly string[], opts: DoneCheckOptions): Promise<DoneCheckResult[]> {
  const results: DoneCheckResult[] = [];
  for (const [i, command] of checks.entries()) {
    if (opts.gate) {
      const v = await opts.gate(command, i);
      if (v.decision !== 'allow') {
        results.push({ command, ok: false, exitCode: null, summary: 'not run: the policy gate refused it', output: v.reason });
        continue;
      }
    }
    const exec = await sandbox.exec({
      argv: ['bash', '-c', command],
      timeoutMs: opts.timeoutMs,
      maxOutputBytes: opts.maxOutputBytes,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    results.push({
      command,
      ok: exec.exitCode === 0 && !exec.timedOut,
      exitCode: exec.exitCode,
      summary: summarize(exec, opts.timeoutMs),
      output: tail(combined(exec), CHECK_OUTPUT_CHARS),
    });
  }
  return results;
}

/** The message the model gets when some checks failed: which, how, their output, and what to do. */
export function describeFailedChecks(results: readonly DoneCheckResult[]): string {
  const failed = results.filter((r) => !r.ok);
  const passed = results.filter((r) => r.ok);
  if (!failed.length) return `All ${results.length} done checks passed.`;
  const lines = [`You said you were done, but ${failed.length} of ${results.length} done checks failed:`];
  for (const r of failed) {
    lines.push('', `- \`${r.command}\`: ${r.summary}`);
    if (r.output) {
      const fence = '`'.repeat(Math.max(3, longestBacktickRun(r.output) + 1));
      lines.push(`${fence}\n${r.output}\n${fence}`);
    } else {
      lines.push('  (no output)');
    }
  }
  if (passed.length) lines.push('', `Passed: ${passed.map((r) => `\`${r.command}\``).join(', ')}.`);
  lines.push('', 'Fix this and say you are done again.');
  return lines.join('\n');
}

function summarize(e: ExecResult, timeoutMs: number): string {
  const state = e.timedOut
    ? `timed out after ${timeoutMs} ms`
    : e.oomKilled
      ? `killed: out of memory after ${e.durationMs} ms`
      : `exit ${e.exitCode ?? 'none (killed)'} in ${e.durationMs} ms`;
  return `${state}${e.truncated ? ', output truncated' : ''}`;
}

function combined(e: ExecResult): string {
  return [e.stdout.trimEnd(), e.stderr.trimEnd()].filter(Boolean).join('\n');
}

/** The last `max` characters, with a leading note of how many were cut (the note counts toward `max`). */
function tail(text: string, max: number): string {
  if (text.length <= max) return text;
  const note = (cut: number) => `[… ${cut} characters cut …]\n`;
  const keep = max - note(text.length).length;
  return note(text.length - keep) + text.slice(text.length - keep);
}

function longestBacktickRun(s: string): number {
  return Math.max(0, ...(s.match(/`+/g) ?? []).map((m) => m.length));
}
