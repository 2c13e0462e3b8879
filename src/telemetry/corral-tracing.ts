/**
 * The tracing ports over one process's tracer: runs (the worker) and submissions (the API). A
 * submission's span (`corral.submit`, a server span) is the child of the caller's traceparent when the
 * request carried one; its context goes into the job, so the run's trace hangs below it.
 */
import { SpanKind, SpanStatusCode, trace, type Context, type Span } from '@opentelemetry/api';
import type { RunTrace, RunTraceStart, RunTracing, SubmitTrace, SubmitTracing } from '../domain/run-trace';
import { OtelRunTrace } from './run-trace';
import { contextFrom, traceparentOf } from './trace-context';
import type { Tracing } from './tracer';

export class CorralTracing implements RunTracing, SubmitTracing {
  constructor(private readonly t: Tracing, private readonly o: { modelServer?: { address: string; port?: number } } = {}) {}

  startRun(s: RunTraceStart): RunTrace {
    return new OtelRunTrace(s, { tracer: this.t.tracer, taskText: this.t.settings.taskText, ...(this.o.modelServer ? { modelServer: this.o.modelServer } : {}) });
  }

  startSubmit(incoming: { traceparent?: string | undefined; tracestate?: string | undefined }, attrs: { tenant: string; route: string }): SubmitTrace {
    const parent = contextFrom(incoming.traceparent, incoming.tracestate);
    const span = this.t.tracer.startSpan('corral.submit', {
      kind: SpanKind.SERVER,
      attributes: { 'http.request.method': 'POST', 'http.route': attrs.route, 'corral.tenant': attrs.tenant, 'messaging.system': 'bullmq', 'messaging.operation.type': 'send' },
    }, parent);
    const ctx = trace.setSpan(parent, span);
    const sc = span.spanContext();
    const own = trace.isSpanContextValid(sc);
    return new Submission(this.t, span, ctx, own ? traceparentOf(ctx) : traceparentOf(parent), own ? sc.traceId : trace.getSpanContext(parent)?.traceId);
  }
}

class Submission implements SubmitTrace {
  private ended = false;
  constructor(private readonly t: Tracing, private readonly span: Span, private readonly ctx: Context, readonly traceparent: string | undefined, readonly traceId: string | undefined) {}

  async phase<T>(name: string, work: () => Promise<T>): Promise<T> {
    const span = this.t.tracer.startSpan(`corral.${name}`, {}, this.ctx);
    try {
      return await work();
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      span.setAttribute('error.type', typeof code === 'string' ? code : 'error');
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw err;
    } finally {
      span.end();
    }
  }

  end(o: { status: number; runId?: string; error?: string }): void {
    if (this.ended) return;
    this.ended = true;
    this.span.setAttributes({ 'http.response.status_code': o.status, ...(o.runId ? { 'corral.run.id': o.runId, 'messaging.message.id': o.runId } : {}), ...(o.error ? { 'error.type': o.error } : {}) });
    if (o.status >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
    this.span.end();
  }
}
