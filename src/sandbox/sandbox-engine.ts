/**
 * How corral creates and removes sandbox containers on its engine, whether that engine is a docker
 * gate or the engine itself (the socket answers /corral-gate/health or it does not):
 * - requests carry exactly the fields the engine reads: the container's name in the query only, the
 *   spec in the body only, an exec start's {Detach, Tty} only (dockerode would otherwise send every
 *   option in both, and a gate refuses keys it does not know);
 * - with the engine itself, the worker is the slot allocator: it takes the host's uid lease
 *   (host-leases.ts) before create and releases it after remove, and makes the slot's pty volume
 *   (pty-volume.ts). Behind a gate, the gate does both and the worker could not.
 */
import type Docker from 'dockerode';
import { SandboxError } from '../domain/errors';
import { isDockerGate } from './egress-dirs';
import { HostLeases } from './host-leases';
import { ptyVolumeCreateBody, ptyVolumeName, isPtyVolume } from './pty-volume';
import { ensureSecureDir } from './secure-dir';
import { UID_LABEL } from './uid-slots';

/** The body of every exec start corral sends (with `hijack`, which is dockerode's and not sent). */
export const EXEC_START = { _body: { Detach: false, Tty: false } } as const;

type Spec = Docker.ContainerCreateOptions & { name?: string };

/** dockerode options that send `name` as the query and the rest of `spec` as the body, nothing else. */
export function createRequest(spec: Spec): Docker.ContainerCreateOptions {
  const { name, ...body } = spec;
  return { _query: name ? { name } : {}, _body: body } as unknown as Docker.ContainerCreateOptions;
}

function socketPathOf(docker: Docker): string | undefined {
  const p = (docker as unknown as { modem?: { socketPath?: unknown } }).modem?.socketPath;
  return typeof p === 'string' ? p : undefined;
}
export { socketPathOf };

export class SandboxEngine {
  private gateP: Promise<boolean> | undefined;
  private leasesP: Promise<HostLeases> | undefined;

  constructor(readonly docker: Docker, private readonly o: { leaseDir: string }) {}

  /** Whether the engine's socket is a docker gate (asked once). */
  isGate(): Promise<boolean> {
    const socket = socketPathOf(this.docker);
    if (!socket) return Promise.resolve(false);
    this.gateP ??= isDockerGate(socket).catch(() => false);
    return this.gateP;
  }

  /** The host's leases, keyed by this engine's ID; null behind a gate (the gate leases). */
  private async leases(): Promise<HostLeases | null> {
    if (await this.isGate()) return null;
    this.leasesP ??= (async () => {
      const info = (await this.docker.info()) as { ID?: string };
      if (!info.ID) throw new SandboxError('sandbox_unavailable', 'the Docker engine did not say its ID (GET /info)');
      await ensureSecureDir(this.o.leaseDir, 0o755);
      return new HostLeases(this.o.leaseDir, `engine:${info.ID}`);
    })();
    this.leasesP.catch(() => (this.leasesP = undefined));
    return this.leasesP;
  }

  /** Makes (or checks) the slot's pty volume; the gate does it itself behind a gate. */
  private async ensurePtyVolume(agentUid: number): Promise<void> {
    const want = ptyVolumeCreateBody(agentUid);
    let v = await this.docker.getVolume(want.Name).inspect().catch((err: { statusCode?: number }) => {
      if (err.statusCode === 404) return null;
      throw err;
    });
    if (!v) {
      await this.docker.createVolume(want);
      v = await this.docker.getVolume(want.Name).inspect();
    }
    if (!isPtyVolume(v as unknown as Record<string, unknown>, agentUid)) {
      // Stale (made without options by a create that named it while missing): replaced when no
      // container uses it; the engine refuses to remove one in use.
      const removed = await this.docker.getVolume(want.Name).remove().then(() => true, () => false);
      if (removed) {
        await this.docker.createVolume(want);
        v = await this.docker.getVolume(want.Name).inspect();
      }
    }
    if (!isPtyVolume(v as unknown as Record<string, unknown>, agentUid)) {
      throw new SandboxError('sandbox_failed', `the volume ${want.Name} exists with other options than a sandbox's pty volume; remove it (docker volume rm ${want.Name})`);
    }
  }

  /**
   * Creates a sandbox container from its spec (named after its slot). With the engine itself: the
   * host's lease of its uid first (held by another engine: a 409, so the caller tries another slot).
   */
  async create(spec: Spec): Promise<Docker.Container> {
    const leases = await this.leases();
    const uid = Number(spec.Labels?.[UID_LABEL]);
    const name = spec.name ?? '';
    if (leases) {
      if ((spec.HostConfig as { Mounts?: unknown[] } | undefined)?.Mounts?.length) await this.ensurePtyVolume(uid);
      const lease = await leases.takeSlot(uid, name);
      if (!lease.ok) throw Object.assign(new Error(`uid ${uid} is leased on this host by ${lease.holder?.name ?? '?'} on ${lease.holder?.engine ?? '?'}`), { statusCode: 409 });
      try {
        return await this.docker.createContainer(createRequest(spec));
      } catch (err) {
        if (lease.fresh && (err as { statusCode?: number }).statusCode !== 409) await leases.releaseSlot(uid, name).catch(() => undefined);
        throw err;
      }
    }
    return this.docker.createContainer(createRequest(spec));
  }

  /** Force-removes a sandbox container (and its anonymous volumes), then its uid lease. */
  async remove(container: Docker.Container, slot?: { agentUid: number; name: string }): Promise<void> {
    await container.remove({ force: true, v: true });
    await this.released(slot);
  }

  /** After a sandbox container is gone: its pty volume, then its lease go too (with the engine itself). */
  async released(slot?: { agentUid: number; name: string }): Promise<void> {
    const leases = slot ? await this.leases().catch(() => null) : null;
    if (!leases || !slot) return;
    // Before the lease: once the slot is free another container may mount the volume (then it stays: in use).
    await this.docker.getVolume(ptyVolumeName(slot.agentUid)).remove().catch(() => undefined);
    await leases.releaseSlot(slot.agentUid, slot.name).catch(() => undefined);
  }

  /** Releases this engine's leases whose container is gone (the reaper's sweep calls it). */
  async sweepLeases(): Promise<number[]> {
    const leases = await this.leases();
    if (!leases) return [];
    const all = await this.docker.listContainers({ all: true });
    return leases.sweep(new Set(all.flatMap((c) => c.Names.map((n) => n.replace(/^\//, '')))));
  }
}
