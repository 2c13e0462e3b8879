/**
 * JsonlSink: the run's durable log, one RunEvent per line. Each write is a synchronous append, so
 * every event handed to the sink is on disk before `write` returns and a normal exit (or a crash
 * right after) never loses the last line. readJsonl parses such a log back.
 */
import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { RunEvent } from '../domain/events';
import { InvalidInputError } from '../domain/errors';

export class JsonlSink {
  constructor(readonly path: string) {
    mkdirSync(dirname(path), { recursive: true });
  }

  /** Appends one line. Bound, so `sink.write` can be handed to an EventRecorder as a sink. */
  readonly write = (event: RunEvent): void => {
    appendFileSync(this.path, `${JSON.stringify(event)}\n`);
  };
}

/**
 * Reads a JSONL run log. Blank lines are skipped; a line that is not JSON, or not an object with
 * `type`, `runId` and `seq`, throws an InvalidInputError naming the file and the 1-based line number.
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
    events.push(value);
  });
  return events;
}

function isEventShaped(v: unknown): v is RunEvent {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const o = v as Record<string, unknown>;
  return typeof o.type === 'string' && typeof o.runId === 'string' && typeof o.seq === 'number';
}
