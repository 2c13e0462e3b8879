/**
 * Server-sent events for one run: replays the run's events after `after`, then waits on its Redis
 * stream (XREAD BLOCK on a connection of its own, at most `pollMs` at a time) and sends new ones, until run.finished has been sent or the client goes away. Each SSE
 * message's id is the stream id, so a client can resume with ?after=<id> (or Last-Event-ID). A
 * comment line (": heartbeat") goes out every `heartbeatMs` so proxies and clients can tell a quiet
 * run from a dead connection.
 *
 * Once the history is sent, live deltas of a streaming model answer go out too (`event:
 * model.delta`, data a LiveDelta), in stream order with the events; the history never repeats them.
 */
import type { ServerResponse } from 'node:http';
import type { LiveDelta, RunEvent } from '../domain/events';
import type { RunStore } from '../queue/run-store';

export interface StreamOptions {
  pollMs: number;
  heartbeatMs: number;
}

export async function streamEvents(res: ServerResponse, store: RunStore, runId: string, after: string, o: StreamOptions): Promise<void> {
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  let closed = false;
  const waiter = store.streamWaiter();
  res.on('close', () => {
    closed = true;
    waiter.close(); // a blocked wait ends now, not at its timeout
  });
  const heartbeat = setInterval(() => {
    if (!closed) res.write(': heartbeat\n\n');
  }, o.heartbeatMs);
  let cursor = after;
  // History first (events only); once caught up, events and live deltas as they come.
  let live = false;
  const PAGE = 500;
  try {
    while (!closed) {
      const rows: Array<{ id: string; event?: RunEvent; delta?: LiveDelta }> = live ? await store.readLive(runId, cursor, PAGE) : await store.readEvents(runId, cursor, PAGE);
      for (const r of rows) {
        const item = r.event ?? r.delta;
        if (item) res.write(`id: ${r.id}\nevent: ${item.type}\ndata: ${JSON.stringify(item)}\n\n`);
        cursor = r.id;
        if (r.event?.type === 'run.finished') closed = true;
      }
      if (closed) break;
      if (rows.length < PAGE) live = true;
      if (rows.length === 0) {
        const run = await store.get(runId);
        // A run that ended without events (a malformed job, cancelled while queued) ends the stream too.
        if (!run || (run.finishedAt && (await store.readEvents(runId, cursor)).length === 0)) break;
        // Until the stream grows past the cursor (or pollMs passes: then the run's state is checked again).
        await waiter.wait(runId, cursor, o.pollMs).catch((err: Error) => {
          if (!closed) throw err;
        });
      }
    }
  } finally {
    clearInterval(heartbeat);
    waiter.close();
    res.end();
  }
}
