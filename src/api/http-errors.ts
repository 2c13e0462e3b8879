/**
 * Errors → HTTP, in one place. Every error body is JSON `{ error: { code, message, field?, issues? } }`:
 * `field` is the dotted path of the first offending input, `issues` lists every one of them as
 * `{ path: (string|number)[], message }`. Our CorralErrors map by code; HttpError carries statuses
 * that only mean something over HTTP (401, 413, 429) and its headers (retry-after, www-authenticate).
 */
import type { FastifyReply } from 'fastify';
import type { z } from 'zod';
import { CorralError, InvalidInputError, flattenIssues, isStoreOutage, type Issue } from '../domain/errors';

export { flattenIssues, type Issue } from '../domain/errors';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message);
    this.name = 'HttpError';
  }
}

/**
 * A cap that is full: 429 (or 413 for one request larger than the cap itself) with retry-after, the
 * cap's name in `limit` and its size in `max`; the message names the configuration variable.
 */
export function limitReached(v: { limit: string; max: number; retryAfterS: number; message: string; status?: 413 | 429 }): HttpError {
  const status = v.status ?? 429;
  return new HttpError(status, status === 413 ? 'payload_too_large' : 'rate_limited', v.message, { 'retry-after': String(v.retryAfterS) }, { limit: v.limit, max: v.max, retryAfterS: v.retryAfterS });
}

const STATUS: Record<string, number> = { invalid_input: 400, not_found: 404, conflict: 409, limit_exceeded: 400, cancelled: 409, path_refused: 400, store_unavailable: 503, sandbox_unavailable: 503 };

/** What a 503 says of what is away — which kind of dependency, never where it is (bucket, endpoint, address). */
const AWAY: Record<string, string> = {
  store_unavailable: 'a store this server depends on (Redis or the object store) is unavailable',
  sandbox_unavailable: 'the sandbox engine (Docker) is unavailable',
};

/**
 * A 5xx: the answer carries only a reference (the request id); the detail is the server log's (the
 * API's error handler logs every 5xx with its cause under that reference). A dependency that is
 * away is a 503 with Retry-After; anything else is our defect, a 500.
 */
function serverError(reply: FastifyReply, status: number, code: string): FastifyReply {
  const reference = String(reply.request.id);
  if (status === 503) {
    return reply.status(503).headers({ 'retry-after': '5' }).send({ error: { code: 'unavailable', message: `${AWAY[code] ?? AWAY.store_unavailable}; try again shortly (reference ${reference})`, reference } });
  }
  return reply.status(500).send({ error: { code: 'internal', message: `internal error (reference ${reference}); the server logged it`, reference } });
}

export function dotted(path: ReadonlyArray<string | number>): string {
  return path.map(String).join('.');
}

/** Parses `value` with `schema`; a failure is a 400 whose message, field and issues name every path. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  throw invalid(where, flattenIssues(r.error.issues));
}

export function invalid(where: string, issues: Issue[]): InvalidInputError {
  const message = issues.map((i) => `${i.path.length ? dotted(i.path) : '(body)'}: ${i.message}`).join('; ');
  const first = issues.find((i) => i.path.length);
  return new InvalidInputError(`${where}: ${message}`, first ? dotted(first.path) : undefined, { issues });
}

export function sendError(reply: FastifyReply, err: unknown): FastifyReply {
  if (err instanceof HttpError) {
    return reply.status(err.status).headers(err.headers).send({ error: { code: err.code, message: err.message, ...err.extra } });
  }
  if (err instanceof CorralError) {
    const field = err instanceof InvalidInputError ? err.field : undefined;
    const status = STATUS[err.code] ?? 500;
    if (status >= 500) return serverError(reply, status, err.code);
    let issues = err.details?.issues as Issue[] | undefined;
    if (!issues && status === 400) issues = [{ path: field ? field.split('.') : [], message: err.message }];
    return reply.status(status).send({ error: { code: err.code, message: err.message, ...(field ? { field } : {}), ...(issues ? { issues } : {}) } });
  }
  const e = err as { statusCode?: number; code?: string; message?: string };
  if (e.statusCode === 413) {
    return reply.status(413).send({ error: { code: 'payload_too_large', message: `the request body is larger than this server accepts (${e.message ?? ''}); see CORRAL_API_MAX_BODY_BYTES` } });
  }
  if (e.statusCode === 415) {
    return reply.status(415).send({ error: { code: 'unsupported_media_type', message: `the body must be JSON: send Content-Type: application/json (got ${JSON.stringify(String(reply.request.headers['content-type'] ?? '(none)').slice(0, 100))})` } });
  }
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) {
    // Fastify's own client errors: bad JSON, wrong content type.
    return reply.status(e.statusCode).send({
      error: { code: 'invalid_input', message: e.message ?? 'bad request', issues: [{ path: [], message: e.message ?? 'bad request' }], ...(e.code ? { detail: e.code } : {}) },
    });
  }
  if (isStoreOutage(err)) return serverError(reply, 503, 'store_unavailable');
  // Anything else is our defect: the caller gets a reference, the log gets the error (never the
  // other way round — a Redis reply or a stack says nothing useful to a client and may say too much).
  return serverError(reply, 500, 'internal');
}

/** The status sendError answers `err` with (for a span or a log line that records the answer). */
export function httpStatusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof CorralError) return STATUS[err.code] ?? 500;
  const e = err as { statusCode?: number };
  if (e.statusCode && e.statusCode >= 400 && e.statusCode < 500) return e.statusCode;
  return isStoreOutage(err) ? 503 : 500;
}
