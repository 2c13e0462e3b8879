/**
 * A workspace export as the run records it: the workspace.changes event (lists cut to a few
 * hundred entries, with counts of the rest, so one run's event and run record stay small) and the
 * summary GET /v1/runs/:id shows (the needs-review flags and what was not exported). The review
 * flags are never cut silently: every flag (the workspace's and the bundle's) is in the run's
 * needs-review.jsonl, and the counts by rule cover all of them.
 */
import type { WorkspaceChanges } from '../domain/events';
import type { ReviewFlag, ReviewRule, WorkspaceExport } from '../domain/sandbox';
import type { RunWorkspace } from '../queue/run-store';

const MAX_FILES = 1000;
const MAX_LISTED = 200;
/** The run file holding every review flag, one JSON object per line. */
export const NEEDS_REVIEW_FILE = 'needs-review.jsonl';

export function countByRule(flags: readonly ReviewFlag[]): Partial<Record<ReviewRule, number>> {
  const out: Partial<Record<ReviewRule, number>> = {};
  for (const f of flags) out[f.rule] = (out[f.rule] ?? 0) + 1;
  return out;
}

/** All flags as JSON lines (the needs-review.jsonl artifact). */
export function needsReviewLines(flags: readonly ReviewFlag[]): string {
  return flags.map((f) => JSON.stringify(f)).join('\n') + (flags.length ? '\n' : '');
}

/** `flags`: every review flag of the run (the workspace's, then the bundle's); default the export's. */
export function workspaceChanges(x: WorkspaceExport, flags: readonly ReviewFlag[] = x.needsReview): WorkspaceChanges {
  const omitted = { ...x.notExportedOmitted };
  for (const e of x.notExported.slice(MAX_LISTED)) omitted[e.code] = (omitted[e.code] ?? 0) + 1;
  return {
    files: x.files.slice(0, MAX_FILES),
    ...(x.files.length > MAX_FILES ? { filesOmitted: x.files.length - MAX_FILES } : {}),
    gitFiles: x.gitFiles.length,
    ...(x.ignored.count > 0 ? { ignored: { count: x.ignored.count, paths: x.ignored.paths.slice(0, MAX_LISTED) } } : {}),
    ...(notInPatch(x).length > 0 ? { notInPatch: notInPatch(x).slice(0, MAX_LISTED) } : {}),
    notExported: x.notExported.slice(0, MAX_LISTED),
    notExportedOmitted: omitted,
    needsReview: flags.slice(0, MAX_LISTED),
    ...(flags.length > MAX_LISTED ? { needsReviewOmitted: flags.length - MAX_LISTED } : {}),
    needsReviewByRule: countByRule(flags),
    needsReviewFile: NEEDS_REVIEW_FILE,
    notes: x.notes.slice(0, 20),
    stats: x.stats,
  };
}

/** The changes workspace.patch does not carry, and why. */
function notInPatch(x: WorkspaceExport): Array<{ path: string; reason: string }> {
  return x.files.filter((f) => f.notInPatch).map((f) => ({ path: f.path, reason: f.notInPatch! }));
}

export function runWorkspace(x: WorkspaceExport, flags: readonly ReviewFlag[] = x.needsReview): RunWorkspace {
  const notExportedTotal = x.notExported.length + Object.values(x.notExportedOmitted).reduce((n, k) => n + (k ?? 0), 0);
  return {
    filesChanged: x.files.length,
    gitFilesChanged: x.gitFiles.length,
    ignoredChanges: x.ignored.count,
    notInPatch: notInPatch(x).slice(0, MAX_LISTED),
    needsReview: flags.slice(0, MAX_LISTED),
    needsReviewTotal: flags.length,
    needsReviewByRule: countByRule(flags),
    notExported: x.notExported.slice(0, MAX_LISTED),
    notExportedTotal,
  };
}
