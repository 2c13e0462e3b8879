/**
 * The pipe between the worker and a run's egress proxy process: newline-delimited JSON, each line at
 * most MAX_LINE bytes, each message checked against a zod schema on arrival (both ways). A line that
 * is too long or does not parse is a protocol violation: the reader stops and says why (the worker
 * then ends that proxy). Strings in messages have length caps, so one message is bounded.
 */
import type { Readable } from 'node:stream';
import { z } from 'zod';

export const MAX_LINE = 64 * 1024;

const Str = (max: number) => z.string().max(max);
const Code = z.enum([
  'allowed', 'invalid_target', 'invalid_name', 'ip_literal', 'not_allowed', 'port_not_allowed', 'forbidden_address', 'resolve_failed',
  'wildcard_rate', 'wildcard_names', 'host_mismatch', 'framing', 'upgrade_refused', 'cap_connections', 'cap_rate', 'cap_requests',
  'cap_bytes_out', 'cap_bytes_in', 'unreachable',
]);
const Count = z.number().int().min(0);
const CallId = Str(200).nullable();

export const CapsSchema = z.object({
  maxConnections: z.number().int().positive(),
  connectionsPerS: z.number().positive(),
  requestsPerS: z.number().positive(),
  maxBytesOut: z.number().positive(),
  maxBytesIn: z.number().positive(),
  wildcardResolvesPerS: z.number().positive(),
  wildcardMaxNames: z.number().int().positive(),
  idleTimeoutMs: z.number().int().positive(),
}).strict();

/** Worker → proxy. */
export const ToProxy = z.discriminatedUnion('t', [
  z.object({
    t: z.literal('init'),
    socketPath: Str(200),
    allow: z.array(Str(300)).max(100),
    caps: CapsSchema,
    /** system = the host's resolver (getaddrinfo); servers = these DNS servers only (tests). */
    resolver: z.discriminatedUnion('kind', [z.object({ kind: z.literal('system') }), z.object({ kind: z.literal('servers'), servers: z.array(Str(60)).min(1).max(4) })]),
    /** Exact addresses exempt from the forbidden table: only test hooks set it. */
    exempt: z.array(Str(60)).max(16),
    flushMs: z.number().int().positive(),
  }).strict(),
  z.object({ t: z.literal('call'), callId: CallId }).strict(),
  z.object({ t: z.literal('stop') }).strict(),
]);
export type ToProxy = z.infer<typeof ToProxy>;

export const StatsSchema = z.object({
  connections: Count, requests: Count, allowed: Count, denied: Count, bytesOut: Count, bytesIn: Count, peakConnections: Count,
  byCode: z.partialRecord(Code, Count),
  wildcardNames: z.record(Str(300), Count).refine((r) => Object.keys(r).length <= 100, 'at most 100 wildcard entries'),
  wildcardRefused: Count,
  resolutions: Count,
}).strict();

/** Proxy → worker. */
export const FromProxy = z.discriminatedUnion('t', [
  z.object({ t: z.literal('ready'), pid: z.number().int(), uid: z.number().int(), gid: z.number().int(), groups: z.array(z.number().int()).max(64), nofile: z.number().int().nullable(), heapMb: z.number() }).strict(),
  z.object({
    t: z.literal('attempt'), callId: CallId, host: Str(400), port: z.number().int().min(0).max(65535), method: Str(20),
    decision: z.enum(['allow', 'deny']), code: Code, reason: Str(1000),
  }).strict(),
  z.object({
    t: z.literal('aggregate'), callId: CallId, method: Str(20), decision: z.enum(['allow', 'deny']), code: Code, count: Count,
    sample: Str(400), reason: Str(1000),
  }).strict(),
  z.object({ t: z.literal('stats'), stats: StatsSchema }).strict(),
]);
export type FromProxy = z.infer<typeof FromProxy>;

/**
 * Reads newline-delimited messages of `schema` from `stream`: `onMessage` for each valid one,
 * `onViolation` once (and nothing after) for a line over MAX_LINE bytes, bad JSON or a bad shape.
 */
export function readMessages<T>(stream: Readable, schema: z.ZodType<T>, onMessage: (m: T) => void, onViolation: (reason: string) => void): void {
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
    const r = schema.safeParse(value);
    if (!r.success) return fail(`a malformed message: ${r.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
    onMessage(r.data);
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
export function encode(m: ToProxy | FromProxy): string {
  return `${JSON.stringify(m)}\n`;
}
