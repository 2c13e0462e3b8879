/**
 * corral's error tree. Expected outcomes (a non-zero exit, a policy denial, bad tool JSON) are
 * values, not errors; these are for broken input, broken infrastructure and bugs. Each has a stable
 * `code`, mapped at three boundaries: dockerode → SandboxError, openai → ModelError, and ours →
 * HTTP status (api/) or BullMQ UnrecoverableError (worker/).
 */
export type ErrorCode =
  | 'invalid_input'
  | 'not_found'
  | 'conflict'
  | 'limit_exceeded'
  | 'sandbox_unavailable'
  | 'sandbox_failed'
  | 'path_refused'
  | 'model_failed'
  | 'policy_invalid'
  | 'cancelled'
  | 'internal';

export class CorralError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** Input that does not satisfy a schema; `field` is a dotted path such as `limits.memoryMb`. */
export class InvalidInputError extends CorralError {
  constructor(message: string, readonly field?: string, details?: Record<string, unknown>) {
    super('invalid_input', message, { ...details, ...(field ? { field } : {}) });
  }
}

export class NotFoundError extends CorralError {
  constructor(message: string) {
    super('not_found', message);
  }
}

/** The Docker daemon failed or refused; never turned into fake command output. */
export class SandboxError extends CorralError {
  constructor(code: 'sandbox_unavailable' | 'sandbox_failed' | 'path_refused' | 'limit_exceeded' | 'conflict', message: string, options?: { cause?: unknown; details?: Record<string, unknown> }) {
    super(code, message, options?.details, { cause: options?.cause });
  }
}

/** The model endpoint failed after retries (HTTP error, timeout, malformed response). */
export class ModelError extends CorralError {
  constructor(message: string, readonly status?: number, options?: { cause?: unknown }) {
    super('model_failed', message, status ? { status } : undefined, options);
  }
}

export class CancelledError extends CorralError {
  constructor(message = 'the run was cancelled') {
    super('cancelled', message);
  }
}

/** Formats a zod error as "field: message; field: message" naming each offending path. */
export function describeZodIssues(issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }>): { message: string; field?: string } {
  const parts = issues.map((i) => `${i.path.length ? i.path.map(String).join('.') : '(body)'}: ${i.message}`);
  const first = issues[0];
  return { message: parts.join('; '), field: first && first.path.length ? first.path.map(String).join('.') : undefined };
}
