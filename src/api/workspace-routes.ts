/**
 * PUT /v1/workspaces: a workspace too large for a JSON body, uploaded once as a tar (plain, or gzip
 * with Content-Type: application/gzip), streamed and checked entry by entry while it arrives
 * (src/workspaces), capped by CORRAL_MAX_WORKSPACE_MB. The answer is its content-addressed id (201
 * new, 200 when this tenant already uploaded the same tar — its TTL is refreshed).
 * Each upload holds an in-flight slot (per tenant and service-wide) and is charged as it arrives
 * against the tenant's bytes per hour and bytes kept (queue/upload-quota.ts); a full cap is a 429
 * naming it. DELETE /v1/workspaces/:id removes an upload and frees what it counted.
 */
import { PassThrough, type Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ApiDeps } from './api-deps';
import { InvalidInputError, NotFoundError } from '../domain/errors';
import { UploadRefusedError } from '../workspaces/workspace-uploads';
import { HttpError, limitReached, parseInput } from './http-errors';
import { lingerAfterAnswer } from './request-guards';
import { route, type RouteDoc } from './openapi';
import { WORKSPACE_ID } from '../domain/run-spec';
import { ErrorBody } from './schemas';

export const TAR_TYPES = ['application/x-tar', 'application/gzip', 'application/x-gzip'] as const;
/** What a 429 for too many uploads in flight suggests. */
const UPLOAD_RETRY_S = 5;

const WorkspaceParams = z.object({ id: z.string().regex(WORKSPACE_ID, 'must be a workspace id (ws_ and 64 hex digits)') }).strict();

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
    description: `Regular files, directories and symbolic links that stay inside the workspace, with relative names only (no hard links, devices, absolute or \`..\` names); at most CORRAL_MAX_WORKSPACE_MB (${deps.config.CORRAL_MAX_WORKSPACE_MB} MB here) of file content and ${deps.config.CORRAL_WORKSPACE_MAX_ENTRIES} entries, checked while streaming. Kept ${deps.config.CORRAL_WORKSPACE_TTL_S} s after the last upload of the same tar. Names the workspace export would refuse (control, bidi and separator characters, bytes that are not UTF-8) and a tar with no entries are refused. Per tenant: ${deps.config.CORRAL_TENANT_MAX_UPLOADS} uploads in flight (CORRAL_TENANT_MAX_UPLOADS), ${deps.config.CORRAL_TENANT_UPLOAD_MB_PER_HOUR} MiB per hour (CORRAL_TENANT_UPLOAD_MB_PER_HOUR) and ${deps.config.CORRAL_TENANT_UPLOAD_STORED_MB} MiB kept (CORRAL_TENANT_UPLOAD_STORED_MB), each upload counting at least 1 MiB; the service as a whole: ${deps.config.CORRAL_API_MAX_UPLOADS} in flight and ${deps.config.CORRAL_API_UPLOAD_STORED_MB} MiB kept. A body that arrives slower than ${deps.config.CORRAL_API_MIN_BODY_BYTES_PER_S} bytes/s over 10 s (CORRAL_API_MIN_BODY_BYTES_PER_S), or not within CORRAL_API_REQUEST_TIMEOUT_S, is answered 408 and its connection closed.`,
    rawBody: { contentTypes: [...TAR_TYPES], description: 'the tar; gzip with application/gzip' },
    responses: {
      201: { description: 'stored', schema: StoredWorkspaceBody },
      200: { description: 'the same tar was stored already (its TTL is refreshed)', schema: StoredWorkspaceBody },
      400: { description: 'the tar was refused: the message names the entry and why (an empty tar too)', schema: ErrorBody },
      413: { description: 'this upload alone is larger than a per-tenant cap (kept bytes, CORRAL_TENANT_UPLOAD_STORED_MB, or bytes per hour, CORRAL_TENANT_UPLOAD_MB_PER_HOUR): by its Content-Length (plain tar), or as it arrives', schema: ErrorBody },
      429: { description: 'a cap is full — error.limit says which: uploads_per_tenant / uploads_global (in flight), upload_bytes_per_hour, upload_stored_per_tenant / upload_stored_global (kept bytes)', schema: ErrorBody, headers: { 'retry-after': 'seconds to wait' } },
    },
  }, async (req, reply) => {
    const body = req.body as Readable | undefined;
    if (!body || typeof (body as { pipe?: unknown }).pipe !== 'function') {
      throw new HttpError(415, 'unsupported_media_type', `send the workspace as a tar: Content-Type ${TAR_TYPES.join(' or ')} (got ${JSON.stringify(String(req.headers['content-type'] ?? '(none)').slice(0, 100))})`);
    }
    // Whatever ends this request early, the rest of a body the client is still sending is read and
    // dropped, up to a bound, so that the client sees the answer (request-guards.ts).
    const refuse = (err: HttpError) => {
      lingerAfterAnswer(req.raw, reply.raw, req.tenant);
      return err;
    };
    // A plain tar announced larger than a per-tenant byte cap can never pass it: 413 before a byte is read.
    const type = String(req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (type === 'application/x-tar' && Number.isFinite(declared)) {
      const c = deps.config;
      for (const [limit, mbCap, variable] of [['upload_stored_per_tenant', c.CORRAL_TENANT_UPLOAD_STORED_MB, 'CORRAL_TENANT_UPLOAD_STORED_MB'], ['upload_bytes_per_hour', c.CORRAL_TENANT_UPLOAD_MB_PER_HOUR, 'CORRAL_TENANT_UPLOAD_MB_PER_HOUR']] as const) {
        if (declared <= mbCap * mb) continue;
        await deps.held.countRefusal(limit, req.tenant).catch(() => undefined);
        throw refuse(limitReached({ status: 413, limit, max: mbCap * mb, retryAfterS: 3600, message: `this upload (${declared} bytes) alone is larger than ${mbCap} MiB (${variable})` }));
      }
    }
    // An upload holds a slot (per tenant and service-wide) while it arrives.
    const slot = await deps.held.take('uploads', req.tenant, {
      perTenant: deps.config.CORRAL_TENANT_MAX_UPLOADS, perTenantVar: 'CORRAL_TENANT_MAX_UPLOADS',
      global: deps.config.CORRAL_API_MAX_UPLOADS, globalVar: 'CORRAL_API_MAX_UPLOADS', retryAfterS: UPLOAD_RETRY_S,
    });
    if (!slot.ok) throw refuse(limitReached(slot));
    // The request stream goes to the tar reader through a pipe of its own: when the reader stops
    // early (a refusal), only that pipe is destroyed, never the connection the answer must go out on.
    const piped = new PassThrough();
    body.pipe(piped);
    // A client that goes away (or is cut off) ends the upload: pipe() alone would wait forever.
    const gone = () => {
      if (!req.raw.complete) piped.destroy(new Error('the client went away before the upload was complete (premature close)'));
    };
    req.raw.once('close', gone);
    body.once('error', (err: Error) => piped.destroy(err));
    let stored;
    try {
      stored = await uploads.ingest(req.tenant, piped, {
        gzip: type !== 'application/x-tar',
        caps: { maxBytes: deps.config.CORRAL_MAX_WORKSPACE_MB * mb, maxEntries: deps.config.CORRAL_WORKSPACE_MAX_ENTRIES },
        holdMs: deps.config.CORRAL_API_REQUEST_TIMEOUT_S * 1000,
      });
    } catch (err) {
      // What is left of the body no longer goes to the reader (it would hold it back): it is dropped.
      body.unpipe(piped);
      piped.destroy();
      if (err instanceof UploadRefusedError) throw refuse(limitReached(err.verdict));
      if (err instanceof InvalidInputError) lingerAfterAnswer(req.raw, reply.raw, req.tenant);
      throw err;
    } finally {
      // Before the answer: a client that uploads again at once finds its slot free.
      await slot.release().catch(() => undefined); // unreleased, the lease runs out on its own
    }
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

  route(app, docs, {
    method: 'DELETE', url: '/v1/workspaces/:id', tag: 'workspaces', summary: 'Remove an upload now (it stops counting against the tenant\'s kept bytes)',
    params: WorkspaceParams,
    responses: {
      204: { description: 'removed' },
      400: { description: 'the id is not a workspace id', schema: ErrorBody },
      404: { description: 'this tenant has no such upload', schema: ErrorBody },
    },
  }, async (req, reply) => {
    const { id } = parseInput(WorkspaceParams, req.params, 'path');
    if (!(await uploads.remove(req.tenant, id))) throw new NotFoundError(`no upload with id ${id}`);
    return reply.status(204).send();
  });
}

const KeptWorkspaceBody = StoredWorkspaceBody.omit({ deduplicated: true });
