/**
 * `corral docker-gate`: the policy from the operator's config (the same CORRAL_* variables the worker
 * reads, so the gate accepts exactly the sandboxes the worker is configured to make), and a started gate.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { Config } from '../config';
import { defaultEgressRoot } from '../sandbox/docker-sandbox';
import { defaultLeaseDir } from '../sandbox/host-leases';
import { DockerGate, type GateLog } from './gate-server';
import type { GatePolicy } from './rules';

export { DockerGate } from './gate-server';
export { Refusal, checkCreate, checkExec, type GatePolicy } from './rules';

/** The host's lease directory from the config (the gate and direct-engine workers share it). */
export function leaseDirFromConfig(config: Config): string {
  return config.CORRAL_HOST_LEASE_DIR ?? defaultLeaseDir();
}

export function policyFromConfig(config: Config, o: { images?: string[]; key?: Buffer; egressRoot?: string } = {}): GatePolicy {
  return {
    images: o.images ?? [...new Set([config.CORRAL_SANDBOX_IMAGE, ...config.CORRAL_SANDBOX_IMAGES])],
    gvisorRuntime: config.CORRAL_GVISOR_RUNTIME,
    queue: config.CORRAL_QUEUE,
    egressRoot: o.egressRoot ?? config.CORRAL_EGRESS_DIR ?? defaultEgressRoot(),
    maxMemoryMb: config.CORRAL_MAX_MEMORY_MB,
    maxCpus: config.CORRAL_MAX_CPUS,
    maxPids: config.CORRAL_MAX_PIDS,
    maxWorkspaceMb: config.CORRAL_MAX_WORKSPACE_MB,
    uidBase: config.CORRAL_SANDBOX_UID_BASE,
    slots: config.CORRAL_SANDBOX_SLOTS,
    key: o.key ?? randomBytes(32),
  };
}

/** The engine's unix socket from DOCKER_HOST (unix:// only), or the default socket. */
export function engineSocketPath(dockerHost: string | undefined): string {
  if (!dockerHost) return '/var/run/docker.sock';
  const u = new URL(dockerHost);
  if (u.protocol !== 'unix:') throw new Error(`docker-gate: the engine must be a unix socket (DOCKER_HOST=${dockerHost})`);
  return u.pathname;
}

/** The ownership key from `path`; a missing file is created with 32 random bytes (mode 0600). */
export function readKey(path: string): Buffer {
  try {
    writeFileSync(path, randomBytes(32), { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const key = readFileSync(path);
  if (key.length < 16) throw new Error(`docker-gate: the key file ${path} must hold at least 16 bytes`);
  return key;
}

export async function startGate(o: { policy: GatePolicy; listen: string; engineSocket: string; leaseDir?: string; log?: GateLog; sweepMs?: number }): Promise<DockerGate> {
  await rm(o.listen, { force: true });
  const gate = new DockerGate({
    policy: o.policy, engineSocket: o.engineSocket, leaseDir: o.leaseDir ?? defaultLeaseDir(),
    ...(o.log ? { log: o.log } : {}), ...(o.sweepMs !== undefined ? { sweepMs: o.sweepMs } : {}),
  });
  await gate.listen(o.listen);
  return gate;
}
