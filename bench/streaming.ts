/**
 * Stage 8, streaming: what asking for streamed answers costs, beside the baseline of plain JSON
 * answers in the same run. The real openai SDK talks to the scripted OpenAI-compatible server on
 * loopback; each turn is an answer of BENCH_STREAM_CHARS characters of text plus one tool call with
 * 2,000 characters of arguments (7-character chunks, as OpenAI sends them).
 *   fast:  chunks back to back — the client-side cost of parsing and assembling the stream (ms and
 *          CPU ms per turn), streamed vs plain, BENCH_STREAM_TURNS turns each, alternated;
 *   paced: chunks 2 ms apart (a model writing ~3,500 characters a second) with the worker's
 *          DeltaPublisher writing live deltas to a real Redis stream — time to the first text, live
 *          deltas and Redis writes per turn (coalescing), BENCH_STREAM_PACED_TURNS turns.
 */
import OpenAI from 'openai';
import { RedisConnections } from '../src/queue/redis-connections';
import type { LiveDelta } from '../src/domain/events';
import { OpenAIModel } from '../src/llm/openai-model';
import { RedisRunStore } from '../src/queue/redis-run-store';
import { DeltaPublisher } from '../src/worker/delta-publisher';
import { startFakeDecisionsServer, type Scripted } from '../test/support/fake-decisions-server';
import { finalTurn } from '../test/support/fake-openai-chat';
import { envInt, round, stats, type P50P95 } from './stats';

export interface StreamingBench {
  answer_chars: number;
  fast: { turns: number; plain_ms: P50P95; streamed_ms: P50P95; plain_cpu_ms: P50P95; streamed_cpu_ms: P50P95; ratio_streamed_to_plain_p50: number };
  paced: { turns: number; chunks_per_turn: number; turn_ms: P50P95; first_text_ms: P50P95; deltas_per_turn: P50P95; redis_writes_per_s: number };
}

function answer(chars: number): Scripted {
  const s = finalTurn('x'.repeat(chars), { prompt_tokens: 1000, completion_tokens: Math.ceil(chars / 4) });
  const msg = (s.body as { choices: Array<{ finish_reason: string; message: Record<string, unknown> }> }).choices[0]!;
  msg.message.tool_calls = [{ id: 'call_b', type: 'function', function: { name: 'write_file', arguments: JSON.stringify({ path: 'a.txt', content: 'y'.repeat(1970) }) } }];
  msg.finish_reason = 'tool_calls';
  return s;
}

export async function benchStreaming(o: { redisUrl: string }): Promise<StreamingBench> {
  const chars = envInt('BENCH_STREAM_CHARS', 4000);
  const turns = envInt('BENCH_STREAM_TURNS', 60);
  const pacedTurns = envInt('BENCH_STREAM_PACED_TURNS', 8);
  let delay = 0;
  const server = await startFakeDecisionsServer({ chat: () => ({ ...answer(chars), chunkDelayMs: delay }) });
  const client = new OpenAI({ apiKey: 'bench', baseURL: server.baseURL, maxRetries: 0 });
  const plain = new OpenAIModel(client, 'bench-model');
  const streamed = new OpenAIModel(client, 'bench-model', { stream: true });
  const req = { messages: [{ role: 'user' as const, content: 'go' }], tools: [] };
  const redis = new RedisConnections(o.redisUrl).open('commands', 'bench-streaming');
  try {
    const once = async (m: OpenAIModel, onDelta?: () => void) => {
      const cpu = process.cpuUsage();
      const t = performance.now();
      await m.complete({ ...req, ...(onDelta ? { onDelta } : {}) });
      const c = process.cpuUsage(cpu);
      return { ms: performance.now() - t, cpuMs: (c.user + c.system) / 1000 };
    };
    for (let i = 0; i < 5; i++) {
      await once(plain);
      await once(streamed, () => undefined);
    }
    const p: Array<{ ms: number; cpuMs: number }> = [];
    const s: Array<{ ms: number; cpuMs: number }> = [];
    for (let i = 0; i < turns; i++) {
      if (i % 2) {
        p.push(await once(plain));
        s.push(await once(streamed, () => undefined));
      } else {
        s.push(await once(streamed, () => undefined));
        p.push(await once(plain));
      }
    }

    delay = 2;
    const store = new RedisRunStore(redis, `bench-stream-${process.pid}`);
    const turnMs: number[] = [];
    const firstText: number[] = [];
    const deltasPerTurn: number[] = [];
    let writes = 0;
    let writingMs = 0;
    for (let i = 0; i < pacedTurns; i++) {
      const runId = `run_benchstream${i}`;
      const published: LiveDelta[] = [];
      const pub = new DeltaPublisher({ runId, now: () => new Date(), maxDeltas: 2000, publish: async (d) => { published.push(d); await store.appendDelta(d); } });
      const t = performance.now();
      let first = -1;
      await streamed.complete({
        ...req,
        onDelta: (d) => {
          if (first < 0 && d.kind === 'text') first = performance.now() - t;
          pub.push(1, d);
        },
      });
      pub.flush();
      const ms = performance.now() - t;
      await new Promise((r) => setTimeout(r, 20));
      pub.close();
      turnMs.push(ms);
      firstText.push(first);
      deltasPerTurn.push(published.length);
      writes += published.length;
      writingMs += ms;
      await redis.del(`bench-stream-${process.pid}:run:${runId}:events`);
    }
    const chunksPerTurn = Math.ceil(chars / 7) + Math.ceil(JSON.stringify({ path: 'a.txt', content: 'y'.repeat(1970) }).length / 10) + 4;
    return {
      answer_chars: chars,
      fast: {
        turns,
        plain_ms: stats(p.map((x) => x.ms)), streamed_ms: stats(s.map((x) => x.ms)),
        plain_cpu_ms: stats(p.map((x) => x.cpuMs)), streamed_cpu_ms: stats(s.map((x) => x.cpuMs)),
        ratio_streamed_to_plain_p50: round(stats(s.map((x) => x.ms)).p50 / stats(p.map((x) => x.ms)).p50, 2),
      },
      paced: {
        turns: pacedTurns, chunks_per_turn: chunksPerTurn, turn_ms: stats(turnMs), first_text_ms: stats(firstText),
        deltas_per_turn: stats(deltasPerTurn), redis_writes_per_s: round(writes / (writingMs / 1000), 1),
      },
    };
  } finally {
    redis.disconnect();
    await server.close();
  }
}
