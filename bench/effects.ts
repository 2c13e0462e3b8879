/**
 * Stage 13 (BENCH_STAGES=effects): what the per-call effect check costs, beside a call without it.
 * For workspaces of three sizes (a small project, a 2,000-file git repository, one past
 * CORRAL_EFFECT_FULL_MB that is read targeted), in ms (p50/p95):
 *   call_ms              `bash -c true` through the Sandbox port: a tool call without the check
 *   check_ms             the check alone after a call that changed nothing (guard.endCall)
 *   call_with_check_ms   both, one after the other: what a tool call costs now
 *   restore_ms           a call that planted a git hook: check, restore through the archive endpoint, read again
 * plus the mode (full/targeted), bytes and archive requests per check. And the secret scan of a tool
 * output (32 KiB of ordinary test output; 32 KiB dense with scanner keywords) in its worker thread.
 * Through the engine directly (the docker gate's own overhead is stage 9).
 *   BENCH_STAGES=effects npm run bench        (BENCH_EFFECT_CALLS, default 30)
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import type { LeasedSandbox } from '../src/domain/sandbox';
import { DEFAULT_PROTECTED_SET } from '../src/domain/protected-set';
import { SecretScanPool } from '../src/policy/secret-scan-pool';
import { EffectGuard } from '../src/run/effect-guard';
import { DockerSandboxProvider } from '../src/sandbox';
import { sandboxTestEnv } from '../test/support/sandbox-env';
import { envInt, note, round, stats, time, type P50P95 } from './stats';

interface Profile {
  name: string;
  /** Shell that builds the workspace (runs once, before the samples). */
  build: string;
  workspaceMb: number;
}

const PROFILES: Profile[] = [
  { name: 'small_project', workspaceMb: 64, build: 'mkdir -p src tests && for i in $(seq 1 10); do echo "x = $i" > src/m$i.py; done && git init -q && git add -A && git -c user.email=b@b -c user.name=b commit -qm base' },
  {
    name: 'repo_2000_files_4500_entries', workspaceMb: 256,
    build: 'for d in $(seq 1 100); do mkdir -p src/d$d; for f in $(seq 1 20); do head -c 2048 /dev/urandom | base64 > src/d$d/f$f.txt; done; done && mkdir -p .github/workflows && echo "on: push" > .github/workflows/ci.yml && git init -q && git add -A && git -c user.email=b@b -c user.name=b commit -qm base',
  },
  { name: 'node_modules_20000_files_targeted', workspaceMb: 512, build: 'mkdir -p node_modules && cd node_modules && for p in $(seq 1 200); do mkdir -p p$p/lib; for f in $(seq 1 100); do echo "module.exports = $f" > p$p/lib/f$f.js; done; done && cd .. && echo x > index.js && mkdir -p .github/workflows && echo "on: push" > .github/workflows/ci.yml && git init -q && git add index.js .github && git -c user.email=b@b -c user.name=b commit -qm base' },
  { name: 'large_100mb_targeted', workspaceMb: 512, build: 'head -c 100000000 /dev/urandom > data.bin && mkdir -p src && echo x > src/a.py && git init -q && git add src && git -c user.email=b@b -c user.name=b commit -qm base' },
];

export interface EffectsBench {
  [profile: string]: {
    mode: 'full' | 'targeted';
    call_ms: P50P95;
    check_ms: P50P95;
    call_with_check_ms: P50P95;
    restore_ms: P50P95;
    bytes_per_check: number;
    requests_per_check: number;
  } | unknown;
  secret_scan_ms: { ordinary_32k: P50P95; keyword_dense_32k: P50P95; note: string };
}

const allowVerdict = { decision: 'allow' as const, static: { decision: 'allow' as const, rule: 'x', reason: 'bench' }, reason: 'bench' };

export async function benchEffects(o: { calls: number }): Promise<EffectsBench> {
  const docker = new Docker();
  const config = loadConfig(sandboxTestEnv());
  const provider = new DockerSandboxProvider({ docker, config });
  const out: Record<string, unknown> = {};
  for (const p of PROFILES) {
    note(`effects: ${p.name}`);
    const sb: LeasedSandbox = await provider.acquire({
      runId: `run_bench_fx_${randomBytes(3).toString('hex')}`, workerId: `bench-fx-${process.pid}`, deadline: new Date(Date.now() + 30 * 60_000),
      files: {}, limits: { memoryMb: 512, cpus: 1, pids: 128, workspaceMb: p.workspaceMb }, egressAllow: [],
    });
    try {
      const b = await sb.exec({ argv: ['bash', '-c', p.build], timeoutMs: 600_000 });
      if (b.exitCode !== 0) throw new Error(`building ${p.name} failed: ${b.stderr.slice(0, 300)}`);
      const events: Array<{ type: string; checks?: number; bytes?: number; requests?: number; mode?: string }> = [];
      const guard = await EffectGuard.start({ runId: 'run_bench', sandbox: sb, set: DEFAULT_PROTECTED_SET, emit: (e) => events.push(e), clock: () => performance.now() });
      const call = () => sb.exec({ argv: ['bash', '-c', 'true'], timeoutMs: 30_000 });
      const check = async (id: string) => {
        guard.beginCall({ callId: id, tool: 'bash', args: { command: 'true' } }, allowVerdict);
        await guard.endCall(allowVerdict, true);
      };
      const calls: number[] = [];
      const checks: number[] = [];
      const both: number[] = [];
      const restores: number[] = [];
      for (let i = 0; i < o.calls; i++) {
        calls.push(await time(call));
        checks.push(await time(() => check(`c${i}`)));
        both.push(await time(async () => { await call(); await check(`b${i}`); }));
      }
      for (let i = 0; i < Math.max(5, Math.floor(o.calls / 3)); i++) {
        await sb.exec({ argv: ['bash', '-c', 'mkdir -p .git/hooks && printf "#!/bin/sh\\nevil\\n" > .git/hooks/pre-commit'], timeoutMs: 30_000 });
        restores.push(await time(() => check(`r${i}`)));
      }
      guard.finish();
      const st = events.find((e) => e.type === 'effect.stats')!;
      out[p.name] = {
        mode: st.mode, call_ms: stats(calls), check_ms: stats(checks), call_with_check_ms: stats(both), restore_ms: stats(restores),
        bytes_per_check: Math.round((st.bytes ?? 0) / (st.checks ?? 1)), requests_per_check: round((st.requests ?? 0) / (st.checks ?? 1)),
      };
      note(`effects: ${p.name} ${JSON.stringify(out[p.name])}`);
    } finally {
      await sb.dispose();
    }
  }
  note('effects: secret scan');
  const pool = new SecretScanPool();
  await pool.warm();
  const ordinary = Array.from({ length: 600 }, (_, i) => `tests/test_mod${i % 40}.py::test_case_${i} PASSED [${Math.round((i / 600) * 100)}%]`).join('\n').slice(0, 32 * 1024);
  const dense = 'token key secret api password auth aws github slack bearer client_secret private_key\n'.repeat(400).slice(0, 32 * 1024);
  const o1: number[] = [];
  const o2: number[] = [];
  for (let i = 0; i < o.calls; i++) {
    o1.push(await time(() => pool.mask(ordinary)));
    o2.push(await time(() => pool.mask(dense)));
  }
  await pool.close();
  out.secret_scan_ms = { ordinary_32k: stats(o1), keyword_dense_32k: stats(o2), note: 'in the scanner\'s worker thread, rules compiled at start-up (not counted)' };
  return out as EffectsBench;
}

if (require.main === module) {
  void benchEffects({ calls: envInt('BENCH_EFFECT_CALLS', 30) }).then((r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`));
}
