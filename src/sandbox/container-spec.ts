/**
 * The sandbox container's create options as a pure function of the run (limits, deadline, labels,
 * egress socket directory) and the operator's config. Every hardening flag lives here and is unit
 * tested one by one (test/unit/sandbox-container-spec.test.ts). Nothing from the worker's environment
 * enters the container: Env is exactly what this file lists.
 *
 * Disk: the root filesystem is read-only; /workspace, /tmp and /home/agent are size-capped tmpfs
 * mounts. tmpfs pages are charged to the container's memory cgroup, so the memory limit is the
 * processes' share plus the tmpfs caps: filling a disk can never take memory from the host beyond it.
 */
import type Docker from 'dockerode';

export const SANDBOX_UID = 10001;
export const SANDBOX_USER = `${SANDBOX_UID}:${SANDBOX_UID}`;
export const WORKSPACE_DIR = '/workspace';
export const HOME_DIR = '/home/agent';
export const EGRESS_MOUNT = '/run/corral';
/** Where the in-sandbox relay (images/sandbox/corral-egress) listens. */
export const EGRESS_RELAY = 'http://127.0.0.1:3128';
export const RELAY_CMD = `socat TCP-LISTEN:3128,bind=127.0.0.1,reuseaddr,fork UNIX-CONNECT:${EGRESS_MOUNT}/egress.sock`;
export const TMP_MB = 64;
export const HOME_MB = 16;
export const SHM_MB = 16;
export const NOFILE = 4096;

export const LABELS = {
  corral: 'corral',
  runId: 'corral.run-id',
  workerId: 'corral.worker-id',
  deadline: 'corral.deadline',
  egressDir: 'corral.egress-dir',
  /** The deployment (queue) that owns the container: a reaper only touches its own deployment's. */
  queue: 'corral.queue',
} as const;

export interface ContainerSpecInput {
  name: string;
  runId: string;
  workerId: string;
  deadline: Date;
  now: Date;
  limits: { memoryMb: number; cpus: number; pids: number; workspaceMb: number };
  /** The queue of the deployment that owns the run. */
  queue?: string;
  /** Host directory holding the run's egress socket; absent = no egress at all. */
  egressDir?: string;
  image: string;
  /** OCI runtime name (e.g. "runsc"); undefined = the engine's default. */
  runtime?: string;
  /**
   * RLIMIT_NPROC counts every process of the uid on the host (all sandboxes share uid 10001), so it is
   * a host-wide backstop sized for all slots; the per-sandbox limit is the pids cgroup.
   */
  nproc: number;
}

/** The environment every sandbox process gets — the only variables that exist in the container. */
export function sandboxEnv(egress: boolean): string[] {
  const env = ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', `HOME=${HOME_DIR}`, 'LANG=C.UTF-8', 'USER=agent', 'PYTHONDONTWRITEBYTECODE=1', 'PYTEST_ADDOPTS=-p no:cacheprovider'];
  if (egress) {
    for (const k of ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) env.push(`${k}=${EGRESS_RELAY}`);
    env.push('NO_PROXY=', 'no_proxy=');
  }
  return env;
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
  const tmpfsOpts = 'rw,nosuid,nodev';
  const labels: Record<string, string> = {
    [LABELS.corral]: '1',
    [LABELS.runId]: input.runId,
    [LABELS.workerId]: input.workerId,
    [LABELS.deadline]: input.deadline.toISOString(),
  };
  if (input.egressDir !== undefined) labels[LABELS.egressDir] = input.egressDir;
  if (input.queue !== undefined) labels[LABELS.queue] = input.queue;

  const hostConfig: Docker.HostConfig = {
    NetworkMode: 'none',
    ReadonlyRootfs: true,
    Tmpfs: {
      [WORKSPACE_DIR]: `${tmpfsOpts},size=${limits.workspaceMb}m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0755`,
      '/tmp': `${tmpfsOpts},size=${TMP_MB}m,mode=1777`,
      [HOME_DIR]: `${tmpfsOpts},size=${HOME_MB}m,uid=${SANDBOX_UID},gid=${SANDBOX_UID},mode=0700`,
    },
    ShmSize: SHM_MB * mb,
    Binds: input.egressDir !== undefined ? [`${input.egressDir}:${EGRESS_MOUNT}:ro`] : [],
    CapDrop: ['ALL'],
    CapAdd: [],
    SecurityOpt: ['no-new-privileges:true'],
    Privileged: false,
    Devices: [],
    IpcMode: 'private',
    PidMode: '',
    UTSMode: '',
    UsernsMode: '',
    PidsLimit: limits.pids,
    Memory: memoryBytes,
    MemorySwap: memoryBytes,
    NanoCpus: Math.round(limits.cpus * 1e9),
    Ulimits: [
      { Name: 'nofile', Soft: NOFILE, Hard: NOFILE },
      { Name: 'nproc', Soft: input.nproc, Hard: input.nproc },
    ],
    Init: true,
    // Under host memory pressure the kernel kills sandbox processes before the worker or the daemon.
    OomScoreAdj: 500,
    AutoRemove: false,
    RestartPolicy: { Name: 'no', MaximumRetryCount: 0 },
    LogConfig: { Type: 'none', Config: {} },
  };
  if (input.runtime) hostConfig.Runtime = input.runtime;

  return {
    name: input.name,
    Image: input.image,
    Cmd: cmd,
    Entrypoint: [],
    User: SANDBOX_USER,
    WorkingDir: WORKSPACE_DIR,
    Env: sandboxEnv(egress),
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
