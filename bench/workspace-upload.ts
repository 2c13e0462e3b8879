/**
 * PUT /v1/workspaces with a large tar (BENCH_UPLOAD_MB, default 200: 10 MB files of random bytes),
 * plain and gzip, to the API in its own process: wall time, MB/s and the API's peak RSS (VmHWM)
 * beside its RSS before the uploads — the baseline: a streamed upload must not grow with the tar.
 *   npx tsx bench/workspace-upload.ts   (or BENCH_STAGES=workspace-upload npm run bench)
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import * as tar from 'tar-stream';
import { announcedNumber } from '../test/support/child-output';

export interface UploadBench {
  tar_mb: number;
  api_rss_mb_before: number;
  plain: { seconds: number; mb_per_s: number; api_peak_rss_mb: number; status: number };
  gzip: { seconds: number; mb_per_s: number; api_peak_rss_mb: number; status: number };
}

const kb = (pid: number, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);

/** A tar of `mb` MB in 10 MB files, generated while it is sent (never whole in memory). */
function tarStream(mb: number, seed: Buffer): tar.Pack {
  const pack = tar.pack();
  void (async () => {
    for (let i = 0; i < mb / 10; i++) {
      const body = Buffer.concat([seed, Buffer.from(String(i))]).subarray(0, 10 * 1024 * 1024);
      await new Promise<void>((res, rej) => pack.entry({ name: `data/part-${i}.bin`, size: body.length }, body, (err) => (err ? rej(err) : res())));
    }
    pack.finalize();
  })().catch((err: Error) => pack.destroy(err));
  return pack;
}

function put(port: number, gzip: boolean, mb: number, seed: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'PUT', path: '/v1/workspaces', headers: { 'content-type': gzip ? 'application/gzip' : 'application/x-tar' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    const src = tarStream(mb, seed);
    (gzip ? pipeline(src, createGzip({ level: 1 }), req) : pipeline(src, req)).catch(reject);
  });
}

export async function benchWorkspaceUpload(mb = Number(process.env.BENCH_UPLOAD_MB ?? 200)): Promise<UploadBench> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-upload-bench-'));
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'workspace-upload-server.ts'), dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const port = await announcedNumber(child, 'port', 'the API');
    const pid = child.pid!;
    const before = kb(pid, 'VmRSS') / 1024;
    const seed = randomBytes(10 * 1024 * 1024);
    const one = async (gzip: boolean) => {
      const t0 = performance.now();
      const status = await put(port, gzip, mb, gzip ? randomBytes(10 * 1024 * 1024) : seed);
      const seconds = (performance.now() - t0) / 1000;
      return { seconds: Math.round(seconds * 100) / 100, mb_per_s: Math.round(mb / seconds), api_peak_rss_mb: Math.round(kb(pid, 'VmHWM') / 1024), status };
    };
    const plain = await one(false);
    const gzip = await one(true);
    return { tar_mb: mb, api_rss_mb_before: Math.round(before), plain, gzip };
  } finally {
    child.kill();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module) {
  benchWorkspaceUpload().then((r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`), (err: unknown) => { console.error(err); process.exitCode = 1; });
}
