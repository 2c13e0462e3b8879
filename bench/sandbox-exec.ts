/**
 * Sandbox costs (p50/p95 in ms):
 *   exec_ms.corral      `true` through the Sandbox port (timeout wrapper, marker env, demux, inspect)
 *   exec_ms.raw_api     the same `true` as a bare Engine-API exec (create + start + inspect)
 *   exec_ms.docker_cli  `docker exec <id> true`
 *   acquire_ms.cold     provider.acquire() with a one-file seed, until the sandbox is usable
 *   acquire_ms.warm     provider.acquire() of a default-class sandbox taken from the warm pool
 *                       (startPool; each sample waits for the pool to refill, and only acquisitions the
 *                       provider logged as pooled count; null if every one fell back to a cold start);
 *                       with the same one-file seed as cold
 *   acquire_ms.warm_empty_workspace  the same with no files to seed (no archive upload)
 *   acquire_ms.raw_create_start  bare create + start of the same image
 *   remove_ms           LeasedSandbox.dispose() (force remove)
 * benchSandbox() is part of `npm run bench` (bench/index.ts); alone:
 *   npx tsx bench/sandbox-exec.ts [--exec N] [--acquire N]
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Readable } from 'node:stream';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import type { LeasedSandbox, SandboxRequest } from '../src/domain/sandbox';
import { DockerSandboxProvider, resolveLimits } from '../src/sandbox';
import { sandboxTestEnv } from '../test/support/sandbox-env';
import { round, sleep, stats, time, type P50P95 } from './stats';

const run = promisify(execFile);

export interface SandboxBench {
  exec_ms: { corral: P50P95; raw_api: P50P95; docker_cli: P50P95 };
  acquire_ms: { cold: P50P95; warm: P50P95 | null; warm_empty_workspace: P50P95 | null; raw_create_start: P50P95 };
  remove_ms: P50P95;
  ratio_corral_to_raw_p50: number;
  samples: { exec: number; acquire: number; warm: number; warm_fell_back_cold: number };
  /** Why acquire_ms.warm is null, when it is. */
  warm_note?: string;
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

/** Warm acquisitions: a pool of 2 default-class sandboxes, refilled between samples. */
async function benchWarm(docker: Docker, workerId: string, samples: number, files: Record<string, string>): Promise<{ ms: number[]; fellBack: number }> {
  const config = loadConfig(sandboxTestEnv());
  const pooled = new Set<string>();
  const provider = new DockerSandboxProvider({
    docker, config,
    log: (msg, fields) => {
      if (msg === 'sandbox acquired' && fields?.pooled) pooled.add(String(fields.runId));
    },
  });
  const p = provider;
  const { execTimeoutS: _t, ...limits } = resolveLimits(undefined, config);
  const ms: number[] = [];
  let fellBack = 0;
  try {
    await p.startPool(workerId, 2, 10 * 60_000);
    for (let i = 0; i < samples + 1; i++) {
      for (let w = 0; (p.poolStats()?.idle ?? 0) < 2 && w < 200; w++) await sleep(25);
      const runId = `run_benchwarm_${Math.random().toString(36).slice(2, 10)}`;
      let sb: LeasedSandbox | undefined;
      const t = await time(async () => (sb = await provider.acquire({
        runId, workerId, deadline: new Date(Date.now() + 5 * 60_000), files, limits, egressAllow: [],
      })));
      await sb!.dispose();
      if (!pooled.has(runId)) fellBack += 1;
      else if (i > 0) ms.push(t);
    }
  } finally {
    await p.stopPool();
  }
  return { ms, fellBack };
}

export async function benchSandbox(o: { execs: number; acquires: number; warm?: number }): Promise<SandboxBench> {
  const WORKER = `bench-${process.pid}`;
  const docker = new Docker();
  const config = loadConfig(sandboxTestEnv());
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
    for (let i = 0; i < o.acquires; i++) {
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
    for (let i = 0; i < o.execs; i++) {
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
    const pool = await benchWarm(docker, WORKER, o.warm ?? o.acquires, { 'README.md': '# bench\n' });
    const poolEmpty = await benchWarm(docker, WORKER, o.warm ?? o.acquires, {});
    return {
      exec_ms: { corral: stats(corral), raw_api: stats(raw), docker_cli: stats(cli) },
      acquire_ms: { cold: stats(acquire), warm: pool.ms.length === 0 ? null : stats(pool.ms), warm_empty_workspace: poolEmpty.ms.length === 0 ? null : stats(poolEmpty.ms), raw_create_start: stats(rawCreate) },
      remove_ms: stats(remove),
      ratio_corral_to_raw_p50: round(stats(corral).p50 / stats(raw).p50, 2),
      samples: { exec: o.execs, acquire: o.acquires, warm: pool.ms.length, warm_fell_back_cold: pool.fellBack + poolEmpty.fellBack },
      ...(pool.ms.length === 0 ? { warm_note: 'every warm acquisition fell back to a cold start' } : {}),
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
  benchSandbox({ execs: arg('--exec', 60), acquires: arg('--acquire', 12) }).then((out) => process.stdout.write(`${JSON.stringify(out)}\n`), (err: unknown) => { console.error(err); process.exitCode = 1; });
}
