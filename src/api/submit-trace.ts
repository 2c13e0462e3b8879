/**
 * The span of one submission (POST /v1/runs, POST /v1/templates/:name/runs): started from the
 * request's traceparent/tracestate, ended with the answer's status; the run's trace hangs below it
 * through the job. With traces off the caller's traceparent still reaches the run.
 */
import type { FastifyRequest } from 'fastify';
import { CorralError } from '../domain/errors';
import { UNTRACED_SUBMITS, type SubmitTrace } from '../domain/run-trace';
import type { ApiDeps } from './api-deps';
import { HttpError, httpStatusOf } from './http-errors';

export function startSubmitTrace(deps: Pick<ApiDeps, 'tracing'>, req: FastifyRequest, route: string): SubmitTrace {
  const header = (n: string) => (typeof req.headers[n] === 'string' ? req.headers[n] : undefined);
  return (deps.tracing ?? UNTRACED_SUBMITS).startSubmit({ traceparent: header('traceparent'), tracestate: header('tracestate') }, { tenant: req.tenant, route });
}

/** Ends the submission's span with the status and error code the caller will get. */
export function failSubmitTrace(t: SubmitTrace, err: unknown): void {
  t.end({ status: httpStatusOf(err), error: err instanceof CorralError || err instanceof HttpError ? err.code : 'internal' });
}

/** The run's trace in the operator's viewer (CORRAL_TRACE_URL_TEMPLATE), when both are known. */
export function traceUrl(deps: Pick<ApiDeps, 'config'>, traceId: string | undefined): string | undefined {
  const t = deps.config.CORRAL_TRACE_URL_TEMPLATE;
  return t && traceId ? t.replaceAll('{traceId}', traceId) : undefined;
}
