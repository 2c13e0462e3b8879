/**
 * Reports a process's span export counts to where /metrics reads them (Redis, through the push
 * function the composition root gives): the change since the last report, every interval and once at
 * stop. A failed push is retried with the next one (the counts are cumulative here).
 */
import type { ExportCounts } from './counted-export';

type Delta = { exported: number; droppedQueueFull: number; droppedExportFailed: number };

export function startCountsPusher(read: () => Readonly<ExportCounts>, push: (d: Delta) => Promise<void>, intervalMs: number, onError: (err: Error) => void): { stop(): Promise<void> } {
  let sent: Delta = { exported: 0, droppedQueueFull: 0, droppedExportFailed: 0 };
  let busy: Promise<void> | null = null;
  const once = async () => {
    const now = read();
    const d: Delta = { exported: now.exported - sent.exported, droppedQueueFull: now.droppedQueueFull - sent.droppedQueueFull, droppedExportFailed: now.droppedExportFailed - sent.droppedExportFailed };
    await push(d);
    sent = { exported: now.exported, droppedQueueFull: now.droppedQueueFull, droppedExportFailed: now.droppedExportFailed };
  };
  const tick = () => {
    busy ??= once().catch((err: Error) => onError(err)).finally(() => (busy = null));
  };
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      if (busy) await busy;
      await once().catch((err: Error) => onError(err));
    },
  };
}
