/**
 * The process's tracer: the OpenTelemetry trace SDK with an OTLP/HTTP exporter (protobuf, or JSON),
 * configured from the settings config.ts reads out of the standard OTEL_* variables — never from the
 * environment directly. One provider per process, not registered globally (nothing else in the
 * process is traced behind our back); `shutdown` flushes what is queued within the export timeout.
 */
import { trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler, AlwaysOnSampler, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider, type Sampler,
} from '@opentelemetry/sdk-trace';
import { CountedExport, type ExportCounts, type QueueOptions } from './counted-export';

/** What the tracer needs (config.ts's TracingSettings has this shape). */
export interface TracerSettings {
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  timeoutMs: number;
  compression: 'gzip' | 'none';
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: { kind: string; ratio: number };
  queue: QueueOptions;
  taskText: boolean;
  urlTemplate?: string;
}

export interface Tracing {
  readonly tracer: Tracer;
  readonly settings: TracerSettings;
  /** Spans exported and dropped so far (for /metrics). */
  counts(): Readonly<ExportCounts>;
  /** Sends what is queued (bounded by the export timeout). */
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}

function samplerOf(s: TracerSettings['sampler']): Sampler {
  switch (s.kind) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return new TraceIdRatioBasedSampler(s.ratio);
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(s.ratio) });
    default: return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** `role`: api or worker (service.instance.id's prefix); `instance`: the worker id or host. */
export function startTracing(settings: TracerSettings, who: { role: 'api' | 'worker' | 'api+worker'; instance: string; version: string }): Tracing {
  const exporterConfig = {
    url: settings.url, headers: { ...settings.headers }, timeoutMillis: settings.timeoutMs,
    ...(settings.compression === 'gzip' ? { compression: 'gzip' as never } : {}),
  };
  const exporter = settings.protocol === 'http/json' ? new JsonExporter(exporterConfig) : new ProtoExporter(exporterConfig);
  const processor = new CountedExport(exporter, settings.queue);
  const resource = defaultResource().merge(resourceFromAttributes({
    ...settings.resourceAttributes,
    'service.name': settings.serviceName,
    'service.version': who.version,
    'service.instance.id': `${who.role}:${who.instance}`,
    'corral.role': who.role,
  }));
  const provider = new TracerProvider({
    resource, sampler: samplerOf(settings.sampler), spanProcessors: [processor],
    spanLimits: { attributeValueLengthLimit: 4096, attributeCountLimit: 64, eventCountLimit: 64 },
  });
  return {
    tracer: provider.getTracer('corral', who.version),
    settings,
    counts: () => ({ ...processor.counts }),
    flush: () => provider.forceFlush({ timeoutMillis: settings.queue.exportTimeoutMillis }),
    shutdown: () => provider.shutdown(),
  };
}

/** A tracer that records nothing (for code that wants a Tracer with traces off). */
export const noopTracer: Tracer = trace.getTracer('corral-noop');
