/**
 * Stage 12: what the artifact store costs a run's end. The files of one run — a 10 MB workspace tar,
 * its patch, a log and a report — are published by the worker's own code (publishRunFiles) into:
 *   - the local store (the baseline: the files are already where the API reads them, nothing moves),
 *   - a copy to another local directory (what a shared volume would cost at least),
 *   - an S3-compatible store on loopback (s3rver), multipart for the tar;
 * and read back whole from the S3 store, as the API streams it. The worker's RSS growth over the S3
 * puts shows that nothing is held whole in memory. Loopback only: the numbers are the client's and
 * the protocol's cost, not a network's. The RSS growth is measured after one warm-up put (the SDK's
 * modules and connections), so it is what the puts themselves hold: lib-storage's part buffers.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArtifactsUrl } from '../src/artifacts/artifacts-url';
import { LocalArtifactStore } from '../src/artifacts/local-artifact-store';
import { S3ArtifactStore } from '../src/artifacts/s3-artifact-store';
import type { ArtifactStore } from '../src/artifacts/artifact-store';
import { publishRunFiles } from '../src/worker/run-files';
import { S3_CREDENTIALS, startS3Server } from '../test/support/s3-server';
import { envInt, round, stats, type P50P95 } from './stats';

export interface ArtifactStoreBench {
  runs: number;
  tar_mb: number;
  publish_ms: { local_in_place: P50P95; local_copy: P50P95; s3: P50P95 };
  s3_read_tar_ms: P50P95;
  s3_mb_per_s_p50: number;
  rss_growth_mb_over_s3_puts: number;
  /** One 100 MB tar put: the growth stays that of a few parts, not of the file. */
  rss_growth_mb_put_100mb: number;
  put_100mb_ms: number;
}

function runDir(root: string, i: number, tar: Buffer): string {
  const d = join(root, 'runs', `run_bench${String(i).padStart(7, '0')}`);
  mkdirSync(d, { recursive: true });
  writeFileSync(join(d, 'workspace.tar'), tar);
  writeFileSync(join(d, 'workspace.patch'), randomBytes(8 * 1024).toString('hex'));
  writeFileSync(join(d, 'events.jsonl'), `${JSON.stringify({ type: 'tool.result', output: 'x'.repeat(400) })}\n`.repeat(120));
  writeFileSync(join(d, 'report.md'), `# Report\n\n${'line\n'.repeat(400)}`);
  return d;
}

async function publishTimes(store: ArtifactStore, root: string, runs: number, tar: Buffer): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const dir = runDir(root, i, tar);
    const t0 = process.hrtime.bigint();
    const r = await publishRunFiles({ store, tenant: 'bench', runId: `run_bench${String(i).padStart(7, '0')}`, runDir: dir });
    out.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r.failed) throw new Error(r.failed);
  }
  return out;
}

export async function benchArtifactStore(): Promise<ArtifactStoreBench> {
  const runs = envInt('BENCH_STORE_RUNS', 10);
  const tar = randomBytes(10 * 1024 * 1024);
  const scratch = mkdtempSync(join(tmpdir(), 'corral-bench-store-'));
  for (const [k, v] of Object.entries(S3_CREDENTIALS)) process.env[k] = v;
  const s3 = await startS3Server({ bucket: 'corral-bench' });
  try {
    const inPlace = await publishTimes(new LocalArtifactStore(join(scratch, 'a')), join(scratch, 'a'), runs, tar);
    // A copy: the worker's run dir on one disk, the store's root on another directory.
    const copyStore = new LocalArtifactStore(join(scratch, 'b-store'));
    const copy = await publishTimes(copyStore, join(scratch, 'b-work'), runs, tar);
    const t = parseArtifactsUrl(`s3://corral-bench/bench?endpoint=${s3.endpoint}`);
    if (t.kind !== 's3') throw new Error('not s3');
    const store = new S3ArtifactStore(t);
    // One put first: the SDK's modules and connections are loaded then, not counted as the puts' memory.
    await publishTimes(store, join(scratch, 'warm'), 1, tar);
    const rss0 = process.memoryUsage().rss;
    let rssPeak = rss0;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage().rss)), 20);
    const put = await publishTimes(store, join(scratch, 'c'), runs, tar);
    clearInterval(sampler);
    const reads: number[] = [];
    for (let i = 0; i < runs; i++) {
      const t0 = process.hrtime.bigint();
      const o = await store.get(store.runFileKey('bench', `run_bench${String(i).padStart(7, '0')}`, 'workspace.tar'));
      let n = 0;
      for await (const c of o!.body as AsyncIterable<Buffer>) n += c.length;
      if (n !== tar.length) throw new Error(`read ${n} bytes of ${tar.length}`);
      reads.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    // A 100 MB file: streamed from disk part by part.
    const bigPath = join(scratch, 'big.tar');
    writeFileSync(bigPath, Buffer.alloc(0));
    for (let i = 0; i < 10; i++) writeFileSync(bigPath, tar, { flag: 'a' });
    global.gc?.();
    const rssBig0 = process.memoryUsage().rss;
    let rssBigPeak = rssBig0;
    const sampler2 = setInterval(() => (rssBigPeak = Math.max(rssBigPeak, process.memoryUsage().rss)), 20);
    const tb = process.hrtime.bigint();
    await store.putFile('bench/big.tar', bigPath, 'application/x-tar');
    const bigMs = Number(process.hrtime.bigint() - tb) / 1e6;
    clearInterval(sampler2);
    await store.close();
    const s3Stats = stats(put);
    return {
      runs, tar_mb: 10,
      publish_ms: { local_in_place: stats(inPlace), local_copy: stats(copy), s3: s3Stats },
      s3_read_tar_ms: stats(reads),
      s3_mb_per_s_p50: round(10 / (s3Stats.p50 / 1000), 1),
      rss_growth_mb_over_s3_puts: round((rssPeak - rss0) / 1024 / 1024, 1),
      rss_growth_mb_put_100mb: round((rssBigPeak - rssBig0) / 1024 / 1024, 1),
      put_100mb_ms: round(bigMs),
    };
  } finally {
    await s3.close();
    rmSync(scratch, { recursive: true, force: true });
  }
}
