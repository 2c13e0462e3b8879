/**
 * Guards every request passes before the API spends memory or time on it:
 *   - a body must keep arriving at CORRAL_API_MIN_BODY_BYTES_PER_S, checked over each window of
 *     BODY_WINDOW_MS from the end of the headers: a client that trickles (one byte a second, a
 *     valid tar header and then nothing) gets a 408 and its connection is closed, long before
 *     CORRAL_API_REQUEST_TIMEOUT_S. Bytes the API has not yet read itself (its own backpressure: a
 *     slow disk, a slow Redis) never count against the client;
 *   - bodies that are buffered (JSON) count against CORRAL_API_MAX_BUFFERED_MB for the process and
 *     a quarter of it per tenant while they are read and handled (429 past either);
 *   - while the process's V8 heap is above CORRAL_API_HEAP_REFUSE_PERCENT of its limit, new
 *     requests (except /healthz and /readyz) get a 503 with retry-after instead of an answer that
 *     might take the process down with everything it holds.
 * The header size (Node's 16 KiB), the headers' time (CORRAL_API_HEADERS_TIMEOUT_S) and the whole
 * request's time (CORRAL_API_REQUEST_TIMEOUT_S) are bounded by the server itself (build-app.ts).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import type { FastifyInstance } from 'fastify';
import { Transform } from 'node:stream';
import { HttpError, limitReached } from './http-errors';

export const BODY_WINDOW_MS = 10_000;

/** The 408 written straight to the socket (the reply may be mid-stream in a handler). */
function slowAnswer(minBytesPerS: number, seen: number, windowMs: number): string {
  const body = JSON.stringify({ error: { code: 'request_timeout', message: `the request body arrived at ${Math.round(seen / (windowMs / 1000))} bytes/s over ${windowMs / 1000} s; this server needs at least ${minBytesPerS} bytes/s (CORRAL_API_MIN_BODY_BYTES_PER_S)` } });
  return `HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}

/**
 * Watches one request's body until it has all arrived: every `windowMs` the socket must have brought
 * minBytesPerS × window bytes, unless the body stream holds unread data or the window's tick came
 * late (then the API is the slow side). `onSlow` runs once when it did not.
 */
export function watchBodyRate(raw: IncomingMessage, minBytesPerS: number, onSlow: (seenInWindow: number) => void, windowMs = BODY_WINDOW_MS): () => void {
  const socket = raw.socket;
  let last = socket.bytesRead;
  let lastAt = Date.now();
  const timer = setInterval(() => {
    const now = socket.bytesRead;
    const seen = now - last;
    last = now;
    // A tick that comes late means this process's loop was stalled (GC, a slow handler, a starved
    // host): it could not read the socket either, so the window says nothing about the client.
    const at = Date.now();
    const stalled = at - lastAt > windowMs * 1.5;
    lastAt = at;
    const backpressured = raw.readableLength > 0 || raw.isPaused();
    if (!backpressured && !stalled && seen < (minBytesPerS * windowMs) / 1000) {
      stop();
      onSlow(seen);
    }
  }, windowMs);
  timer.unref();
  const stop = () => {
    clearInterval(timer);
    raw.off('end', stop);
    raw.off('close', stop);
  };
  raw.once('end', stop);
  raw.once('close', stop);
  return stop;
}

/** What is read and dropped of a body after an early answer, at most (then the connection is closed). */
export const LINGER_BYTES = 64 * 1024 * 1024;
export const LINGER_MS = 30_000;

/** Early answers per tenant in the last LINGER_WINDOW_MS, past which that tenant's bodies are no longer read. */
const LINGER_WINDOW_MS = 10_000;
const LINGER_MAX_REFUSALS = 16;
const recentRefusals = new Map<string, number[]>();

/** Counts an early answer for `tenant`; true while the tenant has had few enough lately to be read to the end. */
function lingerAllowed(tenant: string, now: number): boolean {
  const times = (recentRefusals.get(tenant) ?? []).filter((t) => t > now - LINGER_WINDOW_MS);
  times.push(now);
  recentRefusals.set(tenant, times);
  if (recentRefusals.size > 10_000) for (const [t, v] of recentRefusals) if (!v.some((x) => x > now - LINGER_WINDOW_MS)) recentRefusals.delete(t);
  return times.length <= LINGER_MAX_REFUSALS;
}

/**
 * After an answer given before the request's body has all arrived (a cap, a refused tar): the rest
 * is read and dropped — a client that is still sending then reads the answer instead of a broken
 * pipe — but at most LINGER_BYTES within LINGER_MS; past either, the connection is closed. A tenant
 * that keeps sending after more than LINGER_MAX_REFUSALS such answers in 10 s (a flood) loses that
 * courtesy: its connection closes once the answer is out, so its bytes cost this API nothing more.
 * (The body's minimum rate keeps applying meanwhile.)
 */
/**
 * Closes the request's connection. A request that did not come over a socket (Fastify's inject, a
 * proxy's stream) has no `destroy` there: the request itself is destroyed instead.
 */
function endSocket(raw: IncomingMessage, when: 'now' | 'soon'): void {
  const socket = raw.socket as Partial<Socket> | null;
  if (when === 'soon' && typeof socket?.destroySoon === 'function') return socket.destroySoon();
  if (typeof socket?.destroy === 'function') return void socket.destroy();
  raw.destroy();
}

export function lingerAfterAnswer(raw: IncomingMessage, res: ServerResponse, tenant = ''): void {
  if (raw.complete) return;
  const linger = lingerAllowed(tenant, Date.now());
  if (!linger && !res.headersSent) res.setHeader('connection', 'close');
  res.once('finish', () => {
    if (raw.complete || raw.destroyed) return;
    const close = () => endSocket(raw, 'now');
    if (!linger) return void endSocket(raw, 'soon');
    let n = 0;
    const timer = setTimeout(close, LINGER_MS);
    timer.unref();
    raw.on('data', (c: Buffer) => {
      n += c.length;
      if (n > LINGER_BYTES) close();
    });
    raw.once('close', () => clearTimeout(timer));
    raw.resume();
  });
}

export interface GuardOptions {
  minBodyBytesPerS: number;
  /** CORRAL_API_MAX_BUFFERED_MB in bytes. */
  maxBufferedBytes: number;
  heapRefusePercent: number;
  /** For tests: the window of the body-rate check. */
  bodyWindowMs?: number;
}

export function registerRequestGuards(app: FastifyInstance, o: GuardOptions, log: (msg: string, fields?: Record<string, unknown>) => void): BufferedBodies {
  const buffered = new BufferedBodies(o.maxBufferedBytes);
  // Heap pressure is sampled, not measured per request.
  const limit = getHeapStatistics().heap_size_limit;
  let pressed = false;
  const sample = () => {
    const used = getHeapStatistics().used_heap_size;
    const now = used > (limit * o.heapRefusePercent) / 100;
    if (now !== pressed) log(now ? 'API heap above its refusal mark: new requests get 503' : 'API heap below its refusal mark again', { level: now ? 'warn' : 'info', usedMb: Math.round(used / 1048576), limitMb: Math.round(limit / 1048576), percent: o.heapRefusePercent });
    pressed = now;
  };
  const sampler = setInterval(sample, 250);
  sampler.unref();
  app.addHook('onClose', async () => clearInterval(sampler));
  app.addHook('onRequest', async (req) => {
    if (!pressed) return;
    const path = req.url.split('?')[0];
    if (path === '/healthz' || path === '/readyz') return;
    throw new HttpError(503, 'unavailable', `the API is short of memory (its heap is above ${o.heapRefusePercent}% of ${Math.round(limit / 1048576)} MB, CORRAL_API_HEAP_REFUSE_PERCENT); try again shortly`, { 'retry-after': '5' });
  });

  // Every body, JSON or tar: a minimum rate from the end of the headers until it has all arrived.
  app.addHook('preParsing', async (req, reply, payload) => {
    const raw = req.raw;
    const hasBody = raw.headers['transfer-encoding'] !== undefined || Number(raw.headers['content-length'] ?? 0) > 0;
    if (!hasBody || raw.complete || raw.readableEnded) return payload;
    watchBodyRate(raw, o.minBodyBytesPerS, (seen) => {
      log('request body too slow: answered 408 and disconnected', { level: 'warn', method: req.method, route: req.routeOptions.url ?? req.url.split('?')[0], tenant: req.tenant, bytesInWindow: seen });
      if (!reply.sent && !reply.raw.headersSent) {
        reply.hijack();
        raw.socket.end(slowAnswer(o.minBodyBytesPerS, seen, o.bodyWindowMs ?? BODY_WINDOW_MS));
      }
      raw.socket.destroySoon();
      raw.destroy();
    }, o.bodyWindowMs ?? BODY_WINDOW_MS);
    // A tar is streamed to disk (its own caps); every other body is buffered whole: counted here.
    const type = String(raw.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (TAR_BODY.test(type)) return payload;
    const held = buffered.hold(req.tenant);
    const release = () => held.release();
    reply.raw.once('close', release);
    raw.once('close', release);
    return payload.pipe(new Transform({
      transform(chunk: Buffer, _enc, cb) {
        const refusal = held.add(chunk.length);
        if (refusal) {
          log('request body refused: buffered bodies at their cap', { level: 'warn', tenant: req.tenant, limit: refusal.limit });
          lingerAfterAnswer(raw, reply.raw, req.tenant);
          cb(limitReached(refusal));
        } else cb(null, chunk);
      },
    }));
  });
  return buffered;
}

const TAR_BODY = /^application\/(x-tar|gzip|x-gzip)$/;

/**
 * Bytes of request bodies being buffered by this process (JSON, before it is parsed and while the
 * request is handled): at most `maxBytes` in all and a quarter of that per tenant, so that neither
 * a flood of large bodies nor one tenant's share of them can exhaust the heap.
 */
export class BufferedBodies {
  private total = 0;
  private readonly byTenant = new Map<string, number>();
  constructor(private readonly maxBytes: number) {}

  hold(tenant: string): { add(n: number): { limit: string; max: number; retryAfterS: number; message: string } | null; release(): void } {
    let mine = 0;
    let released = false;
    const perTenant = Math.floor(this.maxBytes / 4);
    return {
      add: (n) => {
        const t = this.byTenant.get(tenant) ?? 0;
        if (t + n > perTenant) return { limit: 'body_bytes_per_tenant', max: perTenant, retryAfterS: 2, message: `tenant "${tenant}" already has ${perTenant} bytes of request bodies being read (a quarter of CORRAL_API_MAX_BUFFERED_MB); send fewer at once` };
        if (this.total + n > this.maxBytes) return { limit: 'body_bytes_global', max: this.maxBytes, retryAfterS: 2, message: `this API already has ${this.maxBytes} bytes of request bodies being read (CORRAL_API_MAX_BUFFERED_MB); try again shortly` };
        mine += n;
        this.total += n;
        this.byTenant.set(tenant, t + n);
        return null;
      },
      release: () => {
        if (released) return;
        released = true;
        this.total -= mine;
        const t = (this.byTenant.get(tenant) ?? 0) - mine;
        if (t > 0) this.byTenant.set(tenant, t);
        else this.byTenant.delete(tenant);
      },
    };
  }

  /** Bytes held now, all and per tenant (for tests). */
  stats(): { total: number; byTenant: Record<string, number> } {
    return { total: this.total, byTenant: Object.fromEntries(this.byTenant) };
  }
}
