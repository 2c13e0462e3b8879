/**
 * A bounded export queue whose losses are counted. The SDK's BatchSpanProcessor batches and exports;
 * in front of it a gate admits a finished span only while fewer than `maxQueueSize` spans are queued
 * or being exported, so the processor's own queue never overflows uncounted: a span past the bound is
 * dropped here (`queue_full`), a batch the exporter could not deliver is counted as `export_failed`,
 * a delivered one as exported. Ending a span never waits for the network: a collector that is down
 * or slow costs dropped spans, never a run's time.
 */
import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { BatchSpanProcessor, type ReadableSpan, type Span, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';

export interface ExportCounts {
  exported: number;
  droppedQueueFull: number;
  droppedExportFailed: number;
  /** Spans queued or in an export now. */
  pending: number;
}

export interface QueueOptions {
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
}

export class CountedExport implements SpanProcessor {
  readonly counts: ExportCounts = { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0, pending: 0 };
  private readonly batch: BatchSpanProcessor;

  constructor(exporter: SpanExporter, private readonly opts: QueueOptions) {
    this.batch = new BatchSpanProcessor({ exporter: this.countingExporter(exporter), ...opts });
  }

  onStart(span: Span, parent: Context): void {
    this.batch.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & 1) === 0) return;
    if (this.counts.pending >= this.opts.maxQueueSize) {
      this.counts.droppedQueueFull += 1;
      return;
    }
    this.counts.pending += 1;
    this.batch.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.batch.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.batch.shutdown();
  }

  /** The exporter, counting each batch's end exactly once: its result, or a timeout if it never answers. */
  private countingExporter(inner: SpanExporter): SpanExporter {
    const counts = this.counts;
    const limitMs = this.opts.exportTimeoutMillis + 5000;
    return {
      export(spans: ReadableSpan[], done: (r: ExportResult) => void) {
        let settled = false;
        const settle = (r: ExportResult) => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          counts.pending = Math.max(0, counts.pending - spans.length);
          if (r.code === ExportResultCode.SUCCESS) counts.exported += spans.length;
          else counts.droppedExportFailed += spans.length;
          done(r);
        };
        const timer = setTimeout(() => settle({ code: ExportResultCode.FAILED, error: new Error('the exporter did not answer') }), limitMs);
        timer.unref();
        try {
          inner.export(spans, settle);
        } catch (err) {
          settle({ code: ExportResultCode.FAILED, error: err as Error });
        }
      },
      shutdown: () => inner.shutdown(),
      ...(inner.forceFlush ? { forceFlush: () => inner.forceFlush!() } : {}),
    };
  }
}
