/**
 * The API's per-tenant and service-wide caps (issue 38) on a listening server over the real test
 * Redis, two tenants: live event streams (a cap per tenant and for the service, one shared Redis
 * reader for every stream, a slow reader dropped and resumed), uploads (in flight, a minimum rate,
 * bytes per hour, bytes kept, DELETE freeing them), each refusal a 429/413/408 naming its cap, and
 * the numbers in /metrics. Attacks at scale against a whole service are in tenant-isolation-*.test.ts.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { RunEvent } from '../../src/domain/events';
import { HeldSlots } from '../../src/queue/held-slots';
import { RedisUploadQuota, uploadCaps } from '../../src/queue/upload-quota';
import { WorkspaceUploads } from '../../src/workspaces/workspace-uploads';
import { startApiFixture, TOKENS, type ApiFixture } from '../support/api-fixture';
import { consistently, eventually } from '../support/eventually';
import { makeTar } from '../support/make-tar';

jest.setTimeout(60_000);

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

const TOKEN_LIST = `acme=${TOKENS.acme},globex=${TOKENS.globex},ops=ops-token-0123456789`;

async function withServer(env: Record<string, string>, deps: Record<string, unknown>, body: (fx: ApiFixture, url: string, uploadsDir: string) => Promise<void>): Promise<void> {
  const uploadsDir = mkdtempSync(join(tmpdir(), 'corral-caps-'));
  let fx: ApiFixture | undefined;
  try {
    fx = await startApiFixture({
      tokens: TOKEN_LIST,
      env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '1000', CORRAL_TENANT_SUBMITS_PER_MIN: '1000', ...env },
      depsOf: ({ redis, prefix, config }) => {
        const quota = new RedisUploadQuota(redis, uploadCaps(config), prefix);
        return { uploads: new WorkspaceUploads(uploadsDir, 3600, Date.now, undefined, quota), uploadQuota: quota, operatorTenants: ['ops'], ...deps };
      },
    });
    const url = await fx.app.listen({ host: '127.0.0.1', port: 0 });
    await body(fx, url, uploadsDir);
  } finally {
    await fx?.close();
    rmSync(uploadsDir, { recursive: true, force: true });
  }
}

async function newRun(fx: ApiFixture, token: string = TOKENS.acme): Promise<string> {
  const r = await fx.call('POST', '/v1/runs', { token, body: { task: 'caps' } });
  expect(r.status).toBe(201);
  return r.json<{ id: string }>().id;
}

const ev = (runId: string, seq: number, type: string, extra: Record<string, unknown> = {}) => ({ runId, seq, ts: new Date().toISOString(), type, ...extra }) as unknown as RunEvent;

/** An SSE request held open; `status` once the head has come. */
async function openStream(url: string, runId: string, token: string): Promise<{ status: number; body: Record<string, unknown> | null; headers: Headers; res: Response; close: () => void }> {
  const ac = new AbortController();
  const res = await fetch(`${url}/v1/runs/${runId}/events`, { headers: { accept: 'text/event-stream', ...auth(token) }, signal: ac.signal });
  const body = res.status === 200 ? null : ((await res.json()) as Record<string, unknown>);
  // `res` stays referenced while the stream is meant to be open: fetch cancels a collected response's body.
  return { status: res.status, body, headers: res.headers, res, close: () => ac.abort() };
}

/** The body of a raw HTTP/1.1 answer with chunked transfer coding, as far as it is complete. */
function dechunk(raw: string): string {
  let rest = raw.slice(raw.indexOf('\r\n\r\n') + 4);
  let out = '';
  for (;;) {
    const eol = rest.indexOf('\r\n');
    if (eol < 0) return out;
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0) || rest.length < eol + 2 + size) return out;
    out += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}

/** Connections the Redis server has now (every client of every test). */
async function redisClients(fx: ApiFixture): Promise<number> {
  return String(await fx.redis.client('LIST')).split('\n').filter(Boolean).length;
}

describe('live event streams', () => {
  test('a tenant past its cap gets 429 naming CORRAL_TENANT_MAX_STREAMS; another tenant still streams; the service cap holds for everyone; closing frees a slot', async () => {
    await withServer({ CORRAL_TENANT_MAX_STREAMS: '5', CORRAL_API_MAX_STREAMS: '8' }, {}, async (fx, url) => {
      const runA = await newRun(fx);
      const runB = await newRun(fx, TOKENS.globex);
      const mine = await Promise.all(Array.from({ length: 5 }, () => openStream(url, runA, TOKENS.acme)));
      expect(mine.map((s) => s.status)).toEqual([200, 200, 200, 200, 200]);
      const over = await Promise.all(Array.from({ length: 20 }, () => openStream(url, runA, TOKENS.acme)));
      expect(new Set(over.map((s) => s.status))).toEqual(new Set([429]));
      expect(over[0]!.headers.get('retry-after')).toBe('10');
      expect(over[0]!.body).toMatchObject({ error: { code: 'rate_limited', limit: 'streams_per_tenant', max: 5, message: expect.stringContaining('CORRAL_TENANT_MAX_STREAMS') } });
      // The victim tenant is not affected by the attacker's cap …
      const theirs = await Promise.all(Array.from({ length: 3 }, () => openStream(url, runB, TOKENS.globex)));
      expect(theirs.map((s) => s.status)).toEqual([200, 200, 200]);
      // … but the service's cap (8) is shared: the ninth stream of anyone is refused, naming it.
      const ninth = await openStream(url, runB, TOKENS.globex);
      expect(ninth.body).toMatchObject({ error: { limit: 'streams_global', max: 8, message: expect.stringContaining('CORRAL_API_MAX_STREAMS') } });
      const metrics = String((await fx.call('GET', '/metrics', { token: 'ops-token-0123456789' })).body);
      expect(metrics).toMatch(/corral_held\{resource="streams",tenant="acme"\} 5/);
      expect(metrics).toMatch(/corral_held\{resource="streams",tenant="globex"\} 3/);
      expect(metrics).toMatch(/corral_held_service\{resource="streams"\} 8/);
      expect(metrics).toMatch(/corral_cap_refusals_total\{cap="streams_per_tenant"\} 20/);
      expect(metrics).toMatch(/corral_cap_refusals_total\{cap="streams_global"\} 1/);
      // A tenant's own view has its numbers, never the service's.
      const own = String((await fx.call('GET', '/metrics', { token: TOKENS.globex })).body);
      expect(own).toMatch(/corral_held\{resource="streams",tenant="globex"\} 3/);
      expect(own.split('\n').filter((l) => /tenant="acme"|corral_held_service/.test(l))).toEqual([]);
      mine[0]!.close();
      await eventually(() => openStream(url, runA, TOKENS.acme).then((s) => (s.status === 200 ? s : (s.close(), null))), { what: 'a freed slot to be taken again', timeoutMs: 10_000 }).then((s) => s.close());
      for (const s of [...mine, ...theirs]) s.close();
    });
  });

  test('one Redis connection reads every stream: 60 subscribers of 20 runs add no connection, and each gets every event', async () => {
    await withServer({ CORRAL_TENANT_MAX_STREAMS: '100' }, {}, async (fx, url) => {
      const runs = await Promise.all(Array.from({ length: 20 }, () => newRun(fx)));
      // One stream opened first makes the shared reader; then the count must not grow with streams.
      const first = await fetch(`${url}/v1/runs/${runs[0]}/events`, { headers: { accept: 'text/event-stream', ...auth(TOKENS.acme) } });
      await eventually(() => (fx.store.liveStats().subscribers > 0 ? true : null), { what: 'the first subscriber to wait on the feed' });
      const before = await redisClients(fx);
      // Each resolves with its whole text once its run has finished.
      const readers = Promise.all(Array.from({ length: 60 }, async (_, i) => {
        const res = await fetch(`${url}/v1/runs/${runs[i % 20]}/events`, { headers: { accept: 'text/event-stream', ...auth(TOKENS.acme) } });
        return res.text();
      }));
      await eventually(() => fx.store.liveStats(), { what: '61 subscribers waiting on 20 runs', until: (s) => s.subscribers === 61 && s.runs === 20 });
      // (other test files may connect meanwhile: a connection per stream would be 60 more)
      expect(await redisClients(fx)).toBeLessThan(before + 10);
      const named = String(await fx.redis.client('LIST')).split('\n').filter((l) => l.includes(`name=${fx.prefix}:live-feed`));
      expect(named).toHaveLength(1);
      for (const r of runs) {
        await fx.store.appendEvent(ev(r, 1, 'run.started', { workerId: 'w', task: 't', policy: 'default', approvals: false, model: 'm', budgets: {} }));
        await fx.store.appendEvent(ev(r, 2, 'run.finished', { outcome: 'succeeded', finalAnswer: 'ok', reason: 'r', usage: {} }));
      }
      for (const t of await readers) expect([...t.matchAll(/^event: (.+)$/gm)].map((m) => m[1])).toEqual(['run.started', 'run.finished']);
      await first.body?.cancel();
    });
  });

  test('a client that stops reading is disconnected once its bound is buffered; it resumes with Last-Event-ID and loses nothing', async () => {
    await withServer({}, { sseMaxBufferedBytes: 16 * 1024, sseSlowReaderMs: 2000 }, async (fx, url) => {
      const run = await newRun(fx);
      const u = new URL(url);
      const sock: Socket = connect(Number(u.port), u.hostname);
      sock.on('error', () => undefined);
      await new Promise<void>((r) => sock.once('connect', () => r()));
      sock.write(`GET /v1/runs/${run}/events HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: text/event-stream\r\nauthorization: Bearer ${TOKENS.acme}\r\n\r\n`);
      // Read the head, then stop reading: the kernel's buffers fill, then the server's bound.
      let got = await new Promise<string>((r) => sock.once('data', (d) => {
        sock.pause();
        r(d.toString());
      }));
      expect(got).toMatch(/^HTTP\/1\.1 200/);
      const held = () => fx.call('GET', '/metrics').then((r) => /corral_held\{resource="streams",tenant="acme"\} (\d+)/.exec(String(r.body))?.[1]);
      await eventually(held, { what: 'the stream to hold a slot', until: (n) => n === '1' });
      const pad = 'x'.repeat(8000);
      let n = 0;
      await eventually(async () => {
        for (let i = 0; i < 100; i++) await fx.store.appendEvent(ev(run, ++n, 'tool.result', { callId: `c${n}`, tool: 'bash', ok: true, output: pad }));
        return held();
      }, { what: 'the server to drop the reader that stopped reading (its slot freed)', until: (v) => v === '0', timeoutMs: 45_000, intervalMs: 20 });
      await fx.store.appendEvent(ev(run, ++n, 'run.finished', { outcome: 'succeeded', finalAnswer: 'ok', reason: 'r', usage: {} }));
      // What the kernel still held reaches the client, then the end: part of the log, never all of it.
      sock.resume();
      sock.on('data', (d) => (got += d.toString()));
      await new Promise<void>((r) => sock.once('close', () => r()));
      const complete = dechunk(got).split('\n\n').filter((m) => /^id: .+\nevent: .+\ndata: .+$/s.test(m) && m.endsWith('}'));
      expect(complete.length).toBeGreaterThan(0);
      expect(complete.length).toBeLessThan(n);
      const lastId = /^id: (.+)$/m.exec(complete.at(-1)!)![1]!;
      // Resumed from the last message it got: the rest, nothing missing, nothing twice.
      const rest = await (await fetch(`${url}/v1/runs/${run}/events`, { headers: { accept: 'text/event-stream', 'last-event-id': lastId, ...auth(TOKENS.acme) } })).text();
      const seqs = [...complete.map((m) => JSON.parse(/^data: (.+)$/m.exec(m)![1]!).seq as number), ...[...rest.matchAll(/^data: (.+)$/gm)].map((m) => JSON.parse(m[1]!).seq as number)];
      expect(seqs).toEqual(Array.from({ length: n }, (_, i) => i + 1));
    });
  });
});

describe('uploads', () => {
  const tarOf = (name: string, bytes: number, seed = 1) => makeTar([{ name, body: Buffer.alloc(bytes, seed) }]);
  const put = async (url: string, body: Buffer, token: string = TOKENS.acme) => {
    const res = await fetch(`${url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/x-tar', ...auth(token) }, body });
    return { status: res.status, headers: res.headers, body: (await res.json()) as { id?: string; error?: Record<string, unknown> } };
  };
  const left = (dir: string, tenant = 'acme') => {
    try {
      return readdirSync(join(dir, tenant)).filter((f) => f.startsWith('.upload-'));
    } catch {
      return [];
    }
  };

  test('a body that trickles gets 408 naming CORRAL_API_MIN_BODY_BYTES_PER_S and is closed; nothing stays on disk', async () => {
    await withServer({ CORRAL_API_MIN_BODY_BYTES_PER_S: '4096' }, { bodyWindowMs: 500 }, async (_fx, url, dir) => {
      const u = new URL(url);
      const sock = connect(Number(u.port), u.hostname);
      let answer = '';
      sock.on('data', (d) => (answer += d.toString()));
      sock.on('error', () => undefined);
      const closed = new Promise<void>((r) => sock.on('close', () => r()));
      const header = (await tarOf('slow.bin', 100_000)).subarray(0, 512);
      sock.write(`PUT /v1/workspaces HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TOKENS.acme}\r\ncontent-type: application/x-tar\r\ncontent-length: 200000\r\n\r\n`);
      sock.write(header);
      const drip = setInterval(() => sock.writable && sock.write('a'), 100);
      await closed;
      clearInterval(drip);
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(answer).toContain('CORRAL_API_MIN_BODY_BYTES_PER_S');
      await eventually(() => left(dir), { what: 'the partial upload to be removed', until: (f) => f.length === 0 });
    });
  });

  test('uploads in flight: past CORRAL_TENANT_MAX_UPLOADS a 429 naming it; another tenant still uploads', async () => {
    await withServer({ CORRAL_TENANT_MAX_UPLOADS: '2', CORRAL_API_MIN_BODY_BYTES_PER_S: '1' }, {}, async (_fx, url) => {
      const u = new URL(url);
      // Two uploads held open: headers and the first tar header, then nothing more for now.
      const holders = await Promise.all([0, 1].map(async () => {
        const sock = connect(Number(u.port), u.hostname);
        sock.on('error', () => undefined);
        await new Promise<void>((r) => sock.once('connect', () => r()));
        sock.write(`PUT /v1/workspaces HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${TOKENS.acme}\r\ncontent-type: application/x-tar\r\ncontent-length: 200000\r\n\r\n`);
        sock.write((await tarOf('held.bin', 100_000)).subarray(0, 1024));
        return sock;
      }));
      await eventually(() => put(url, Buffer.alloc(0)), { what: 'the third upload to be refused for the cap', until: (r) => r.status === 429 }).then((r) => {
        expect(r.headers.get('retry-after')).toBe('5');
        expect(r.body.error).toMatchObject({ limit: 'uploads_per_tenant', max: 2, message: expect.stringContaining('CORRAL_TENANT_MAX_UPLOADS') });
      });
      expect((await put(url, await tarOf('theirs.txt', 10), TOKENS.globex)).status).toBe(201);
      // A tenant that keeps sending after its refusals (a flood) no longer has its bodies read: past 16
      // early answers in 10 s its connection closes once the answer is out.
      const flood = [];
      for (let i = 0; i < 20; i++) flood.push(await put(url, Buffer.alloc(2 * 1024 * 1024)));
      expect(flood.every((r) => r.status === 429)).toBe(true);
      expect(flood.at(0)!.headers.get('connection')).not.toBe('close');
      expect(flood.at(-1)!.headers.get('connection')).toBe('close');
      for (const s of holders) s.destroy();
      const mine = await tarOf('mine.txt', 10);
      await eventually(() => put(url, mine), { what: 'a freed slot', until: (r) => r.status === 201 });
    });
  });

  test('bytes per hour: past CORRAL_TENANT_UPLOAD_MB_PER_HOUR a 429 with retry-after, mid-stream; the other tenant is not charged', async () => {
    await withServer({ CORRAL_TENANT_UPLOAD_MB_PER_HOUR: '3' }, {}, async (fx, url, dir) => {
      expect((await put(url, await tarOf('a.bin', 2 * 1024 * 1024))).status).toBe(201); // 3 MiB charged (rounded up a step)
      const over = await put(url, await tarOf('b.bin', 100));
      expect(over.status).toBe(429);
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(over.body.error).toMatchObject({ limit: 'upload_bytes_per_hour', message: expect.stringContaining('CORRAL_TENANT_UPLOAD_MB_PER_HOUR') });
      expect((await put(url, await tarOf('c.bin', 2 * 1024 * 1024), TOKENS.globex)).status).toBe(201);
      // Announced too large: 413 before a byte is read. Not announced (chunked): stopped as it arrives, not after.
      const announced = await put(url, await tarOf('huge.bin', 20 * 1024 * 1024), TOKENS.globex);
      expect(announced).toMatchObject({ status: 413, body: { error: { limit: 'upload_bytes_per_hour' } } });
      const huge = await tarOf('huge.bin', 20 * 1024 * 1024);
      let sent = 0;
      const chunked = await fetch(`${url}/v1/workspaces`, {
        method: 'PUT', headers: { 'content-type': 'application/x-tar', ...auth(TOKENS.globex) }, duplex: 'half',
        body: new ReadableStream({ pull(c) {
          if (sent >= huge.length) return c.close();
          c.enqueue(huge.subarray(sent, sent + 65536));
          sent += 65536;
        } }),
      } as RequestInit);
      expect(chunked.status).toBe(429);
      expect(await chunked.json()).toMatchObject({ error: { limit: 'upload_bytes_per_hour' } });
      expect(sent).toBeLessThan(huge.length);
      expect(left(dir, 'globex')).toEqual([]);
      const m = String((await fx.call('GET', '/metrics', { token: TOKENS.globex })).body);
      expect(m).toMatch(/corral_cap_refusals_total\{cap="upload_bytes_per_hour"\} 2/);
      expect(m).toMatch(/corral_upload_hour_bytes\{tenant="globex"\} \d{7}/);
    });
  });

  test('bytes kept: past CORRAL_TENANT_UPLOAD_STORED_MB a 429 (413 for one upload larger than the cap); the same tar again counts once; DELETE frees it', async () => {
    await withServer({ CORRAL_TENANT_UPLOAD_STORED_MB: '4', CORRAL_API_UPLOAD_STORED_MB: '5' }, {}, async (fx, url) => {
      // One upload larger than the cap: 413 from its Content-Length (plain tar) or as it arrives (gzip).
      const huge = await put(url, await tarOf('huge.bin', 5 * 1024 * 1024));
      expect(huge.status).toBe(413);
      expect(huge.body.error).toMatchObject({ code: 'payload_too_large', limit: 'upload_stored_per_tenant', message: expect.stringContaining('CORRAL_TENANT_UPLOAD_STORED_MB') });
      const gz = await fetch(`${url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/gzip', ...auth(TOKENS.acme) }, body: gzipSync(await tarOf('huge.bin', 5 * 1024 * 1024)) });
      expect(gz.status).toBe(413);
      const a = await put(url, await tarOf('a.bin', 1024 * 1024 + 1));
      expect(a.status).toBe(201); // ~1.05 MB kept (2 MiB reserved while it was written)
      expect((await put(url, await tarOf('a.bin', 1024 * 1024 + 1))).status).toBe(200); // the same tar: counted once
      expect((await put(url, await tarOf('b.bin', 100, 2))).status).toBe(201); // 1 MiB at least
      expect((await put(url, await tarOf('c.bin', 1000, 3))).status).toBe(201); // 1 MiB: 3.05 MiB kept
      const d = await put(url, await tarOf('d.bin', 100, 4));
      expect(d.status).toBe(429);
      expect(d.body.error).toMatchObject({ limit: 'upload_stored_per_tenant', message: expect.stringContaining('DELETE /v1/workspaces') });
      const m = String((await fx.call('GET', '/metrics')).body);
      expect(m).toMatch(/corral_upload_stored_bytes\{tenant="acme"\} 3\d{6}/);
      expect(m).toMatch(/corral_cap_refusals_total\{cap="upload_stored_per_tenant"\} [23]/);
      // DELETE: another tenant's is a 404 like no upload; the owner's is 204, then 404; the space is free again.
      expect((await fetch(`${url}/v1/workspaces/${a.body.id}`, { method: 'DELETE', headers: auth(TOKENS.globex) })).status).toBe(404);
      expect((await fetch(`${url}/v1/workspaces/${a.body.id}`, { method: 'DELETE', headers: auth(TOKENS.acme) })).status).toBe(204);
      expect((await fetch(`${url}/v1/workspaces/${a.body.id}`, { method: 'DELETE', headers: auth(TOKENS.acme) })).status).toBe(404);
      expect((await put(url, await tarOf('d.bin', 100, 4))).status).toBe(201);
      // The service's cap (5 MiB): 3 MiB are acme's; globex has room of its own but the service has 2 left.
      expect((await put(url, await tarOf('g1.bin', 100, 5), TOKENS.globex)).status).toBe(201);
      expect((await put(url, await tarOf('g2.bin', 100, 6), TOKENS.globex)).status).toBe(201);
      const g3 = await put(url, await tarOf('g3.bin', 100, 7), TOKENS.globex);
      expect(g3.body.error).toMatchObject({ limit: 'upload_stored_global', message: expect.stringContaining('CORRAL_API_UPLOAD_STORED_MB') });
    });
  });

  test('an empty body is a 400, not a stored workspace', async () => {
    await withServer({}, {}, async (_fx, url) => {
      const r = await put(url, Buffer.alloc(0));
      expect(r.status).toBe(400);
      expect(r.body.error).toMatchObject({ code: 'invalid_input', message: expect.stringContaining('no files or directories') });
    });
  });
});

test('HeldSlots: the leases of a process that died run out on their own', async () => {
  await withServer({}, {}, async (fx) => {
    const dead = new HeldSlots(fx.redis, `${fx.prefix}-lease`, 300);
    const caps = { perTenant: 1, global: 10, perTenantVar: 'T', globalVar: 'G', retryAfterS: 1 };
    expect((await dead.take('streams', 'acme', caps)).ok).toBe(true);
    dead.close(); // no more renewals, never released
    const alive = new HeldSlots(fx.redis, `${fx.prefix}-lease`, 300);
    expect((await alive.take('streams', 'acme', caps)).ok).toBe(false);
    const later = await eventually(() => alive.take('streams', 'acme', caps), { what: 'the dead lease to run out', until: (v) => v.ok, timeoutMs: 5000 });
    // A live holder renews: its lease outlasts several lease times.
    await consistently(() => alive.take('streams', 'acme', caps), { what: 'the renewed lease to hold the cap', holds: (v) => !v.ok, forMs: 1200, intervalMs: 100 });
    if (later.ok) await later.release();
    alive.close();
  });
});
