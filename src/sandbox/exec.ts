/**
 * One command in a sandbox through the Engine API (`docker exec`), done so that the sandbox stays the
 * boundary:
 * - argv only (no host shell); User, WorkingDir and Env are fixed by corral, never by the caller;
 * - the timeout is enforced inside the container (`timeout -s KILL`), because killing the client
 *   does not kill the process there; a host-side timer is only a backstop;
 * - at a timeout or a cancel every process the call started is killed (call-kill.ts: frozen and
 *   killed by start time, so `setsid`, `env -i` and double forks do not escape); when that cannot
 *   run (the sandbox is at its pids limit) the whole sandbox is stopped and the call fails;
 * - the container's death during the call (gVisor ends the whole sandbox at its memory limit, and
 *   the exec stream then never ends) ends the call at once as a SandboxError saying why;
 * - stdout/stderr are demultiplexed and captured head+tail while streaming (OutputCapture), so a
 *   flood cannot grow the worker's memory;
 * - whether the runtime failed to start the command is the Engine API's answer (exec inspect: not
 *   running, Pid 0), never a reading of the output, which the command controls.
 * The hot path is exactly create + start + inspect, like a raw Engine-API exec.
 */
import type { Duplex, Readable } from 'node:stream';
import type Docker from 'dockerode';
import { EXEC_START } from './sandbox-engine';
import { CancelledError, SandboxError } from '../domain/errors';
import { killCall } from './call-kill';
import { describeDeath, type ContainerDeath, type DeathSignal } from './container-watch';
import { toSandboxError } from './docker-error';
import { OutputCapture } from './output-capture';
import { WORKSPACE_DIR } from './container-spec';

/** Exit status of a process killed by SIGKILL (timeout -s KILL, the OOM killer, our kill). */
export const EXIT_SIGKILL = 137;
/** Extra time the host waits for the in-container timeout to fire before killing from outside. */
const BACKSTOP_MS = 5000;
/** Attempts of the killer before the sandbox is given up (it may squeeze in between a fork bomb's forks). */
const KILL_ATTEMPTS = 3;

export interface ExecOptions {
  argv: string[];
  env: string[];
  /** `uid:gid` the command runs as: the sandbox's agent user. */
  user: string;
  timeoutMs: number;
  /** Bytes kept per stream (head + tail). */
  maxOutputBytes: number;
  /** Keep only the head of each stream (for callers that parse the output, e.g. file reads). */
  headOnly?: boolean;
  /** Written to the command's stdin, then closed; a stream is piped with backpressure (a large seed). */
  stdin?: string | Buffer | Readable;
  signal?: AbortSignal;
  workingDir?: string;
  /** Tells of the container's death (ContainerWatch): the call then ends at once. */
  died?: DeathSignal;
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

/** `timeout` accepts fractional seconds; we round up to milliseconds. */
export function timeoutArgv(timeoutMs: number, argv: string[]): string[] {
  const s = Math.max(0.001, timeoutMs / 1000);
  return ['timeout', '-s', 'KILL', `${Number(s.toFixed(3))}s`, ...argv];
}

/**
 * Kills what the call started (call-kill.ts), retrying briefly; when it cannot, stops the container
 * (nothing the call started may outlive its timeout) and throws.
 */
async function killOrStop(container: Docker.Container, user: string, started: number): Promise<void> {
  for (let i = 0; i < KILL_ATTEMPTS; i++) {
    if (await killCall(container, user, performance.now() - started)) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  await container.kill({ signal: 'SIGKILL' }).catch(() => undefined);
  throw new SandboxError('sandbox_failed', 'the call\'s processes could not be killed in the sandbox (is it at its process limit?), so the sandbox was stopped');
}

export async function runExec(container: Docker.Container, opts: ExecOptions): Promise<ExecOutcome> {
  if (opts.signal?.aborted) throw new CancelledError('the command was cancelled before it started');
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
      User: opts.user,
      WorkingDir: opts.workingDir ?? WORKSPACE_DIR,
      Env: opts.env,
      AttachStdin: hasStdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      Privileged: false,
    });
    stream = (await exec.start({ hijack: true, stdin: hasStdin, ...EXEC_START })) as unknown as Duplex;
  } catch (err) {
    throw toSandboxError(err, 'exec');
  }

  let killed: 'abort' | 'backstop' | 'died' | undefined;
  let death: ContainerDeath | undefined;
  let killing: Promise<void> | undefined;
  const kill = (why: 'abort' | 'backstop') => {
    if (killed) return;
    killed = why;
    killing = killOrStop(container, opts.user, started).finally(() => stream.destroy());
    killing.catch(() => undefined);
  };
  const onAbort = () => kill('abort');
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  const backstop = setTimeout(() => kill('backstop'), opts.timeoutMs + BACKSTOP_MS);
  const unwatch = opts.died?.onDeath((d) => {
    death = d;
    killed ??= 'died';
    stream.destroy();
  });

  try {
    await pump(stream, opts.stdoutSink ?? stdout, stderr, hasStdin ? opts.stdin : undefined);
  } finally {
    opts.stdoutSink?.end();
    unwatch?.();
    clearTimeout(backstop);
    opts.signal?.removeEventListener('abort', onAbort);
  }
  const durationMs = Math.round(performance.now() - started);
  if (death) {
    throw new SandboxError('sandbox_failed', `${describeDeath(death, container.id)} during the call (after ${durationMs} ms)`, {
      details: { oomKilled: death.oomKilled, exitCode: death.exitCode, status: death.status, cause: death.cause, durationMs },
    });
  }
  if (killing) await killing; // throws when the call's processes could not be killed
  if (killed === 'abort') throw new CancelledError('the command was cancelled; its processes were killed in the sandbox');
  if (killed === 'backstop') return { exitCode: null, stdout, stderr, timedOut: true, durationMs };

  let exitCode: number | null;
  try {
    const info = await exec.inspect();
    // Pid 0 and not running: the runtime never started the process (e.g. the sandbox is at its pids
    // or memory limit). The engine says so in the stream too, but what the stream holds is also what
    // the command wrote, so only the Engine API's answer decides — output that merely looks like
    // "OCI runtime exec failed: …" is the command's output, with its own exit code.
    if (!info.Running && info.Pid === 0) {
      const msg = Buffer.concat([stdout.headBuffer(), stderr.headBuffer()]).toString('utf8').trim().slice(0, 500);
      throw new SandboxError('sandbox_failed', `the sandbox could not start the command (is it at its process or memory limit?)${msg ? `: ${msg}` : ''}`, { details: { exitCode: info.ExitCode ?? null } });
    }
    exitCode = info.Running ? null : (info.ExitCode ?? null);
  } catch (err) {
    if (err instanceof SandboxError) throw err;
    throw toSandboxError(err, 'exec inspect');
  }
  // `timeout -s KILL` kills its child and its process group, so the exec ends with 137; a kill
  // before the deadline (e.g. the OOM killer) also gives 137 but sooner.
  const timedOut = exitCode === EXIT_SIGKILL && durationMs >= opts.timeoutMs - 50;
  if (timedOut) await killOrStop(container, opts.user, started); // what left the process group
  return { exitCode, stdout, stderr, timedOut, durationMs };
}

/**
 * Reads Docker's multiplexed stream (8-byte frame headers) into the two captures, without buffering
 * frames; stdout may be a sink instead, whose backpressure pauses the stream.
 */
function pump(stream: Duplex | Readable, stdout: OutputCapture | ByteSink, stderr: OutputCapture, stdin: string | Buffer | Readable | undefined): Promise<void> {
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
      const duplex = stream as Duplex;
      if (typeof stdin === 'string' || Buffer.isBuffer(stdin)) {
        duplex.write(stdin);
        duplex.end();
      } else {
        // A source that fails (a file read error) ends the exec: the command must not see a cut-off input as whole.
        stdin.once('error', (err) => {
          duplex.destroy();
          reject(toSandboxError(err, 'exec stdin'));
        });
        stdin.pipe(duplex, { end: true });
      }
    }
  });
}
