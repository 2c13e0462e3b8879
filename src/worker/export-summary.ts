/**
 * A workspace export as the run records it: the workspace.changes event (lists cut to a few
 * hundred entries, with counts of the rest, so one run's event and run record stay small) and the
 * summary GET /v1/runs/:id shows (the needs-review flags and what was not exported).
 */
import type { WorkspaceChanges } from '../domain/events';
import type { WorkspaceExport } from '../domain/sandbox';
import type { RunWorkspace } from '../queue/run-store';

const MAX_FILES = 1000;
const MAX_LISTED = 200;

export function workspaceChanges(x: WorkspaceExport): WorkspaceChanges {
  const omitted = { ...x.notExportedOmitted };
  for (const e of x.notExported.slice(MAX_LISTED)) omitted[e.code] = (omitted[e.code] ?? 0) + 1;
  return {
    files: x.files.slice(0, MAX_FILES),
    ...(x.files.length > MAX_FILES ? { filesOmitted: x.files.length - MAX_FILES } : {}),
    gitFiles: x.gitFiles.length,
    notExported: x.notExported.slice(0, MAX_LISTED),
    notExportedOmitted: omitted,
    needsReview: x.needsReview.slice(0, MAX_LISTED),
    ...(x.needsReview.length > MAX_LISTED ? { needsReviewOmitted: x.needsReview.length - MAX_LISTED } : {}),
    notes: x.notes.slice(0, 20),
    stats: x.stats,
  };
}

export function runWorkspace(x: WorkspaceExport): RunWorkspace {
  const notExportedTotal = x.notExported.length + Object.values(x.notExportedOmitted).reduce((n, k) => n + (k ?? 0), 0);
  return {
    filesChanged: x.files.length,
    gitFilesChanged: x.gitFiles.length,
    needsReview: x.needsReview.slice(0, MAX_LISTED),
    needsReviewTotal: x.needsReview.length,
    notExported: x.notExported.slice(0, MAX_LISTED),
    notExportedTotal,
  };
}
