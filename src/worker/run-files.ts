/**
 * A run's files leave the worker's host: at the end of a run, whatever the end, the worker puts its
 * files (events.jsonl, report.md, workspace.tar, workspace.patch, agent.bundle) into the artifact
 * store; with an object store it then removes the run's directory, so the host keeps nothing of it.
 * A run whose worker died is finished by whichever worker notices (start-worker.ts): it writes the
 * log as far as it got — the store's copy, else the run's event stream in Redis — with a closing
 * run.finished event, and a report from that log, so a crashed run has files like any other.
 */
import { existsSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { readStored, type ArtifactStore, type RunFileName } from '../artifacts/artifact-store';
import type { RunEvent } from '../domain/events';
import type { LogSeal, RunStore } from '../queue/run-store';
import { logGenesis, sealLine, stripChain } from '../report/log-chain';
import { buildReport } from '../report/report-markdown';

export const CONTENT_TYPES: Record<RunFileName, string> = {
  'events.jsonl': 'application/x-ndjson',
  'report.md': 'text/markdown; charset=utf-8',
  'workspace.tar': 'application/x-tar',
  'workspace.patch': 'text/x-diff; charset=utf-8',
  'agent.bundle': 'application/octet-stream',
  'needs-review.jsonl': 'application/x-ndjson',
};

export interface PublishedFiles {
  stored: Array<{ name: RunFileName; bytes: number; ms: number }>;
  /** Why a file could not be stored (the run's directory is then kept on this host). */
  failed?: string;
}

/** Puts the run's files that exist in `runDir` into the store (see releaseRunDir for the directory). */
export async function publishRunFiles(o: { store: ArtifactStore; tenant: string; runId: string; runDir: string }): Promise<PublishedFiles> {
  const stored: PublishedFiles['stored'] = [];
  for (const name of Object.keys(CONTENT_TYPES) as RunFileName[]) {
    const path = join(o.runDir, name);
    if (!existsSync(path)) continue;
    const t0 = Date.now();
    try {
      const { bytes } = await o.store.putFile(o.store.runFileKey(o.tenant, o.runId, name), path, CONTENT_TYPES[name]);
      stored.push({ name, bytes, ms: Date.now() - t0 });
    } catch (err) {
      return { stored, failed: `${name}: ${(err as Error).message}` };
    }
  }
  return { stored };
}

/** The marker a run's directory keeps while its files still have to go to the object store (run-files-sweeper.ts retries). */
export const PUBLISH_PENDING = 'publish-pending.json';

/**
 * publishRunFiles, and when an object store did not take every file, a publish-pending marker in the
 * run's directory (its tenant, when, why) so that the run-files sweeper tries again later.
 */
export async function publishOrMark(o: { store: ArtifactStore; tenant: string; runId: string; runDir: string; at: Date }): Promise<PublishedFiles> {
  const published = await publishRunFiles(o);
  if (published.failed && o.store.kind !== 'local') {
    await writeFile(join(o.runDir, PUBLISH_PENDING), JSON.stringify({ tenant: o.tenant, runId: o.runId, at: o.at.toISOString(), failed: published.failed.slice(0, 2000) }));
  }
  return published;
}

/** After an object store took all of a run's files, its directory on this host goes. */
export async function releaseRunDir(store: ArtifactStore, runDir: string, published: PublishedFiles): Promise<void> {
  if (store.kind !== 'local' && !published.failed) await rm(runDir, { recursive: true, force: true });
}

/** Reads at most `maxBytes` of a stored JSONL log as events (a torn last line is dropped). */
async function storedLog(store: ArtifactStore, key: string, maxBytes: number): Promise<RunEvent[] | null> {
  const stored = await readStored(store, key, maxBytes);
  if (!stored) return null;
  const out: RunEvent[] = [];
  for (const line of stored.bytes.toString('utf8').split('\n')) {
    try {
      if (line.trim()) out.push(stripChain(JSON.parse(line) as RunEvent));
    } catch {
      // a line cut by the crash or the cap
    }
  }
  return out;
}

/**
 * Writes the files of a run that ended without its worker (worker_lost): the log so far plus a
 * run.finished event, and the report. Does nothing when the run already has a report in the store.
 * The log is chained afresh from the run's genesis (its events as the dead worker's log or the Redis
 * stream kept them): its seal is returned for the run record.
 */
export async function publishLostRun(o: {
  store: ArtifactStore; runs: RunStore; tenant: string; runId: string; scratchDir: string;
  reason: string; at: Date; maxLogBytes: number; maxEvents: number;
}): Promise<(PublishedFiles & { seal: LogSeal }) | null> {
  const reportKey = o.store.runFileKey(o.tenant, o.runId, 'report.md');
  if ((await o.store.size(reportKey)) !== null) return null;
  const logKey = o.store.runFileKey(o.tenant, o.runId, 'events.jsonl');
  let events = await storedLog(o.store, logKey, o.maxLogBytes);
  if (!events) events = (await o.runs.readEvents(o.runId, '0', o.maxEvents)).map((e) => e.event);
  const last = events.at(-1);
  const usage = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 };
  for (const e of events) {
    if (e.type === 'model.response') {
      usage.llmCalls++;
      usage.inputTokens += e.usage.inputTokens;
      usage.outputTokens += e.usage.outputTokens;
      usage.costUsd += e.costUsd;
    }
    if (e.type === 'tool.result') usage.toolCalls++;
  }
  const started = events.find((e) => e.type === 'run.started');
  if (started) usage.wallTimeMs = Math.max(0, o.at.getTime() - Date.parse(started.ts));
  if (last?.type !== 'run.finished') {
    events.push({ type: 'run.finished', outcome: 'error', finalAnswer: null, reason: o.reason, usage, runId: o.runId, seq: (last?.seq ?? 0) + 1, ts: o.at.toISOString() });
  }
  const dir = join(o.scratchDir, `lost-${o.runId}`);
  await mkdir(dir, { recursive: true });
  try {
    let prev = logGenesis(o.runId, (await o.runs.getSpec(o.runId)) ?? null);
    const lines = events.map((e) => {
      const sealed = sealLine(prev, e);
      prev = sealed.hash;
      return sealed.line;
    });
    const seal: LogSeal = { finalHash: prev, lines: lines.length };
    await writeFile(join(dir, 'events.jsonl'), lines.join('\n') + '\n');
    await writeFile(join(dir, 'report.md'), buildReport(events, { audit: seal }));
    const stored: PublishedFiles['stored'] = [];
    for (const name of ['events.jsonl', 'report.md'] as const) {
      const t0 = Date.now();
      const { bytes } = await o.store.putFile(o.store.runFileKey(o.tenant, o.runId, name), join(dir, name), CONTENT_TYPES[name]);
      stored.push({ name, bytes, ms: Date.now() - t0 });
    }
    return { stored, seal };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
