/**
 * PUT /v1/workspaces: a workspace too large for a JSON body, uploaded once as a tar (plain, or gzip
 * with Content-Type: application/gzip), streamed and checked entry by entry while it arrives
 * (src/workspaces), capped by CORRAL_MAX_WORKSPACE_MB. The answer is its content-addressed id (201
 * new, 200 when this tenant already uploaded the same tar — its TTL is refreshed).
 */
import type { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiDeps } from './api-deps';
import { HttpError, parseInput } from './http-errors';
import { route, type RouteDoc } from './openapi';
import { WORKSPACE_ID } from '../domain/run-spec';
import { ErrorBody } from './schemas';

export const TAR_TYPES = ['application/x-tar', 'application/gzip', 'application/x-gzip'] as const;

const StoredWorkspaceBody = z.object({
  id: z.string().meta({ description: 'ws_ and the SHA-256 of the checked, re-packed tar' }),
  bytes: z.number().meta({ description: 'size of the stored (clean, uncompressed) tar' }),
  files: z.number(),
  dirs: z.number(),
  deduplicated: z.boolean().meta({ description: 'true: this tenant had uploaded the same tar already' }),
  expiresAt: z.string().meta({ description: 'when it is removed unless uploaded again' }),
});

export function registerWorkspaceRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  const uploads = deps.uploads;
  if (!uploads) return;
  const mb = 1024 * 1024;
  route(app, docs, {
    method: 'PUT', url: '/v1/workspaces', tag: 'workspaces', summary: 'Upload a workspace tar (plain or gzip), streamed and checked; returns its id',
    description: `Regular files, directories and symbolic links that stay inside the workspace, with relative names only (no hard links, devices, absolute or \`..\` names); at most CORRAL_MAX_WORKSPACE_MB (${deps.config.CORRAL_MAX_WORKSPACE_MB} MB here) of file content and ${deps.config.CORRAL_WORKSPACE_MAX_ENTRIES} entries, checked while streaming. Kept ${deps.config.CORRAL_WORKSPACE_TTL_S} s after the last upload of the same tar.`,
    rawBody: { contentTypes: [...TAR_TYPES], description: 'the tar; gzip with application/gzip' },
    redis: false,
    responses: {
      201: { description: 'stored', schema: StoredWorkspaceBody },
      200: { description: 'the same tar was stored already (its TTL is refreshed)', schema: StoredWorkspaceBody },
      400: { description: 'the tar was refused: the message names the entry and why', schema: ErrorBody },
    },
  }, async (req, reply) => {
    const body = req.body as Readable | undefined;
    if (!body || typeof (body as { pipe?: unknown }).pipe !== 'function') {
      throw new HttpError(415, 'unsupported_media_type', `send the workspace as a tar: Content-Type ${TAR_TYPES.join(' or ')} (got ${JSON.stringify(String(req.headers['content-type'] ?? '(none)').slice(0, 100))})`);
    }
    const type = String(req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const stored = await uploads.ingest(req.tenant, body, {
      gzip: type !== 'application/x-tar',
      caps: { maxBytes: deps.config.CORRAL_MAX_WORKSPACE_MB * mb, maxEntries: deps.config.CORRAL_WORKSPACE_MAX_ENTRIES },
    });
    return reply.status(stored.deduplicated ? 200 : 201).send(stored);
  });

  // A client that computed a directory's id (the SHA-256 of its clean tar) asks first, and sends
  // nothing when the server has it (corral submit --workspace does).
  route(app, docs, {
    method: 'GET', url: '/v1/workspaces/:id', tag: 'workspaces', summary: 'Whether this tenant\'s upload is kept; refreshes its TTL as uploading it again would',
    params: WorkspaceParams, redis: false,
    responses: {
      200: { description: 'kept (its TTL now counts from this request)', schema: KeptWorkspaceBody },
      404: { description: 'not kept for this tenant (never uploaded, or expired): PUT it', schema: ErrorBody },
    },
  }, async (req, reply) => {
    const { id } = parseInput(WorkspaceParams, req.params, 'params');
    const found = await uploads.find(req.tenant, id, { touch: true });
    if (!found) throw new HttpError(404, 'not_found', `no upload ${id} is kept for this tenant`);
    return reply.send({ id, bytes: found.bytes, files: found.files, dirs: found.dirs, expiresAt: new Date(Date.now() + deps.config.CORRAL_WORKSPACE_TTL_S * 1000).toISOString() });
  });
}

const WorkspaceParams = z.object({ id: z.string().regex(WORKSPACE_ID, 'must be a workspace id (ws_ and 64 hex digits)') });
const KeptWorkspaceBody = StoredWorkspaceBody.omit({ deduplicated: true });
