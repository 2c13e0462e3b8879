/**
 * The rules for POST /containers/create: a body passes only when it is a sandbox as
 * src/sandbox/container-spec.ts builds it (within the operator's maxima), and what the engine gets is
 * rebuilt from the checked fields (shape.ts), never the client's object. The tables below are the
 * whole contract: each field the gate uses with its check (in the order checked, the sharpest rule
 * first, so an attack is refused by the rule it attacks), each other field of the engine's structs with
 * the rule that refuses it unless empty. Checks across fields (uid slot, runtime, egress) follow.
 */
import { isAbsolute, normalize } from 'node:path';
import { EGRESS_MOUNT, LABELS, MASKED_PATHS, WORKSPACE_DIR } from '../sandbox/container-spec';
import { CA_MOUNT, SYSTEM_BUNDLE } from '../sandbox/egress-ca';
import { FILES, GVISOR_NPROC_MAX, gvisorPidsCgroup } from '../sandbox/sandbox-budgets';
import { seccompJson } from '../sandbox/seccomp-profile';
import { slotOfAgentUid } from '../sandbox/uid-slots';
import { CONFIG_FIELDS, droppedFields, HOST_CONFIG_FIELDS, LOG_CONFIG_FIELDS, RESTART_POLICY_FIELDS, ULIMIT_FIELDS, WRAPPER_FIELDS } from './engine-fields';
import { checkMounts, mountsSpec, type CheckedMount } from './mount-rules';
import { isObject, type JValue } from './go-json';
import { bool, empty, exactly, int, isEmptyJson, readMap, readObject, refuse, str, strList, type Dropped, type ObjectShape, type Spec } from './shape';

export interface GatePolicy {
  /** Images a sandbox may be created from (repo:tag as the worker names them). */
  images: string[];
  /** The engine's runtime name for gVisor (CORRAL_GVISOR_RUNTIME); runc is the other. */
  gvisorRuntime: string;
  /** This deployment's queue: containers must carry corral.queue=<queue>. */
  queue: string;
  /** Host directory under which the gate makes every egress socket directory. */
  egressRoot: string;
  maxMemoryMb: number;
  maxCpus: number;
  maxPids: number;
  maxWorkspaceMb: number;
  /** The uid slots (CORRAL_SANDBOX_UID_BASE, CORRAL_SANDBOX_SLOTS). */
  uidBase: number;
  slots: number;
  /** Key of the ownership label. */
  key: Buffer;
}

/** What a checked create becomes: the body the engine gets, and what the gate must still do for it. */
export interface CheckedCreate {
  body: Record<string, unknown>;
  name: string;
  runId: string;
  /** The agent uid of the container's slot (its label, its name, PID 1's uid + 1). */
  agentUid: number;
  isolation: 'runc' | 'gvisor';
  /** The bind source, to be checked on disk (a directory the gate made under the egress root, and its `ca/`). */
  egressDir?: string;
  /** The slot's pty volume, to be made or checked by the gate (runc). */
  ptyVolume?: string;
}

/** Resource limits a sandbox needs beyond its processes' memory (container-spec.ts: tmpfs + shm). */
const EXTRA_MB = 64 + 16 + 16;
const SECCOMP = { runc: seccompJson({ gvisor: false }), gvisor: seccompJson({ gvisor: true }) };
const TMPFS_DIRS = new Set(['/workspace', '/tmp', '/home/agent']);
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const PATH_RE = /^\/[^\0]{0,4095}$/;
const ENV_RE = /^[A-Za-z_][A-Za-z0-9_]{0,255}=[^\0]*$/s;
const MB = 1024 * 1024;
/** The name of an egress directory the gate made (egress-dirs.ts). */
export const EGRESS_DIR_NAME = /^r-[A-Za-z0-9_-]{6,64}$/;

const num = (v: unknown): number => (typeof v === 'number' ? v : NaN);

function tmpfs(p: GatePolicy): Spec<Record<string, string> | undefined> {
  return (v, at) => {
    const m = readMap(v, at, 'tmpfs-size', 8);
    if (m.size === 0) return undefined;
    const out: Record<string, string> = {};
    for (const [dir, opts] of m) {
      if (!TMPFS_DIRS.has(dir)) refuse('tmpfs-size', `tmpfs only at ${[...TMPFS_DIRS].join(', ')} (got ${JSON.stringify(dir).slice(0, 80)})`);
      if (typeof opts !== 'string' || opts.length > 256) refuse('tmpfs-size', `${at}[${dir}] must be an option string`);
      const o = new Map<string, string | true>();
      for (const part of opts.split(',')) {
        const [k, val] = part.split('=', 2) as [string, string | undefined];
        if (o.has(k)) refuse('tmpfs-size', `tmpfs ${dir} names ${k} twice`);
        o.set(k, val ?? true);
      }
      for (const k of o.keys()) {
        if (!['rw', 'exec', 'noexec', 'nosuid', 'nodev', 'size', 'uid', 'gid', 'mode'].includes(k)) refuse('tmpfs-size', `tmpfs ${dir}: option ${JSON.stringify(k).slice(0, 40)} is not allowed`);
      }
      const size = /^(\d{1,6})m$/.exec(String(o.get('size') ?? ''));
      if (!size || Number(size[1]) < 1 || Number(size[1]) > p.maxWorkspaceMb) refuse('tmpfs-size', `tmpfs ${dir} needs one size=<N>m with N ≤ ${p.maxWorkspaceMb}`);
      if (o.get('nosuid') !== true || o.get('nodev') !== true) refuse('tmpfs-size', `tmpfs ${dir} must be nosuid,nodev`);
      for (const k of ['uid', 'gid']) if (o.has(k) && !/^\d{1,10}$/.test(String(o.get(k)))) refuse('tmpfs-size', `tmpfs ${dir}: ${k} must be a number`);
      if (o.has('mode') && !/^[0-7]{3,4}$/.test(String(o.get('mode')))) refuse('tmpfs-size', `tmpfs ${dir}: mode must be octal`);
      if ((o.get('rw') !== undefined && o.get('rw') !== true) || (o.get('exec') !== undefined && o.get('exec') !== true) || (o.get('noexec') !== undefined && o.get('noexec') !== true)) {
        refuse('tmpfs-size', `tmpfs ${dir}: rw, exec and noexec take no value`);
      }
      const parts = ['rw', o.has('noexec') ? 'noexec' : 'exec', 'nosuid', 'nodev', `size=${size![1]}m`];
      for (const k of ['uid', 'gid', 'mode']) if (o.has(k)) parts.push(`${k}=${String(o.get(k))}`);
      out[dir] = parts.join(',');
    }
    return out;
  };
}

const securityOpt: Spec<string[]> = (v, at) => {
  const list = strList('security-opt', { maxItems: 4, maxLen: 1024 * 1024 })(v, at) ?? [];
  if (!list.some((o) => o === 'no-new-privileges:true' || o === 'no-new-privileges')) refuse('no-new-privileges', 'SecurityOpt must include no-new-privileges:true');
  const sec = list.filter((o) => o.startsWith('seccomp=') || o.startsWith('seccomp:'));
  const json = sec.length === 1 ? sec[0]!.slice('seccomp='.length) : '';
  if (json !== SECCOMP.runc && json !== SECCOMP.gvisor) refuse('seccomp-profile', 'SecurityOpt must carry corral\'s seccomp profile (src/sandbox/seccomp-profile.ts), exactly');
  const other = list.filter((o) => !o.startsWith('no-new-privileges') && o !== sec[0]);
  if (other.length > 0) refuse('security-opt', `SecurityOpt may hold only no-new-privileges and the seccomp profile (got ${JSON.stringify(other[0]).slice(0, 80)})`);
  if (list.some((o) => o.startsWith('no-new-privileges') && o !== 'no-new-privileges:true' && o !== 'no-new-privileges')) refuse('no-new-privileges', 'no-new-privileges must be true');
  return ['no-new-privileges:true', `seccomp=${json}`];
};

const maskedPaths: Spec<string[]> = (v, at) => {
  const list = strList('masked-paths', { maxItems: 512, maxLen: 4096, re: PATH_RE })(v, at) ?? [];
  const have = new Set(list);
  const missing = MASKED_PATHS.filter((m) => !have.has(m));
  if (missing.length > 0) refuse('masked-paths', `MaskedPaths must include ${missing.slice(0, 3).join(', ')}${missing.length > 3 ? ' …' : ''}`);
  return [...have];
};

const ulimit: ObjectShape = {
  fields: { Name: str('resource-maxima', { required: true, re: /^(nofile|nproc)$/ }), Hard: int('resource-maxima', { min: 1, required: true }), Soft: int('resource-maxima', { min: 1, required: true }) },
  dropped: droppedFields(ULIMIT_FIELDS, ['Name', 'Hard', 'Soft'], {}, 'resource-maxima'), rule: 'resource-maxima',
};

const ulimits: Spec<Record<string, { Soft: number; Hard: number }>> = (v, at) => {
  if (!Array.isArray(v) || v.length !== 2) refuse('resource-maxima', 'Ulimits must be exactly nofile and nproc');
  const out: Record<string, { Soft: number; Hard: number }> = {};
  (v as JValue[]).forEach((u, i) => {
    const x = readObject(u, `${at}[${i}].`, ulimit) as { Name: string; Hard: number; Soft: number };
    if (out[x.Name]) refuse('duplicate-field', `Ulimits names ${x.Name} twice`);
    if (x.Soft > x.Hard) refuse('resource-maxima', `ulimit ${x.Name}: Soft must be ≤ Hard`);
    out[x.Name] = { Soft: x.Soft, Hard: x.Hard };
  });
  return out;
};

/** What HostConfig.Binds may hold: the egress directory, then optionally the operator CA's files in it (egress-ca.ts). */
export interface CheckedBinds {
  egressDir: string;
  /** 0: no CA; 1: its directory at CA_MOUNT; 2: that and its bundle over the image's system store. */
  ca: 0 | 1 | 2;
}

/** The binds a sandbox with egress carries (container-spec.ts makes exactly these). */
export function egressBinds(b: CheckedBinds): string[] {
  return [`${b.egressDir}:${EGRESS_MOUNT}:ro`, `${b.egressDir}/ca:${CA_MOUNT}:ro`, `${b.egressDir}/ca/bundle.crt:${SYSTEM_BUNDLE}:ro`].slice(0, 1 + b.ca);
}

/**
 * HostConfig.Binds: nothing, or one directory directly under the egress root, read-only at the egress
 * mount, optionally followed by exactly the operator CA's two read-only binds from its `ca/`.
 */
function binds(p: GatePolicy): Spec<CheckedBinds | undefined> {
  const root = normalize(p.egressRoot).replace(/\/+$/, '');
  return (v, at) => {
    const list = strList('binds-egress-only', { maxItems: 3, maxLen: 512 })(v, at) ?? [];
    if (list.length === 0) return undefined;
    const parts = list[0]!.split(':');
    const [src, dst, mode] = parts;
    if (parts.length !== 3 || !src || !isAbsolute(src) || normalize(src) !== src || !src.startsWith(`${root}/`) || !EGRESS_DIR_NAME.test(src.slice(root.length + 1))) {
      refuse('binds-egress-only', `bind ${JSON.stringify(list[0]).slice(0, 200)} is not an egress directory the gate made under ${root}`);
    }
    if (dst !== EGRESS_MOUNT || mode !== 'ro') refuse('binds-egress-only', `the egress directory must be mounted read-only at ${EGRESS_MOUNT}`);
    const checked: CheckedBinds = { egressDir: src, ca: (list.length - 1) as 0 | 1 | 2 };
    const want = egressBinds({ egressDir: src, ca: 2 });
    for (let i = 1; i < list.length; i++) {
      if (list[i] !== want[i]) refuse('binds-egress-only', `bind ${i + 1} may only be ${JSON.stringify(want[i])} (the operator CA's files, read-only), got ${JSON.stringify(list[i]).slice(0, 200)}`);
    }
    return checked;
  };
}

/** No restarts (a sandbox ends at its deadline): forwarded as absent, the engine's "no". */
const restartPolicy: Spec<undefined> = (v, at) => {
  readObject(v, `${at}.`, { fields: { Name: str('host-config', { re: /^no$/ }), MaximumRetryCount: int('host-config', { min: 0, max: 0 }) }, dropped: droppedFields(RESTART_POLICY_FIELDS, ['Name', 'MaximumRetryCount'], {}, 'host-config'), rule: 'host-config' });
  return undefined;
};

/** No log driver: a driver such as syslog or fluentd would make the engine connect where the body says. */
const logConfig: Spec<{ Type: 'none'; Config: Record<string, never> }> = (v, at) => {
  readObject(v, `${at}.`, { fields: { Type: str('host-config', { re: /^none$/ }), Config: empty('host-config') }, dropped: droppedFields(LOG_CONFIG_FIELDS, ['Type', 'Config'], {}, 'host-config'), rule: 'host-config' });
  return { Type: 'none', Config: {} };
};

/** HostConfig fields the sandbox never uses, each with its rule (the rest: host-config). */
const HOST_DROPPED = droppedFields(HOST_CONFIG_FIELDS, [], {
  DeviceRequests: 'no-devices', DeviceCgroupRules: 'no-devices', Cgroup: 'no-host-namespaces', VolumesFrom: 'binds-egress-only',
  VolumeDriver: 'binds-egress-only',
  // [] would mean "none" to the engine (it replaces the defaults): refused unless absent
  ReadonlyPaths: { rule: 'masked-paths', absent: true },
  // the docker CLI sends -1 (the engine's "unset")
  MemorySwappiness: { rule: 'host-config', also: [-1] },
}, 'host-config');

function hostConfigShape(p: GatePolicy): ObjectShape {
  const fields: Record<string, Spec<unknown>> = {
    Privileged: bool('not-privileged', { only: false }),
    CapAdd: empty('no-cap-add'),
    Devices: empty('no-devices'),
    PidMode: empty('no-host-namespaces'),
    UTSMode: empty('no-host-namespaces'),
    UsernsMode: empty('no-host-namespaces'),
    IpcMode: (v, at) => {
      if (!isEmptyJson(v) && v !== 'private' && v !== 'none') refuse('no-host-namespaces', `${at} must be private (got ${JSON.stringify(v).slice(0, 60)})`);
      return v === 'none' ? 'none' : 'private';
    },
    CgroupnsMode: (v, at) => {
      if (!isEmptyJson(v) && v !== 'private') refuse('no-host-namespaces', `${at} must be private (got ${JSON.stringify(v).slice(0, 60)})`);
      return 'private';
    },
    Mounts: mountsSpec(p.maxWorkspaceMb),
    Binds: binds(p),
    NetworkMode: exactly('network-none', 'none'),
    ReadonlyRootfs: exactly('read-only-root', true),
    CapDrop: (v, at) => {
      if (!Array.isArray(v) || v.length !== 1 || typeof v[0] !== 'string' || v[0].toUpperCase() !== 'ALL') refuse('cap-drop-all', `${at} must be ["ALL"]`);
      return ['ALL'];
    },
    SecurityOpt: securityOpt,
    MaskedPaths: maskedPaths,
    Tmpfs: tmpfs(p),
    Memory: int('resource-maxima', { min: 1, max: (p.maxMemoryMb + p.maxWorkspaceMb + EXTRA_MB) * MB, required: true }),
    MemorySwap: int('resource-maxima', { min: 1, required: true }),
    NanoCpus: int('resource-maxima', { min: 1, max: Math.round(p.maxCpus * 1e9), required: true }),
    PidsLimit: int('resource-maxima', { min: 1, max: gvisorPidsCgroup(p.maxPids), required: true }),
    ShmSize: int('resource-maxima', { min: 0, max: 64 * MB }),
    OomScoreAdj: int('resource-maxima', { min: 0, max: 1000 }),
    Ulimits: ulimits,
    Runtime: str('runtime-allowlist', { required: true, max: 128 }),
    Init: bool('host-config'),
    AutoRemove: bool('host-config', { only: false }),
    RestartPolicy: restartPolicy,
    LogConfig: logConfig,
  };
  const dropped = Object.fromEntries(Object.entries(HOST_DROPPED).filter(([k]) => !(k in fields)));
  return { fields, dropped, rule: 'host-config' };
}

function topShape(p: GatePolicy): ObjectShape {
  const fields: Record<string, Spec<unknown>> = {
    Image: (v) => {
      if (typeof v !== 'string' || !p.images.includes(v)) refuse('image-allowlist', `image ${JSON.stringify(v ?? null).slice(0, 200)} is not a sandbox image (allowed: ${p.images.join(', ')})`);
      return v;
    },
    HostConfig: (v, at) => {
      if (v !== undefined && v !== null && !isObject(v)) refuse('create-body', 'HostConfig must be an object');
      return readObject(v, `${at}.`, hostConfigShape(p));
    },
    Cmd: strList('create-body', { nonEmpty: true, maxItems: 64, maxLen: 4096 }),
    Entrypoint: strList('create-body', { maxItems: 16, maxLen: 4096 }),
    WorkingDir: str('create-body', { re: PATH_RE }),
    Env: strList('create-body', { maxItems: 512, maxLen: 32 * 1024, re: ENV_RE }),
    Hostname: str('create-body', { re: /^[A-Za-z0-9][A-Za-z0-9-]{0,62}$/ }),
    NetworkDisabled: bool('network-none'),
    AttachStdin: bool('create-body'),
    AttachStdout: bool('create-body'),
    AttachStderr: bool('create-body'),
    Tty: bool('create-body', { only: false }),
    OpenStdin: bool('create-body', { only: false }),
    User: str('sandbox-user', { max: 64 }),
    Labels: (v, at) => {
      const m = readMap(v, at, 'deployment-labels', 64);
      const out: Record<string, string> = {};
      for (const [k, x] of m) {
        if (typeof x !== 'string' || k.length > 128 || x.length > 4096) refuse('deployment-labels', `label ${JSON.stringify(k).slice(0, 80)} must be a string of at most 4096 characters`);
        out[k] = x;
      }
      return out;
    },
  };
  const dropped: Record<string, Dropped> = {
    ...droppedFields(CONFIG_FIELDS, Object.keys(fields), { Volumes: 'binds-egress-only' }, 'create-body'),
    ...droppedFields(WRAPPER_FIELDS, Object.keys(fields), { NetworkingConfig: 'network-none' }, 'create-body'),
    // The deprecated top-level HostConfig (see engine-fields.ts): every field of it must be empty.
    ...droppedFields(HOST_CONFIG_FIELDS, [], {}, 'create-body'),
  };
  // dockerode's createContainer() sends the name in the body too (the query's is the one the engine reads)
  return { fields, dropped, rule: 'create-body', client: { name: str('container-name', { re: NAME_RE }) } };
}

/**
 * Checks a POST /containers/create body (parsed, go-json.ts) and its ?name=; returns the body the
 * engine gets and what the gate must still check on disk and on the engine (egress dir, pty volume).
 */
export function checkCreate(body: JValue, name: string | null, p: GatePolicy): CheckedCreate {
  if (!isObject(body)) refuse('create-body', 'the body must be a JSON object');
  const client: Record<string, unknown> = {};
  const top = readObject(body, '', topShape(p), client) as Record<string, unknown> & { HostConfig: Record<string, unknown>; Labels?: Record<string, string> };
  if (client.name !== undefined && client.name !== name) refuse('container-name', 'the name in the body and in the query differ');
  const h = top.HostConfig;
  const runtime = h.Runtime as string;
  const isolation = runtime === 'runc' ? 'runc' : runtime === p.gvisorRuntime ? 'gvisor' : refuse('runtime-allowlist', `Runtime ${JSON.stringify(runtime)} is not allowed (allowed: runc, ${p.gvisorRuntime})`);
  if (h.MemorySwap !== h.Memory) refuse('resource-maxima', 'MemorySwap must equal Memory (no swap)');
  const seccomp = (h.SecurityOpt as string[])[1]!.slice('seccomp='.length);
  if (seccomp !== SECCOMP[isolation]) refuse('seccomp-profile', `SecurityOpt must carry corral's seccomp profile for ${isolation}`);

  // The uid slot: PID 1's uid, the agent uid label and the name all name one slot of the range.
  const labels = top.Labels ?? {};
  const user = /^(\d{1,10}):(\d{1,10})$/.exec(String(top.User ?? ''));
  const initUid = user && user[1] === user[2] ? Number(user[1]) : NaN;
  const agentUid = initUid + 1;
  if (!Number.isSafeInteger(initUid) || slotOfAgentUid({ base: p.uidBase, slots: p.slots }, agentUid) === undefined) {
    refuse('sandbox-user', `User must be uid:gid of a sandbox slot's PID 1 (${p.uidBase} + 2n, n < ${p.slots}), got ${JSON.stringify(top.User ?? '')}`);
  }
  if (labels[LABELS.uid] !== String(agentUid)) refuse('sandbox-user', `label ${LABELS.uid} must be the slot's agent uid ${agentUid} (PID 1's + 1)`);
  const tmp = (h.Tmpfs ?? {}) as Record<string, string>;
  for (const [dir, o] of Object.entries(tmp)) {
    for (const k of ['uid', 'gid']) {
      const m = new RegExp(`(?:^|,)${k}=(\\d+)`).exec(o);
      if (m && Number(m[1]) !== agentUid) refuse('sandbox-user', `tmpfs ${dir}: ${k} must be the slot's agent uid ${agentUid}`);
    }
  }

  // Resources: the process, file and host-pid budgets (src/sandbox/sandbox-budgets.ts).
  const u = h.Ulimits as Record<string, { Soft: number; Hard: number }>;
  if (!u.nofile || !u.nproc) refuse('resource-maxima', 'Ulimits must set nofile and nproc');
  if (u.nproc.Hard > p.maxPids) refuse('resource-maxima', `nproc ≤ ${p.maxPids}`);
  if (isolation === 'gvisor' && u.nproc.Hard > GVISOR_NPROC_MAX) refuse('resource-maxima', `nproc ≤ ${GVISOR_NPROC_MAX} under gVisor (what its host-pid cap holds)`);
  if (u.nofile.Hard * u.nproc.Hard > FILES) refuse('file-budget', `nofile × nproc must be ≤ ${FILES} (the open files one sandbox may hold), got ${u.nofile.Hard} × ${u.nproc.Hard}`);
  const pidsCap = isolation === 'gvisor' ? gvisorPidsCgroup(u.nproc.Hard) : u.nproc.Hard;
  if (num(h.PidsLimit) > pidsCap) refuse('resource-maxima', `PidsLimit must be ≤ ${pidsCap} for nproc ${u.nproc.Hard} under ${isolation}`);
  h.Ulimits = [{ Name: 'nofile', Soft: u.nofile.Soft, Hard: u.nofile.Hard }, { Name: 'nproc', Soft: u.nproc.Soft, Hard: u.nproc.Hard }];

  // Mounts: under runc exactly the workspace volume and the slot's pty volume; under gVisor none (mount-rules.ts).
  if (isolation === 'runc' && tmp[WORKSPACE_DIR] !== undefined) refuse('workspace-volume', `under runc ${WORKSPACE_DIR} is the workspace volume (HostConfig.Mounts), not a tmpfs mount`);
  const mounted = checkMounts(h.Mounts as CheckedMount[] | undefined, agentUid, isolation);
  if (mounted.mounts) h.Mounts = mounted.mounts;
  else delete h.Mounts;
  const ptyVolume = mounted.ptyVolume;

  // The binds: the egress directory its label names, and the operator CA's files in it.
  const bound = h.Binds as CheckedBinds | undefined;
  const egressDir = bound?.egressDir;
  if (labels[LABELS.egressDir] !== egressDir) refuse('binds-egress-only', `the bind must be the directory in the ${LABELS.egressDir} label`);
  if (bound) h.Binds = egressBinds(bound);
  else delete h.Binds;

  // Labels: this deployment's, the run's, the isolation class; the ownership tag is the gate's to set.
  if (labels[LABELS.corral] !== '1' || labels[LABELS.queue] !== p.queue) refuse('deployment-labels', `labels ${LABELS.corral}=1 and ${LABELS.queue}=${p.queue} are required`);
  const runId = labels[LABELS.runId];
  const deadline = labels[LABELS.deadline];
  if (!runId || runId.length > 128 || !deadline || Number.isNaN(Date.parse(deadline))) {
    refuse('deployment-labels', `labels ${LABELS.runId} and ${LABELS.deadline} (a date) are required`);
  }
  if (labels[LABELS.isolation] !== undefined && labels[LABELS.isolation] !== isolation) refuse('deployment-labels', `label ${LABELS.isolation} must be ${isolation} (the runtime's class)`);
  if ('corral.gate' in labels) refuse('deployment-labels', 'the corral.gate label is the gate\'s to set');
  if (!name || !NAME_RE.test(name)) refuse('container-name', 'a sandbox is created with a name (its uid slot)');
  if (name !== `corral-u${agentUid}`) refuse('container-name', `a sandbox is named after its uid slot: corral-u${agentUid}`);
  return { body: top, name, runId: runId!, agentUid, isolation, ...(egressDir ? { egressDir } : {}), ...(ptyVolume ? { ptyVolume } : {}) };
}
