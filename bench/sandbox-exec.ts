/**
 * Sandbox costs from one run, printed as one JSON object (p50/p95 in ms):
 *   exec_ms.corral      `true` through the Sandbox port (timeout wrapper, marker env, demux, inspect)
 *   exec_ms.raw_api     the same `true` as a bare Engine-API exec (create + start + inspect)
 *   exec_ms.docker_cli  `docker exec <id> true`
 *   acquire_ms.cold     provider.acquire() with a one-file seed, until the sandbox is usable
 *   acquire_ms.raw_create_start  bare create + start of the same image
 *   remove_ms           LeasedSandbox.dispose() (force remove)
 * Run: npx tsx bench/sandbox-exec.ts [--exec N] [--acquire N]
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import type { LeasedSandbox, SandboxRequest } from '../src/domain/sandbox';
import { DockerSandboxProvider } from '../src/sandbox';

const run = promisify(execFile);
const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const EXECS = arg('--exec', 60);
const ACQUIRES = arg('--acquire', 12);
const WORKER = `bench-${process.pid}`;

function stats(xs: number[]): { p50: number; p95: number } {
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
  return { p50: Math.round(q(0.5) * 10) / 10, p95: Math.round(q(0.95) * 10) / 10 };
}

async function time(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

async function rawExec(c: Docker.Container): Promise<number | null> {
  const exec = await c.exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true, Tty: false });
  const s = (await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })) as unknown as Readable;
  await new Promise<void>((resolve, reject) => {
    s.on('data', () => {});
    s.once('end', resolve);
    s.once('close', resolve);
    s.once('error', reject);
  });
  return (await exec.inspect()).ExitCode ?? null;
}

async function main(): Promise<void> {
  const docker = new Docker();
  const config = loadConfig({});
  const provider = new DockerSandboxProvider({ docker, config });
  const req = (): SandboxRequest => ({
    runId: `run_bench_${Math.random().toString(36).slice(2, 10)}`,
    workerId: WORKER,
    deadline: new Date(Date.now() + 10 * 60_000),
    files: { 'README.md': '# bench\n' },
    limits: { memoryMb: 256, cpus: 1, pids: 128, workspaceMb: 64 },
    egressAllow: [],
  });

  const acquire: number[] = [];
  const remove: number[] = [];
  const rawCreate: number[] = [];
  try {
    // warm-up (image layers, daemon caches)
    const warm = await provider.acquire(req());
    await warm.dispose();
    for (let i = 0; i < ACQUIRES; i++) {
      let sb: LeasedSandbox | undefined;
      acquire.push(await time(async () => (sb = await provider.acquire(req()))));
      remove.push(await time(() => sb!.dispose()));
      let c: Docker.Container | undefined;
      rawCreate.push(await time(async () => {
        c = await docker.createContainer({ Image: config.CORRAL_SANDBOX_IMAGE, Cmd: ['sleep', '600'], Labels: { corral: '1', 'corral.worker-id': WORKER, 'corral.run-id': 'bench', 'corral.deadline': new Date(Date.now() + 600_000).toISOString() } });
        await c.start();
      }));
      await c!.remove({ force: true });
    }

    const sb = await provider.acquire(req());
    const container = docker.getContainer(sb.id);
    const corral: number[] = [];
    const raw: number[] = [];
    const cli: number[] = [];
    for (let i = 0; i < 5; i++) {
      await sb.exec({ argv: ['true'], timeoutMs: 10_000 });
      await rawExec(container);
    }
    for (let i = 0; i < EXECS; i++) {
      corral.push(await time(async () => {
        const r = await sb.exec({ argv: ['true'], timeoutMs: 10_000 });
        if (r.exitCode !== 0) throw new Error(`corral exec: exit ${r.exitCode}`);
      }));
      raw.push(await time(async () => {
        if ((await rawExec(container)) !== 0) throw new Error('raw exec failed');
      }));
      cli.push(await time(() => run('docker', ['exec', sb.id, 'true'])));
    }
    await sb.dispose();
    const out = {
      exec_ms: { corral: stats(corral), raw_api: stats(raw), docker_cli: stats(cli) },
      acquire_ms: { cold: stats(acquire), raw_create_start: stats(rawCreate) },
      remove_ms: stats(remove),
      ratio_corral_to_raw_p50: Math.round((stats(corral).p50 / stats(raw).p50) * 100) / 100,
      samples: { exec: EXECS, acquire: ACQUIRES },
    };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } finally {
    const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => {})));
  }
}

void main();
