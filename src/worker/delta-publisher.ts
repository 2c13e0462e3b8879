/**
 * DeltaPublisher: puts a run's streamed model output on its live stream, coalesced. Text pieces and
 * tool-call progress are buffered and published as one LiveDelta every `flushMs` (or sooner when
 * `maxChars` of text are waiting), so a fast stream costs a few Redis writes a second, not one per
 * token. flush() publishes what is buffered at once; the worker calls it right before the turn's
 * model.response goes out, so every delta of a turn precedes its response on the stream.
 *
 * Bounded: at most `maxDeltas` deltas per run (the Redis stream's length cap leaves room for them);
 * the last one says that the live text stops there. Publishing never throws into the run: a failed
 * write is reported through `onError`.
 */
import type { LiveDelta } from '../domain/events';
import type { ModelDelta } from '../domain/model';

export interface DeltaPublisherOptions {
  runId: string;
  publish: (d: LiveDelta) => Promise<unknown>;
  now: () => Date;
  maxDeltas: number;
  flushMs?: number;
  maxChars?: number;
  onError?: (err: Error) => void;
}

export class DeltaPublisher {
  private turn = 0;
  private text = '';
  private readonly tools = new Map<number, { index: number; name: string; argumentsChars: number }>();
  private timer: NodeJS.Timeout | undefined;
  private published = 0;
  private stopped = false;

  constructor(private readonly o: DeltaPublisherOptions) {}

  /** Counts what was published (deltas, including the last one with the cap's note). */
  get count(): number {
    return this.published;
  }

  push(turn: number, d: ModelDelta): void {
    if (this.stopped) return;
    if (turn !== this.turn) {
      this.flush();
      this.turn = turn;
    }
    if (d.kind === 'text') this.text += d.text;
    else this.tools.set(d.index, { index: d.index, name: d.name, argumentsChars: d.argumentsChars });
    if (this.text.length >= (this.o.maxChars ?? 2048)) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.o.flushMs ?? 100);
  }

  /** Publishes what is buffered now (nothing when the buffer is empty). */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.stopped || (!this.text && this.tools.size === 0)) return;
    const last = this.published + 1 >= this.o.maxDeltas;
    const d: LiveDelta = {
      type: 'model.delta', runId: this.o.runId, turn: this.turn, ts: this.o.now().toISOString(),
      ...(this.text ? { text: this.text } : {}),
      ...(this.tools.size ? { tools: [...this.tools.values()].sort((a, b) => a.index - b.index) } : {}),
      ...(last ? { note: `live output stops here: this run published ${this.o.maxDeltas} deltas (CORRAL_STREAM_MAX_DELTAS); each turn's whole answer is still in its model.response` } : {}),
    };
    this.text = '';
    this.tools.clear();
    this.published += 1;
    if (last) this.stopped = true;
    this.o.publish(d).catch((err: Error) => this.o.onError?.(err));
  }

  /** Drops what is buffered and publishes nothing more. */
  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stopped = true;
  }
}
