/**
 * A run's files, streamed: report.md, the JSONL log, the workspace tar and patch, the agent's bundle.
 * With an object store (CORRAL_ARTIFACTS=s3://…) every file is read from the store under the run's
 * tenant's keys, whichever host's worker wrote it; while the run goes on, its log is served from the
 * run's event stream in Redis (the store gets it when the run ends). With the local store a worker
 * writes them under {data dir}/runs/{id}/ on its own host; this API serves the file from its own data
 * dir, or from the path the run record names when that is a file of the same name in a directory
 * named for the run (a shared volume mounted elsewhere). A run that ended before the deployment
 * switched to an object store recorded paths on disk: its files are served from there as with the
 * local store, so the switch orphans nothing (`corral artifacts migrate` moves them into the store).
 * Anything else is a 404 that says where the file is and why this host cannot serve it.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotFoundError } from '../domain/errors';
import type { RunFileName } from '../artifacts/artifact-store';
import type { RunView } from '../queue/run-store';
import type { ApiDeps } from './api-deps';
import { route, type RouteDoc } from './openapi';
import { ownRun } from './run-routes';
import { ErrorBody, RunParams } from './schemas';
import { parseInput } from './http-errors';

interface RunFile {
  url: string;
  name: RunFileName;
  contentType: string;
  summary: string;
  /** The path the run record gives for it, and what to say when there is none yet. */
  recorded(run: RunView): string | undefined;
  download?: boolean;
}

const artifact = (name: string) => (run: RunView) => run.artifacts?.find((a) => a.name === name)?.path;

const FILES: RunFile[] = [
  { url: '/v1/runs/:id/report', name: 'report.md', contentType: 'text/markdown; charset=utf-8', summary: 'The run\'s report (Markdown), once it has ended', recorded: (r) => (r.finishedAt ? r.reportPath : undefined) },
  { url: '/v1/runs/:id/logs', name: 'events.jsonl', contentType: 'application/x-ndjson', summary: 'The run\'s log: one RunEvent JSON per line (grows while the run goes)', recorded: (r) => r.logPath },
  { url: '/v1/runs/:id/artifacts/workspace.tar', name: 'workspace.tar', contentType: 'application/x-tar', summary: 'The workspace as the run left it (uncompressed tar), once it has ended', recorded: artifact('workspace.tar'), download: true },
  { url: '/v1/runs/:id/artifacts/agent.bundle', name: 'agent.bundle', contentType: 'application/octet-stream', summary: 'workspace.git with bundle: the agent\'s commits as a git bundle of branch corral/RUN_ID (git fetch agent.bundle corral/RUN_ID), once the run has ended', recorded: artifact('agent.bundle'), download: true },
  { url: '/v1/runs/:id/artifacts/needs-review.jsonl', name: 'needs-review.jsonl', contentType: 'application/x-ndjson', summary: 'Every change to review before using the artifacts (the workspace\'s and the git bundle\'s): one review flag JSON per line, once the run has ended', recorded: artifact('needs-review.jsonl') },
  { url: '/v1/runs/:id/artifacts/patch', name: 'workspace.patch', contentType: 'text/x-diff; charset=utf-8', summary: 'What the run changed in the workspace (unified diff), once it has ended', recorded: artifact('workspace.patch') },
];

export function registerRunFileRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  for (const f of FILES) {
    route(app, docs, {
      method: 'GET', url: f.url, tag: 'artifacts', summary: f.summary, params: RunParams,
      responses: {
        200: { description: f.name, contentType: f.contentType },
        400: { description: 'not a run id', schema: ErrorBody },
        404: { description: 'no such run (or another tenant\'s), the file does not exist yet, or this host cannot read it (the message says which)', schema: ErrorBody },
      },
    }, async (req, reply) => {
      const { id } = parseInput(RunParams, req.params, 'path');
      const run = await ownRun(deps, req, id);
      return sendRunFile(reply, deps, run, f);
    });
  }
}

async function sendRunFile(reply: FastifyReply, deps: ApiDeps, run: RunView, f: RunFile): Promise<FastifyReply> {
  const recorded = f.recorded(run);
  if (!recorded) {
    throw new NotFoundError(`run ${run.id} has no ${f.name} yet (status ${run.status}${run.finishedAt ? '' : '; it is written when the run ends'})`);
  }
  const store = deps.artifacts;
  if (store && store.kind !== 'local') {
    const obj = await store.get(store.runFileKey(run.tenant, run.id, f.name));
    if (obj) {
      void reply.type(f.contentType).header('content-length', String(obj.bytes));
      if (f.download) void reply.header('content-disposition', `attachment; filename="${run.id}-${f.name}"`);
      return reply.send(obj.body);
    }
    if (f.name === 'events.jsonl' && !run.finishedAt) return sendLiveLog(reply, deps, run, f);
    // A run from before the switch to the object store recorded a path on disk: serve it from there
    // (or `corral artifacts migrate` on the worker's host moves it into the store).
    if (/^s3:\/\//.test(recorded)) throw new NotFoundError(`the ${f.name} of run ${run.id} is not in the object store${run.finishedAt ? ' (its worker could not store it: see the run\'s reason)' : ' yet: it is stored when the run ends'}`);
  }
  const local = join(resolve(deps.config.CORRAL_DATA_DIR), 'runs', run.id, f.name);
  const candidates = [local];
  if (recorded !== local && basename(recorded) === f.name && basename(dirname(recorded)) === run.id) candidates.push(recorded);
  for (const path of candidates) {
    const st = await stat(path).catch(() => null);
    if (!st?.isFile()) continue;
    void reply.type(f.contentType).header('content-length', String(st.size));
    if (f.download) void reply.header('content-disposition', `attachment; filename="${run.id}-${f.name}"`);
    return reply.send(createReadStream(path));
  }
  // Where it is, on which worker, and where this API looks are the operator's to know, not the tenant's:
  // they go to the server log under the answer's reference.
  const reference = String(reply.request.id);
  const migrate = store && store.kind !== 'local' ? `, and it is not in ${store.description} either (run \`corral artifacts migrate\` on that worker's host to move it there)` : '';
  deps.log?.('a run file this API cannot read', {
    level: 'warn', reference, runId: run.id, file: f.name,
    detail: `at ${recorded} on worker ${run.workerId ?? '?'}; this API serves files from ${resolve(deps.config.CORRAL_DATA_DIR)} (share that directory with the workers)${migrate}`,
  });
  throw new NotFoundError(`the ${f.name} of run ${run.id} was written where this API cannot read it; the operator can find why in the server log (reference ${reference})`);
}

/** The log of a run still going, from its event stream in Redis (as many events as the stream keeps), as JSONL. */
async function sendLiveLog(reply: FastifyReply, deps: ApiDeps, run: RunView, f: RunFile): Promise<FastifyReply> {
  const lines: string[] = [];
  let after = '0';
  for (;;) {
    const page = await deps.store.readEvents(run.id, after, 1000);
    for (const e of page) lines.push(JSON.stringify(e.event));
    if (page.length < 1000) break;
    after = page.at(-1)!.id;
  }
  const body = lines.length ? `${lines.join('\n')}\n` : '';
  void reply.type(f.contentType).header('content-length', String(Buffer.byteLength(body))).header('x-corral-log-source', 'live event stream');
  return reply.send(body);
}
