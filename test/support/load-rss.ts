/**
 * Samples the resident set size (VmRSS in /proc/<pid>/status) of tracked processes every
 * `intervalMs` and keeps each one's peak, in MB. Linux only; a process that is gone is skipped.
 */
import { readFileSync } from 'node:fs';

/** VmRSS of a process in MB, or null when it is gone (or this is not Linux). */
export function readRssMb(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

export interface RssSampler {
  track(name: string, pid: number): void;
  /** Peak MB per tracked name (rounded to 0.1). */
  peaks(): Record<string, number>;
  samples(): number;
  stop(): Record<string, number>;
}

export function startRssSampler(intervalMs = 200): RssSampler {
  const pids = new Map<string, number>();
  const peak = new Map<string, number>();
  let n = 0;
  const sample = () => {
    for (const [name, pid] of pids) {
      const mb = readRssMb(pid);
      if (mb === null) continue;
      n += 1;
      if (mb > (peak.get(name) ?? 0)) peak.set(name, mb);
    }
  };
  const timer = setInterval(sample, intervalMs);
  timer.unref();
  const peaks = () => Object.fromEntries([...peak].map(([k, v]) => [k, Math.round(v * 10) / 10]));
  return {
    track(name, pid) {
      pids.set(name, pid);
      sample();
    },
    peaks,
    samples: () => n,
    stop() {
      sample();
      clearInterval(timer);
      return peaks();
    },
  };
}
