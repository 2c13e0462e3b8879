/**
 * The messages between the worker and a run's egress proxy process, as zod schemas: the worker checks
 * every message from the proxy against FromProxy (strings have length caps, so one message is
 * bounded). Framing is egress-ipc-lines.ts. The proxy process checks what the worker sends with a
 * small hand check instead (egress-proxy-process.ts), so it starts without loading zod.
 */
import { z } from 'zod';
import type { Parsed } from './egress-ipc-lines';

export { encode, MAX_LINE, readMessages } from './egress-ipc-lines';

const Str = (max: number) => z.string().max(max);
const Code = z.enum([
  'allowed', 'invalid_target', 'invalid_name', 'ip_literal', 'not_allowed', 'port_not_allowed', 'forbidden_address', 'resolve_failed',
  'wildcard_rate', 'wildcard_names', 'host_mismatch', 'framing', 'upgrade_refused', 'cap_connections', 'cap_rate', 'cap_requests',
  'cap_bytes_out', 'cap_bytes_in', 'unreachable', 'unpredicted', 'upstream_refused', 'upstream_unreachable',
]);
const Net = z.enum(['open', 'hold', 'refuse']);
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

const SiteSchema = z.object({
  upstream: z.object({ host: Str(255), port: z.number().int().min(1).max(65535), authorization: Str(4096).nullable() }).strict().nullable(),
  noProxy: z.array(z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('all') }).strict(),
    z.object({ kind: z.literal('domain'), name: Str(253), port: z.number().int().nullable() }).strict(),
    z.object({ kind: z.literal('cidr'), cidr: Str(60) }).strict(),
  ])).max(1000),
  internal: z.array(z.object({ name: Str(253), ranges: z.array(Str(60)).max(100) }).strict()).max(1000),
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
    /** The operator's upstream proxy, NO_PROXY and internal hosts (config only). */
    site: SiteSchema,
    flushMs: z.number().int().positive(),
  }).strict(),
  z.object({ t: z.literal('call'), callId: CallId, net: Net.optional() }).strict(),
  /** The worker's answer for a held connection. */
  z.object({ t: z.literal('release'), id: Count, allow: z.boolean() }).strict(),
  /** Report everything recorded so far, then answer `synced` with the same n. */
  z.object({ t: z.literal('sync'), n: Count }).strict(),
  /** A setup phase ended: the agent's allowlist from now on; every open connection is closed. */
  z.object({ t: z.literal('narrow'), allow: z.array(Str(300)).max(100) }).strict(),
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
  z.object({ t: z.literal('narrowed'), closed: Count }).strict(),
  z.object({ t: z.literal('held'), id: Count, callId: CallId, host: Str(400), port: z.number().int().min(0).max(65535), method: Str(20) }).strict(),
  z.object({ t: z.literal('synced'), n: Count }).strict(),
]);
export type FromProxy = z.infer<typeof FromProxy>;

/** A line parser for readMessages from a zod schema (the worker's side: everything the proxy sends is checked). */
export function zodParser<T>(schema: z.ZodType<T>): (v: unknown) => Parsed<T> {
  return (v) => {
    const r = schema.safeParse(v);
    return r.success ? { ok: true, value: r.data } : { ok: false, reason: `a malformed message: ${r.error.issues.slice(0, 3).map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}` };
  };
}
