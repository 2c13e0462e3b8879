/**
 * The dockerode → SandboxError boundary. A daemon that cannot be reached, or a missing image, is
 * 'sandbox_unavailable' (the host is misconfigured or down); anything else the daemon refuses or
 * fails at is 'sandbox_failed'. Never turned into fake command output.
 */
import { CorralError, SandboxError } from '../domain/errors';

const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH']);

export function toSandboxError(err: unknown, what: string): CorralError {
  if (err instanceof CorralError) return err;
  const e = err as { statusCode?: number; code?: string; message?: string; json?: { message?: string } };
  const detail = e.json?.message ?? e.message ?? String(err);
  if ((e.code && UNREACHABLE.has(e.code)) || (e.statusCode === 404 && /no such image/i.test(detail))) {
    return new SandboxError('sandbox_unavailable', `${what}: the Docker engine is unavailable or misconfigured: ${detail}`, { cause: err });
  }
  return new SandboxError('sandbox_failed', `${what}: ${detail}`, { cause: err, details: e.statusCode ? { status: e.statusCode } : undefined });
}
