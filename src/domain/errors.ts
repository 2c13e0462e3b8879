/**
 * corral's error tree. Expected outcomes (a non-zero exit, a policy denial, bad tool JSON) are
 * values, not errors; these are for broken input, broken infrastructure and bugs. Each has a stable
 * `code`, mapped at three boundaries: dockerode → SandboxError, openai → ModelError, and ours →
 * HTTP status (api/) or JobFailure (worker/: an UnrecoverableError that keeps the code and cause).
 */
import type { z } from 'zod';

export const ERROR_CODES = [
  'invalid_input',
  'not_found',
  'conflict',
  'limit_exceeded',
  'sandbox_unavailable',
  'store_unavailable',
  'sandbox_failed',
  'path_refused',
  'model_failed',
  'policy_invalid',
  'policy_refused',
  'run_failed',
  'setup_failed',
  'worker_lost',
  /** The run's durable log (events.jsonl) could not be written whole. */
  'log_failed',
  'cancelled',
  'internal',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** What every CorralError takes last: the error it was made from, kept as `cause` (logs, job failures). */
export interface CorralErrorOptions {
  cause?: unknown;
}

export class CorralError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    options?: CorralErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }

  /**
   * `err` re-worded as `message`, keeping its class of failure: a CorralError keeps its code, a
   * Redis connection failure is store_unavailable, anything else is `otherwise`; `err` is the cause.
   * Re-wrapping never turns broken infrastructure into bad input (or the reverse).
   */
  static wrap(err: unknown, message: string, otherwise: ErrorCode = 'internal'): CorralError {
    return new CorralError(codeOf(err, otherwise), message, err instanceof CorralError ? err.details : undefined, { cause: err });
  }
}

/** The code of what broke: a CorralError's own, store_unavailable for a Redis connection failure, else `otherwise`. */
export function codeOf(err: unknown, otherwise: ErrorCode = 'internal'): ErrorCode {
  if (err instanceof CorralError) return err.code;
  return isStoreOutage(err) ? 'store_unavailable' : otherwise;
}

/**
 * ioredis failing fast while Redis is away or failing over (the API's connection has no offline queue
 * and bounds each command): refused or dropped connections, retries used up, a command that timed out
 * (a primary that hangs), no sentinel answering, a replica's or a demoted primary's refusal (READONLY,
 * MASTERDOWN, NOREPLICAS), a replica still loading, a blocked call ended by a role change (UNBLOCKED).
 */
export function isStoreOutage(err: unknown): boolean {
  const e = err as { name?: string; message?: string; code?: string } | null | undefined;
  const message = e?.message ?? '';
  return e?.name === 'MaxRetriesPerRequestError'
    || /enableOfflineQueue|Connection is closed|ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|Stream isn't writeable|Command timed out|Socket timeout|sentinels are unreachable|failed to connect to sentinel/i.test(message)
    || /^(LOADING|READONLY|MASTERDOWN|NOREPLICAS|UNBLOCKED|TRYAGAIN|CLUSTERDOWN)\b/.test(message)
    || e?.code === 'ECONNREFUSED' || e?.code === 'ECONNRESET';
}

/** Input that does not satisfy a schema; `field` is a dotted path such as `limits.memoryMb`. */
export class InvalidInputError extends CorralError {
  constructor(message: string, readonly field?: string, details?: Record<string, unknown>, options?: CorralErrorOptions) {
    super('invalid_input', message, { ...details, ...(field ? { field } : {}) }, options);
  }
}

/** Redis (the run store and the queue) cannot be reached or is unfit (it may evict keys). */
export class StoreUnavailableError extends CorralError {
  constructor(message: string, options?: CorralErrorOptions) {
    super('store_unavailable', message, undefined, options);
  }
}

export class NotFoundError extends CorralError {
  constructor(message: string, options?: CorralErrorOptions) {
    super('not_found', message, undefined, options);
  }
}

/** The Docker daemon failed or refused; never turned into fake command output. */
export class SandboxError extends CorralError {
  constructor(code: 'sandbox_unavailable' | 'sandbox_failed' | 'path_refused' | 'limit_exceeded' | 'conflict', message: string, options?: CorralErrorOptions & { details?: Record<string, unknown> }) {
    super(code, message, options?.details, options && 'cause' in options ? { cause: options.cause } : undefined);
  }
}

/** The model endpoint failed after retries (HTTP error, timeout, malformed response). */
export class ModelError extends CorralError {
  constructor(message: string, readonly status?: number, options?: CorralErrorOptions) {
    super('model_failed', message, status ? { status } : undefined, options);
  }
}

/**
 * The code a run's end carries outside the run (its job's failure, GET /v1/runs/:id `errorCode`):
 * budgets and wall time → limit_exceeded, the policy's abort → policy_refused, a task judged failed →
 * run_failed, an error → the code of what broke (internal when it was not one of ours).
 */
export function codeForOutcome(outcome: string, errorCode?: ErrorCode): ErrorCode {
  switch (outcome) {
    case 'cancelled': return 'cancelled';
    case 'budget_exhausted':
    case 'timed_out': return 'limit_exceeded';
    case 'policy_aborted': return 'policy_refused';
    case 'failed': return 'run_failed';
    case 'setup_failed': return 'setup_failed';
    default: return errorCode ?? 'internal';
  }
}

export class CancelledError extends CorralError {
  constructor(message = 'the run was cancelled', options?: CorralErrorOptions) {
    super('cancelled', message, undefined, options);
  }
}

export interface Issue {
  path: Array<string | number>;
  message: string;
}

/** zod issues as {path, message}: record-key issues carry their inner messages, unknown keys one issue each. */
export function flattenIssues(issues: readonly z.core.$ZodIssue[], base: Array<string | number> = []): Issue[] {
  const out: Issue[] = [];
  for (const i of issues) {
    const path = [...base, ...i.path.map((p) => (typeof p === 'number' ? p : String(p)))];
    if (i.code === 'unrecognized_keys') {
      for (const k of i.keys) out.push({ path: [...path, k], message: 'unknown field (not in the schema)' });
    } else if (i.code === 'invalid_key' || i.code === 'invalid_element') {
      const inner = flattenIssues(i.issues, path);
      out.push(...(inner.length ? inner : [{ path, message: i.message }]));
    } else if (i.code === 'invalid_union' && i.errors.length === 1) {
      out.push(...flattenIssues(i.errors[0]!, path));
    } else {
      out.push({ path, message: i.message });
    }
  }
  return out;
}

/** Formats a zod error as "field: message; field: message" naming each offending path (flattenIssues). */
export function describeZodIssues(issues: readonly z.core.$ZodIssue[]): { message: string; field?: string } {
  const flat = flattenIssues(issues);
  const parts = flat.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(body)'}: ${i.message}`);
  const first = flat.find((i) => i.path.length);
  return { message: parts.join('; '), field: first ? first.path.map(String).join('.') : undefined };
}
