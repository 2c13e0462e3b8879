/**
 * The docker gate's rules: pure checks of what a worker asks the engine for, against what
 * src/sandbox/container-spec.ts creates. A create body passes only when it is a sandbox as that file
 * builds it (within the operator's maxima); an exec only as the sandbox's agent uid. Each refusal
 * names its rule, so a 403 says exactly what was wrong.
 */
import { createHmac } from 'node:crypto';
import { isAbsolute, normalize } from 'node:path';
import { EGRESS_MOUNT, LABELS, MASKED_PATHS, WORKSPACE_DIR, workspaceTmpfsOptions } from '../sandbox/container-spec';
import { seccompJson } from '../sandbox/seccomp-profile';

/** The label the gate stamps on every container it creates: HMAC(key, name, run id). */
export const GATE_LABEL = 'corral.gate';

export interface GatePolicy {
  /** Images a sandbox may be created from (repo:tag as the worker names them). */
  images: string[];
  /** Runtimes a sandbox may use (runc and the gVisor runtime name). */
  runtimes: string[];
  /** This deployment's queue: containers must carry corral.queue=<queue>. */
  queue: string;
  /** Host directory under which every egress socket directory lies. */
  egressRoot: string;
  maxMemoryMb: number;
  maxCpus: number;
  maxPids: number;
  maxWorkspaceMb: number;
  /** Lowest uid a sandbox process may run as (CORRAL_SANDBOX_UID_BASE). */
  minUid: number;
  /** Key of the ownership label. */
  key: Buffer;
}

export class Refusal extends Error {
  constructor(readonly rule: string, detail: string) {
    super(`docker-gate refused (rule ${rule}): ${detail}`);
  }
}

type Json = Record<string, unknown>;

function refuse(rule: string, detail: string): never {
  throw new Refusal(rule, detail);
}

/** Empty in the engine's sense: absent, null, false, 0, '', [], {} or an object of such. */
export function isEmpty(v: unknown): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return true;
  if (Array.isArray(v)) return v.length === 0;
  if (typeof v === 'object') return Object.values(v as Json).every(isEmpty);
  return false;
}

export function ownershipTag(key: Buffer, name: string, runId: string): string {
  return createHmac('sha256', key).update(`${name}\0${runId}`).digest('hex');
}

/** Resource limits a sandbox needs beyond its processes' memory (container-spec.ts: tmpfs + shm). */
const EXTRA_MB = 64 + 16 + 16;
const SECCOMP = new Set([seccompJson({ gvisor: false }), seccompJson({ gvisor: true })]);
const TMPFS_DIRS = new Set(['/workspace', '/tmp', '/home/agent']);
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** HostConfig keys the rules below check; any other key must be empty. */
const CHECKED_HOST_KEYS = new Set([
  'Privileged', 'CapAdd', 'CapDrop', 'Capabilities', 'Devices', 'DeviceRequests', 'DeviceCgroupRules', 'PidMode', 'IpcMode', 'UTSMode',
  'UsernsMode', 'CgroupnsMode', 'Cgroup', 'CgroupParent', 'NetworkMode', 'Binds', 'Mounts', 'VolumesFrom', 'VolumeDriver', 'Tmpfs',
  'ReadonlyRootfs', 'SecurityOpt', 'MaskedPaths', 'ReadonlyPaths', 'Memory', 'MemorySwap', 'NanoCpus', 'PidsLimit', 'ShmSize', 'Runtime',
  'Ulimits', 'Init', 'OomScoreAdj', 'AutoRemove', 'RestartPolicy', 'LogConfig', 'ConsoleSize', 'Sysctls', 'PortBindings', 'PublishAllPorts',
  'OomKillDisable', 'Privileged', 'Links', 'ExtraHosts', 'Dns', 'DnsOptions', 'DnsSearch', 'GroupAdd', 'StorageOpt', 'Isolation',
]);
/** Top-level create keys that may carry values (everything else must be empty). */
const FREE_TOP_KEYS = new Set(['Image', 'Cmd', 'Entrypoint', 'User', 'WorkingDir', 'Env', 'Hostname', 'Labels', 'HostConfig', 'NetworkingConfig',
  'Volumes', 'ExposedPorts', 'Tty', 'OpenStdin', 'StdinOnce', 'AttachStdin', 'AttachStdout', 'AttachStderr', 'NetworkDisabled', 'Domainname',
  'StopSignal', 'StopTimeout', 'OnBuild', 'Shell', 'Healthcheck', 'ArgsEscaped', 'MacAddress', 'Platform']);

function uidOf(user: unknown): number | undefined {
  if (typeof user !== 'string') return undefined;
  const m = /^(\d{1,10}):(\d{1,10})$/.exec(user);
  if (!m || m[1] !== m[2]) return undefined;
  return Number(m[1]);
}

/**
 * Checks a POST /containers/create body (and its ?name=) and returns the labels to stamp. The order
 * puts the sharpest rule first, so an attack is refused by the rule it attacks.
 */
export function checkCreate(body: unknown, name: string | null, p: GatePolicy): { name: string; runId: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) refuse('create-body', 'the body must be a JSON object');
  const b = body as Json;
  const h = (b.HostConfig ?? {}) as Json;
  if (typeof h !== 'object' || Array.isArray(h)) refuse('create-body', 'HostConfig must be an object');

  if (typeof b.Image !== 'string' || !p.images.includes(b.Image)) refuse('image-allowlist', `image ${JSON.stringify(b.Image)} is not a sandbox image (allowed: ${p.images.join(', ')})`);
  if (h.Privileged !== false && h.Privileged !== undefined) refuse('not-privileged', 'Privileged must be false');
  if (!isEmpty(h.CapAdd) || !isEmpty(h.Capabilities)) refuse('no-cap-add', `CapAdd must be empty (got ${JSON.stringify(h.CapAdd ?? h.Capabilities)})`);
  if (!isEmpty(h.Devices) || !isEmpty(h.DeviceRequests) || !isEmpty(h.DeviceCgroupRules)) refuse('no-devices', 'Devices, DeviceRequests and DeviceCgroupRules must be empty');
  for (const k of ['PidMode', 'UTSMode', 'UsernsMode', 'Cgroup'] as const) {
    if (!isEmpty(h[k])) refuse('no-host-namespaces', `${k} must be empty (got ${JSON.stringify(h[k])})`);
  }
  if (!isEmpty(h.IpcMode) && h.IpcMode !== 'private' && h.IpcMode !== 'none') refuse('no-host-namespaces', `IpcMode must be private (got ${JSON.stringify(h.IpcMode)})`);
  if (!isEmpty(h.CgroupnsMode) && h.CgroupnsMode !== 'private') refuse('no-host-namespaces', `CgroupnsMode must be private (got ${JSON.stringify(h.CgroupnsMode)})`);
  if (!isEmpty(h.VolumesFrom) || !isEmpty(h.VolumeDriver) || !isEmpty(b.Volumes)) refuse('binds-egress-only', 'VolumesFrom, VolumeDriver and Volumes must be empty');
  checkWorkspaceMount(h.Mounts, b.Labels, p);
  checkBinds(h.Binds, b.Labels, p);
  if (h.NetworkMode !== 'none') refuse('network-none', `NetworkMode must be "none" (got ${JSON.stringify(h.NetworkMode)})`);
  if (!isEmpty(b.NetworkingConfig)) refuse('network-none', 'NetworkingConfig must be empty');
  if (h.ReadonlyRootfs !== true) refuse('read-only-root', 'ReadonlyRootfs must be true');
  if (!Array.isArray(h.CapDrop) || h.CapDrop.length !== 1 || String(h.CapDrop[0]).toUpperCase() !== 'ALL') refuse('cap-drop-all', 'CapDrop must be ["ALL"]');
  checkSecurityOpt(h.SecurityOpt);
  const masked = new Set(Array.isArray(h.MaskedPaths) ? h.MaskedPaths : []);
  const missing = MASKED_PATHS.filter((m) => !masked.has(m));
  if (missing.length > 0) refuse('masked-paths', `MaskedPaths must include ${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ' …' : ''}`);
  if (h.ReadonlyPaths !== undefined && h.ReadonlyPaths !== null) refuse('masked-paths', 'ReadonlyPaths must not be set (it would replace the engine\'s defaults)');
  checkTmpfs(h.Tmpfs, p);
  checkResources(h, p);
  if (typeof h.Runtime !== 'string' || !p.runtimes.includes(h.Runtime)) refuse('runtime-allowlist', `Runtime ${JSON.stringify(h.Runtime)} is not allowed (allowed: ${p.runtimes.join(', ')})`);
  if (!isEmpty(h.Sysctls) || !isEmpty(h.PortBindings) || h.PublishAllPorts === true || h.OomKillDisable === true || !isEmpty(h.CgroupParent)
    || !isEmpty(h.Links) || !isEmpty(h.GroupAdd) || !isEmpty(h.StorageOpt)) {
    refuse('host-config', 'Sysctls, PortBindings, PublishAllPorts, OomKillDisable, CgroupParent, Links, GroupAdd and StorageOpt must be empty');
  }
  for (const [k, v] of Object.entries(h)) if (!CHECKED_HOST_KEYS.has(k) && !isEmpty(v)) refuse('host-config', `HostConfig.${k} is not part of a sandbox (must be empty)`);
  for (const [k, v] of Object.entries(b)) if (!FREE_TOP_KEYS.has(k) && !isEmpty(v)) refuse('create-body', `${k} is not part of a sandbox (must be empty)`);
  const uid = uidOf(b.User);
  if (uid === undefined || uid < p.minUid) refuse('sandbox-user', `User must be uid:gid of a sandbox slot (≥ ${p.minUid}), got ${JSON.stringify(b.User)}`);
  return checkLabels(b.Labels, name, p);
}

function checkBinds(binds: unknown, labels: unknown, p: GatePolicy): void {
  if (isEmpty(binds)) return;
  if (!Array.isArray(binds) || binds.length !== 1) refuse('binds-egress-only', 'at most one bind, the egress socket directory');
  const parts = String(binds[0]).split(':');
  const [src, dst, mode] = parts;
  const root = normalize(p.egressRoot).replace(/\/+$/, '');
  if (parts.length !== 3 || !src || !isAbsolute(src) || normalize(src) !== src || !src.startsWith(`${root}/`) || src.slice(root.length + 1).includes('/')) {
    refuse('binds-egress-only', `bind ${JSON.stringify(binds[0])} is not a directory directly under the egress root ${root}`);
  }
  if (dst !== EGRESS_MOUNT || mode !== 'ro') refuse('binds-egress-only', `the egress directory must be mounted read-only at ${EGRESS_MOUNT}`);
  const l = (labels ?? {}) as Json;
  if (l[LABELS.egressDir] !== src) refuse('binds-egress-only', `the bind must be the directory in the ${LABELS.egressDir} label`);
}

/**
 * Mounts: nothing, or exactly the workspace as container-spec.ts makes it — an anonymous volume (no
 * Source: never another container's or a host directory) of the local driver whose options are a
 * tmpfs (`type=tmpfs`, `device=tmpfs`: no block device, no bind) with the agent's uid, a size within
 * the maximum, nosuid and nodev. Any other option (`o=bind`, `device=/`, `type=ext4`) could mount the
 * host's files or devices, so the options must be exactly that form.
 */
function checkWorkspaceMount(mounts: unknown, labels: unknown, p: GatePolicy): void {
  if (isEmpty(mounts)) return;
  const m = (Array.isArray(mounts) && mounts.length === 1 ? mounts[0] : null) as Json | null;
  const bad = (why: string): never => refuse('workspace-volume', `Mounts may hold only the workspace volume: ${why}`);
  if (!m || typeof m !== 'object') bad('exactly one mount');
  if (m!.Type !== 'volume' || m!.Target !== WORKSPACE_DIR) bad(`a volume at ${WORKSPACE_DIR}`);
  if (!isEmpty(m!.Source)) bad('an anonymous volume (no Source)');
  if (m!.ReadOnly === true || !isEmpty(m!.BindOptions) || !isEmpty(m!.TmpfsOptions) || !isEmpty(m!.Consistency) || !isEmpty((m as Json).ImageOptions)) bad('no other options');
  for (const k of Object.keys(m!)) if (!['Type', 'Target', 'Source', 'ReadOnly', 'VolumeOptions', 'BindOptions', 'TmpfsOptions', 'Consistency'].includes(k) && !isEmpty(m![k])) bad(`no ${k}`);
  const v = (m!.VolumeOptions ?? {}) as Json;
  for (const k of Object.keys(v)) if (!['NoCopy', 'Labels', 'DriverConfig'].includes(k) && !isEmpty(v[k])) bad(`no VolumeOptions.${k}`);
  if (v.NoCopy !== true) bad('NoCopy true');
  const d = (v.DriverConfig ?? {}) as Json;
  const o = (d.Options ?? {}) as Json;
  if (d.Name !== 'local' || Object.keys(o).sort().join(',') !== 'device,o,type' || o.type !== 'tmpfs' || o.device !== 'tmpfs') bad('the local driver with type=tmpfs, device=tmpfs and o');
  const uid = Number(((labels ?? {}) as Json)[LABELS.uid]);
  const size = /^size=(\d{1,6})m,/.exec(String(o.o));
  if (!size || Number(size[1]) < 1 || Number(size[1]) > p.maxWorkspaceMb) bad(`a size of at most ${p.maxWorkspaceMb} MiB`);
  if (!Number.isInteger(uid) || String(o.o) !== workspaceTmpfsOptions(Number(size![1]), uid)) bad(`tmpfs options exactly "${workspaceTmpfsOptions(Number(size![1]), uid)}"`);
}

function checkSecurityOpt(opts: unknown): void {
  const list = Array.isArray(opts) ? opts.map(String) : [];
  if (!list.some((o) => o === 'no-new-privileges:true' || o === 'no-new-privileges')) refuse('no-new-privileges', 'SecurityOpt must include no-new-privileges:true');
  const sec = list.filter((o) => o.startsWith('seccomp=') || o.startsWith('seccomp:'));
  if (sec.length !== 1 || !SECCOMP.has(sec[0]!.slice('seccomp='.length))) refuse('seccomp-profile', 'SecurityOpt must carry corral\'s seccomp profile (src/sandbox/seccomp-profile.ts), exactly');
  const other = list.filter((o) => !o.startsWith('no-new-privileges') && o !== sec[0]);
  if (other.length > 0) refuse('security-opt', `SecurityOpt may hold only no-new-privileges and the seccomp profile (got ${JSON.stringify(other[0]).slice(0, 80)})`);
}

function checkTmpfs(tmpfs: unknown, p: GatePolicy): void {
  if (isEmpty(tmpfs)) return;
  if (typeof tmpfs !== 'object' || Array.isArray(tmpfs)) refuse('tmpfs-size', 'Tmpfs must be an object');
  for (const [dir, opts] of Object.entries(tmpfs as Json)) {
    if (!TMPFS_DIRS.has(dir)) refuse('tmpfs-size', `tmpfs only at ${[...TMPFS_DIRS].join(', ')} (got ${dir})`);
    const o = String(opts).split(',');
    const size = o.filter((x) => x.startsWith('size='));
    const m = size.length === 1 ? /^size=(\d{1,6})m$/.exec(size[0]!) : null;
    if (!m || Number(m[1]) < 1 || Number(m[1]) > p.maxWorkspaceMb) refuse('tmpfs-size', `tmpfs ${dir} needs one size=<N>m with N ≤ ${p.maxWorkspaceMb}`);
    if (!o.includes('nosuid') || !o.includes('nodev')) refuse('tmpfs-size', `tmpfs ${dir} must be nosuid,nodev`);
  }
}

function checkResources(h: Json, p: GatePolicy): void {
  const mb = 1024 * 1024;
  const maxMem = (p.maxMemoryMb + p.maxWorkspaceMb + EXTRA_MB) * mb;
  const num = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : NaN);
  const mem = num(h.Memory);
  if (!(mem > 0 && mem <= maxMem)) refuse('resource-maxima', `Memory must be set and ≤ ${maxMem} bytes`);
  if (num(h.MemorySwap) !== mem) refuse('resource-maxima', 'MemorySwap must equal Memory (no swap)');
  const cpus = num(h.NanoCpus);
  if (!(cpus > 0 && cpus <= p.maxCpus * 1e9)) refuse('resource-maxima', `NanoCpus must be set and ≤ ${p.maxCpus * 1e9}`);
  const pids = num(h.PidsLimit);
  // Under gVisor the pids cgroup also counts the Sentry's threads (container-spec.ts).
  if (!(pids > 0 && pids <= p.maxPids * 24 + 256)) refuse('resource-maxima', `PidsLimit must be set and ≤ ${p.maxPids * 24 + 256}`);
  const shm = h.ShmSize === undefined ? 0 : num(h.ShmSize);
  if (!(shm >= 0 && shm <= 64 * mb)) refuse('resource-maxima', 'ShmSize must be ≤ 64 MiB');
  if (!isEmpty(h.OomScoreAdj) && !(num(h.OomScoreAdj) >= 0)) refuse('resource-maxima', 'OomScoreAdj may not be negative');
  if (!isEmpty(h.Ulimits)) {
    if (!Array.isArray(h.Ulimits)) refuse('resource-maxima', 'Ulimits must be a list');
    for (const u of h.Ulimits as Json[]) {
      if (u.Name === 'nproc' && !(num(u.Hard) > 0 && num(u.Hard) <= p.maxPids)) refuse('resource-maxima', `nproc ≤ ${p.maxPids}`);
      if (u.Name === 'nofile' && !(num(u.Hard) > 0 && num(u.Hard) <= 65536)) refuse('resource-maxima', 'nofile ≤ 65536');
    }
  }
}

function checkLabels(labels: unknown, name: string | null, p: GatePolicy): { name: string; runId: string } {
  const l = (typeof labels === 'object' && labels !== null ? labels : {}) as Json;
  if (l[LABELS.corral] !== '1' || l[LABELS.queue] !== p.queue) refuse('deployment-labels', `labels ${LABELS.corral}=1 and ${LABELS.queue}=${p.queue} are required`);
  const runId = l[LABELS.runId];
  if (typeof runId !== 'string' || runId.length === 0 || typeof l[LABELS.deadline] !== 'string' || typeof l[LABELS.uid] !== 'string') {
    refuse('deployment-labels', `labels ${LABELS.runId}, ${LABELS.deadline} and ${LABELS.uid} are required`);
  }
  if (l[GATE_LABEL] !== undefined) refuse('deployment-labels', `the ${GATE_LABEL} label is the gate's to set`);
  if (!name || !NAME_RE.test(name)) refuse('container-name', 'a sandbox is created with a name (its uid slot)');
  return { name, runId };
}

/** Checks a POST /containers/{id}/exec body against the container's labels. */
export function checkExec(body: unknown, labels: Record<string, string>): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) refuse('exec-body', 'the body must be a JSON object');
  const b = body as Json;
  if (b.Privileged !== false && b.Privileged !== undefined) refuse('exec-not-privileged', 'exec Privileged must be false');
  const want = `${labels[LABELS.uid]}:${labels[LABELS.uid]}`;
  if (b.User !== want) refuse('exec-user', `exec must run as the sandbox's agent ${want} (got ${JSON.stringify(b.User ?? '')})`);
  if (!Array.isArray(b.Cmd) || b.Cmd.length === 0) refuse('exec-body', 'Cmd must be a non-empty list');
}

/** Whether an inspected container is this deployment's, created through the gate. */
export function owned(name: string, labels: Record<string, string> | undefined, p: GatePolicy): boolean {
  if (!labels || labels[LABELS.corral] !== '1' || labels[LABELS.queue] !== p.queue) return false;
  const tag = labels[GATE_LABEL];
  const runId = labels[LABELS.runId];
  return typeof tag === 'string' && typeof runId === 'string' && tag === ownershipTag(p.key, name.replace(/^\//, ''), runId);
}
