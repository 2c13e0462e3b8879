/**
 * uid slots on the real engine: the container's name is the lease, so a slot some other container
 * already holds by name (even one corral did not label) is skipped, and a full range is refused with
 * a message naming the setting. A range of its own (base 2_100_000) keeps this test apart from others.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { LeasedSandbox, SandboxRequest } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { instanceLabels, sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(60_000);

const docker = new Docker();
const WORKER = `test-slots-${randomBytes(3).toString('hex')}`;
const base = 2_100_000 + 2 * Math.floor(Math.random() * 1000) * 4;
const config = loadConfig({ ...sandboxTestEnv(), CORRAL_SANDBOX_UID_BASE: String(base), CORRAL_SANDBOX_SLOTS: '3' });
const provider = new DockerSandboxProvider({ docker, config });
const request = (): SandboxRequest => ({
  runId: `run_slots_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 60_000), files: {},
  limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: [],
});
let squatter: Docker.Container;

afterAll(async () => {
  await squatter?.remove({ force: true }).catch(() => undefined);
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
});

test('a slot held by name is skipped; every sandbox gets a slot of its own; a full range is refused, naming CORRAL_SANDBOX_SLOTS', async () => {
  // an unlabelled container squatting slot 1's name: the engine's 409 moves corral to another slot
  squatter = await docker.createContainer({ name: `corral-u${base + 3}`, Image: config.CORRAL_SANDBOX_IMAGE, Cmd: ['true'], Labels: { 'corral.worker-id': WORKER, ...instanceLabels() } });
  const got: LeasedSandbox[] = [];
  try {
    got.push(await provider.acquire(request()), await provider.acquire(request()));
    const uids = await Promise.all(got.map(async (sb) => (await sb.exec({ argv: ['id', '-u'], timeoutMs: 5000 })).stdout.trim()));
    expect(uids.sort()).toEqual([String(base + 1), String(base + 5)]);
    const names = await Promise.all(got.map(async (sb) => (await docker.getContainer(sb.id).inspect()).Name));
    expect(names.sort()).toEqual([`/corral-u${base + 1}`, `/corral-u${base + 5}`]);
    await expect(provider.acquire(request())).rejects.toMatchObject({
      code: 'sandbox_unavailable', message: expect.stringMatching(/every sandbox uid slot on this engine is in use \(3 slots, .*raise CORRAL_SANDBOX_SLOTS/),
    });
    // disposing frees the slot
    await got.shift()!.dispose();
    got.push(await provider.acquire(request()));
  } finally {
    await Promise.all(got.map((sb) => sb.dispose()));
  }
});
