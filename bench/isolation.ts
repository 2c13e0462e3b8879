/**
 * The isolation classes side by side (p50/p95 in ms), each through corral's own provider and as the
 * bare Engine-API equivalent on the same runtime:
 *   exec_ms.corral         `true` through the Sandbox port (timeout wrapper, death watch, demux, inspect)
 *   exec_ms.raw_api        the same `true` as a bare Engine-API exec
 *   exec_ms.python         `python3 -c pass` through the Sandbox port (a process start that does real work)
 *   acquire_ms.cold        provider.acquire() with a one-file seed (uid slot, create, start, seed)
 *   acquire_ms.raw_create_start  bare create + start of the image with that runtime
 *   remove_ms              LeasedSandbox.dispose()
 * Part of `npm run bench` (bench/index.ts); alone:
 *   npx tsx bench/isolation.ts [--exec N] [--acquire N]
 */
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import type { IsolationClass, LeasedSandbox, SandboxRequest } from '../src/domain/sandbox';
import { DockerSandboxProvider } from '../src/sandbox';
import { isolationEnv } from '../test/support/sandbox-env';
import { stats, time, type P50P95 } from './stats';

export interface IsolationBench {
  exec_ms: { corral: P50P95; raw_api: P50P95; python: P50P95 };
  acquire_ms: { cold: P50P95; raw_create_start: P50P95 };
  remove_ms: P50P95;
  runtime: string;
  samples: { exec: number; acquire: number };
}

async function rawExec(c: Docker.Container): Promise<void> {
  const exec = await c.exec({ Cmd: ['true'], AttachStdout: true, AttachStderr: true, Tty: false });
  const s = (await exec.start({ hijack: true, stdin: false, Detach: false, Tty: false })) as unknown as Readable;
  await new Promise<void>((resolve, reject) => {
    s.on('data', () => {});
    s.once('end', resolve);
    s.once('close', resolve);
    s.once('error', reject);
  });
  if ((await exec.inspect()).ExitCode !== 0) throw new Error('raw exec failed');
}

export async function benchIsolation(isolation: IsolationClass, o: { execs: number; acquires: number }): Promise<IsolationBench> {
  const WORKER = `bench-iso-${isolation}-${process.pid}`;
  const docker = new Docker();
  const config = loadConfig(isolationEnv(isolation));
  const runtime = isolation === 'gvisor' ? config.CORRAL_GVISOR_RUNTIME : 'runc';
  const provider = new DockerSandboxProvider({ docker, config });
  const req = (): SandboxRequest => ({
    runId: `run_benchiso_${Math.random().toString(36).slice(2, 10)}`,
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
    await (await provider.acquire(req())).dispose(); // warm-up
    for (let i = 0; i < o.acquires; i++) {
      let sb: LeasedSandbox | undefined;
      acquire.push(await time(async () => (sb = await provider.acquire(req()))));
      remove.push(await time(() => sb!.dispose()));
      let c: Docker.Container | undefined;
      rawCreate.push(await time(async () => {
        c = await docker.createContainer({
          Image: config.CORRAL_SANDBOX_IMAGE, Cmd: ['sleep', '600'], NetworkDisabled: false,
          HostConfig: { Runtime: runtime, NetworkMode: 'none' },
          Labels: { corral: '1', 'corral.worker-id': WORKER, 'corral.run-id': 'bench', 'corral.deadline': new Date(Date.now() + 600_000).toISOString() },
        });
        await c.start();
      }));
      await c!.remove({ force: true });
    }
    const sb = await provider.acquire(req());
    const container = docker.getContainer(sb.id);
    const corral: number[] = [];
    const raw: number[] = [];
    const python: number[] = [];
    for (let i = 0; i < 5; i++) {
      await sb.exec({ argv: ['true'], timeoutMs: 10_000 });
      await rawExec(container);
    }
    for (let i = 0; i < o.execs; i++) {
      corral.push(await time(async () => {
        if ((await sb.exec({ argv: ['true'], timeoutMs: 10_000 })).exitCode !== 0) throw new Error('corral exec failed');
      }));
      raw.push(await time(() => rawExec(container)));
      if (i % 3 === 0) {
        python.push(await time(async () => {
          if ((await sb.exec({ argv: ['python3', '-c', 'pass'], timeoutMs: 10_000 })).exitCode !== 0) throw new Error('python exec failed');
        }));
      }
    }
    await sb.dispose();
    return {
      exec_ms: { corral: stats(corral), raw_api: stats(raw), python: stats(python) },
      acquire_ms: { cold: stats(acquire), raw_create_start: stats(rawCreate) },
      remove_ms: stats(remove),
      runtime,
      samples: { exec: o.execs, acquire: o.acquires },
    };
  } finally {
    const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => {})));
  }
}

if (require.main === module) {
  const arg = (name: string, def: number) => {
    const i = process.argv.indexOf(name);
    return i >= 0 ? Number(process.argv[i + 1]) : def;
  };
  (async () => {
    const o = { execs: arg('--exec', 60), acquires: arg('--acquire', 12) };
    const out = { runc: await benchIsolation('runc', o), gvisor: await benchIsolation('gvisor', o) };
    process.stdout.write(`${JSON.stringify(out)}\n`);
  })().catch((err: unknown) => { console.error(err); process.exitCode = 1; });
}
