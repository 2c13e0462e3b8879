/** W3C Trace Context in and out of a span context (the SDK's propagator, no global state). */
import { ROOT_CONTEXT, defaultTextMapGetter, defaultTextMapSetter, trace, type Context } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { traceIdOf } from '../domain/run-trace';

const propagator = new W3CTraceContextPropagator();

/** A context whose parent is the given traceparent (ROOT_CONTEXT when it is absent or malformed). */
export function contextFrom(traceparent: string | undefined, tracestate?: string): Context {
  if (!traceIdOf(traceparent)) return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent: traceparent! };
  if (tracestate && tracestate.length <= 512) carrier.tracestate = tracestate;
  return propagator.extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
}

/** The traceparent of the span in `ctx` (undefined when it has none). */
export function traceparentOf(ctx: Context): string | undefined {
  if (!trace.getSpanContext(ctx)) return undefined;
  const carrier: Record<string, string> = {};
  propagator.inject(ctx, carrier, defaultTextMapSetter);
  return carrier.traceparent;
}
