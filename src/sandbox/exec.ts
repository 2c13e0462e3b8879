/**
 * One command in a sandbox through the Engine API (`docker exec`), done so that the sandbox stays the
 * boundary:
 * - argv only (no host shell); User, WorkingDir and Env are fixed by corral, never by the caller;
 * - the timeout is enforced inside the container (`timeout -s KILL`), because killing the client
 *   does not kill the process there; a host-side timer is only a backstop;
 * - every process the exec starts carries a marker variable, so a cancel (AbortSignal) or a timeout
 *   kills them all in the container, including background children;
 * - stdout/stderr are demultiplexed and captured head+tail while streaming (OutputCapture), so a
 *   flood cannot grow the worker's memory.
 * The hot path is exactly create + start + inspect, like a raw Engine-API exec.
 */
import { randomBytes } from 'node:crypto';
import type { Duplex, Readable } from 'node:stream';
import type Docker from 'dockerode';
import { CancelledError, SandboxError } from '../domain/errors';
import { toSandboxError } from './docker-error';
import { OutputCapture } from './output-capture';
import { SANDBOX_USER, WORKSPACE_DIR } from './container-spec';

export const EXEC_MARKER = 'CORRAL_EXEC_ID';
/** Exit status of a process killed by SIGKILL (timeout -s KILL, the OOM killer, our kill). */
export const EXIT_SIGKILL = 137;
/** Extra time the host waits for the in-container timeout to fire before killing from outside. */
const BACKSTOP_MS = 5000;

export interface ExecOptions {
  argv: string[];
  env: string[];
  timeoutMs: number;
  /** Bytes kept per stream (head + tail). */
  maxOutputBytes: number;
  /** Keep only the head of each stream (for callers that parse the output, e.g. file reads). */
  headOnly?: boolean;
  stdin?: string | Buffer;
  signal?: AbortSignal;
  workingDir?: string;
  /**
   * Receives stdout instead of the capture, with backpressure (the exec's stream pauses until the
   * sink drains); ended when the stream ends. For output too large to hold (the workspace export).
   */
  stdoutSink?: ByteSink;
}

/** The part of a Node or streamx Writable that runExec writes stdout to. */
export interface ByteSink {
  write(chunk: Buffer): boolean;
  end(chunk?: undefined): unknown;
  once(event: 'drain', listener: () => void): unknown;
}

export interface ExecOutcome {
  exitCode: number | null;
  stdout: OutputCapture;
  stderr: OutputCapture;
  timedOut: boolean;
  durationMs: number;
}

/**
 * The argv that kills every process carrying `marker` (run as its own exec). Shell builtins only, no
 * fork per process, so it still works when the sandbox is near its pids limit; several rounds of
 * STOP-then-KILL catch children forked while a round ran.
 */
export function killByMarkerArgv(marker: string): string[] {
  const script = `for round in 1 2 3 4 5; do
  found=
  for d in /proc/[0-9]*; do
    while IFS= read -r -d '' v; do
      if [ "$v" = "${EXEC_MARKER}=$1" ]; then found="$found \${d#/proc/}"; break; fi
    done < "$d/environ" 2>/dev/null
  done
  [ -z "$found" ] && exit 0
  kill -STOP $found 2>/dev/null; kill -KILL $found 2>/dev/null
done
exit 0`;
  return ['bash', '-c', script, 'corral-kill', marker];
}

/** `timeout` accepts fractional seconds; we round up to milliseconds. */
export function timeoutArgv(timeoutMs: number, argv: string[]): string[] {
  const s = Math.max(0.001, timeoutMs / 1000);
  return ['timeout', '-s', 'KILL', `${Number(s.toFixed(3))}s`, ...argv];
}

export async function runExec(container: Docker.Container, opts: ExecOptions): Promise<ExecOutcome> {
  if (opts.signal?.aborted) throw new CancelledError('the command was cancelled before it started');
  const marker = randomBytes(9).toString('base64url');
  const started = performance.now();
  const capture = (name: string) =>
    opts.headOnly ? new OutputCapture(opts.maxOutputBytes, 0, name) : OutputCapture.forLimit(opts.maxOutputBytes, name);
  const stdout = capture('stdout');
  const stderr = capture('stderr');
  const hasStdin = opts.stdin !== undefined;

  let exec: Docker.Exec;
  let stream: Duplex | Readable;
  try {
    exec = await container.exec({
      Cmd: timeoutArgv(opts.timeoutMs, opts.argv),
      User: SANDBOX_USER,
      WorkingDir: opts.workingDir ?? WORKSPACE_DIR,
      Env: [...opts.env, `${EXEC_MARKER}=${marker}`],
      AttachStdin: hasStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      Privileged: false,
    });
    stream = (await exec.start({ hijack: true, stdin: hasStdin, Detach: false, Tty: false })) as unknown as Duplex;
  } catch (err) {
    throw toSandboxError(err, 'exec');
  }

  let killed: 'abort' | 'backstop' | undefined;
  const kill = (why: 'abort' | 'backstop') => {
    if (killed) return;
    killed = why;
    void killMarked(container, marker).finally(() => stream.destroy());
  };
  const onAbort = () => kill('abort');
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const backstop = setTimeout(() => kill('backstop'), opts.timeoutMs + BACKSTOP_MS);

  try {
    await pump(stream, opts.stdoutSink ?? stdout, stderr, hasStdin ? opts.stdin : undefined);
  } finally {
    opts.stdoutSink?.end();
    clearTimeout(backstop);
    opts.signal?.removeEventListener('abort', onAbort);
  }
  const durationMs = Math.round(performance.now() - started);
  if (!killed && stdout.total < 512 && runtimeStartFailed(stdout, stderr)) {
    // The runtime could not start the process (e.g. the sandbox is at its pids or memory limit):
    // Docker reports that as output; it is not the command's output.
    const msg = Buffer.concat([stdout.headBuffer(), stderr.headBuffer()]).toString('utf8').trim();
    throw new SandboxError('sandbox_failed', `the sandbox could not start the command (is it at its process or memory limit?): ${msg}`);
  }
  if (killed === 'abort') throw new CancelledError('the command was cancelled; its processes were killed in the sandbox');
  if (killed === 'backstop') return { exitCode: null, stdout, stderr, timedOut: true, durationMs };

  let exitCode: number | null;
  try {
    const info = await exec.inspect();
    exitCode = info.Running ? null : (info.ExitCode ?? null);
  } catch (err) {
    throw toSandboxError(err, 'exec inspect');
  }
  // `timeout -s KILL` kills its child and its process group, so the exec ends with 137; a kill
  // before the deadline (e.g. the OOM killer) also gives 137 but sooner.
  const timedOut = exitCode === EXIT_SIGKILL && durationMs >= opts.timeoutMs - 50;
  if (timedOut) await killMarked(container, marker); // children that left the process group
  return { exitCode, stdout, stderr, timedOut, durationMs };
}

/** Docker's own start failure, or `timeout` unable to fork the command (the pids limit is exhausted). */
function runtimeStartFailed(stdout: OutputCapture, stderr: OutputCapture): boolean {
  const head = Buffer.concat([stdout.headBuffer(), stderr.headBuffer()]).toString('utf8');
  return /^OCI runtime exec failed: /.test(head) || /^timeout: fork system call failed/.test(stderr.headBuffer().toString('utf8'));
}

/**
 * Reads Docker's multiplexed stream (8-byte frame headers) into the two captures, without buffering
 * frames; stdout may be a sink instead, whose backpressure pauses the stream.
 */
function pump(stream: Duplex | Readable, stdout: OutputCapture | ByteSink, stderr: OutputCapture, stdin: string | Buffer | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    let header = Buffer.alloc(0);
    let remaining = 0;
    let target: OutputCapture | ByteSink | undefined;
    let paused = false;
    const put = (t: OutputCapture | ByteSink, data: Buffer) => {
      if (t instanceof OutputCapture) return t.push(data);
      if (!t.write(data) && !paused) {
        paused = true;
        stream.pause();
        t.once('drain', () => {
          paused = false;
          stream.resume();
        });
      }
    };
    stream.on('data', (chunk: Buffer) => {
      let off = 0;
      while (off < chunk.length) {
        if (remaining === 0) {
          const need = 8 - header.length;
          header = Buffer.concat([header, chunk.subarray(off, off + need)]);
          off += Math.min(need, chunk.length - off);
          if (header.length < 8) return;
          target = header[0] === 2 ? stderr : stdout;
          remaining = header.readUInt32BE(4);
          header = Buffer.alloc(0);
          continue;
        }
        const take = Math.min(remaining, chunk.length - off);
        if (target) put(target, chunk.subarray(off, off + take));
        off += take;
        remaining -= take;
      }
    });
    stream.once('end', () => resolve());
    stream.once('close', () => resolve());
    stream.once('error', (err: Error) => (stream.destroyed ? resolve() : reject(toSandboxError(err, 'exec stream'))));
    if (stdin !== undefined && 'write' in stream) {
      (stream as Duplex).write(stdin);
      (stream as Duplex).end();
    }
  });
}

/** Kills every process of one exec inside the container; never throws (best effort, e.g. container gone). */
export async function killMarked(container: Docker.Container, marker: string): Promise<void> {
  try {
    const exec = await container.exec({ Cmd: killByMarkerArgv(marker), User: SANDBOX_USER, AttachStdout: true, AttachStderr: true, Tty: false });
    const s = (await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })) as unknown as Readable;
    s.resume();
    await new Promise<void>((resolve) => {
      s.once('end', () => resolve());
      s.once('close', () => resolve());
      s.once('error', () => resolve());
    });
  } catch {
    // the container may already be gone; its removal kills everything anyway
  }
}
