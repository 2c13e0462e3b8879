/**
 * The reaper after a crash: a real worker-like process (the `corral sandbox exec` CLI, which acquires
 * a sandbox with an egress socket directory) is killed with SIGKILL mid-run; the next sweep — as a
 * worker start runs it — removes the container it left and its socket directory, while a live run's
 * container is kept until its deadline passes.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { DockerSandboxProvider, startReaper, sweepSandboxes } from '../../src/sandbox';
import { eventually } from '../support/eventually';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(60_000);

const docker = new Docker();
const WORKER = `test-reaper-${randomBytes(3).toString('hex')}`;
const byWorker = (w: string) => docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${w}`] } });

afterAll(async () => {
  for (const c of await byWorker(WORKER)) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
});

test('after a worker is killed with SIGKILL mid-run, the next reaper sweep removes what it left', async () => {
  const root = join(__dirname, '..', '..');
  const child = spawn(join(root, 'bin', 'corral'), ['sandbox', 'exec', '--allow-domain', 'allowed.test', '--', 'sleep', '300'], {
    env: { ...process.env, CORRAL_WORKER_ID: WORKER },
    stdio: 'ignore',
  });
  const left = await eventually(async () => (await byWorker(WORKER)).find((c) => c.State === 'running'), { what: "the CLI's sandbox to be running", timeoutMs: 20_000 });
  // the CLI's exec is running inside (runc's `docker top` lists it)
  await eventually(async () => (await docker.getContainer(left.Id).top()).Processes?.some((p: string[]) => p.join(' ').includes('sleep 300')), { what: 'sleep 300 running in the sandbox', timeoutMs: 20_000 });
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  const dir = left.Labels['corral.egress-dir']!;
  expect(existsSync(dir)).toBe(true);
  expect((await docker.getContainer(left.Id).inspect()).State.Running).toBe(true); // nothing cleaned up by itself

  // A live run of the same worker, acquired by this process.
  const provider = new DockerSandboxProvider({ docker, config: loadConfig(sandboxTestEnv()) });
  const live = await provider.acquire({
    runId: 'run_reaper_live', workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: {},
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: [],
  });
  const leftRun = left.Labels['corral.run-id']!;
  const reaper = startReaper({ CORRAL_REAP_INTERVAL_S: 3600 }, {
    docker,
    onlyWorkerId: WORKER,
    graceMs: 0,
    isActive: (runId) => runId !== leftRun, // the killed worker's run is no longer active in the store
  });
  const swept = await reaper.first;
  reaper.stop();
  expect(swept.removed).toEqual([expect.objectContaining({ id: left.Id, runId: leftRun, reason: 'run not active' })]);
  await expect(docker.getContainer(left.Id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  expect(existsSync(dir)).toBe(false);
  expect((await docker.getContainer(live.id).inspect()).State.Running).toBe(true);

  // Past its deadline, even an "active" run's container goes, with its in-container deadline disarmed
  // (PID 1 stopped through the engine).
  await docker.getContainer(live.id).kill({ signal: 'SIGSTOP' });
  const later = await sweepSandboxes({ docker, onlyWorkerId: WORKER, isActive: () => true, now: () => new Date(Date.now() + 120_000) });
  expect(later.removed.map((r) => [r.id, r.reason])).toEqual([[live.id, 'deadline passed']]);
  await live.dispose(); // idempotent with the reaper's removal
});

test('a reaper scoped to its queue leaves other deployments alone: their containers and their egress socket directories', async () => {
  const other = new DockerSandboxProvider({ docker, config: loadConfig({ ...sandboxTestEnv(), CORRAL_QUEUE: `other-${randomBytes(3).toString('hex')}` }) });
  const sb = await other.acquire({
    runId: 'run_reaper_other', workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: {},
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: ['allowed.test'],
  });
  try {
    const info = await docker.getContainer(sb.id).inspect();
    const dir = info.Config.Labels['corral.egress-dir']!;
    expect(existsSync(join(dir, 'egress.sock'))).toBe(true);
    const swept = await sweepSandboxes({ docker, queue: `mine-${randomBytes(3).toString('hex')}`, graceMs: 0, isActive: () => false });
    expect(swept.removed.map((r) => r.id)).not.toContain(sb.id);
    expect(swept.removedDirs).not.toContain(dir);
    expect(existsSync(join(dir, 'egress.sock'))).toBe(true);
    expect((await docker.getContainer(sb.id).inspect()).State.Running).toBe(true);
  } finally {
    await sb.dispose();
  }
});
