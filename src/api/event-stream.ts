/**
 * Server-sent events for one run: replays the run's events after `after`, then takes live rows from
 * the process's one shared feed (LiveFeed: a single blocking Redis reader for every stream, never a
 * connection per stream) and sends them, until run.finished has been sent or the client goes away.
 * Each SSE message's id is the stream id, so a client can resume with ?after=<id> (or
 * Last-Event-ID). A comment line (": heartbeat") goes out every `heartbeatMs` so proxies and clients
 * can tell a quiet run from a dead connection.
 *
 * Once the history is sent, live deltas of a streaming model answer go out too (`event:
 * model.delta`, data a LiveDelta), in stream order with the events; the history never repeats them.
 *
 * Memory per subscriber is bounded: at most one page of rows is held, and once `maxBufferedBytes`
 * wait in the socket's buffer (a client that reads slowly, or not at all) nothing more is read until
 * it drains; a client that does not drain within `slowReaderMs` is disconnected — it resumes from
 * the last id it got, nothing is lost, and the server never buffers without bound.
 */
import type { ServerResponse } from 'node:http';
import type { LiveFeed, RunStore } from '../queue/run-store';

export interface StreamOptions {
  pollMs: number;
  heartbeatMs: number;
  /** Bytes that may wait in the socket's buffer before the stream stops reading until it drains. */
  maxBufferedBytes?: number;
  /** How long a client may take to drain that buffer before it is disconnected. */
  slowReaderMs?: number;
}

/** How the stream ended: run.finished sent (or the run ended without events), the client left, or it read too slowly. */
export type StreamEnd = 'finished' | 'client_gone' | 'slow_reader';

const HISTORY_PAGE = 100;

type HistoryRow = Awaited<ReturnType<RunStore['readEvents']>>[number];

/**
 * The stream's first page, read before the caller commits to a 200 (and hijacks the reply): a Redis
 * that is away or failing over is then a 503 with Retry-After that a client waits out, not a stream
 * that ends as soon as it opened.
 */
export function firstPage(store: RunStore, runId: string, after: string): Promise<HistoryRow[]> {
  return store.readEvents(runId, after, HISTORY_PAGE);
}

export async function streamEvents(res: ServerResponse, store: RunStore, feed: LiveFeed, runId: string, after: string, o: StreamOptions & { first?: HistoryRow[] }): Promise<StreamEnd> {
  let first = o.first;
  const maxBuffered = o.maxBufferedBytes ?? 64 * 1024;
  const slowMs = o.slowReaderMs ?? 30_000;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.flushHeaders(); // the client knows at once that it has a stream, even before the first event
  const gone = new AbortController();
  let end: StreamEnd | undefined;
  res.on('close', () => {
    end ??= 'client_gone';
    gone.abort(); // a wait on the feed ends now, not at its timeout
  });
  const heartbeat = setInterval(() => {
    // A heartbeat is for a quiet stream, never piled onto a client that is not reading.
    if (!end && res.writableLength < maxBuffered) res.write(': heartbeat\n\n');
  }, o.heartbeatMs);

  /** Writes one message; when the buffer is past its bound, waits for it to drain (or gives up on the client). */
  const send = async (text: string): Promise<boolean> => {
    if (end) return false;
    // Node says when its buffer is past its own mark (write() false, then 'drain' once it empties);
    // the stream waits only once `maxBuffered` is passed too.
    if (res.write(text) || res.writableLength <= maxBuffered) return true;
    let timer: NodeJS.Timeout | undefined;
    const drained = await new Promise<boolean>((resolve) => {
      const ok = () => resolve(true);
      res.once('drain', ok);
      gone.signal.addEventListener('abort', () => resolve(false), { once: true });
      timer = setTimeout(() => {
        res.off('drain', ok);
        resolve(false);
      }, slowMs);
    });
    clearTimeout(timer);
    if (!drained && !end) {
      end = 'slow_reader';
      res.destroy(); // what it has not read is dropped; it resumes with Last-Event-ID
    }
    return drained && !end;
  };

  let cursor = after;
  try {
    // History first (events only, one page at a time) …
    for (;;) {
      const rows = first ?? (await store.readEvents(runId, cursor, HISTORY_PAGE));
      first = undefined;
      for (const r of rows) {
        if (!(await send(`id: ${r.id}\nevent: ${r.event.type}\ndata: ${JSON.stringify(r.event)}\n\n`))) return end ?? 'client_gone';
        cursor = r.id;
        if (r.event.type === 'run.finished') return (end = 'finished');
      }
      if (rows.length < HISTORY_PAGE) break;
    }
    // … then events and live deltas as they come.
    while (!end) {
      const rows = await feed.next(runId, cursor, o.pollMs, gone.signal);
      if (end) break;
      if (rows.length === 0) {
        const run = await store.get(runId);
        // A run that ended without events (a malformed job, cancelled while queued) ends the stream too.
        if (!run || (run.finishedAt && (await store.readEvents(runId, cursor, 1)).length === 0)) return (end = 'finished');
        continue;
      }
      for (const r of rows) {
        const item = r.event ?? r.delta;
        if (item && !(await send(`id: ${r.id}\nevent: ${item.type}\ndata: ${JSON.stringify(item)}\n\n`))) return end ?? 'client_gone';
        cursor = r.id;
        if (r.event?.type === 'run.finished') return (end = 'finished');
      }
    }
    return end;
  } finally {
    clearInterval(heartbeat);
    if (!res.destroyed) res.end();
  }
}
