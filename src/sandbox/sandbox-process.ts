/**
 * A long-lived process in a sandbox (an MCP server): one `docker exec` with stdin attached, kept open
 * — the same shape as every exec corral makes (argv only; User, WorkingDir and Env fixed by corral;
 * never privileged), only not waited for.
 *
 * - The process is started through `bash -c 'printf "%s\n" "$$" >&2; exec "$@"'`: the first line of
 *   its stderr is its pid inside the sandbox, written before the program runs, so the program cannot
 *   forge it. kill() uses it to kill the process and its descendants (process-kill.ts).
 * - stdout goes to the caller's callback as it comes, chunk by chunk; stderr is kept head and tail
 *   (OutputCapture). Nothing here grows with what the process writes.
 * - Killing the client does not kill the process inside, so kill() first stops reading (the stream is
 *   destroyed: a flood stops costing the worker anything), then kills the tree through its own exec.
 * - The container's death ends the stream at once (ContainerWatch).
 */
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import type { SandboxProcess, SpawnRequest } from '../domain/sandbox';
import { SandboxError } from '../domain/errors';
import type { DeathSignal } from './container-watch';
import { toSandboxError } from './docker-error';
import { OutputCapture } from './output-capture';
import { killTree } from './process-kill';
import { WORKSPACE_DIR } from './container-spec';

export interface SpawnOptions extends SpawnRequest {
  /** The sandbox's environment (`NAME=value`); the request's env is added to it. */
  baseEnv: string[];
  user: string;
  died?: DeathSignal;
}

const PID_LINE_MAX = 32;

export function spawnArgv(argv: readonly string[]): string[] {
  return ['bash', '-c', 'printf "%s\\n" "$$" >&2; exec "$@"', 'corral-process', ...argv];
}

export async function spawnProcess(container: Docker.Container, o: SpawnOptions): Promise<SandboxProcess> {
  if (!Array.isArray(o.argv) || o.argv.length === 0 || o.argv.some((a) => typeof a !== 'string' || a.includes('\0'))) {
    throw new SandboxError('sandbox_failed', 'spawn: argv must be a non-empty array of strings without NUL');
  }
  const extra = Object.entries(o.env ?? {}).map(([k, v]) => `${k}=${v}`);
  const names = new Set(extra.map((e) => e.slice(0, e.indexOf('='))));
  let exec: Docker.Exec;
  let stream: Duplex;
  try {
    exec = await container.exec({
      Cmd: spawnArgv(o.argv), User: o.user, WorkingDir: WORKSPACE_DIR,
      Env: [...o.baseEnv.filter((e) => !names.has(e.slice(0, e.indexOf('=')))), ...extra],
      AttachStdin: true, AttachStdout: true, AttachStderr: true, Tty: false, Privileged: false,
    });
    stream = (await exec.start({ hijack: true, stdin: true, Detach: false, Tty: false })) as unknown as Duplex;
  } catch (err) {
    throw toSandboxError(err, 'spawn');
  }
  return new ExecProcess(container, exec, stream, o);
}

class ExecProcess implements SandboxProcess {
  private readonly stderr: OutputCapture;
  private pidText = '';
  private pid: number | null = null;
  private pidDone = false;
  stdoutBytes = 0;
  private killing: Promise<void> | undefined;
  private reason: string | undefined;
  readonly exited: Promise<{ exitCode: number | null; reason?: string }>;

  constructor(
    private readonly container: Docker.Container,
    exec: Docker.Exec,
    private readonly stream: Duplex,
    private readonly o: SpawnOptions,
  ) {
    this.stderr = OutputCapture.forLimit(o.maxStderrBytes, 'stderr');
    const unwatch = o.died?.onDeath((d) => {
      this.reason ??= `the sandbox ended (${d.cause})`;
      stream.destroy();
    });
    const onAbort = () => void this.kill('the run was cancelled');
    o.signal?.addEventListener('abort', onAbort, { once: true });
    this.exited = new Promise<void>((resolve) => {
      stream.once('end', () => resolve());
      stream.once('close', () => resolve());
      stream.once('error', () => resolve());
    }).then(async () => {
      unwatch?.();
      o.signal?.removeEventListener('abort', onAbort);
      let exitCode: number | null = null;
      try {
        const info = await exec.inspect();
        exitCode = info.Running ? null : (info.ExitCode ?? null);
      } catch { /* the container may be gone: unknown */ }
      return { exitCode, ...(this.reason ? { reason: this.reason } : {}) };
    });
    this.demux();
  }

  get stderrBytes(): number {
    return this.stderr.total;
  }

  get pendingBytes(): number {
    return this.stream.writableLength;
  }

  write(data: string | Buffer): boolean {
    if (this.stream.destroyed || this.stream.writableEnded) return false;
    return this.stream.write(data);
  }

  stderrText(): string {
    return this.stderr.text();
  }

  kill(reason: string): Promise<void> {
    this.killing ??= (async () => {
      this.reason ??= reason;
      // stop reading first: whatever it still writes costs the worker nothing
      this.stream.destroy();
      if (this.pid !== null && (await this.container.inspect().then((i) => i.State.Running, () => false))) {
        await killTree(this.container, this.o.user, this.pid);
      }
    })();
    return this.killing;
  }

  /** Docker's multiplexed stream (8-byte frame headers): stdout to the callback, stderr's first line is the pid. */
  private demux(): void {
    let header = Buffer.alloc(0);
    let remaining = 0;
    let toStderr = false;
    this.stream.on('data', (chunk: Buffer) => {
      let off = 0;
      while (off < chunk.length) {
        if (remaining === 0) {
          const need = 8 - header.length;
          header = Buffer.concat([header, chunk.subarray(off, off + need)]);
          off += Math.min(need, chunk.length - off);
          if (header.length < 8) return;
          toStderr = header[0] === 2;
          remaining = header.readUInt32BE(4);
          header = Buffer.alloc(0);
          continue;
        }
        const take = Math.min(remaining, chunk.length - off);
        const part = chunk.subarray(off, off + take);
        off += take;
        remaining -= take;
        if (toStderr) this.onStderr(part);
        else {
          this.stdoutBytes += part.length;
          this.o.onStdout(part);
        }
      }
    });
  }

  private onStderr(part: Buffer): void {
    if (this.pidDone) {
      this.stderr.push(part);
      this.o.onStderr?.(this.stderr.total);
      return;
    }
    const nl = part.indexOf(0x0a);
    const upto = nl < 0 ? part.length : nl;
    this.pidText += part.subarray(0, upto).toString('latin1');
    if (nl < 0 && this.pidText.length <= PID_LINE_MAX) return;
    this.pidDone = true;
    this.pid = /^[0-9]{1,9}$/.test(this.pidText) ? Number(this.pidText) : null;
    const rest = nl < 0 ? Buffer.alloc(0) : part.subarray(nl + 1);
    if (rest.length) {
      this.stderr.push(rest);
      this.o.onStderr?.(this.stderr.total);
    }
  }
}
