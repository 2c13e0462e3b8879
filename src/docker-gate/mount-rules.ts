/**
 * HostConfig.Mounts of a sandbox create (create-rules.ts): under runc exactly two volumes, each as
 * src/sandbox/container-spec.ts makes it, and nothing else — no bind, no tmpfs mount, no named or
 * shared volume, no other driver or driver option:
 * - /workspace: the container's anonymous volume of the `local` driver that is a size-capped tmpfs
 *   owned by the slot's agent uid (issue 37: the Engine API's archive endpoints see volumes, not
 *   HostConfig.Tmpfs mounts). Its options must be exactly `type=tmpfs`, `device=tmpfs` and
 *   workspaceTmpfsOptions(size, uid): another `type`, `device` or `o` (`o=bind`, `device=/`,
 *   `type=ext4`, `dev`, `suid`) would mount the host's files or devices. Rule `workspace-volume`.
 * - /dev/pts: the slot's pty volume (pty-volume.ts; rule `pty-budget` for which one, else
 *   `binds-egress-only`).
 * Each mount is read as the engine reads it (every key folded, a repeated or unknown key refused)
 * and dispatched by its Target; which slot's values they must carry is checked with the uid
 * (checkMounts). What the engine gets is rebuilt by container-spec.ts's own functions.
 */
import { WORKSPACE_DIR, workspaceMount, workspaceTmpfsOptions } from '../sandbox/container-spec';
import { PTY_MOUNT, PTY_VOLUME_PREFIX, ptyMount } from '../sandbox/pty-volume';
import { droppedFields, MOUNT_FIELDS, VOLUME_OPTIONS_FIELDS } from './engine-fields';
import type { JValue } from './go-json';
import { bool, empty, exactly, isEmptyJson, readMap, readObject, refuse, str, type ObjectShape, type Spec } from './shape';

/** A mount as checked, before the uid is known. */
export type CheckedMount =
  | { kind: 'workspace'; sizeMb: number; options: string }
  | { kind: 'pty'; source: string };

const LIST = `Mounts may hold only, under runc, the workspace volume at ${WORKSPACE_DIR} and the slot's pty volume at ${PTY_MOUNT}`;
const DRIVER_FIELDS = ['Name', 'Options'] as const;

/** Reads every key of a mount as the engine would (values unchecked), to learn its Target. */
const anyMount: ObjectShape = { fields: Object.fromEntries(MOUNT_FIELDS.map((f) => [f, (x: JValue | undefined) => x])), dropped: {}, rule: 'binds-egress-only' };

const ptyShape: ObjectShape = {
  fields: {
    Type: exactly('binds-egress-only', 'volume'),
    Source: str('binds-egress-only', { required: true, max: 64, re: new RegExp(`^${PTY_VOLUME_PREFIX}\\d{1,10}$`) }),
    Target: exactly('binds-egress-only', PTY_MOUNT),
    ReadOnly: bool('binds-egress-only', { only: false }),
    VolumeOptions: (v, at) => readObject(v, `${at}.`, { fields: { NoCopy: exactly('pty-budget', true) }, dropped: droppedFields(VOLUME_OPTIONS_FIELDS, ['NoCopy'], {}, 'binds-egress-only'), rule: 'binds-egress-only' }),
  },
  dropped: droppedFields(MOUNT_FIELDS, ['Type', 'Source', 'Target', 'ReadOnly', 'VolumeOptions'], {}, 'binds-egress-only'),
  rule: 'binds-egress-only',
};

/** The local driver's options of the workspace volume: exactly type, device and o; returns the size and o. */
function workspaceDriverOptions(maxMb: number): Spec<{ sizeMb: number; options: string }> {
  return (v, at) => {
    const m = readMap(v, at, 'workspace-volume', 8);
    const keys = [...m.keys()].sort().join(',');
    if (keys !== 'device,o,type') refuse('workspace-volume', `${at} must be exactly type, device and o (got ${JSON.stringify(keys).slice(0, 80)})`);
    if (m.get('type') !== 'tmpfs' || m.get('device') !== 'tmpfs') refuse('workspace-volume', `${at}: the workspace volume is a tmpfs (type=tmpfs, device=tmpfs): no bind, no block device`);
    const o = m.get('o');
    if (typeof o !== 'string' || o.length > 256) refuse('workspace-volume', `${at}.o must be a mount option string`);
    const size = /^size=(\d{1,6})m,/.exec(o);
    if (!size || Number(size[1]) < 1 || Number(size[1]) > maxMb) refuse('workspace-volume', `${at}.o needs size=<N>m first, N ≤ ${maxMb} (CORRAL_MAX_WORKSPACE_MB)`);
    return { sizeMb: Number(size[1]), options: o };
  };
}

function workspaceShape(maxMb: number): ObjectShape {
  const driver: ObjectShape = {
    fields: { Name: exactly('workspace-volume', 'local'), Options: workspaceDriverOptions(maxMb) },
    dropped: droppedFields(DRIVER_FIELDS, ['Name', 'Options'], {}, 'workspace-volume'),
    rule: 'workspace-volume',
  };
  const volumeOptions: ObjectShape = {
    fields: {
      NoCopy: exactly('workspace-volume', true),
      Labels: (v, at) => {
        if (readMap(v, at, 'workspace-volume', 8).size > 0) refuse('workspace-volume', `${at} must be empty`);
        return undefined;
      },
      DriverConfig: (v, at) => readObject(v, `${at}.`, driver).Options,
    },
    dropped: {},
    rule: 'workspace-volume',
  };
  return {
    fields: {
      Type: exactly('workspace-volume', 'volume'),
      // no Source: the container's own anonymous volume, never a named one another container could hold
      Source: empty('workspace-volume'),
      Target: exactly('workspace-volume', WORKSPACE_DIR),
      ReadOnly: bool('workspace-volume', { only: false }),
      VolumeOptions: (v, at) => {
        if (v === undefined || v === null) refuse('workspace-volume', `${at} must name the local driver's tmpfs`);
        return readObject(v, `${at}.`, volumeOptions).DriverConfig;
      },
    },
    dropped: droppedFields(MOUNT_FIELDS, ['Type', 'Source', 'Target', 'ReadOnly', 'VolumeOptions'], {}, 'workspace-volume'),
    rule: 'workspace-volume',
  };
}

/** HostConfig.Mounts: nothing, or at most one workspace volume and one pty volume (which ones: checkMounts). */
export function mountsSpec(maxWorkspaceMb: number): Spec<CheckedMount[] | undefined> {
  const ws = workspaceShape(maxWorkspaceMb);
  return (v, at) => {
    if (isEmptyJson(v)) return undefined;
    if (!Array.isArray(v) || v.length > 2) refuse('binds-egress-only', LIST);
    const seen = new Set<string>();
    return v.map((m, i) => {
      const where = `${at}[${i}].`;
      const target = readObject(m, where, anyMount).Target;
      if (target !== WORKSPACE_DIR && target !== PTY_MOUNT) refuse('binds-egress-only', `${LIST} (got a mount at ${JSON.stringify(target ?? null).slice(0, 80)})`);
      if (seen.has(target)) refuse('binds-egress-only', `${LIST} (two at ${target})`);
      seen.add(target);
      if (target === PTY_MOUNT) return { kind: 'pty', source: readObject(m, where, ptyShape).Source as string };
      const o = readObject(m, where, ws).VolumeOptions as { sizeMb: number; options: string };
      return { kind: 'workspace', ...o };
    });
  };
}

/**
 * The mounts for the slot of `agentUid`, rebuilt: under runc the workspace volume (its owner the
 * agent, its options exactly the sandbox's) and the slot's own pty volume, both required; under
 * gVisor none (its workspace is a tmpfs in the Sentry, its ptys the Sentry's).
 */
export function checkMounts(list: CheckedMount[] | undefined, agentUid: number, isolation: 'runc' | 'gvisor'): { mounts?: unknown[]; ptyVolume?: string; workspaceMb?: number } {
  if (isolation === 'gvisor') {
    if (list?.length) refuse('binds-egress-only', 'a gVisor sandbox has no mounts (its workspace is a tmpfs in its own kernel, its ptys are the Sentry\'s)');
    return {};
  }
  const ws = list?.find((m) => m.kind === 'workspace');
  const pty = list?.find((m) => m.kind === 'pty');
  if (!ws) refuse('workspace-volume', `a runc sandbox's ${WORKSPACE_DIR} is its anonymous tmpfs volume (HostConfig.Mounts)`);
  for (const k of ['uid', 'gid']) {
    const m = new RegExp(`(?:^|,)${k}=(\\d+)`).exec(ws.options);
    if (!m || Number(m[1]) !== agentUid) refuse('sandbox-user', `the workspace volume's ${k} must be the slot's agent uid ${agentUid}`);
  }
  const want = workspaceTmpfsOptions(ws.sizeMb, agentUid);
  if (ws.options !== want) refuse('workspace-volume', `the workspace volume's options must be exactly "${want}"`);
  const p = ptyMount(agentUid);
  if (!pty || pty.source !== p.Source) refuse('pty-budget', `a runc sandbox mounts its slot's own pty volume ${p.Source} at ${PTY_MOUNT}`);
  return { mounts: [workspaceMount(ws.sizeMb, agentUid), p], ptyVolume: p.Source, workspaceMb: ws.sizeMb };
}
