/**
 * One attacking tenant and one victim tenant on the same corral (issue 38), as a suite run against
 * both deployments (tenant-isolation-serve.test.ts, tenant-isolation-split.test.ts). For each break:
 * the attacker tries it at a scale that passes its cap (cap + 100 live streams, cap + 100 trickling
 * uploads, an upload flood, a crash of the API mid-run, names the export refuses), while the victim
 * submits a run — through an uploaded workspace where uploads are attacked — and watches it over SSE.
 * Each test asserts what must hold: the victim's run succeeds, the attacker gets 429s (408s for the
 * trickle) naming the cap, nothing of the attacker's stays on disk, the API and worker stay under
 * their RSS bounds. What is measured — the victim's enqueue → start and whole run, beside the
 * quiet case of the same deployment, and the processes' peak RSS under each attack — goes to
 * test-output/tenant-isolation-<kind>.json (numbers, not assertions: tests wait for facts).
 */
import { mkdirSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { RedisConnections } from '../../src/queue/redis-connections';
import { eventually } from './eventually';
import type { FakeServer } from './fake-decisions-server';
import { loadTask } from './load-agent';
import { startRssSampler, type RssSampler } from './load-rss';
import { makeTar } from './make-tar';
import { startDeployment, startSuiteModel, TENANT_TOKENS, type Deployment, type DeploymentKind } from './tenant-deployment';

/** The caps under attack (the defaults are larger; these keep the attacks quick). */
export const SUITE_CAPS = {
  CORRAL_TENANT_MAX_STREAMS: '50', CORRAL_API_MAX_STREAMS: '200',
  CORRAL_TENANT_MAX_UPLOADS: '4', CORRAL_API_MAX_UPLOADS: '32',
  CORRAL_TENANT_UPLOAD_MB_PER_HOUR: '64', CORRAL_TENANT_UPLOAD_STORED_MB: '48', CORRAL_API_UPLOAD_STORED_MB: '512',
  CORRAL_API_MIN_BODY_BYTES_PER_S: '16384',
} as const;
/** RSS bounds the suite holds each process to (stated in the README). */
export const RSS_BOUND_MB = { api: 300, worker: 400 } as const;

type Token = keyof typeof TENANT_TOKENS;
const auth = (who: Token) => ({ authorization: `Bearer ${TENANT_TOKENS[who]}` });
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export interface VictimTiming { status: string; enqueueToStartMs: number; runMs: number }

async function json<T = Record<string, unknown>>(res: Response): Promise<T> {
  const text = await res.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    return { text } as T;
  }
}

async function submit(d: Deployment, who: Token, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${d.url}/v1/runs`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth(who) }, body: JSON.stringify(body) });
  const b = await json<{ id?: string }>(res);
  if (res.status !== 201 || !b.id) throw new Error(`${who} submit: ${res.status} ${JSON.stringify(b)}`);
  return b.id;
}

async function runOf(d: Deployment, who: Token, id: string): Promise<Record<string, unknown>> {
  return json(await fetch(`${d.url}/v1/runs/${id}`, { headers: auth(who) }));
}

/** Polls the run until it has ended (the API may be away for a moment: that is retried). */
async function finished(d: Deployment, who: Token, id: string, ms = 180_000): Promise<Record<string, unknown>> {
  return eventually(() => runOf(d, who, id), { what: `run ${id} to end`, until: (r) => !!r.finishedAt, timeoutMs: ms, intervalMs: 200 });
}

/** The victim's run (over its own SSE stream, which must carry it to run.finished); its timings. */
async function victimRun(d: Deployment, extra: Record<string, unknown> = {}, tools = 2): Promise<VictimTiming & { events: string[] }> {
  const id = await submit(d, 'victim', { task: loadTask(tools, 'victim'), budgets: { wallTimeS: 600 }, ...extra });
  const sse = await fetch(`${d.url}/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream', ...auth('victim') } });
  if (sse.status !== 200) throw new Error(`victim SSE: ${sse.status} ${await sse.text()}`);
  const text = await sse.text(); // ends after run.finished
  const run = await finished(d, 'victim', id);
  const t = (k: string) => Date.parse(String(run[k]));
  return {
    status: String(run.status), enqueueToStartMs: t('startedAt') - t('createdAt'), runMs: t('finishedAt') - t('createdAt'),
    events: [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]!),
  };
}

/** `n` victim runs, one after another or all at once; each must succeed. The median timings, and each run's. */
async function victimRuns(d: Deployment, n: number, o: { extra?: () => Promise<Record<string, unknown>>; parallel?: boolean } = {}): Promise<VictimTiming & { runs: VictimTiming[] }> {
  const one = async () => victimRun(d, o.extra ? await o.extra() : {});
  const runs = o.parallel ? await Promise.all(Array.from({ length: n }, one)) : await (async () => {
    const out = [];
    for (let i = 0; i < n; i++) out.push(await one());
    return out;
  })();
  for (const r of runs) {
    expect(r.status).toBe('succeeded');
    expect(r.events.at(-1)).toBe('run.finished');
  }
  const slim = runs.map(({ status, enqueueToStartMs, runMs }) => ({ status, enqueueToStartMs, runMs }));
  return { status: runs.every((r) => r.status === 'succeeded') ? 'succeeded' : 'failed', enqueueToStartMs: median(slim.map((r) => r.enqueueToStartMs)), runMs: median(slim.map((r) => r.runMs)), runs: slim };
}

async function upload(d: Deployment, who: Token, body: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${d.url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/x-tar', ...auth(who) }, body });
  return { status: res.status, body: await json(res) };
}

function tracked(d: Deployment): RssSampler {
  const rss = startRssSampler(100);
  const p = d.pids();
  rss.track('api', p.api);
  rss.track('worker', p.worker);
  if (p.supervisor) rss.track('supervisor', p.supervisor);
  return rss;
}

/** Bytes under a directory (files only) and any upload still being written there. */
function diskOf(dir: string): { bytes: number; partial: string[] } {
  let bytes = 0;
  const partial: string[] = [];
  const walk = (p: string) => {
    for (const f of (() => { try { return readdirSync(p); } catch { return []; } })()) {
      const full = join(p, f);
      const st = statSync(full);
      if (st.isDirectory()) walk(full);
      else {
        bytes += st.size;
        if (f.startsWith('.upload-') || f.startsWith('.fetch-')) partial.push(full);
      }
    }
  };
  walk(dir);
  return { bytes, partial };
}

/** A raw PUT that sends its headers and one tar header, then a byte every second until the server ends it. */
function trickler(d: Deployment, tarHead: Buffer): { answer: () => string; closed: Promise<void>; socket: Socket } {
  const sock = connect(d.port, '127.0.0.1');
  let answer = '';
  let drip: NodeJS.Timeout | undefined;
  sock.on('error', () => undefined);
  sock.on('data', (c) => (answer += c.toString()));
  sock.on('connect', () => {
    sock.write(`PUT /v1/workspaces HTTP/1.1\r\nhost: 127.0.0.1:${d.port}\r\nauthorization: Bearer ${TENANT_TOKENS.attacker}\r\ncontent-type: application/x-tar\r\ncontent-length: 41943040\r\n\r\n`);
    sock.write(tarHead);
    drip = setInterval(() => sock.writable && sock.write('\0'), 1000);
  });
  const closed = new Promise<void>((r) => sock.on('close', () => {
    clearInterval(drip);
    r();
  }));
  return { answer: () => answer, closed, socket: sock };
}

export function tenantIsolationSuite(kind: DeploymentKind): void {
  let model: FakeServer;
  let d: Deployment;
  let redis: Redis;
  const results: Record<string, unknown> = { kind, caps: SUITE_CAPS, rssBoundMb: RSS_BOUND_MB };
  const quiet: VictimTiming[] = [];

  beforeAll(async () => {
    model = await startSuiteModel();
    d = await startDeployment(kind, { redisUrl: process.env.REDIS_URL!, model, env: { ...SUITE_CAPS } });
    redis = new RedisConnections(process.env.REDIS_URL!).open('commands', 'test-tenant-isolation');
  });
  afterAll(async () => {
    mkdirSync(join(__dirname, '..', '..', 'test-output'), { recursive: true });
    writeFileSync(join(__dirname, '..', '..', 'test-output', `tenant-isolation-${kind}.json`), `${JSON.stringify(results, null, 2)}\n`);
    process.stdout.write(`tenant-isolation ${kind}: ${JSON.stringify(results)}\n`);
    await redis?.quit();
    await d?.close();
    await model?.close();
  });

  /** Records an attack's numbers beside the quiet case. */
  const record = (attack: string, victim: VictimTiming & { runs?: VictimTiming[] }, rss: Record<string, number>, attacker: Record<string, unknown>) => {
    const q = { enqueueToStartMs: median(quiet.map((x) => x.enqueueToStartMs)), runMs: median(quiet.map((x) => x.runMs)) };
    results[attack] = {
      victim: { status: victim.status, enqueueToStartMs: victim.enqueueToStartMs, runMs: victim.runMs, ...('runs' in victim ? { runs: victim.runs } : {}) },
      quiet: q, ratio: { enqueueToStart: Math.round((victim.enqueueToStartMs / Math.max(1, q.enqueueToStartMs)) * 100) / 100, run: Math.round((victim.runMs / q.runMs) * 100) / 100 },
      rssPeakMb: rss, attacker,
    };
  };
  const withinBounds = (rss: Record<string, number>) => {
    expect({ api: (rss.api ?? 0) < RSS_BOUND_MB.api, worker: (rss.worker ?? 0) < RSS_BOUND_MB.worker, rss }).toMatchObject({ api: true, worker: true });
  };

  test('the quiet case: the victim alone (five runs)', async () => {
    const rss = tracked(d);
    for (let i = 0; i < 5; i++) {
      const v = await victimRun(d);
      expect(v.status).toBe('succeeded');
      quiet.push(v);
    }
    results.quiet = { runs: quiet.map(({ enqueueToStartMs, runMs }) => ({ enqueueToStartMs, runMs })), rssPeakMb: rss.stop() };
  });

  test('break 8 — names the export refuses are refused at upload, naming the entry; the victim is unaffected', async () => {
    for (const name of ['a\u2028b.txt', 'dir\u2029/x', 'x\u202e.txt']) {
      const r = await upload(d, 'attacker', await makeTar([{ name, body: 'x' }]));
      expect(r.status).toBe(400);
      expect(String((r.body.error as Record<string, unknown>).message)).toMatch(/entry ".*\\u20(28|29|2e).*"/);
    }
    const victim = await victimRun(d);
    expect(victim.status).toBe('succeeded');
  });

  test('break 1 — live streams: the attacker opens cap + 100 SSE streams; it gets 50, then 429s naming CORRAL_TENANT_MAX_STREAMS; one Redis reader serves them all; the victim streams and succeeds', async () => {
    const rss = tracked(d);
    const hold = await submit(d, 'attacker', { task: 'HOLD-RUN: wait for the model', budgets: { wallTimeS: 1800 } });
    await eventually(() => runOf(d, 'attacker', hold), { what: 'the attacker\'s run to be running', until: (r) => r.status === 'running', timeoutMs: 60_000 });
    const clientsBefore = String(await redis.client('LIST')).split('\n').filter(Boolean).length;
    const aborts: AbortController[] = [];
    // Open responses are kept referenced: fetch cancels the body of a response that is collected.
    const open: Response[] = [];
    const statuses = await Promise.all(Array.from({ length: 150 }, async () => {
      const ac = new AbortController();
      aborts.push(ac);
      const res = await fetch(`${d.url}/v1/runs/${hold}/events`, { headers: { accept: 'text/event-stream', ...auth('attacker') }, signal: ac.signal });
      if (res.status === 200) {
        open.push(res);
        return { status: 200 };
      }
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await json<{ error: Record<string, unknown> }>(res) };
    }));
    const ok = statuses.filter((s) => s.status === 200).length;
    const refused = statuses.filter((s) => s.status === 429);
    expect({ ok, refused: refused.length }).toEqual({ ok: 50, refused: 100 });
    expect(refused[0]).toMatchObject({ retryAfter: '10', body: { error: { limit: 'streams_per_tenant', max: 50, message: expect.stringContaining('CORRAL_TENANT_MAX_STREAMS') } } });
    // 50 open streams, and no connection to Redis for each (the old way added 50).
    const clientsDuring = String(await redis.client('LIST')).split('\n').filter(Boolean).length;
    expect(clientsDuring - clientsBefore).toBeLessThan(10);
    const metrics = await (await fetch(`${d.url}/metrics`, { headers: auth('ops') })).text();
    expect(metrics).toMatch(/corral_held\{resource="streams",tenant="attacker"\} 50/);
    const victim = await victimRuns(d, 3);
    expect(open).toHaveLength(50);
    for (const ac of aborts) ac.abort();
    await fetch(`${d.url}/v1/runs/${hold}/cancel`, { method: 'POST', headers: auth('attacker') });
    await finished(d, 'attacker', hold);
    const peaks = rss.stop();
    record('streams', victim, peaks, { attempts: 150, opened: ok, refused429: refused.length, redisClientsAdded: clientsDuring - clientsBefore });
    withinBounds(peaks);
  });

  test('break 2 — slow uploads: cap + 100 uploads that trickle get 429 (in flight) or 408 (too slow) and are closed; nothing stays on disk; the victim uploads and runs', async () => {
    const rss = tracked(d);
    const head = (await makeTar([{ name: 'slow.bin', body: Buffer.alloc(100_000) }])).subarray(0, 512);
    const tricklers = Array.from({ length: 104 }, () => trickler(d, head));
    // Headers that never end (no tenant known yet): closed by the headers' time bound.
    const slowHeads = Array.from({ length: 50 }, () => {
      const s = connect(d.port, '127.0.0.1');
      s.on('error', () => undefined);
      s.on('connect', () => s.write(`GET /v1/runs HTTP/1.1\r\nhost: 127.0.0.1\r\nx-slow: `));
      const t = setInterval(() => s.writable && s.write('a'), 1000);
      return new Promise<void>((r) => s.on('close', () => {
        clearInterval(t);
        r();
      }));
    });
    let n = 0;
    const victim = await victimRuns(d, 3, { extra: async () => {
      const ws = await upload(d, 'victim', await makeTar([{ name: 'src/app.py', body: `print("victim ${++n}")\n` }]));
      expect(ws.status).toBe(201);
      return { workspace: { id: ws.body.id } };
    } });
    await Promise.all([...tricklers.map((t) => t.closed), ...slowHeads]);
    const answers = tricklers.map((t) => /^HTTP\/1\.1 (\d+)/.exec(t.answer())?.[1] ?? 'none');
    const count = (s: string) => answers.filter((a) => a === s).length;
    expect(count('429') + count('408')).toBe(104);
    expect(count('429')).toBeGreaterThanOrEqual(100);
    expect(tricklers.find((t) => t.answer().startsWith('HTTP/1.1 429'))!.answer()).toContain('CORRAL_TENANT_MAX_UPLOADS');
    expect(tricklers.find((t) => t.answer().startsWith('HTTP/1.1 408'))!.answer()).toContain('CORRAL_API_MIN_BODY_BYTES_PER_S');
    expect(diskOf(join(d.dataDir, 'workspaces', 'attacker'))).toEqual({ bytes: 0, partial: [] });
    const peaks = rss.stop();
    record('slow_uploads', victim, peaks, { tricklers: 104, refused429: count('429'), cut408: count('408'), slowHeaders: 50 });
    withinBounds(peaks);
  });

  test('break 3 — upload flood: distinct 4 MiB uploads, 8 at a time, while the victim works; past the caps 429s naming them; an empty body 400; kept bytes within the cap on disk; the victim uploads and runs', async () => {
    const rss = tracked(d);
    // An empty body is no workspace: a 400, not a stored upload.
    const empty = await upload(d, 'attacker', Buffer.alloc(0));
    expect(empty).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('no files or directories') } } });
    // The attacker floods for as long as the victim works: 8 uploads at a time, each a distinct 4 MiB tar.
    const outcomes: Array<{ status: number; body: Record<string, unknown> }> = [];
    let flooding = true;
    let k = 0;
    // (made once; each upload changes 8 bytes of the file's content, so each is a distinct tar at the cost of a copy)
    const template = await makeTar([{ name: 'blob.bin', body: Buffer.alloc(4 * 1024 * 1024, 7) }]);
    const flood = Promise.all(Array.from({ length: 8 }, async () => {
      while (flooding || outcomes.length < 40) {
        const tar = Buffer.from(template);
        tar.writeDoubleLE(k++, 512);
        // Past 16 refusals in 10 s the API stops reading the attacker's bodies: its writes then fail (EPIPE).
        outcomes.push(await upload(d, 'attacker', tar).catch((err: Error) => ({ status: 0, body: { cutOff: String((err.cause as Error | undefined)?.message ?? err.message) } })));
      }
    }));
    let n = 0;
    const victim = await victimRuns(d, 3, { extra: async () => {
      const ws = await upload(d, 'victim', await makeTar([{ name: 'data/input.txt', body: `victim data ${++n}\n` }]));
      expect(ws.status).toBe(201);
      return { workspace: { id: ws.body.id } };
    } });
    flooding = false;
    await flood;
    const accepted = outcomes.filter((o) => o.status === 201).length;
    const refused = outcomes.filter((o) => o.status === 429);
    const cut = outcomes.filter((o) => o.status === 0);
    expect(accepted + refused.length + cut.length).toBe(outcomes.length);
    expect(cut.every((o) => /EPIPE|ECONNRESET|other side closed/.test(String(o.body.cutOff)))).toBe(true);
    expect(accepted).toBeLessThanOrEqual(11); // 48 MiB kept / (4 MiB + framing)
    // Each refusal names its cap: uploads in flight (8 at a time, 4 allowed), kept bytes (48 MiB),
    // bytes per hour (64 MiB, charged as they arrive — refused uploads count).
    const named: Record<string, string> = { uploads_per_tenant: 'CORRAL_TENANT_MAX_UPLOADS', upload_stored_per_tenant: 'CORRAL_TENANT_UPLOAD_STORED_MB', upload_bytes_per_hour: 'CORRAL_TENANT_UPLOAD_MB_PER_HOUR' };
    for (const r of refused) {
      const e = r.body.error as { limit: string; message: string };
      expect(e.message).toContain(named[e.limit] ?? `an upload cap, not ${e.limit}`);
    }
    expect(refused.some((r) => ['upload_stored_per_tenant', 'upload_bytes_per_hour'].includes((r.body.error as { limit: string }).limit))).toBe(true);
    const disk = diskOf(join(d.dataDir, 'workspaces', 'attacker'));
    expect(disk.partial).toEqual([]);
    expect(disk.bytes).toBeLessThanOrEqual(48 * 1024 * 1024 + 64 * 1024);
    const metrics = await (await fetch(`${d.url}/metrics`, { headers: auth('ops') })).text();
    expect(Number(/corral_upload_stored_bytes\{tenant="attacker"\} (\d+)/.exec(metrics)?.[1])).toBeLessThanOrEqual(48 * 1024 * 1024);
    // Deleting its uploads frees the attacker's kept bytes (the count and the disk).
    for (const o of outcomes.filter((x) => x.status === 201)) expect((await fetch(`${d.url}/v1/workspaces/${String(o.body.id)}`, { method: 'DELETE', headers: auth('attacker') })).status).toBe(204);
    const after = await (await fetch(`${d.url}/metrics`, { headers: auth('attacker') })).text();
    expect(Number(/corral_upload_stored_bytes\{tenant="attacker"\} (\d+)/.exec(after)?.[1])).toBe(0);
    expect(diskOf(join(d.dataDir, 'workspaces', 'attacker')).bytes).toBe(0);
    const peaks = rss.stop();
    const byCap: Record<string, number> = {};
    for (const r of refused) byCap[(r.body.error as { limit: string }).limit] = (byCap[(r.body.error as { limit: string }).limit] ?? 0) + 1;
    record('upload_flood', victim, peaks, { uploads: outcomes.length, accepted, refused429: byCap, cutOffUnread: cut.length, keptBytesOnDisk: disk.bytes });
    withinBounds(peaks);
  });

  test('break 7 — the API dies mid-run (SIGKILL): the worker goes on, the victim\'s run succeeds, the API answers again', async () => {
    const rss = tracked(d);
    const workerBefore = d.pids().worker;
    const id = await submit(d, 'victim', { task: loadTask(6, 'victim across an API crash'), budgets: { wallTimeS: 600 } });
    await eventually(() => runOf(d, 'victim', id), { what: 'the victim\'s run to be running', until: (r) => r.status === 'running', timeoutMs: 60_000 });
    await d.killApi();
    const run = await finished(d, 'victim', id);
    expect(run.status).toBe('succeeded');
    expect(d.pids().worker).toBe(workerBefore);
    const t = (k: string) => Date.parse(String(run[k]));
    const peaks = rss.stop();
    // (a 6-step run, against the quiet case's 2-step runs: its run ratio is not a slowdown)
    record('api_crash', { status: String(run.status), enqueueToStartMs: t('startedAt') - t('createdAt'), runMs: t('finishedAt') - t('createdAt') }, peaks, { apiKilled: 'SIGKILL', workerKept: true, victimSteps: 6 });
  });

  test('nothing of the attacker is left: no sandbox, no partial upload, no held slot', async () => {
    const metrics = await (await fetch(`${d.url}/metrics`, { headers: auth('ops') })).text();
    expect(metrics).not.toMatch(/corral_held\{resource="(streams|uploads)",tenant="attacker"\} [1-9]/);
    expect(diskOf(join(d.dataDir, 'workspaces')).partial).toEqual([]);
    const { execFileSync } = await import('node:child_process');
    // (a run's sandbox is removed as it ends; the last one may still be going)
    await eventually(() => execFileSync('docker', ['ps', '-aq', '--filter', `label=corral.queue=${d.queue}`]).toString().trim(), { what: 'no sandbox of this deployment left', until: (ids) => ids === '', timeoutMs: 30_000 });
  });
}

/** One request with the given Host header (node:http; fetch() sets Host itself). */
function withHost(d: Deployment, method: string, path: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: d.port, method, path, headers: { host } }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * Break 6 — auth off, the operator's own machine: a cross-site page's POST (Sec-Fetch-Site, or
 * Origin for an older browser) cannot cancel the operator's run, a DNS-rebinding Host reads nothing;
 * the CLI still works (it sends neither header). Real processes; chromium's view of the same attacks
 * is in auth-off-browser.test.ts.
 */
export function authOffSuite(kind: DeploymentKind): void {
  let model: FakeServer;
  let d: Deployment;
  beforeAll(async () => {
    model = await startSuiteModel();
    d = await startDeployment(kind, { redisUrl: process.env.REDIS_URL!, model, authOff: true });
  });
  afterAll(async () => {
    await d?.close();
    await model?.close();
  });

  test('break 6 — auth off: cross-origin POSTs to cancel get 403, a rebinding Host gets 421, the operator\'s run succeeds; the CLI still cancels', async () => {
    const post = (path: string, headers: Record<string, string>) => fetch(`${d.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ task: loadTask(3, 'operator'), budgets: { wallTimeS: 600 } }) });
    const created = await post('/v1/runs', {});
    expect(created.status).toBe(201);
    const { id } = await json<{ id: string }>(created);
    const attempts = [
      await fetch(`${d.url}/v1/runs/${id}/cancel`, { method: 'POST', headers: { 'sec-fetch-site': 'cross-site', origin: 'http://evil.example' } }),
      await fetch(`${d.url}/v1/runs/${id}/cancel`, { method: 'POST', headers: { 'sec-fetch-site': 'same-site', origin: `http://127.0.0.1:${d.port + 1}` } }),
      await fetch(`${d.url}/v1/runs/${id}/cancel`, { method: 'POST', headers: { origin: 'http://evil.example' } }),
      await fetch(`${d.url}/v1/runs/${id}/cancel`, { method: 'POST', headers: { origin: 'null' } }),
    ];
    expect(attempts.map((r) => r.status)).toEqual([403, 403, 403, 403]);
    // fetch() never sends a Host of its own choosing; a page after DNS rebinding does.
    const rebound = await withHost(d, 'GET', '/v1/runs', `rebind.attacker.test:${d.port}`);
    expect(rebound.status).toBe(421);
    expect(rebound.body).not.toContain(id);
    expect((await withHost(d, 'POST', `/v1/runs/${id}/cancel`, `rebind.attacker.test:${d.port}`)).status).toBe(421);
    const run = await eventually(() => fetch(`${d.url}/v1/runs/${id}`).then((r) => json(r)), { what: 'the operator\'s run to end', until: (r) => !!r.finishedAt, timeoutMs: 180_000, intervalMs: 200 });
    expect(run.status).toBe('succeeded');
    // The CLI sends neither Origin nor Sec-Fetch-Site: it still cancels (a run held running by its model).
    const other = await json<{ id: string }>(await fetch(`${d.url}/v1/runs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ task: 'HOLD-RUN: wait for the model' }) }));
    const { execFile } = await import('node:child_process');
    const { ROOT } = await import('./load-stack');
    const out = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(join(ROOT, 'bin/corral'), ['cancel', other.id, '--api', d.url, '--wait'], { env: { ...process.env, CORRAL_API_TOKEN: '' } }, (err, stdout, stderr) => resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }));
    });
    expect({ code: out.code, stderr: out.stderr }).toEqual({ code: 0, stderr: '' });
    expect((await json(await fetch(`${d.url}/v1/runs/${other.id}`))).status).toBe('cancelled');
  });
}
