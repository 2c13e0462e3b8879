/**
 * The docker gate's cost (p50/p95 in ms), through `corral docker-gate` (its own process, as deployed)
 * beside the engine's socket directly, interleaved sample by sample in the same run:
 *   exec_ms.{direct,gate}          `true` through the Sandbox port (exec create + hijacked start + inspect)
 *   exec_ms_cat_1mb.{direct,gate}  1 MiB of stdout through the hijacked stream
 *   create_start_ms.{direct,gate}  provider.acquire() with no files (slot list, checked create, start)
 *   ratio_exec_p50                 gate / direct (target ≤ 1.1)
 * Part of `npm run bench`; alone: BENCH_STAGES=docker-gate npm run bench, or npx tsx bench/docker-gate.ts
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import type { LeasedSandbox, SandboxRequest } from '../src/domain/sandbox';
import { gateReadyCheck } from '../src/docker-gate/readiness';
import { DockerSandboxProvider } from '../src/sandbox';
import { sandboxTestEnv } from '../test/support/sandbox-env';
import { round, sleep, stats, time, type P50P95 } from './stats';

export interface GateBench {
  exec_ms: { direct: P50P95; gate: P50P95 };
  exec_ms_cat_1mb: { direct: P50P95; gate: P50P95 };
  create_start_ms: { direct: P50P95; gate: P50P95 };
  ratio_exec_p50: number;
  ratio_create_start_p50: number;
  samples: { exec: number; acquire: number };
}

export async function benchDockerGate(o: { execs: number; acquires: number }): Promise<GateBench> {
  const dir = await mkdtemp(join(tmpdir(), 'cgb-'));
  const sock = join(dir, 'gate.sock');
  const queue = `gatebench${randomBytes(3).toString('hex')}`;
  const env = { ...process.env, ...sandboxTestEnv(), CORRAL_QUEUE: queue, CORRAL_EGRESS_DIR: join(dir, 'egress'), CORRAL_SANDBOX_UID_BASE: '2300000', CORRAL_SANDBOX_SLOTS: '16' };
  const config = loadConfig(env);
  const child = spawn(join(__dirname, '..', 'bin', 'corral'), ['docker-gate', '--listen', `unix://${sock}`], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  const sandboxes: LeasedSandbox[] = [];
  try {
    const ready = gateReadyCheck(`unix://${sock}`)['docker-gate']!;
    for (let i = 0; ; i++) {
      if (await ready().then((r) => r === 'gate', () => false)) break;
      if (i > 300 || child.exitCode !== null) throw new Error('corral docker-gate did not start');
      await sleep(100);
    }
    const direct = new DockerSandboxProvider({ docker: new Docker(), config });
    const gated = new DockerSandboxProvider({ docker: new Docker({ socketPath: sock }), config });
    const req = (): SandboxRequest => ({
      runId: `run_gatebench_${randomBytes(4).toString('hex')}`, workerId: 'gate-bench', deadline: new Date(Date.now() + 600_000), files: {},
      limits: { memoryMb: 128, cpus: 1, pids: 64, workspaceMb: 16 }, egressAllow: [],
    });
    const acq = { direct: [] as number[], gate: [] as number[] };
    for (let i = 0; i < o.acquires; i++) {
      for (const [k, p] of [['direct', direct], ['gate', gated]] as const) {
        let sb: LeasedSandbox | undefined;
        acq[k].push(await time(async () => { sb = await p.acquire(req()); }));
        await sb!.dispose();
      }
    }
    const sd = await direct.acquire(req());
    sandboxes.push(sd);
    const sg = await gated.acquire(req());
    sandboxes.push(sg);
    const ex = { direct: [] as number[], gate: [] as number[] };
    const cat = { direct: [] as number[], gate: [] as number[] };
    const one = (sb: LeasedSandbox) => sb.exec({ argv: ['true'], timeoutMs: 10_000 });
    const mb = (sb: LeasedSandbox) => sb.exec({ argv: ['head', '-c', '1048576', '/dev/zero'], timeoutMs: 10_000, maxOutputBytes: 2 << 20 });
    for (let i = 0; i < 3; i++) await Promise.all([one(sd), one(sg)]); // warm-up
    for (let i = 0; i < o.execs; i++) {
      // alternate which goes first, so neither side always gets the warmer engine
      const order = i % 2 === 0 ? (['direct', 'gate'] as const) : (['gate', 'direct'] as const);
      for (const k of order) ex[k].push(await time(() => one(k === 'direct' ? sd : sg)));
      if (i % 3 === 0) for (const k of order) cat[k].push(await time(() => mb(k === 'direct' ? sd : sg)));
    }
    const r = {
      exec_ms: { direct: stats(ex.direct), gate: stats(ex.gate) },
      exec_ms_cat_1mb: { direct: stats(cat.direct), gate: stats(cat.gate) },
      create_start_ms: { direct: stats(acq.direct), gate: stats(acq.gate) },
      ratio_exec_p50: 0,
      ratio_create_start_p50: 0,
      samples: { exec: o.execs, acquire: o.acquires },
    };
    r.ratio_exec_p50 = round(r.exec_ms.gate.p50 / r.exec_ms.direct.p50, 3);
    r.ratio_create_start_p50 = round(r.create_start_ms.gate.p50 / r.create_start_ms.direct.p50, 3);
    return r;
  } finally {
    await Promise.all(sandboxes.map((s) => s.dispose().catch(() => undefined)));
    child.kill('SIGTERM');
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    await rm(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchDockerGate({ execs: Number(process.env.BENCH_GATE_EXECS ?? 60), acquires: Number(process.env.BENCH_GATE_ACQUIRES ?? 10) }).then(
    (r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`),
    (err: unknown) => {
      process.stderr.write(`${(err as Error).stack}\n`);
      process.exitCode = 1;
    },
  );
}
