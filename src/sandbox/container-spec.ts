/**
 * The sandbox container's create options as a pure function of the run (limits, deadline, labels,
 * egress socket directory, uid slot, isolation class) and the operator's config. Every hardening flag
 * lives here and is unit tested one by one (test/unit/sandbox-container-spec.test.ts). Nothing from the
 * worker's environment enters the container: Env is exactly what this file lists.
 *
 * Disk: the root filesystem is read-only; /workspace, /tmp and /home/agent are size-capped tmpfs
 * mounts. tmpfs pages are charged to the container's memory cgroup, so the memory limit is the
 * processes' share plus the tmpfs caps: filling a disk can never take memory from the host beyond it.
 * /workspace is a tmpfs too, but mounted as the container's anonymous volume of the `local` driver
 * (type tmpfs, the same size and options; removed with the container): the Engine API's archive
 * endpoints see volumes and not HostConfig.Tmpfs mounts (Docker 20.10), and the worker reads the
 * protected files through them after every call — a path no sandbox process can stand in
 * (sandbox/protected-snapshot.ts). Not under gVisor (see below): there it stays a plain tmpfs.
 * The tmpfs mounts allow exec (`./configure`, `./gradlew`): with python3 and bash in the image,
 * noexec stops no attacker; the boundary is the container (seccomp, no capabilities, read-only root,
 * nosuid + no-new-privileges), which tests attack with binaries run from /workspace.
 *
 * Users: PID 1 (docker-init, the deadline sleep, the egress relay) runs as the slot's init uid, the
 * agent as the slot's agent uid (uid-slots.ts), so the agent can neither signal nor trace PID 1, and
 * per-uid kernel limits are the sandbox's own (RLIMIT_NPROC is then simply the pids limit).
 */
import type Docker from 'dockerode';
import type { IsolationClass } from '../domain/sandbox';
import { ptyMount } from './pty-volume';
import { sandboxBudget } from './sandbox-budgets';
import { seccompJson } from './seccomp-profile';
import { UID_LABEL, type UidSlot } from './uid-slots';
import { CA_MOUNT, caEnv, SYSTEM_BUNDLE } from './egress-ca';

export const WORKSPACE_DIR = '/workspace';
export const HOME_DIR = '/home/agent';
export const EGRESS_MOUNT = '/run/corral';
/** Where the in-sandbox relay (images/sandbox/corral-egress) listens. */
export const EGRESS_RELAY = 'http://127.0.0.1:3128';
export const RELAY_CMD = `socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:${EGRESS_MOUNT}/egress.sock`;
export const TMP_MB = 64;
export const HOME_MB = 16;
export const SHM_MB = 16;
export const LABELS = {
  corral: 'corral',
  runId: 'corral.run-id',
  workerId: 'corral.worker-id',
  deadline: 'corral.deadline',
  egressDir: 'corral.egress-dir',
  /** The deployment (queue) that owns the container: a reaper only touches its own deployment's. */
  queue: 'corral.queue',
  /** The corral instance that made it (CORRAL_INSTANCE), when one is named: what a clean-up of that instance removes. */
  instance: 'corral.instance',
  /** The sandbox's agent uid: the slot it holds (uid-slots.ts). */
  uid: UID_LABEL,
  isolation: 'corral.isolation',
} as const;

/**
 * Paths hidden in the sandbox: Docker's default set plus what tells an attacker about the host kernel
 * and machine (the kernel command line and config, symbols, modules, BTF type info, devices, I/O and
 * memory maps, disks, the boot id). A masked file reads as empty, a masked directory is an empty
 * read-only tmpfs. What cannot be masked this way: /proc/self/mountinfo (per process; under runc it
 * shows the overlay2 layer paths), /proc/cpuinfo and /proc/meminfo (programs size themselves by them),
 * /proc/stat and /proc/vmstat (ps, top and psutil need /proc/stat; both count host-wide activity), and
 * /sys/devices/system/cpu (the cpu topology). A path absent on a host is skipped by the runtime.
 */
export const MASKED_PATHS = [
  // Docker 20.10's defaults (setting MaskedPaths replaces them)
  '/proc/asound', '/proc/acpi', '/proc/kcore', '/proc/keys', '/proc/latency_stats', '/proc/timer_list', '/proc/timer_stats',
  '/proc/sched_debug', '/proc/scsi', '/sys/firmware',
  // the host kernel and machine
  '/proc/cmdline', '/proc/bootconfig', '/proc/config.gz', '/proc/kallsyms', '/proc/modules', '/proc/version_signature',
  '/proc/iomem', '/proc/ioports', '/proc/interrupts', '/proc/softirqs', '/proc/devices', '/proc/misc', '/proc/dma',
  '/proc/mtrr', '/proc/partitions', '/proc/diskstats', '/proc/swaps', '/proc/buddyinfo', '/proc/zoneinfo',
  '/proc/pagetypeinfo', '/proc/vmallocinfo', '/proc/slabinfo', '/proc/key-users', '/proc/consoles', '/proc/crypto',
  '/proc/execdomains', '/proc/sys/kernel/random/boot_id',
  '/sys/kernel', '/sys/module', '/sys/power', '/sys/block', '/sys/bus', '/sys/class', '/sys/dev',
  // host-wide activity: every process's pressure stall times and the host's load average
  '/proc/pressure', '/proc/loadavg',
  // /sys/devices: the machine's devices with their I/O statistics (disks, block and virtual devices),
  // memory and NUMA counters, clocks, idle and frequency residency. Kept: the cpu topology under
  // system/cpu (glibc, nproc and runtimes size themselves by it); not masked there: the per-cpu
  // cpuN/cpuidle directories (their number differs by host).
  '/sys/devices/virtual', '/sys/devices/platform', '/sys/devices/pci0000:00', '/sys/devices/LNXSYSTM:00', '/sys/devices/pnp0',
  '/sys/devices/software', '/sys/devices/tracepoint', '/sys/devices/uprobe', '/sys/devices/kprobe', '/sys/devices/breakpoint',
  '/sys/devices/msr', '/sys/devices/faux', '/sys/devices/system/memory', '/sys/devices/system/node',
  '/sys/devices/system/clockevents', '/sys/devices/system/clocksource', '/sys/devices/system/container',
  '/sys/devices/system/machinecheck', '/sys/devices/system/edac', '/sys/devices/system/cpu/cpuidle', '/sys/devices/system/cpu/cpufreq',
];

export interface ContainerSpecInput {
  runId: string;
  workerId: string;
  deadline: Date;
  now: Date;
  limits: { memoryMb: number; cpus: number; pids: number; workspaceMb: number };
  /** The queue of the deployment that owns the run. */
  queue?: string;
  /** CORRAL_INSTANCE, when set. */
  instance?: string | undefined;
  /** Host directory holding the run's egress socket; absent = no egress at all. */
  egressDir?: string;
  /** The operator's CA files are in the egress directory's `ca` (egress-ca.ts); system: the image has a system bundle to cover. */
  trust?: { system: boolean };
  image: string;
  /** An environment's variables, after corral's own. */
  extraEnv?: Record<string, string> | undefined;
  /** Directories before PATH (an environment's `path`). */
  pathPrepend?: readonly string[] | undefined;
  isolation: IsolationClass;
  /** The engine's runtime name for gVisor (CORRAL_GVISOR_RUNTIME). */
  gvisorRuntime: string;
  /** The uids this sandbox holds; the container is named after them (its lease). */
  slot: UidSlot;
}

/** `uid:gid` of the agent's commands in a slot. */
export function agentUser(slot: UidSlot): string {
  return `${slot.agentUid}:${slot.agentUid}`;
}

/** The environment every sandbox process gets — the only variables that exist in the container. */
export function sandboxEnv(egress: boolean, extra: Record<string, string> = {}, pathFirst: readonly string[] = [], trust = false): string[] {
  const env = [`PATH=${[...pathFirst, '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'].join(':')}`, `HOME=${HOME_DIR}`, 'LANG=C.UTF-8', 'USER=agent', 'PYTHONDONTWRITEBYTECODE=1', 'PYTEST_ADDOPTS=-p no:cacheprovider'];
  if (egress) {
    for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) env.push(`${k}=${EGRESS_RELAY}`);
    env.push('NO_PROXY=', 'no_proxy=');
  }
  if (trust) for (const [k, v] of Object.entries(caEnv())) env.push(`${k}=${v}`);
  // An environment's own variables come after corral's (environment.ts refuses the names corral sets).
  for (const [k, v] of Object.entries(extra)) env.push(`${k}=${v}`);
  return env;
}

/**
 * /workspace: an anonymous volume of the local driver that is a size-capped tmpfs owned by the agent
 * (`docker rm -v` removes it with the container). NoCopy: nothing of the image is copied into it.
 */
export function workspaceMount(workspaceMb: number, agentUid: number): Docker.MountSettings {
  return {
    Type: 'volume',
    Target: WORKSPACE_DIR,
    // empty: an anonymous volume of this container's own
    Source: '',
    ReadOnly: false,
    VolumeOptions: {
      NoCopy: true,
      Labels: {},
      DriverConfig: { Name: 'local', Options: { type: 'tmpfs', device: 'tmpfs', o: workspaceTmpfsOptions(workspaceMb, agentUid) } },
    },
  };
}

/** The mount options of the workspace tmpfs (the docker gate checks them against this form). */
export function workspaceTmpfsOptions(workspaceMb: number, agentUid: number): string {
  return `size=${workspaceMb}m,uid=${agentUid},gid=${agentUid},mode=0755,nosuid,nodev,exec`;
}

/** Seconds PID 1 sleeps: it ends the container at the deadline (a dead man's switch). At least 1. */
export function secondsUntil(deadline: Date, now: Date): number {
  return Math.max(1, Math.ceil((deadline.getTime() - now.getTime()) / 1000));
}

export function containerSpec(input: ContainerSpecInput): Docker.ContainerCreateOptions {
  const { limits } = input;
  const mb = 1024 * 1024;
  const egress = input.egressDir !== undefined;
  const sleepS = String(secondsUntil(input.deadline, input.now));
  // With egress, PID 1's child also starts the relay (the same command as images/sandbox/corral-egress,
  // spelled out so the spec does not depend on the script's version); tini (Init) reaps and forwards signals.
  const cmd = egress ? ['/bin/sh', '-c', `${RELAY_CMD} & exec sleep "$0"`, sleepS] : ['sleep', sleepS];
  const memoryBytes = (limits.memoryMb + limits.workspaceMb + TMP_MB + HOME_MB + SHM_MB) * mb;
  const tmpfsOpts = 'rw,exec,nosuid,nodev';
  const agent = input.slot.agentUid;
  const gvisor = input.isolation === 'gvisor';
  const budget = sandboxBudget(limits.pids, input.isolation);
  const labels: Record<string, string> = {
    [LABELS.corral]: '1',
    [LABELS.runId]: input.runId,
    [LABELS.workerId]: input.workerId,
    [LABELS.deadline]: input.deadline.toISOString(),
  };
  if (input.egressDir !== undefined) labels[LABELS.egressDir] = input.egressDir;
  if (input.queue !== undefined) labels[LABELS.queue] = input.queue;
  if (input.instance !== undefined) labels[LABELS.instance] = input.instance;
  labels[LABELS.uid] = String(agent);
  labels[LABELS.isolation] = input.isolation;

  const hostConfig: Docker.HostConfig = {
    NetworkMode: 'none',
    ReadonlyRootfs: true,
    Tmpfs: {
      // under gVisor the workspace stays a tmpfs of the sandbox's own kernel: its gofer-backed volumes answer
      // statx with EINVAL in the runsc this targets (ls, stat fail), so the effect check reads nothing there
      ...(gvisor ? { [WORKSPACE_DIR]: `${tmpfsOpts},size=${limits.workspaceMb}m,uid=${agent},gid=${agent},mode=0755` } : {}),
      '/tmp': `${tmpfsOpts},size=${TMP_MB}m,mode=1777`,
      [HOME_DIR]: `${tmpfsOpts},size=${HOME_MB}m,uid=${agent},gid=${agent},mode=0700`,
    },
    // runc: the workspace volume (above), and the slot's own devpts instance, at most PTYS ptys
    // (pty-volume.ts); under gVisor neither: its workspace is the tmpfs above, its ptys are the Sentry's.
    Mounts: gvisor ? [] : [workspaceMount(limits.workspaceMb, agent), ptyMount(agent) as unknown as Docker.MountSettings],
    ShmSize: SHM_MB * mb,
    Binds: [
      ...(input.egressDir !== undefined ? [`${input.egressDir}:${EGRESS_MOUNT}:ro`] : []),
      ...(input.trust && input.egressDir !== undefined ? [`${input.egressDir}/ca:${CA_MOUNT}:ro`] : []),
      ...(input.trust?.system && input.egressDir !== undefined ? [`${input.egressDir}/ca/bundle.crt:${SYSTEM_BUNDLE}:ro`] : []),
    ],
    CapDrop: ['ALL'],
    CapAdd: [],
    // Our own seccomp profile by content (seccomp-profile.ts); under gVisor runsc loads it inside the
    // sandbox when registered with --oci-seccomp.
    SecurityOpt: ['no-new-privileges:true', `seccomp=${seccompJson({ gvisor })}`],
    MaskedPaths: MASKED_PATHS,
    Privileged: false,
    Devices: [],
    IpcMode: 'private',
    PidMode: '',
    UTSMode: '',
    UsernsMode: '',
    PidsLimit: budget.pidsCgroup,
    Memory: memoryBytes,
    MemorySwap: memoryBytes,
    NanoCpus: Math.round(limits.cpus * 1e9),
    // nofile × nproc bounds the file-table entries the sandbox can hold (sandbox-budgets.ts). nproc is
    // per uid, and the uids are this sandbox's own: the same bound as the pids cgroup (under gVisor the
    // process limit itself, enforced by the Sentry).
    Ulimits: [
      { Name: 'nofile', Soft: budget.nofile, Hard: budget.nofile },
      { Name: 'nproc', Soft: budget.nproc, Hard: budget.nproc },
    ],
    // docker-init (tini) as PID 1, as the init uid: it reaps orphans and forwards signals.
    Init: true,
    // Under host memory pressure the kernel kills sandbox processes before the worker or the daemon.
    OomScoreAdj: 500,
    AutoRemove: false,
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    LogConfig: { Type: 'none', Config: {} },
  };
  // Explicit for both classes: the engine's default runtime may be either.
  hostConfig.Runtime = gvisor ? input.gvisorRuntime : 'runc';

  return {
    name: input.slot.name,
    Image: input.image,
    Cmd: cmd,
    Entrypoint: [],
    User: `${input.slot.initUid}:${input.slot.initUid}`,
    WorkingDir: WORKSPACE_DIR,
    Env: sandboxEnv(egress, input.extraEnv, input.pathPrepend, input.trust !== undefined),
    Hostname: 'sandbox',
    Labels: labels,
    NetworkDisabled: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    Tty: false,
    OpenStdin: false,
    HostConfig: hostConfig,
  };
}
