/**
 * The workspace export's diffs off the worker's event loop (issue 35): one run's sandbox rewrites 20
 * text files of 1 MiB each (every line new, the worst case for a line diff: each takes its whole one-
 * second budget on the main thread) and exports, while another run on the same process keeps
 * executing commands and the process measures its event-loop delay. The baseline is one such diff
 * on the main thread, measured in the same run: the loop never stalls for a fraction of it, the diffs
 * ran in the diff thread, and the other run kept going during the export.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { LeasedSandbox } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { diffThread } from '../../src/sandbox/diff-thread';
import { diffFile, sideOf } from '../../src/sandbox/workspace-diff';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(300_000);

const WORKER = `test-export-lag-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const config = loadConfig(sandboxTestEnv());
const provider = new DockerSandboxProvider({ docker, config });
const FILES = 20;
const lines = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag} ${i} ${randomBytes(12).toString('hex')}`).join('\n') + '\n';
const MIB_LINES = Math.floor((1024 * 1024 - 64) / 40);
let heavy: LeasedSandbox;
let other: LeasedSandbox;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'corral-export-lag-'));
  const files = Object.fromEntries(Array.from({ length: FILES }, (_, i) => [`data/f${i}.txt`, lines(MIB_LINES, 'seed').slice(0, 1024 * 1024 - 1) + '\n']));
  const req = (files: Record<string, string>) => ({
    runId: `run_lag_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000), files,
    limits: { memoryMb: 512, cpus: 1, pids: 64, workspaceMb: 128 }, egressAllow: [],
  });
  [heavy, other] = await Promise.all([provider.acquire(req(files)), provider.acquire(req({ 'a.txt': 'a\n' }))]);
});

afterAll(async () => {
  await Promise.allSettled([heavy?.dispose(), other?.dispose()]);
  await diffThread().close();
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await rm(dir, { recursive: true, force: true });
});

test('20 rewritten 1 MiB files: the export\'s diffs run in the diff thread; the worker\'s loop never stalls for a fraction of one main-thread diff; another run keeps executing', async () => {
  // Baseline, same run: one such diff on the main thread.
  const a = sideOf(Buffer.from(lines(MIB_LINES, 'seed').slice(0, 1024 * 1024)), 0o644);
  const b = sideOf(Buffer.from(lines(MIB_LINES, 'new').slice(0, 1024 * 1024)), 0o644);
  const t0 = performance.now();
  diffFile('x.txt', a, b);
  const baselineMs = performance.now() - t0;

  const rewrite = await heavy.exec({
    argv: ['python3', '-c', 'import os, secrets\nfor i in range(20):\n    p = f"data/f{i}.txt"\n    n = os.path.getsize(p)\n    s = "".join(f"new {j} {secrets.token_hex(12)}\\n" for j in range(n // 40 + 2))[: n - 1] + "\\n"\n    open(p, "w").write(s)\nprint("ok")'],
    timeoutMs: 120_000,
  });
  expect(rewrite).toMatchObject({ exitCode: 0, stdout: 'ok\n' });

  const before = { ...diffThread().stats };
  const h = monitorEventLoopDelay({ resolution: 10 });
  let execs = 0;
  let exporting = true;
  const otherRun = (async () => {
    while (exporting) {
      const r = await other.exec({ argv: ['true'], timeoutMs: 10_000 });
      if (r.exitCode === 0) execs++;
    }
  })();
  h.enable();
  const t1 = performance.now();
  const ex = await heavy.exportWorkspace({ tarPath: join(dir, 'w.tar'), patchPath: join(dir, 'w.patch') });
  const exportMs = performance.now() - t1;
  h.disable();
  exporting = false;
  await otherRun;
  const maxLagMs = h.max / 1e6;
  const after = diffThread().stats;
  console.log(`[export lag] baseline: one 1 MiB diff on the main thread ${baselineMs.toFixed(0)} ms; export of ${FILES} rewritten files ${exportMs.toFixed(0)} ms; the loop's delay during it: max ${maxLagMs.toFixed(1)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(1)} ms, mean ${(h.mean / 1e6).toFixed(1)} ms; the other run executed ${execs} commands meanwhile; diffs in the thread ${after.inThread - before.inThread}, given up ${after.givenUp - before.givenUp}`);

  expect(ex.files.filter((f) => f.path.startsWith('data/'))).toHaveLength(FILES);
  expect(after.inThread - before.inThread).toBe(FILES);
  expect(after.threadId).not.toBe(0);
  expect(execs).toBeGreaterThan(0);
  expect(maxLagMs).toBeLessThan(baselineMs / 4);
  const patch = await readFile(join(dir, 'w.patch'), 'utf8');
  expect(patch.match(/^diff --git a\/data\/f\d+\.txt/gm)).toHaveLength(FILES);
});
