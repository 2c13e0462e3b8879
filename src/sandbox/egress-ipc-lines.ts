/**
 * Framing of the pipe between the worker and a run's egress proxy process: newline-delimited JSON,
 * each line at most MAX_LINE bytes. A line that is too long, is not JSON or fails the caller's parser
 * is a protocol violation: the reader stops and says why (the worker then ends that proxy). No zod
 * here, so the proxy process can use it without loading zod.
 */
import type { Readable } from 'node:stream';

export const MAX_LINE = 64 * 1024;

export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Reads newline-delimited messages from `stream`: `onMessage` for each one `parse` accepts,
 * `onViolation` once (and nothing after) for a line over MAX_LINE bytes, bad JSON or a refused shape.
 */
export function readMessages<T>(stream: Readable, parse: (v: unknown) => Parsed<T>, onMessage: (m: T) => void, onViolation: (reason: string) => void): void {
  let buf: Buffer[] = [];
  let size = 0;
  let dead = false;
  const fail = (reason: string) => {
    if (dead) return;
    dead = true;
    buf = [];
    stream.removeAllListeners('data');
    stream.resume();
    onViolation(reason);
  };
  const line = (raw: Buffer) => {
    let value: unknown;
    try {
      value = JSON.parse(raw.toString('utf8'));
    } catch {
      return fail('a message that is not JSON');
    }
    const r = parse(value);
    if (!r.ok) return fail(r.reason);
    onMessage(r.value);
  };
  stream.on('data', (chunk: Buffer) => {
    let start = 0;
    for (;;) {
      if (dead) return;
      const nl = chunk.indexOf(10, start);
      const part = chunk.subarray(start, nl < 0 ? chunk.length : nl);
      size += part.length;
      if (size > MAX_LINE) return fail(`a message longer than ${MAX_LINE} bytes`);
      buf.push(part);
      if (nl < 0) return;
      const whole = Buffer.concat(buf);
      buf = [];
      size = 0;
      start = nl + 1;
      if (whole.length > 0) line(whole);
    }
  });
}

/** One message as a line. */
export function encode(m: unknown): string {
  return `${JSON.stringify(m)}\n`;
}
