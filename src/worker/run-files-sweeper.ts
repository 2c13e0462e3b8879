/**
 * The run-files sweeper: what a worker's host keeps of runs, kept no longer than the run store keeps
 * the run. One pass walks the run directories under the data dir (at most `maxDirs`) and, keyed on
 * each run's record in the run store:
 *   - a run still going (a record without finishedAt) is left alone, checkpoints and all;
 *   - a run whose record is gone (the store forgot it: FINISHED_TTL_S) or that finished more than
 *     `retentionMs` ago loses its directory (tars up to the workspace cap, logs, checkpoints), and
 *     with an object store its objects; a directory without a record is removed only once it is
 *     older than `orphanGraceMs` (a run being set up may not have its record yet);
 *   - a finished run keeps no checkpoint tars (a worker that crashed between legs leaves them);
 *   - a run whose files did not reach the object store (publish-pending marker) is published again;
 *     once the store took them, the marker and the directory go.
 * Objects of runs whose directory is already gone are not listed here: with an object store, a
 * lifecycle rule on the prefix expires them (README: Retention).
 */
import { existsSync } from 'node:fs';
import { readdir, rm, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { ArtifactStore, RunFileName } from '../artifacts/artifact-store';
import { isRunId } from '../domain/run-id';
import type { RunStore } from '../queue/run-store';
import { CONTENT_TYPES, PUBLISH_PENDING, publishRunFiles, releaseRunDir } from './run-files';

export interface RunFilesSweepDeps {
  /** CORRAL_DATA_DIR: run directories are `runs/<id>` under it. */
  dataDir: string;
  runs: Pick<RunStore, 'get'>;
  artifacts: ArtifactStore;
  /** CORRAL_RUN_FILES_RETENTION_DAYS, in ms. */
  retentionMs: number;
  clock: () => number;
  /** A directory with no run record is left alone while younger than this (default one hour). */
  orphanGraceMs?: number;
  /** Directories looked at in one pass (default 10,000); the rest wait for the next pass. */
  maxDirs?: number;
}

export interface RunFilesSweep {
  /** Run directories removed (expired or forgotten runs). */
  removed: string[];
  /** Checkpoint files removed from finished runs. */
  checkpoints: number;
  /** Runs whose files the object store took on this pass. */
  published: string[];
  /** Runs whose files it still refused (the marker stays). */
  pending: string[];
}

const CHECKPOINT = /^checkpoint-[0-9]+\.(tar|patch)$/;

export async function sweepRunFiles(d: RunFilesSweepDeps): Promise<RunFilesSweep> {
  const out: RunFilesSweep = { removed: [], checkpoints: 0, published: [], pending: [] };
  const root = join(d.dataDir, 'runs');
  if (!existsSync(root)) return out;
  const now = d.clock();
  const ids = (await readdir(root)).filter(isRunId).slice(0, d.maxDirs ?? 10_000);
  for (const id of ids) {
    const dir = join(root, id);
    const run = await d.runs.get(id);
    if (run && !run.finishedAt) continue;
    if (!run) {
      const st = await stat(dir).catch(() => null);
      if (!st?.isDirectory() || now - st.mtimeMs < (d.orphanGraceMs ?? 3600_000)) continue;
    }
    if (!run || Date.parse(run.finishedAt!) < now - d.retentionMs) {
      if (run && d.artifacts.kind !== 'local') {
        await d.artifacts.delete((Object.keys(CONTENT_TYPES) as RunFileName[]).map((n) => d.artifacts.runFileKey(run.tenant, id, n)));
      }
      await rm(dir, { recursive: true, force: true });
      out.removed.push(id);
      continue;
    }
    for (const f of await readdir(dir).catch(() => [] as string[])) {
      if (!CHECKPOINT.test(f)) continue;
      await unlink(join(dir, f)).catch(() => undefined);
      out.checkpoints++;
    }
    if (d.artifacts.kind !== 'local' && existsSync(join(dir, PUBLISH_PENDING))) {
      const published = await publishRunFiles({ store: d.artifacts, tenant: run.tenant, runId: id, runDir: dir });
      if (published.failed) {
        out.pending.push(id);
        continue;
      }
      await unlink(join(dir, PUBLISH_PENDING)).catch(() => undefined);
      await releaseRunDir(d.artifacts, dir, published);
      out.published.push(id);
    }
  }
  return out;
}
