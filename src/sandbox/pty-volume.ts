/**
 * A sandbox's own devpts instance (runc). Docker mounts a fresh devpts at /dev/pts in every container,
 * but all of them draw on one host-wide pool (kernel.pty.max minus the host's reserve), so one sandbox
 * opening ptys in a loop made `docker run -t` fail engine-wide. The engine's `local` volume driver can
 * mount a devpts itself, with a `max=` of its own: each uid slot has such a volume, mounted at /dev/pts
 * (it replaces Docker's default devpts there), so a sandbox holds at most PTYS ptys and `docker exec -t`,
 * `script`, python's `pty` and node-pty still work. A volume is mounted when its container starts and
 * unmounted when it is removed, so every sandbox starts with an empty instance; slots are unique per
 * host (host-leases.ts), so no two live sandboxes share one. Whoever removes the container (the gate, or
 * a worker holding the engine) removes the volume before it frees the slot. gVisor serves ptys from its
 * Sentry: no volume.
 */
import { PTYS } from './sandbox-budgets';

export const PTY_MOUNT = '/dev/pts';
export const PTY_VOLUME_PREFIX = 'corral-pts-u';
/** The label every pty volume carries. */
export const PTY_VOLUME_LABEL = 'corral.pty-volume';

export function ptyVolumeName(agentUid: number): string {
  return `${PTY_VOLUME_PREFIX}${agentUid}`;
}

/** The volume's driver options, exactly (the gate compares an existing volume's with these). */
export function ptyVolumeOptions(ptys = PTYS): Record<string, string> {
  return { type: 'devpts', device: 'devpts', o: `nosuid,noexec,newinstance,ptmxmode=0666,mode=0620,gid=5,max=${ptys}` };
}

/** The body of POST /volumes/create for a slot's pty volume. */
export function ptyVolumeCreateBody(agentUid: number): { Name: string; Driver: string; DriverOpts: Record<string, string>; Labels: Record<string, string> } {
  return { Name: ptyVolumeName(agentUid), Driver: 'local', DriverOpts: ptyVolumeOptions(), Labels: { corral: '1', [PTY_VOLUME_LABEL]: String(agentUid) } };
}

/** The HostConfig.Mounts entry that puts it at /dev/pts. */
export function ptyMount(agentUid: number): { Type: 'volume'; Source: string; Target: string; VolumeOptions: { NoCopy: boolean } } {
  return { Type: 'volume', Source: ptyVolumeName(agentUid), Target: PTY_MOUNT, VolumeOptions: { NoCopy: true } };
}

/** Whether an inspected volume (GET /volumes/{name}) is exactly a pty volume as ptyVolumeCreateBody makes it. */
export function isPtyVolume(v: { Name?: unknown; Driver?: unknown; Options?: unknown } | null | undefined, agentUid: number): boolean {
  if (!v || v.Name !== ptyVolumeName(agentUid) || v.Driver !== 'local') return false;
  const want = ptyVolumeOptions();
  const got = (typeof v.Options === 'object' && v.Options !== null ? v.Options : {}) as Record<string, unknown>;
  return Object.keys(got).length === Object.keys(want).length && Object.entries(want).every(([k, x]) => got[k] === x);
}
