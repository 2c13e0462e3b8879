/**
 * The host's shared kernel budgets against what its sandboxes may take (sandbox-budgets.ts): read at
 * start by the docker gate and by a worker that holds the engine itself, and logged — with what one
 * sandbox at the configured maxima can take, how many such sandboxes the host holds before a budget
 * runs out, and what to change when CORRAL_SANDBOX_SLOTS allows more. One sandbox never takes more
 * than its caps; this check is about many at once.
 *
 * Files a sandbox maps and then closes keep their kernel file object without a descriptor, so
 * RLIMIT_NOFILE does not bound them: only the sandbox's memory limit does (≈460 bytes each, charged to
 * its cgroup: measured, 65,479 files held by one process for 29.7 MB). fs.file-max is a counter sized
 * at boot from RAM (≈1 per 10 KiB), not the memory itself; systemd ≥ 240 raises it to the maximum. A
 * host whose fs.file-max is below what its sandboxes' memory can pin is reported.
 */
import { readFileSync } from 'node:fs';
import { FILES, gvisorPidsCgroup, PTYS } from './sandbox-budgets';

export interface HostLimits {
  pidMax: number;
  fileMax: number;
  ptyMax: number;
  ptyReserve: number;
  aioMaxNr: number;
}

/** Bytes of kernel memory one mapped-and-closed file costs (measured: struct file + VMA). */
export const BYTES_PER_PINNED_FILE = 460;

export function readHostLimits(read: (p: string) => string = (p) => readFileSync(p, 'utf8')): HostLimits {
  const n = (p: string) => Number(read(p).trim().split(/\s+/)[0]);
  return {
    pidMax: n('/proc/sys/kernel/pid_max'),
    fileMax: n('/proc/sys/fs/file-max'),
    ptyMax: n('/proc/sys/kernel/pty/max'),
    ptyReserve: n('/proc/sys/kernel/pty/reserve'),
    aioMaxNr: n('/proc/sys/fs/aio-max-nr'),
  };
}

export interface BudgetLine {
  budget: string;
  /** What the host has for sandboxes (containers' share). */
  host: number;
  /** What one sandbox at the configured maxima can take. */
  perSandbox: number;
  /** How many such sandboxes fit before the budget is gone. */
  sandboxes: number;
}

export interface HostBudgetReport {
  lines: BudgetLine[];
  /** Lines whose budget holds fewer sandboxes than CORRAL_SANDBOX_SLOTS allows, with the remedy. */
  problems: string[];
}

export function hostBudgetReport(h: HostLimits, o: { maxPids: number; maxMemoryMb: number; maxWorkspaceMb: number; slots: number; gvisor: boolean }): HostBudgetReport {
  const memBytes = (o.maxMemoryMb + o.maxWorkspaceMb + 96) * 1024 * 1024;
  const pids = o.gvisor ? Math.max(o.maxPids, gvisorPidsCgroup(o.maxPids)) : o.maxPids;
  const pinned = Math.floor(memBytes / BYTES_PER_PINNED_FILE);
  const lines: BudgetLine[] = [
    { budget: 'kernel.pid_max (pids cgroup)', host: h.pidMax, perSandbox: pids, sandboxes: Math.floor(h.pidMax / pids) },
    { budget: 'kernel.pty.max (devpts max, runc)', host: h.ptyMax - h.ptyReserve, perSandbox: PTYS, sandboxes: Math.floor((h.ptyMax - h.ptyReserve) / PTYS) },
    { budget: 'fs.file-max (descriptors: nofile × nproc)', host: h.fileMax, perSandbox: FILES, sandboxes: Math.floor(h.fileMax / FILES) },
    { budget: 'fs.file-max (mapped files: memory limit / 460 B)', host: h.fileMax, perSandbox: pinned, sandboxes: Math.floor(h.fileMax / Math.max(1, pinned)) },
    { budget: 'fs.aio-max-nr (io_setup refused)', host: h.aioMaxNr, perSandbox: 0, sandboxes: Number.POSITIVE_INFINITY },
  ];
  const remedy: Record<string, string> = {
    'kernel.pid_max (pids cgroup)': 'raise kernel.pid_max (up to 4194304) or lower CORRAL_MAX_PIDS / CORRAL_SANDBOX_SLOTS',
    'kernel.pty.max (devpts max, runc)': 'raise kernel.pty.max or lower CORRAL_SANDBOX_SLOTS',
    'fs.file-max (descriptors: nofile × nproc)': 'raise fs.file-max (systemd sets 9223372036854775807) or lower CORRAL_SANDBOX_SLOTS',
    'fs.file-max (mapped files: memory limit / 460 B)': 'raise fs.file-max (systemd sets 9223372036854775807) or lower CORRAL_MAX_MEMORY_MB / CORRAL_SANDBOX_SLOTS',
  };
  const problems = lines.filter((l) => l.sandboxes < o.slots).map((l) => `${l.budget}: ${l.host} on this host holds ${l.sandboxes} sandboxes at the configured maxima (${l.perSandbox} each), fewer than CORRAL_SANDBOX_SLOTS=${o.slots}: ${remedy[l.budget]}`);
  return { lines, problems };
}
