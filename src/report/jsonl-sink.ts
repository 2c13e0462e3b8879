/**
 * JsonlSink: the run's durable log, one RunEvent per line, hash-chained (log-chain.ts). One file
 * handle per run, written asynchronously off the caller's path: `write` seals the line (its hash and
 * link are computed at once, so the chain follows the order of the calls) and queues it; a single
 * writer appends what is queued, in order, in as few writes as it can. `flush` resolves when every
 * queued line is written; `close` flushes, syncs the file to disk and closes it — a run's log is
 * durable once `close` resolves. A failed write is kept (`failure`), never thrown at the emitter:
 * the lines after it are counted as lost, and the run's end reports it.
 * readJsonl parses such a log back (the chain's fields removed).
 */
import { mkdir, open, type FileHandle } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { RunEvent } from '../domain/events';
import { InvalidInputError } from '../domain/errors';
import { chainFields, sealLine, stripChain } from './log-chain';

export interface JsonlSinkOptions {
  /** The first line's `prev` (logGenesis of the run id and its admitted spec). */
  genesis: string;
  /**
   * Continue the chain of the log already at `path` (a resumed run): its last line's hash is the next
   * `prev`, and its line count goes on. Absent: the file is expected new (a fresh log).
   */
  resume?: { lastHash: string; lines: number };
}

export class JsonlSink {
  private last: string;
  private count: number;
  private queued: string[] = [];
  private inFlight: Promise<void> | null = null;
  private handle: FileHandle | null = null;
  private closed = false;
  private written: number;
  private error: Error | undefined;

  constructor(readonly path: string, opts: JsonlSinkOptions) {
    this.last = opts.resume?.lastHash ?? opts.genesis;
    this.count = opts.resume?.lines ?? 0;
    this.written = this.count;
  }

  /** Seals one event as the next line and queues it. Bound, so it can be handed to an EventRecorder as a sink. */
  readonly write = (event: RunEvent): void => {
    const { line, hash } = sealLine(this.last, event);
    this.last = hash;
    this.count += 1;
    if (this.closed) {
      this.error ??= new Error(`${this.path}: an event (seq ${event.seq}, ${event.type}) came after the log was closed`);
      return;
    }
    if (this.error) return;
    this.queued.push(`${line}\n`);
    this.inFlight ??= this.drain();
  };

  /** The hash of the last line written so far (what the run record keeps as the final hash at the end). */
  get lastHash(): string {
    return this.last;
  }

  /** Lines of the log so far (sealed, whether or not on disk yet). */
  get lines(): number {
    return this.count;
  }

  /** Why the log is incomplete, when it is: the first write that failed, and how many lines are missing. */
  get failure(): string | undefined {
    if (!this.error) return undefined;
    return `${this.error.message}; ${this.count - this.written} of ${this.count} lines are not in the file`;
  }

  /** Resolves when every line queued so far is written (or the log has failed). */
  async flush(): Promise<void> {
    while (this.inFlight) await this.inFlight;
  }

  /** Flushes, syncs the file to disk and closes it; later writes are failures. Resolves to `failure`. */
  async close(): Promise<string | undefined> {
    this.closed = true;
    await this.flush();
    const h = this.handle;
    this.handle = null;
    if (h) {
      try {
        await h.sync();
      } catch (err) {
        // EINVAL: a file that cannot be synced (a pipe); its bytes went where they go.
        if ((err as NodeJS.ErrnoException).code !== 'EINVAL') this.error ??= withPath(this.path, err);
      }
      await h.close().catch(() => undefined);
    }
    return this.failure;
  }

  /** The one writer: appends what is queued, batch by batch, until nothing is left. */
  private async drain(): Promise<void> {
    try {
      if (!this.handle) {
        await mkdir(dirname(this.path), { recursive: true });
        this.handle = await open(this.path, 'a', 0o644);
      }
      while (this.queued.length > 0 && !this.error) {
        const batch = this.queued;
        this.queued = [];
        await this.handle.appendFile(batch.join(''));
        this.written += batch.length;
      }
    } catch (err) {
      this.error ??= withPath(this.path, err);
      this.queued = [];
    } finally {
      this.inFlight = null;
    }
    // A line queued while the last batch was being written, after the loop looked.
    if (this.queued.length > 0 && !this.error) this.inFlight ??= this.drain();
  }
}

function withPath(path: string, err: unknown): Error {
  const message = err instanceof Error ? err.message : String(err);
  return new Error(message.includes(path) ? message : `${path}: ${message}`, { cause: err });
}

/** The chain position at the end of an existing log: its last line's hash and its line count (null: no chained line). */
export function chainEnd(path: string): { lastHash: string; lines: number } | null {
  const lines = readFileSync(path, 'utf8').split('\n').filter((l) => l.trim() !== '');
  const last = lines.at(-1);
  const fields = last === undefined ? null : chainFields(last);
  return fields ? { lastHash: fields.hash, lines: lines.length } : null;
}

/**
 * Reads a JSONL run log. Blank lines are skipped; a line that is not JSON, or not an object with
 * `type`, `runId` and `seq`, throws an InvalidInputError naming the file and the 1-based line number.
 * The chain's `prev` and `hash` fields are removed (verify the chain with log-chain.ts).
 */
export function readJsonl(path: string): RunEvent[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const events: RunEvent[] = [];
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '') return;
    const where = `${path}:${i + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch (err) {
      throw new InvalidInputError(`${where}: malformed JSONL line ${i + 1}: ${(err as Error).message}`, undefined, { line: i + 1 }, { cause: err });
    }
    if (!isEventShaped(value)) {
      throw new InvalidInputError(`${where}: line ${i + 1} is not a run event (needs string "type", string "runId", number "seq")`, undefined, { line: i + 1 });
    }
    events.push(stripChain(value));
  });
  return events;
}

function isEventShaped(v: unknown): v is RunEvent {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return typeof o.type === 'string' && typeof o.runId === 'string' && typeof o.seq === 'number';
}
