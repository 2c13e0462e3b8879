/**
 * Uid slots are unique per host, not per engine (issue 35): two engines on this machine (the main one
 * and a second dockerd, test/support/second-engine.ts) share one host lease directory. A slot a
 * sandbox holds on one engine is not given to a sandbox on the other, whoever allocates it — a docker
 * gate of each engine, or a worker that holds the engine itself — and is free again once that sandbox
 * is gone. Positive control: the engines alone (no lease) happily create the same slot's container twice.
 */
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { policyFromConfig, startGate, type DockerGate } from '../../src/docker-gate';
import type { SandboxRequest } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { containerSpec } from '../../src/sandbox/container-spec';
import { createRequest } from '../../src/sandbox/sandbox-engine';
import { uidSlot } from '../../src/sandbox/uid-slots';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';

jest.setTimeout(240_000);

const IMAGE = 'corral/sandbox:latest';
const QUEUE = `lease${randomBytes(3).toString('hex')}`;
const base = 2_500_000 + 2 * Math.floor(Math.random() * 1000) * 4;
const main = new Docker();
let second: SecondEngine;
let b: Docker;
let dir: string;
let leaseDir: string;
const gates: DockerGate[] = [];

const configFor = (slots: number) => loadConfig({
  CORRAL_SANDBOX_IMAGE: IMAGE, CORRAL_QUEUE: QUEUE, CORRAL_SANDBOX_UID_BASE: String(base), CORRAL_SANDBOX_SLOTS: String(slots), CORRAL_SANDBOX_RUNTIME: 'runc',
});
const request = (): SandboxRequest => ({
  runId: `run_lease_${randomBytes(4).toString('hex')}`, workerId: 'lease-test', deadline: new Date(Date.now() + 120_000), files: {},
  limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8, isolation: 'runc' }, egressAllow: [],
});

async function gateFor(engineSocket: string, name: string, slots: number): Promise<Docker> {
  const sock = join(dir, `${name}.sock`);
  const g = await startGate({ policy: policyFromConfig(configFor(slots), { egressRoot: join(dir, `egress-${name}`) }), listen: sock, engineSocket, leaseDir, sweepMs: 0, log: () => undefined });
  gates.push(g);
  return new Docker({ socketPath: sock });
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cgl-'));
  await chmod(dir, 0o755);
  leaseDir = join(dir, 'leases');
  second = await startSecondEngine({ images: [IMAGE] });
  b = new Docker({ socketPath: second.socketPath });
});

afterAll(async () => {
  await Promise.all(gates.map((g) => g.close()));
  for (const d of [main, b]) {
    const left = await d.listContainers({ all: true, filters: { label: [`corral.queue=${QUEUE}`] } }).catch(() => []);
    await Promise.all(left.map((c) => d.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  }
  await second?.dispose();
  await rm(dir, { recursive: true, force: true });
});

test('positive control: without the host lease, both engines create the same slot\'s container', async () => {
  const s = containerSpec({
    runId: 'run_lease_ctl', workerId: 'lease-test', queue: QUEUE, deadline: new Date(Date.now() + 60_000), now: new Date(),
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, image: IMAGE, isolation: 'runc', gvisorRuntime: 'runsc', slot: uidSlot({ base, slots: 1 }, 0),
  });
  delete s.HostConfig!.Mounts; // the pty volume is not made here
  const x = await main.createContainer(createRequest(s));
  const y = await b.createContainer(createRequest(s));
  expect((await x.inspect()).Config.Labels['corral.uid']).toBe((await y.inspect()).Config.Labels['corral.uid']);
  await Promise.all([x.remove({ force: true }), y.remove({ force: true })]);
});

test('through each engine\'s docker gate: a slot held on one engine is not given out on the other; freed, it is', async () => {
  const pa = new DockerSandboxProvider({ docker: await gateFor('/var/run/docker.sock', 'a', 1), config: configFor(1) });
  const pb = new DockerSandboxProvider({ docker: await gateFor(second.socketPath, 'b', 1), config: configFor(1) });
  const sa = await pa.acquire(request());
  await expect(pb.acquire(request())).rejects.toMatchObject({ code: 'sandbox_unavailable' });
  expect(await b.listContainers({ all: true, filters: { label: [`corral.queue=${QUEUE}`] } })).toEqual([]);
  const lease = JSON.parse(await readFile(join(leaseDir, `u${base + 1}`), 'utf8')) as { engine: string; name: string };
  expect(lease.name).toBe(`corral-u${base + 1}`);
  await sa.dispose();
  expect(await readdir(leaseDir)).not.toContain(`u${base + 1}`);
  const sb = await pb.acquire(request());
  const id = (await sb.exec({ argv: ['id', '-u'], timeoutMs: 10_000 })).stdout.trim();
  expect(id).toBe(String(base + 1));
  await sb.dispose();
});

test('with two slots, the two engines\' sandboxes run as different uids, through gates and with the engines themselves', async () => {
  const pa = new DockerSandboxProvider({ docker: main, config: configFor(2), leaseDir });
  const pb = new DockerSandboxProvider({ docker: await gateFor(second.socketPath, 'b2', 2), config: configFor(2) });
  const pc = new DockerSandboxProvider({ docker: b, config: configFor(2), leaseDir });
  const sa = await pa.acquire(request());
  const sb = await pb.acquire(request());
  const uids = await Promise.all([sa, sb].map(async (s) => (await s.exec({ argv: ['id', '-u'], timeoutMs: 10_000 })).stdout.trim()));
  expect(new Set(uids).size).toBe(2);
  // both slots taken on this host: a third sandbox, on either engine, waits for one
  await expect(pc.acquire(request())).rejects.toMatchObject({ code: 'sandbox_unavailable' });
  await Promise.all([sa.dispose(), sb.dispose()]);
  expect((await readdir(leaseDir)).filter((f) => /^u\d+$/.test(f))).toEqual([]);
});
