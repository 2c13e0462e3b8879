/**
 * A run's files, streamed from disk: report.md, the JSONL log, the workspace tar and patch. A worker
 * writes them under {data dir}/runs/{id}/ on its own host; this API serves the file from its own data
 * dir, or from the path the run record names when that is a file of the same name in a directory
 * named for the run (a shared volume mounted elsewhere). Anything else is a 404 that says where the
 * file is and why this host cannot serve it.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { NotFoundError } from '../domain/errors';
import type { RunView } from '../queue/run-store';
import type { ApiDeps } from './api-deps';
import { route, type RouteDoc } from './openapi';
import { ownRun } from './run-routes';
import { ErrorBody, RunParams } from './schemas';
import { parseInput } from './http-errors';

interface RunFile {
  url: string;
  name: 'report.md' | 'events.jsonl' | 'workspace.tar' | 'workspace.patch' | 'agent.bundle';
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
  throw new NotFoundError(`the ${f.name} of run ${run.id} is at ${recorded} on worker ${run.workerId ?? '?'}, which this API cannot read (it serves files from ${resolve(deps.config.CORRAL_DATA_DIR)}; share that directory with the workers)`);
}
