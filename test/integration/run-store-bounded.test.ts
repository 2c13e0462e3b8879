/**
 * The Redis event stream of a run is bounded by the recorder's caps whatever the run emits: with the
 * real RunStore as a sink, 20,000 large events leave a stream within the byte cap, with the
 * truncation markers and the run's end in it.
 */
import { Redis } from 'ioredis';
import type { RunEventBody } from '../../src/domain/events';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { EventRecorder } from '../../src/report/event-recorder';

jest.setTimeout(60_000);

test('count and byte caps hold for the Redis stream; the end and the markers are in it', async () => {
  const redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  const prefix = `bounded-${process.pid}-${Date.now()}`;
  const store = new RedisRunStore(redis, prefix);
  const runId = 'run_bounded01';
  const writes: Promise<unknown>[] = [];
  const maxBytes = 512 * 1024;
  const rec = new EventRecorder({ runId, now: () => new Date(), sinks: [(e) => void writes.push(store.appendEvent(e))], maxBytes, maxEvents: 5000 });
  try {
    const big: RunEventBody = { type: 'egress', callId: null, host: 'x'.repeat(400), port: 443, method: 'CONNECT', decision: 'deny', reason: 'r'.repeat(400) };
    for (let i = 0; i < 20_000; i++) rec.emit(big);
    rec.emit({ type: 'run.finished', outcome: 'error', finalAnswer: null, reason: 'flood', usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 } });
    await Promise.all(writes);
    const rows = await redis.xrange(`${prefix}:run:${runId}:events`, '-', '+');
    const bytes = rows.reduce((n, [, f]) => n + Buffer.byteLength(f[1] ?? ''), 0);
    expect(bytes).toBeLessThan(maxBytes + 8192);
    expect(rows.length).toBeLessThan(1000);
    const types = rows.map(([, f]) => (JSON.parse(f[1]!) as { type: string }).type);
    expect(types.filter((t) => t === 'log.truncated')).toHaveLength(2);
    expect(types.at(-1)).toBe('run.finished');
  } finally {
    await redis.del(`${prefix}:run:${runId}:events`);
    redis.disconnect();
  }
});
