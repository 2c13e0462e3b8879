/**
 * What one sandbox may take of the kernel budgets its host shares with every other sandbox and with
 * the host itself. Linux keeps these host-wide, not per container, so under runc a sandbox without a
 * cap of its own can exhaust them for everyone (measured by the red team of issue 35: all of
 * fs.aio-max-nr, 3,071 of the host's ptys, ~1 M file-table entries):
 *
 * - Linux AIO contexts (fs.aio-max-nr): none. io_setup answers ENOSYS (seccomp-profile.ts); no
 *   toolchain corral targets uses Linux AIO, and libaio users fall back to threads on ENOSYS.
 * - ptys (kernel.pty.max, of which every container's devpts instance shares all but the host's
 *   reserve): a devpts instance of the sandbox's own, mounted from a per-slot volume with `max=PTYS`
 *   (pty-volume.ts). Under gVisor the Sentry serves ptys itself.
 * - the file table (fs.file-max): RLIMIT_NOFILE × RLIMIT_NPROC ≤ FILES, with RLIMIT_NPROC the
 *   sandbox's process limit (per uid, and the uid is the sandbox's own). Files mapped and closed are
 *   charged to the memory cgroup (struct file and VMA are accounted kernel memory).
 * - pids (kernel.pid_max): runc's pids cgroup is the process limit; gVisor's counts the Sentry's host
 *   threads (≈40 idle + ≈5–16 per sandbox process, measured), so it gets room for those, capped at
 *   GVISOR_HOST_PIDS_CAP so one gVisor sandbox never holds more than an eighth of a default pid_max
 *   (32,768). Its RLIMIT_NPROC (which the Sentry enforces, threads included) is kept where that room
 *   suffices (GVISOR_NPROC_MAX), so a fork bomb meets EAGAIN before the cgroup refuses the Sentry a
 *   thread (which would end the whole sandbox).
 * Pure: the worker's container spec and the docker gate's rules both use it, so they agree.
 */
import type { IsolationClass } from '../domain/sandbox';

/** Open files one sandbox may hold: RLIMIT_NOFILE × RLIMIT_NPROC never exceeds it. */
export const FILES = 262_144;
export const NOFILE_MIN = 16;
export const NOFILE_MAX = 4096;
/** ptys of one sandbox's own devpts instance (runc). */
export const PTYS = 32;
/** Host pids (threads) of one gVisor sandbox: the Sentry, the gofer and the processes' stubs. */
export const GVISOR_HOST_PIDS_PER_PROCESS = 24;
export const GVISOR_HOST_PIDS_BASE = 256;
export const GVISOR_HOST_PIDS_CAP = 4096;
/** Host threads one gVisor sandbox process may cost at most (measured 5–16, with room). */
const GVISOR_HOST_PIDS_WORST = 18;
/** gVisor's RLIMIT_NPROC ceiling: what GVISOR_HOST_PIDS_CAP holds at the worst cost per process. */
export const GVISOR_NPROC_MAX = Math.floor((GVISOR_HOST_PIDS_CAP - GVISOR_HOST_PIDS_BASE) / GVISOR_HOST_PIDS_WORST);

export interface SandboxBudget {
  /** RLIMIT_NPROC (per uid: the sandbox's processes and threads). */
  nproc: number;
  /** RLIMIT_NOFILE (per process). */
  nofile: number;
  /** The container's pids cgroup. */
  pidsCgroup: number;
  /** ptys of its devpts instance (runc); 0 = the runtime's own (gVisor). */
  ptys: number;
}

/** RLIMIT_NOFILE for a process limit: as many as FILES allows, at most NOFILE_MAX (NOFILE_MIN only past 16,384 processes). */
export function nofileFor(nproc: number): number {
  return Math.max(NOFILE_MIN, Math.min(NOFILE_MAX, Math.floor(FILES / Math.max(1, nproc))));
}

/** gVisor's pids cgroup for a process limit. */
export function gvisorPidsCgroup(pids: number): number {
  return Math.min(GVISOR_HOST_PIDS_CAP, pids * GVISOR_HOST_PIDS_PER_PROCESS + GVISOR_HOST_PIDS_BASE);
}

export function sandboxBudget(pids: number, isolation: IsolationClass): SandboxBudget {
  const nproc = isolation === 'gvisor' ? Math.min(pids, GVISOR_NPROC_MAX) : pids;
  return {
    nproc,
    nofile: nofileFor(nproc),
    pidsCgroup: isolation === 'gvisor' ? gvisorPidsCgroup(pids) : pids,
    ptys: isolation === 'gvisor' ? 0 : PTYS,
  };
}
