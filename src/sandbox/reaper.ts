/**
 * The reaper: removes what dead or finished runs left behind. A sweep lists every container labelled
 * `corral=1` and force-removes it (with its anonymous volumes and its egress socket directory) when
 * its deadline has passed, or when `isActive(runId, workerId)` says its run is no longer active (a
 * worker killed with SIGKILL leaves its run inactive in the caller's store). Containers younger than
 * `graceMs` are left alone unless past their deadline, so a run being acquired is never reaped.
 * Orphaned egress socket directories (no container refers to them) are removed too — only those of
 * this reaper's engine (the marker file beside each names it): on a host whose workers use two
 * engines, each engine's reaper sees only its own containers, so it must not judge the other's.
 * The worker calls startReaper() at start: one sweep at once, then every CORRAL_REAP_INTERVAL_S.
 */
import { readFile, readdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type Docker from 'dockerode';
import type { Config } from '../config';
import { LABELS } from './container-spec';
import { defaultEgressRoot, engineMarkerOf, type SandboxLog } from './docker-sandbox';
import type { SandboxEngine } from './sandbox-engine';

export interface ReaperOptions {
  docker: Docker;
  /** Whether a run still owns its container; may consult Redis. Errors count as "active" (never reap on doubt). */
  isActive: (runId: string, workerId: string) => boolean | Promise<boolean>;
  now?: () => Date;
  log?: SandboxLog;
  egressRoot?: string;
  graceMs?: number;
  /** Only consider containers of this worker id (e.g. tests); default: all corral containers. */
  onlyWorkerId?: string;
  /** Only consider containers of this deployment (its queue name); others belong to another Redis. */
  queue?: string;
  /** This worker's engine (docker-sandbox.ts engineKeyOf); egress directories marked with another are left alone. */
  engine?: string;
  /** Releases the host's uid leases of what it removes and of containers gone otherwise (with the engine itself; a gate does that for itself). */
  sandboxEngine?: SandboxEngine;
}

export interface SweepResult {
  removed: Array<{ id: string; runId: string; workerId: string; reason: string }>;
  removedDirs: string[];
}

const ORPHAN_DIR_GRACE_MS = 60_000;

export async function sweepSandboxes(o: ReaperOptions): Promise<SweepResult> {
  const now = (o.now ?? (() => new Date()))();
  const log = o.log ?? (() => {});
  const grace = o.graceMs ?? 30_000;
  const root = resolve(o.egressRoot ?? defaultEgressRoot());
  const filters = {
    label: [`${LABELS.corral}=1`, ...(o.onlyWorkerId ? [`${LABELS.workerId}=${o.onlyWorkerId}`] : []), ...(o.queue ? [`${LABELS.queue}=${o.queue}`] : [])],
  };
  const list = await o.docker.listContainers({ all: true, filters });
  const result: SweepResult = { removed: [], removedDirs: [] };
  const liveDirs = new Set<string>();
  for (const c of list) {
    const labels = c.Labels ?? {};
    const runId = labels[LABELS.runId] ?? '';
    const workerId = labels[LABELS.workerId] ?? '';
    const deadline = Date.parse(labels[LABELS.deadline] ?? '');
    const ageMs = now.getTime() - c.Created * 1000;
    let reason: string | undefined;
    if (!Number.isFinite(deadline)) reason = 'no valid deadline label';
    else if (deadline <= now.getTime()) reason = 'deadline passed';
    else if (ageMs >= grace) {
      let active = true;
      try {
        active = await o.isActive(runId, workerId);
      } catch (err) {
        log('reaper: isActive failed; keeping the container', { runId, error: (err as Error).message });
      }
      if (!active) reason = 'run not active';
    }
    const dir = labels[LABELS.egressDir];
    if (!reason) {
      if (dir) liveDirs.add(resolve(dir));
      continue;
    }
    try {
      await o.docker.getContainer(c.Id).remove({ force: true, v: true });
      const uid = Number(labels[LABELS.uid]);
      if (Number.isSafeInteger(uid)) await o.sandboxEngine?.released({ agentUid: uid, name: (c.Names?.[0] ?? '').replace(/^\//, '') });
      result.removed.push({ id: c.Id, runId, workerId, reason });
      log('reaper: removed sandbox', { container: c.Id, runId, workerId, reason });
    } catch (err) {
      const e = err as { statusCode?: number };
      if (e.statusCode !== 404 && e.statusCode !== 409) log('reaper: remove failed', { container: c.Id, error: (err as Error).message });
    }
    if (dir && resolve(dir).startsWith(`${root}/`)) {
      await rm(resolve(dir), { recursive: true, force: true }).catch(() => {});
      await rm(engineMarkerOf(resolve(dir)), { force: true }).catch(() => {});
      result.removedDirs.push(resolve(dir));
    }
  }
  // Socket dirs whose container is gone (the worker died between mkdtemp and create, or before dispose).
  if (!o.onlyWorkerId) {
    await o.sandboxEngine?.sweepLeases().catch((err: Error) => log('reaper: sweeping uid leases failed', { error: err.message }));
    // The egress root is shared by every deployment on this host: a directory is orphaned only when no
    // corral container at all (of any queue) refers to it.
    if (o.queue) {
      const all = await o.docker.listContainers({ all: true, filters: { label: [`${LABELS.corral}=1`] } });
      for (const c of all) {
        const d = c.Labels?.[LABELS.egressDir];
        if (d && !result.removed.some((r) => r.id === c.Id)) liveDirs.add(resolve(d));
      }
    }
    const names = await readdir(root).catch(() => [] as string[]);
    for (const n of names) {
      const d = join(root, n);
      if (n.endsWith('.engine')) {
        // A marker whose directory is gone (a crash between the two removals).
        const st = await stat(d).catch(() => undefined);
        if (st && !names.includes(n.slice(0, -'.engine'.length)) && now.getTime() - st.mtimeMs >= ORPHAN_DIR_GRACE_MS) await rm(d, { force: true }).catch(() => {});
        continue;
      }
      if (liveDirs.has(d) || result.removedDirs.includes(d)) continue;
      const marker = await readFile(engineMarkerOf(d), 'utf8').catch(() => null);
      if (marker !== null && o.engine !== undefined && marker !== o.engine) continue; // another engine's sandbox
      const st = await stat(d).catch(() => undefined);
      // At least a minute: another worker may have just made the directory and not yet its container.
      if (st && now.getTime() - st.mtimeMs >= Math.max(grace, ORPHAN_DIR_GRACE_MS)) {
        await rm(d, { recursive: true, force: true }).catch(() => {});
        await rm(engineMarkerOf(d), { force: true }).catch(() => {});
        result.removedDirs.push(d);
      }
    }
  }
  return result;
}

export interface Reaper {
  /** The first sweep (run at start). */
  readonly first: Promise<SweepResult>;
  sweep(): Promise<SweepResult>;
  stop(): void;
}

/** Sweeps now and every CORRAL_REAP_INTERVAL_S until stop(); sweep errors are logged, never thrown. */
export function startReaper(config: Pick<Config, 'CORRAL_REAP_INTERVAL_S' | 'CORRAL_EGRESS_DIR'>, opts: ReaperOptions): Reaper {
  const o: ReaperOptions = { ...opts, egressRoot: opts.egressRoot ?? config.CORRAL_EGRESS_DIR };
  const log = o.log ?? (() => {});
  let running: Promise<SweepResult> | undefined;
  const sweep = () => {
    running ??= sweepSandboxes(o)
      .catch((err: unknown) => {
        log('reaper: sweep failed', { error: (err as Error).message });
        return { removed: [], removedDirs: [] } as SweepResult;
      })
      .finally(() => (running = undefined));
    return running;
  };
  const first = sweep();
  const timer = setInterval(() => void sweep(), config.CORRAL_REAP_INTERVAL_S * 1000);
  timer.unref();
  return { first, sweep, stop: () => clearInterval(timer) };
}
