/**
 * Environments' setup phase: the start of a run (submission → its first model request, and the
 * setup phase alone) in three cases, side by side in one run on one corral (API + worker, real
 * engine, real Redis):
 *   baseline  the `default` environment: no setup phase;
 *   first     an environment whose setup runs `npm install` of a package of BENCH_SETUP_FILES files
 *             (default 3000, about BENCH_SETUP_MB MB in all, default 30) from a registry on loopback
 *             (an injected name through the run's proxy) — a cache miss;
 *   cached    the same lockfiles again — a cache hit (the capture restored; npm does not run).
 * Each case BENCH_SETUP_RUNS times (default 3; `first` changes package.json's version to miss).
 * With BENCH_SETUP_UPLOAD_MB (a multiple of 10, e.g. 200) every run's workspace is instead an upload
 * (PUT /v1/workspaces, before the clock starts) of package.json and that many MB of files: the start
 * of a run from a large upload, first and cached, beside the default environment with the same upload.
 *   npx tsx bench/setup-cache.ts   (or BENCH_STAGES=setup-cache npm run bench)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { egressTestHooks } from '../src/sandbox/egress-test-hooks';
import { startHarness } from '../test/support/corral-harness';
import { finalTurn } from '../test/support/fake-openai-chat';
import { makeTar } from '../test/support/make-tar';
import { startTestDns } from '../test/support/test-dns';
import { putStreamedWorkspace } from '../test/support/upload-stream';
import { benchRedis } from './redis';
import { envInt, note, round, stats, type P50P95 } from './stats';

export interface SetupBench {
  package: { files: number; mb: number };
  /** MB of the uploaded workspace each run starts from (0: an inline package.json only). */
  workspace_upload_mb: number;
  runs: number;
  /** submission → first model request (ms). */
  start_ms: { baseline: P50P95; first: P50P95; cached: P50P95 };
  /** The setup phase alone (setup.finished.ms). */
  setup_ms: { first: P50P95; cached: P50P95 };
  capture_mb: number;
}

export async function benchSetupCache(): Promise<SetupBench> {
  const files = envInt('BENCH_SETUP_FILES', 3000);
  const mb = envInt('BENCH_SETUP_MB', 30);
  const runs = envInt('BENCH_SETUP_RUNS', 3);
  const uploadMb = envInt('BENCH_SETUP_UPLOAD_MB', 0);
  const per = Math.floor((mb * 1024 * 1024) / files);
  const entries = [{ name: 'package/package.json', body: JSON.stringify({ name: 'bigdep', version: '1.0.0', main: 'index.js' }) }, { name: 'package/index.js', body: 'module.exports = 1;\n' }];
  for (let i = 0; i < files; i++) entries.push({ name: `package/lib/d${i % 50}/f${i}.js`, body: randomBytes(per / 2).toString('hex') });
  const tgz = gzipSync(await makeTar(entries), { level: 1 });
  const server = createServer((req, res) => {
    if (req.url === '/bigdep-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const dns = await startTestDns((n) => (n === 'pkgs.test' ? ['127.0.0.1'] : undefined));
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-envs-'));
  writeFileSync(join(dir, 'benchnode.yaml'), `version: 1
description: npm install from a loopback registry
image: corral/sandbox-node:latest
env: { npm_config_cache: /tmp/.npm }
setup:
  commands: ["npm install --no-audit --no-fund"]
  egress: ["pkgs.test:${port}"]
cache: { files: [package.json, package-lock.json] }
`);
  const redis = await benchRedis();
  const prevRedis = process.env.REDIS_URL;
  process.env.REDIS_URL = redis.url;
  const firstRequest = new Map<string, number>();
  const h = await startHarness('bench-setup', {
    chat: (body) => {
      const text = JSON.stringify(body);
      const m = /BENCH-(\w+)/.exec(text);
      if (m && !firstRequest.has(m[1]!)) firstRequest.set(m[1]!, Date.now());
      return finalTurn('done');
    },
  }, { CORRAL_ENVIRONMENT_DIR: dir, CORRAL_SANDBOX_IMAGES: 'corral/sandbox-node:latest', CORRAL_SETUP_CACHE_MB: '1024' },
  { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
  const startMs: Record<'baseline' | 'first' | 'cached', number[]> = { baseline: [], first: [], cached: [] };
  const setupMs: Record<'first' | 'cached', number[]> = { first: [], cached: [] };
  let captureBytes = 0;
  try {
    const pkg = (v: string) => `${JSON.stringify({ name: 'app', version: v, private: true, dependencies: { bigdep: `http://pkgs.test:${port}/bigdep-1.0.0.tgz` } })}\n`;
    const one = async (kind: 'baseline' | 'first' | 'cached', i: number) => {
      const tag = `${kind}${i}${randomBytes(3).toString('hex')}`;
      const environment = kind === 'baseline' ? 'default' : 'benchnode';
      const version = kind === 'first' ? `1.0.${i}` : '1.0.0';
      let workspace: Record<string, unknown> = { files: { 'package.json': pkg(version) } };
      if (uploadMb > 0) {
        const up = await putStreamedWorkspace(h.url, { 'package.json': pkg(version) }, Math.ceil(uploadMb / 10));
        if (up.status !== 201 && up.status !== 200) throw new Error(`upload: ${up.status} ${JSON.stringify(up.body)}`);
        workspace = { id: up.body.id };
      }
      const t0 = Date.now();
      const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: `BENCH-${tag}`, environment, workspace, limits: { workspaceMb: Math.max(256, uploadMb + 64), memoryMb: 1024 } });
      if (created.status !== 201) throw new Error(`submit: ${created.status} ${JSON.stringify(created.body)}`);
      const run = await h.waitFor(created.body.id, undefined, 600_000);
      if (run.status !== 'succeeded') throw new Error(`run ${created.body.id} ${String(run.status)}: ${String(run.reason)}`);
      startMs[kind].push(firstRequest.get(tag)! - t0);
      if (kind !== 'baseline') {
        const events = readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
        const fin = events.find((e) => e.type === 'setup.finished')!;
        const started = events.find((e) => e.type === 'setup.started')!;
        const expected = kind === 'cached' ? 'hit' : 'miss';
        if (started.cache !== expected) throw new Error(`${kind} run ${i}: cache ${String(started.cache)}, expected ${expected}`);
        setupMs[kind].push(fin.ms as number);
        if (typeof fin.bytes === 'number') captureBytes = Math.max(captureBytes, fin.bytes);
      }
      note(`  ${kind} ${startMs[kind].length}: first model request after ${startMs[kind].at(-1)} ms`);
    };
    // One miss with version 1.0.0 fills the cache for the `cached` runs (not counted).
    await one('first', 0);
    startMs.first.length = 0;
    setupMs.first.length = 0;
    for (let i = 0; i < runs; i++) {
      await one('baseline', i);
      await one('first', i + 1);
      await one('cached', i);
    }
  } finally {
    await h.close();
    await new Promise((r) => server.close(r));
    await dns.close();
    await redis.close();
    if (prevRedis === undefined) delete process.env.REDIS_URL;
    else process.env.REDIS_URL = prevRedis;
  }
  return {
    package: { files, mb: round(tgz.length / 1024 / 1024, 1) },
    workspace_upload_mb: uploadMb,
    runs,
    start_ms: { baseline: stats(startMs.baseline), first: stats(startMs.first), cached: stats(startMs.cached) },
    setup_ms: { first: stats(setupMs.first), cached: stats(setupMs.cached) },
    capture_mb: round(captureBytes / 1024 / 1024, 1),
  };
}

if (require.main === module) {
  benchSetupCache().then((r) => process.stdout.write(`${JSON.stringify({ setup_cache: r }, null, 2)}\n`), (err: Error) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    process.exit(1);
  });
}
