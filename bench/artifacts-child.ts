/**
 * One artifacts measurement in a fresh process (so its memory numbers are its own), printed as one
 * JSON line: `tsx bench/artifacts-child.ts SRC SCENARIO`, SRC = the src/ directory to load (this
 * tree's, or the baseline's extracted by bench/artifacts.ts), SCENARIO = `large` (BENCH_EXPORT_MB of
 * 10 MB random files plus 200 small text files, a tenth of them changed), `sparse` (a 20 GB sparse
 * file beside a few small ones) or `files` (BENCH_FILE_OPS writes and reads through the file tools'
 * sandbox calls). Memory is sampled every 10 ms during the export: peak RSS, external and
 * array-buffer growth over the value before it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';

type Src = {
  config: { loadConfig(env: Record<string, string>): unknown };
  sandbox: { DockerSandboxProvider: new (o: { docker: Docker; config: unknown }) => { acquire(r: unknown): Promise<Box> } };
};
interface Box {
  exec(r: { argv: string[]; timeoutMs: number }): Promise<{ exitCode: number | null; stderr: string }>;
  exportWorkspace(o?: unknown): Promise<unknown>;
  writeFile(p: string, c: string): Promise<void>;
  readFile(p: string): Promise<unknown>;
  dispose(): Promise<void>;
}

async function main(): Promise<void> {
  const [srcArg, scenario] = process.argv.slice(2);
  const src = resolve(srcArg!);
  /* eslint-disable @typescript-eslint/no-require-imports */
  const mods: Src = { config: require(join(src, 'config')), sandbox: require(join(src, 'sandbox')) };
  const env: Record<string, string> = process.env.CORRAL_SANDBOX_IMAGE ? { CORRAL_SANDBOX_IMAGE: process.env.CORRAL_SANDBOX_IMAGE } : {};
  const provider = new mods.sandbox.DockerSandboxProvider({ docker: new Docker(), config: mods.config.loadConfig(env) });
  const mb = Number(process.env.BENCH_EXPORT_MB ?? 300);
  const small: Record<string, string> = {};
  for (let i = 0; i < 200; i++) small[`src/m${i}.py`] = `def f${i}():\n    return ${i}\n`.repeat(20);
  const sb = await provider.acquire({
    runId: `run_bench_artifacts_${process.pid}`, workerId: 'bench-artifacts', deadline: new Date(Date.now() + 15 * 60_000),
    files: small, limits: { memoryMb: 256, cpus: 1, pids: 64, workspaceMb: mb + 64 }, egressAllow: [],
  });
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-artifacts-'));
  try {
    const sh = async (s: string) => {
      const r = await sb.exec({ argv: ['bash', '-c', s], timeoutMs: 300_000 });
      if (r.exitCode !== 0) throw new Error(r.stderr);
    };
    if (scenario === 'files') {
      const n = Number(process.env.BENCH_FILE_OPS ?? 40);
      const w: number[] = [];
      const r: number[] = [];
      for (let i = 0; i < n; i++) {
        let t = performance.now();
        await sb.writeFile(`notes/n${i % 5}.txt`, `line ${i}\n`.repeat(50));
        w.push(performance.now() - t);
        t = performance.now();
        await sb.readFile(`notes/n${i % 5}.txt`);
        r.push(performance.now() - t);
      }
      const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
      process.stdout.write(`${JSON.stringify({ write_ms_p50: Math.round(p50(w)), read_ms_p50: Math.round(p50(r)), ops: n })}\n`);
      return;
    }
    if (scenario === 'sparse') await sh('truncate -s 20G big.bin && printf x > a.txt');
    else await sh(`for i in $(seq 1 ${Math.floor(mb / 10)}); do head -c 10485760 /dev/urandom > f$i.bin; done; for i in $(seq 0 10 199); do echo "# changed" >> src/m$i.py; done`);
    global.gc?.();
    const base = process.memoryUsage();
    const peak = { rss: base.rss, external: base.external, arrayBuffers: base.arrayBuffers };
    const iv = setInterval(() => {
      const m = process.memoryUsage();
      peak.rss = Math.max(peak.rss, m.rss);
      peak.external = Math.max(peak.external, m.external);
      peak.arrayBuffers = Math.max(peak.arrayBuffers, m.arrayBuffers);
    }, 10);
    const t0 = performance.now();
    let ok = true;
    let error: string | undefined;
    let tarBytes = 0;
    try {
      const tarPath = join(dir, 'workspace.tar');
      const patchPath = join(dir, 'workspace.patch');
      const x = (await sb.exportWorkspace({ tarPath, patchPath })) as { tar: Buffer | { bytes: number }; patch: string | object };
      if (Buffer.isBuffer(x.tar)) {
        // The baseline returned buffers; its worker then wrote them with writeFileSync.
        writeFileSync(tarPath, x.tar);
        writeFileSync(patchPath, x.patch as string);
        tarBytes = x.tar.length;
      } else {
        tarBytes = x.tar.bytes;
      }
    } catch (err) {
      ok = false;
      error = (err as Error).message.slice(0, 200);
    }
    const ms = performance.now() - t0;
    clearInterval(iv);
    const MB = (n: number) => Math.round((n / 1024 / 1024) * 10) / 10;
    process.stdout.write(`${JSON.stringify({
      ok, ...(error ? { error } : {}), ms: Math.round(ms), tar_mb: MB(tarBytes),
      rss_growth_mb: MB(peak.rss - base.rss), external_growth_mb: MB(peak.external - base.external), array_buffers_growth_mb: MB(peak.arrayBuffers - base.arrayBuffers),
    })}\n`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await sb.dispose();
  }
}

main().catch((err: Error) => {
  process.stderr.write(`${err.stack ?? err.message}\n`);
  process.exitCode = 1;
});
