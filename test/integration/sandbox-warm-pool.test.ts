/**
 * The warm pool on the real engine: a worker keeps N started sandboxes of its default class; a run of
 * that class gets one at once (it keeps its name, which is its uid slot's lease), the pool refills, the
 * run's dispose removes it (never reused); other classes (egress, other limits, another isolation class)
 * are created cold; stop() removes idle ones; expired pool containers are reaped.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { resolveLimits } from '../../src/sandbox/limits';
import { DockerSandboxProvider, POOL_PREFIX, sweepSandboxes } from '../../src/sandbox';
import { eventually } from '../support/eventually';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(90_000);

const docker = new Docker();
const WORKER = `test-pool-${randomBytes(3).toString('hex')}`;
const config = loadConfig({ ...sandboxTestEnv(), CORRAL_QUEUE: `pool-${randomBytes(3).toString('hex')}` });
const { execTimeoutS: _t, ...defaults } = resolveLimits(undefined, config);
const mine = () => docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
const poolIds = async () => (await mine()).map((c) => c.Labels['corral.run-id']!).filter((id) => id.startsWith(POOL_PREFIX)).sort();
afterAll(async () => {
  for (const c of await mine()) await docker.getContainer(c.Id).remove({ force: true }).catch(() => {});
});

test('a run of the default class takes a started sandbox; the pool refills; the used one is removed, never reused', async () => {
  const provider = new DockerSandboxProvider({ docker, config });
  await provider.startPool(WORKER, 2, 600_000);
  const before = await poolIds();
  expect(before).toHaveLength(2);
  expect(provider.poolStats()).toEqual({ idle: 2, claimed: 0, filling: 0 });

  const t0 = performance.now();
  const sb = await provider.acquire({
    runId: 'run_pool_warm1', workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: {}, limits: defaults, egressAllow: [],
  });
  const warmMs = performance.now() - t0;
  const info = await docker.getContainer(sb.id).inspect();
  expect(before).toContain(info.Config.Labels['corral.run-id']);
  expect(info.Name).toMatch(/^\/corral-u\d+$/);
  const uid = info.Config.Labels['corral.uid'];
  expect(provider.poolOwns(info.Config.Labels['corral.run-id']!)).toBe(true);
  expect((await sb.exec({ argv: ['bash', '-c', 'echo hi > a.txt && cat a.txt && id -u'], timeoutMs: 5000 })).stdout).toBe(`hi\n${uid}\n`);
  expect(info.Name).toBe(`/corral-u${uid}`);

  // The pool refills to 2 idle while the run holds its sandbox.
  await eventually(() => provider.poolStats()!, { what: 'the pool to refill to 2 idle', until: (s) => s.idle === 2 });
  expect(provider.poolStats()).toMatchObject({ idle: 2, claimed: 1 });

  await sb.dispose();
  await expect(docker.getContainer(sb.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  expect(provider.poolOwns(info.Config.Labels['corral.run-id']!)).toBe(false);

  // Another class (other limits) is made cold.
  const t1 = performance.now();
  const cold = await provider.acquire({
    runId: 'run_pool_cold1', workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: { 'x.txt': 'x' },
    limits: { ...defaults, memoryMb: defaults.memoryMb + 64 }, egressAllow: [],
  });
  const coldMs = performance.now() - t1;
  expect((await docker.getContainer(cold.id).inspect()).Config.Labels['corral.run-id']).toBe('run_pool_cold1');
  await cold.dispose();
  // So is another isolation class.
  const gv = await provider.acquire({
    runId: 'run_pool_gvisor1', workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: {}, limits: { ...defaults, isolation: 'gvisor' }, egressAllow: [],
  });
  expect((await docker.getContainer(gv.id).inspect()).Config.Labels).toMatchObject({ 'corral.run-id': 'run_pool_gvisor1', 'corral.isolation': 'gvisor' });
  await gv.dispose();
  process.stdout.write(`warm acquire ${warmMs.toFixed(1)} ms, cold acquire ${coldMs.toFixed(1)} ms\n`);

  // A run longer than what is left of a pooled container's life is made cold too.
  const long = await provider.acquire({
    runId: 'run_pool_long1', workerId: WORKER, deadline: new Date(Date.now() + 3_600_000), files: {}, limits: defaults, egressAllow: [],
  });
  expect((await docker.getContainer(long.id).inspect()).Config.Labels['corral.run-id']).toBe('run_pool_long1');
  await long.dispose();

  await provider.stopPool();
  expect(await poolIds()).toEqual([]);
});

test('pool containers past their deadline are reaped, even when their worker is gone', async () => {
  const provider = new DockerSandboxProvider({ docker, config });
  await provider.startPool(WORKER, 1, 1000);
  const ids = await poolIds();
  expect(ids).toHaveLength(1);
  // Swept as soon as its deadline (1 s) has passed; until then each sweep keeps it.
  const swept = await eventually(() => sweepSandboxes({ docker, onlyWorkerId: WORKER, isActive: () => true }), { what: 'a sweep to remove the pool container past its deadline', until: (r) => r.removed.length > 0, timeoutMs: 10_000, intervalMs: 250 });
  expect(swept.removed).toEqual([expect.objectContaining({ runId: ids[0], reason: 'deadline passed' })]);
  await provider.stopPool();
  expect(await poolIds()).toEqual([]);
});
