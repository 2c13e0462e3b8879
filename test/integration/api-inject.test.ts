/**
 * The REST API through app.inject() over the real test Redis, tokens on (tenants acme and globex), no
 * worker: runs stay queued unless a test writes their end into the store as a worker would. Listing
 * and pagination, budget use, cross-tenant 404s on every run endpoint, idempotency keys, per-tenant
 * limits (429 + retry-after), cancel of a queued run, run files, /readyz, /metrics, and SSE (history,
 * live, heartbeat, resume) on a listening copy of the same app.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RunEvent } from '../../src/domain/events';
import { TOKENS, startApiFixture, type ApiFixture } from '../support/api-fixture';

jest.setTimeout(30_000);

type ErrorBody = { error: { code: string; message: string; field?: string; limit?: string; issues?: Array<{ path: Array<string | number>; message: string }> } };
type Created = { id: string; status: string; links: Record<string, string>; idempotentReplay?: boolean };
type Page = { runs: Array<{ id: string; status: string; tenant: string; task: string; taskTruncated?: boolean }>; next: string | null };

let f: ApiFixture;
beforeAll(async () => {
  f = await startApiFixture({ env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '1000', CORRAL_TENANT_SUBMITS_PER_MIN: '1000' } });
});
afterAll(async () => {
  await f?.close();
});

async function submit(fx: ApiFixture, body: Record<string, unknown>, token: string = TOKENS.acme, headers?: Record<string, string>): Promise<Created> {
  const r = await fx.call('POST', '/v1/runs', { token, body, ...(headers ? { headers } : {}) });
  if (r.status !== 201) throw new Error(`submit: ${r.status} ${JSON.stringify(r.body)}`);
  fx.clock.now += 1000;
  return r.json<Created>();
}

/** Ends a run in the store the way a worker does, with its files in the fixture's data dir. */
async function finish(fx: ApiFixture, id: string, opts: { files?: boolean; elsewhere?: boolean } = {}): Promise<void> {
  const dir = opts.elsewhere ? `/nonexistent/elsewhere/runs/${id}` : join(resolve(fx.config.CORRAL_DATA_DIR), 'runs', id);
  if (opts.files !== false && !opts.elsewhere) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'events.jsonl'), '{"type":"run.started","seq":1}\n{"type":"run.finished","seq":2}\n');
    writeFileSync(join(dir, 'report.md'), `# Run ${id}\n`);
    writeFileSync(join(dir, 'workspace.tar'), Buffer.alloc(1024, 0));
    writeFileSync(join(dir, 'workspace.patch'), '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n');
  }
  await fx.store.update(id, {
    status: 'succeeded', outcome: 'succeeded', reason: 'done', finalAnswer: 'ok', startedAt: new Date(fx.clock.now - 5000).toISOString(), finishedAt: new Date(fx.clock.now).toISOString(),
    workerId: 'w-test', logPath: join(dir, 'events.jsonl'), reportPath: join(dir, 'report.md'),
    usage: { llmCalls: 3, toolCalls: 2, inputTokens: 1500, outputTokens: 500, costUsd: 0.002, wallTimeMs: 4200 },
    artifacts: [{ name: 'workspace.tar', path: join(dir, 'workspace.tar'), bytes: 1024 }, { name: 'workspace.patch', path: join(dir, 'workspace.patch'), bytes: 33 }],
  });
}

describe('GET /v1/runs', () => {
  let fx: ApiFixture;
  let acme: string[];
  beforeAll(async () => {
    fx = await startApiFixture();
    acme = [];
    for (let i = 0; i < 7; i++) acme.push((await submit(fx, { task: `list task ${i} ${'x'.repeat(i === 6 ? 600 : 0)}` })).id);
    await submit(fx, { task: 'globex task 1' }, TOKENS.globex);
    await submit(fx, { task: 'globex task 2' }, TOKENS.globex);
    expect((await fx.call('POST', `/v1/runs/${acme[2]}/cancel`)).status).toBe(200);
    await finish(fx, acme[4]!);
  });
  afterAll(() => fx.close());

  test('a tenant sees only its runs, newest first, with links; long tasks are cut', async () => {
    const r = await fx.call('GET', '/v1/runs');
    expect(r.status).toBe(200);
    const page = r.json<Page>();
    expect(page.runs.map((x) => x.id)).toEqual([...acme].reverse());
    expect(page.next).toBeNull();
    expect(page.runs.every((x) => x.tenant === 'acme')).toBe(true);
    expect(page.runs[0]).toMatchObject({ taskTruncated: true, links: { self: `/v1/runs/${acme[6]}`, logs: `/v1/runs/${acme[6]}/logs` } });
    expect(page.runs[0]!.task).toHaveLength(500);
    const g = (await fx.call('GET', '/v1/runs', { token: TOKENS.globex })).json<Page>();
    expect(g.runs.map((x) => x.task)).toEqual(['globex task 2', 'globex task 1']);
  });

  test('pages follow the cursor to the end without repeats or gaps, even when runs are added meanwhile', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await fx.call('GET', `/v1/runs?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      const page = r.json<Page>();
      expect(page.runs.length).toBeLessThanOrEqual(3);
      seen.push(...page.runs.map((x) => x.id));
      cursor = page.next;
      if (pages === 0) await submit(fx, { task: 'added while paging' }); // newer: must not shift later pages
      pages++;
    } while (cursor);
    expect(seen).toEqual([...acme].reverse());
    expect(pages).toBe(3);
  });

  test('?status= filters (one or several, comma-separated), still paginated', async () => {
    const cancelled = (await fx.call('GET', '/v1/runs?status=cancelled')).json<Page>();
    expect(cancelled).toEqual({ runs: [expect.objectContaining({ id: acme[2], status: 'cancelled' })], next: null });
    const ended = (await fx.call('GET', '/v1/runs?status=succeeded,cancelled')).json<Page>();
    expect(ended.runs.map((x) => x.id)).toEqual([acme[4], acme[2]]);
    const queued1 = (await fx.call('GET', '/v1/runs?status=queued&limit=2')).json<Page>();
    expect(queued1.runs.map((x) => x.status)).toEqual(['queued', 'queued']);
    const queued2 = (await fx.call('GET', `/v1/runs?status=queued&limit=50&cursor=${queued1.next}`)).json<Page>();
    const all = [...queued1.runs, ...queued2.runs].map((x) => x.id);
    expect(new Set(all).size).toBe(all.length);
    expect(all).not.toContain(acme[2]);
    expect(all).not.toContain(acme[4]);
    expect(queued2.next).toBeNull();
  });

  test('a bad cursor or status is a 400 naming it', async () => {
    const c = await fx.call('GET', '/v1/runs?cursor=bm9wZQ');
    expect(c).toMatchObject({ status: 400, body: { error: { field: 'cursor', message: expect.stringContaining('cursor') } } });
    const s = await fx.call('GET', '/v1/runs?status=done');
    expect(s).toMatchObject({ status: 400, body: { error: { field: 'status', issues: [{ path: ['status'] }] } } });
  });

  test('runs whose records expired drop out of the list', async () => {
    const victim = acme[5]!;
    await fx.redis.del(`${fx.prefix}:run:${victim}`);
    const page = (await fx.call('GET', '/v1/runs?limit=100')).json<Page>();
    expect(page.runs.map((x) => x.id)).not.toContain(victim);
    expect(await fx.redis.zscore(`${fx.prefix}:tenant:acme:runs`, victim)).toBeNull();
  });
});

describe('GET /v1/runs/:id', () => {
  test('tenant, timestamps, links and budget use: live counts while running, final usage once ended', async () => {
    const { id } = await submit(f, { task: 'budgets', budgets: { llmCalls: 10, toolCalls: 4, tokens: 10_000, wallTimeS: 60, costUsd: 0.5 } });
    const queued = (await f.call('GET', `/v1/runs/${id}`)).json<Record<string, unknown>>();
    expect(queued).toMatchObject({
      id, status: 'queued', tenant: 'acme', task: 'budgets', createdAt: expect.any(String), pendingApprovals: [],
      links: { self: `/v1/runs/${id}`, events: `/v1/runs/${id}/events`, report: `/v1/runs/${id}/report`, logs: `/v1/runs/${id}/logs`, workspaceTar: `/v1/runs/${id}/artifacts/workspace.tar`, patch: `/v1/runs/${id}/artifacts/patch`, bundle: `/v1/runs/${id}/artifacts/agent.bundle`, cancel: `/v1/runs/${id}/cancel` },
      budgets: { llmCalls: { used: 0, limit: 10, percent: 0 }, toolCalls: { used: 0, limit: 4, percent: 0 }, wallTimeS: { used: 0, limit: 60, percent: 0 } },
    });

    // A worker has started it and counted a model call and a tool call (what its metrics observer writes).
    await f.store.update(id, { status: 'running', startedAt: new Date(f.clock.now - 30_000).toISOString() });
    const observe = f.metrics.observer(id);
    const base = { runId: id, ts: new Date().toISOString() };
    await observe({ ...base, seq: 1, type: 'model.response', turn: 1, content: null, toolCalls: [], usage: { inputTokens: 4000, outputTokens: 1000 }, costUsd: 0.25, ms: 5, model: 'm', finishReason: 'tool_calls' } as RunEvent);
    await observe({ ...base, seq: 2, type: 'tool.call', callId: 'c1', tool: 'bash', args: {} });
    const running = (await f.call('GET', `/v1/runs/${id}`)).json<{ budgets: Record<string, { used: number; limit: number; percent: number }> }>();
    expect(running.budgets).toEqual({
      llmCalls: { used: 1, limit: 10, percent: 10 }, toolCalls: { used: 1, limit: 4, percent: 25 }, tokens: { used: 5000, limit: 10_000, percent: 50 },
      wallTimeS: { used: 30, limit: 60, percent: 50 }, costUsd: { used: 0.25, limit: 0.5, percent: 50 },
    });

    await finish(f, id);
    const ended = (await f.call('GET', `/v1/runs/${id}`)).json<{ budgets: Record<string, { used: number }>; usage: unknown; finishedAt: string }>();
    expect(ended.finishedAt).toEqual(expect.any(String));
    expect(ended.budgets).toMatchObject({ llmCalls: { used: 3 }, toolCalls: { used: 2 }, tokens: { used: 2000 }, wallTimeS: { used: 4.2 }, costUsd: { used: 0.002 } });
  });

  test('pending approvals are listed', async () => {
    const { id } = await submit(f, { task: 'approve me', approvals: true });
    await f.store.update(id, { status: 'running' });
    await f.store.setPending(id, { callId: 'call_9', tool: 'bash', args: { command: 'rm x' }, reason: 'asks', risk: 'medium', since: new Date().toISOString() });
    const r = (await f.call('GET', `/v1/runs/${id}`)).json<Record<string, unknown>>();
    expect(r).toMatchObject({ status: 'awaiting_approval', pendingApprovals: [{ callId: 'call_9', tool: 'bash', args: { command: 'rm x' }, risk: 'medium' }] });
    const answered = await f.call('POST', `/v1/runs/${id}/approvals/call_9`, { body: { decision: 'deny', by: 'tester' } });
    // Who answered is the token's principal; the body's "by" is kept as a note.
    expect(answered).toMatchObject({ status: 200, body: { id, callId: 'call_9', decision: 'deny', by: expect.stringMatching(/^acme\/key-[0-9a-f]{8}$/), principal: { kind: 'token', tenant: 'acme' }, note: 'tester' } });
    expect((await f.call('POST', `/v1/runs/${id}/approvals/call_9`, { body: { decision: 'approve' } })).status).toBe(409);
  });
});

describe('tenants', () => {
  test('another tenant gets the same 404 as for an unknown id on every run endpoint, and changes nothing', async () => {
    const { id } = await submit(f, { task: 'acme secret run' });
    await f.store.update(id, { status: 'running' });
    await f.store.setPending(id, { callId: 'call_x', tool: 'bash', args: {}, reason: 'r', since: new Date().toISOString() });
    const other = { token: TOKENS.globex };
    const endpoints: Array<[string, string, unknown?, Record<string, string>?]> = [
      ['GET', '/v1/runs/ID'],
      ['GET', '/v1/runs/ID/events'],
      ['GET', '/v1/runs/ID/events', undefined, { accept: 'text/event-stream' }],
      ['GET', '/v1/runs/ID/logs'],
      ['GET', '/v1/runs/ID/report'],
      ['GET', '/v1/runs/ID/artifacts/workspace.tar'],
      ['GET', '/v1/runs/ID/artifacts/patch'],
      ['POST', '/v1/runs/ID/approvals/call_x', { decision: 'approve' }],
      ['POST', '/v1/runs/ID/cancel'],
      ['POST', '/v1/runs/ID/replay'],
    ];
    for (const [method, path, body, headers] of endpoints) {
      const theirs = await f.call(method, path.replace('ID', id), { ...other, ...(body ? { body } : {}), ...(headers ? { headers } : {}) });
      const unknown = await f.call(method, path.replace('ID', 'run_doesnotexist'), { ...other, ...(body ? { body } : {}), ...(headers ? { headers } : {}) });
      expect({ path, status: theirs.status, body: theirs.body }).toEqual({ path, status: 404, body: { error: { code: 'not_found', message: `no run with id ${id}` } } });
      expect(unknown.body).toEqual({ error: { code: 'not_found', message: 'no run with id run_doesnotexist' } });
    }
    const replay = await f.call('POST', '/v1/runs', { ...other, body: { task: 'steal', replayOf: id } });
    expect(replay).toMatchObject({ status: 400, body: { error: { field: 'replayOf', message: `body: replayOf: no run with id ${id}` } } });
    // Nothing happened to acme's run.
    const mine = (await f.call('GET', `/v1/runs/${id}`)).json<{ status: string; pendingApprovals: unknown[] }>();
    expect(mine.status).toBe('awaiting_approval');
    expect(mine.pendingApprovals).toHaveLength(1);
    expect(await f.redis.hget(`${f.prefix}:run:${id}`, 'answered:call_x')).toBeNull();
    expect((await f.call('GET', '/v1/runs?limit=500', other)).json<Page>().runs.map((r) => r.id)).not.toContain(id);
  });
});

describe('idempotency', () => {
  test('the same key and body returns the same run (200, one job); another body is a 409; keys are per tenant', async () => {
    const body = { task: 'idempotent', budgets: { llmCalls: 5 }, labels: { a: '1', b: '2' } };
    const key = { 'idempotency-key': `key-${Date.now()}` };
    const first = await f.call('POST', '/v1/runs', { body, headers: key });
    expect(first.status).toBe(201);
    const id = first.json<Created>().id;
    const again = await f.call('POST', '/v1/runs', { body: { labels: { b: '2', a: '1' }, budgets: { llmCalls: 5 }, task: 'idempotent', approvals: false }, headers: key });
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual({ id, status: 'queued', links: first.json<Created>().links, idempotentReplay: true });
    expect(await f.queue.getJob(id)).toBeTruthy();
    const jobs = await f.queue.getJobs(['waiting']);
    expect(jobs.filter((j) => (j.data as { spec: { task: string } }).spec.task === 'idempotent')).toHaveLength(1);

    const different = await f.call('POST', '/v1/runs', { body: { ...body, task: 'something else' }, headers: key });
    expect(different).toMatchObject({ status: 409, body: { error: { code: 'conflict', message: expect.stringContaining(`already used with a different body (for run ${id})`) } } });

    const globex = await f.call('POST', '/v1/runs', { token: TOKENS.globex, body, headers: key });
    expect(globex.status).toBe(201);
    expect(globex.json<Created>().id).not.toBe(id);

    // The status follows the run.
    await f.call('POST', `/v1/runs/${id}/cancel`);
    expect((await f.call('POST', '/v1/runs', { body, headers: key })).body).toMatchObject({ id, status: 'cancelled' });
    // The key is kept with a TTL.
    const ttl = await f.redis.ttl((await f.redis.keys(`${f.prefix}:idem:acme:*`))[0]!);
    expect(ttl).toBeGreaterThan(24 * 3600 - 60);
    expect(ttl).toBeLessThanOrEqual(24 * 3600);
  });

  test('concurrent requests with one key create one run', async () => {
    const headers = { 'idempotency-key': `race-${Date.now()}` };
    const rs = await Promise.all(Array.from({ length: 8 }, () => f.call('POST', '/v1/runs', { body: { task: 'race' }, headers })));
    const ids = new Set(rs.map((r) => r.json<Created>().id));
    expect(ids.size).toBe(1);
    expect(rs.filter((r) => r.status === 201)).toHaveLength(1);
    expect(rs.filter((r) => r.status === 200)).toHaveLength(7);
  });

  test('a refused submission (429) does not use up its key', async () => {
    const fx = await startApiFixture({ env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '1' } });
    try {
      await submit(fx, { task: 'fills the slot' });
      const headers = { 'idempotency-key': 'retry-me' };
      expect((await fx.call('POST', '/v1/runs', { body: { task: 'waits' }, headers })).status).toBe(429);
      const [first] = (await fx.call('GET', '/v1/runs')).json<Page>().runs;
      await fx.call('POST', `/v1/runs/${first!.id}/cancel`);
      const retried = await fx.call('POST', '/v1/runs', { body: { task: 'waits' }, headers });
      expect(retried.status).toBe(201);
    } finally {
      await fx.close();
    }
  });
});

describe('per-tenant limits', () => {
  test('submissions per minute: 429 with retry-after and which limit; other tenants unaffected; the window slides', async () => {
    const fx = await startApiFixture({ env: { CORRAL_TENANT_SUBMITS_PER_MIN: '3', CORRAL_TENANT_MAX_ACTIVE_RUNS: '100' } });
    try {
      const t0 = fx.clock.now;
      for (let i = 0; i < 3; i++) {
        expect((await fx.call('POST', '/v1/runs', { body: { task: `r${i}` } })).status).toBe(201);
        fx.clock.now += 10_000;
      }
      const limited = await fx.call('POST', '/v1/runs', { body: { task: 'r3' } });
      expect(limited.status).toBe(429);
      expect(limited.headers['retry-after']).toBe('30'); // the oldest of the three leaves the window 60 s after t0
      expect(limited.json<ErrorBody>().error).toMatchObject({ code: 'rate_limited', limit: 'submits_per_minute', message: expect.stringContaining('at most 3 runs per minute') });
      expect((await fx.call('POST', '/v1/runs', { token: TOKENS.globex, body: { task: 'g' } })).status).toBe(201);
      // 60 s after the first, it has left the window: one more fits, then the limit holds again.
      fx.clock.now = t0 + 60_001;
      expect((await fx.call('POST', '/v1/runs', { body: { task: 'r3' } })).status).toBe(201);
      expect((await fx.call('POST', '/v1/runs', { body: { task: 'r4' } })).status).toBe(429);
      const listed = (await fx.call('GET', '/v1/runs?limit=100')).json<Page>().runs;
      expect(listed).toHaveLength(4); // refused submissions left nothing behind
    } finally {
      await fx.close();
    }
  });

  test('active runs: 429 when queued + running reach the limit; a run ending frees its slot', async () => {
    const fx = await startApiFixture({ env: { CORRAL_TENANT_MAX_ACTIVE_RUNS: '2', CORRAL_TENANT_SUBMITS_PER_MIN: '100' } });
    try {
      const a = await submit(fx, { task: 'a' });
      const b = await submit(fx, { task: 'b' });
      await fx.store.update(b.id, { status: 'running' });
      const limited = await fx.call('POST', '/v1/runs', { body: { task: 'c' } });
      expect(limited.status).toBe(429);
      expect(limited.headers['retry-after']).toBe('10');
      expect(limited.json<ErrorBody>().error).toMatchObject({ limit: 'active_runs', message: expect.stringContaining('already has 2 queued or running runs') });
      expect((await fx.call('POST', '/v1/runs', { token: TOKENS.globex, body: { task: 'g' } })).status).toBe(201);
      // Replays count too.
      await finish(fx, a.id);
      await fx.call('POST', '/v1/runs', { body: { task: 'c' } }); // takes the freed slot
      expect((await fx.call('POST', `/v1/runs/${a.id}/replay`)).status).toBe(429);
      await finish(fx, b.id);
      expect((await fx.call('POST', '/v1/runs', { body: { task: 'd' } })).status).toBe(201);
    } finally {
      await fx.close();
    }
  });
});

describe('admission (issue 14, defect 6)', () => {
  test('a replay is admitted again: a stored spec this server would no longer take is a 400 naming the field, and no job is made', async () => {
    const { RunSpec } = await import('../../src/domain/run-spec');
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['a retired policy', { policy: 'retired-policy' }, 'policy', /unknown policy "retired-policy"/],
      ['a budget over the ceiling', { budgets: { llmCalls: 900 } }, 'budgets.llmCalls', /above this server's maximum/],
    ];
    for (const [name, extra, field, message] of cases) {
      const id = `run_readmit${Math.random().toString(36).slice(2, 8)}`;
      await f.store.create(id, RunSpec.parse({ task: `replayed: ${name}`, ...extra }), new Date(f.clock.now), 'acme');
      await finish(f, id);
      const r = await f.call('POST', `/v1/runs/${id}/replay`);
      expect({ name, status: r.status, body: r.body }).toMatchObject({ name, status: 400, body: { error: { code: 'invalid_input', field, message: expect.stringMatching(new RegExp(`^the spec of run ${id}: .*${message.source}`)) } } });
    }
    expect(await f.queue.getJobCounts('waiting')).toMatchObject({ waiting: expect.any(Number) });
  });

  test('names the sandbox would refuse are refused at submit: ".", "./x", "a/./b", C1 controls, bidi overrides', async () => {
    for (const name of ['.', './notes.txt', 'a/./b.txt', 'a/.', 'line\u0085break.txt', 'invoice\u202etxt.exe', 'x\u2066y']) {
      const r = await f.call('POST', '/v1/runs', { body: { task: 'seed', workspace: { files: { [name]: 'x' } } } });
      expect({ name, status: r.status }).toEqual({ name, status: 400 });
      expect(r.json<ErrorBody>().error.issues).toEqual([{ path: ['workspace', 'files', name], message: expect.stringMatching(/must not contain/) }]);
    }
  });
});

describe('cancel', () => {
  test('a queued run is removed from the queue and ends cancelled; a second cancel is a 409', async () => {
    const { id } = await submit(f, { task: 'cancel me' });
    expect(await f.queue.getJob(id)).toBeTruthy();
    const r = await f.call('POST', `/v1/runs/${id}/cancel`);
    expect(r).toMatchObject({ status: 200, body: { id, status: 'cancelled' } });
    expect(await f.queue.getJob(id)).toBeFalsy();
    expect((await f.call('GET', `/v1/runs/${id}`)).body).toMatchObject({ status: 'cancelled', outcome: 'cancelled', reason: 'cancelled before it started' });
    expect(await f.call('POST', `/v1/runs/${id}/cancel`)).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });
  });
});

describe('run files', () => {
  test('logs (x-ndjson), report, workspace.tar and patch stream from the data dir', async () => {
    const { id } = await submit(f, { task: 'files' });
    await finish(f, id);
    const logs = await f.call('GET', `/v1/runs/${id}/logs`);
    expect(logs.status).toBe(200);
    expect(logs.headers['content-type']).toBe('application/x-ndjson');
    expect(String(logs.body).trim().split('\n').map((l) => (JSON.parse(l) as { type: string }).type)).toEqual(['run.started', 'run.finished']);
    const report = await f.call('GET', `/v1/runs/${id}/report`);
    expect(report).toMatchObject({ status: 200, body: `# Run ${id}\n` });
    expect(report.headers['content-type']).toBe('text/markdown; charset=utf-8');
    const tar = await f.app.inject({ method: 'GET', url: `/v1/runs/${id}/artifacts/workspace.tar`, headers: { authorization: `Bearer ${TOKENS.acme}` } });
    expect(tar.statusCode).toBe(200);
    expect(tar.headers['content-type']).toBe('application/x-tar');
    expect(tar.headers['content-disposition']).toBe(`attachment; filename="${id}-workspace.tar"`);
    expect(tar.rawPayload.length).toBe(1024);
    const patch = await f.call('GET', `/v1/runs/${id}/artifacts/patch`);
    expect(patch.headers['content-type']).toBe('text/x-diff; charset=utf-8');
    expect(patch.body).toContain('+b');
  });

  test('404s that say why: not written yet, or on a host this API cannot read', async () => {
    const { id } = await submit(f, { task: 'not yet' });
    for (const p of ['report', 'logs', 'artifacts/workspace.tar', 'artifacts/patch']) {
      const r = await f.call('GET', `/v1/runs/${id}/${p}`);
      expect({ p, status: r.status, message: r.json<ErrorBody>().error.message }).toEqual({ p, status: 404, message: expect.stringMatching(/has no (report\.md|events\.jsonl|workspace\.tar|workspace\.patch) yet \(status queued; it is written when the run ends\)/) });
    }
    const { id: far } = await submit(f, { task: 'elsewhere' });
    await finish(f, far, { elsewhere: true });
    const r = await f.call('GET', `/v1/runs/${far}/artifacts/workspace.tar`);
    expect(r.status).toBe(404);
    // Where the file is, on which worker, and this server's data dir are the operator's (the log's), not the tenant's.
    expect(r.json<ErrorBody>().error.message).toMatch(new RegExp(`^the workspace\\.tar of run ${far} was written where this API cannot read it; the operator can find why in the server log \\(reference \\S+\\)$`));
    for (const secret of ['/nonexistent', 'w-test', resolve(f.config.CORRAL_DATA_DIR)]) expect(JSON.stringify(r.body)).not.toContain(secret);
  });

  test('a run record naming some other file is never served', async () => {
    const { id } = await submit(f, { task: 'tampered' });
    await finish(f, id, { files: false });
    await f.store.update(id, { artifacts: [{ name: 'workspace.patch', path: '/etc/passwd', bytes: 1 }] });
    const r = await f.call('GET', `/v1/runs/${id}/artifacts/patch`);
    expect(r.status).toBe(404);
    expect(String(r.body)).not.toContain('root:');
  });
});

describe('operations', () => {
  test('/healthz and /readyz need no token; /readyz names each check and is 503 when one fails', async () => {
    expect((await f.call('GET', '/healthz', { token: null })).body).toEqual({ ok: true });
    const ready = await f.call('GET', '/readyz', { token: null });
    expect(ready).toMatchObject({ status: 200, body: { ok: true, checks: { redis: { ok: true, ms: expect.any(Number) } }, workers: 0 } });

    const fx = await startApiFixture({ deps: { readyChecks: { docker: () => Promise.reject(new Error('connect ENOENT /var/run/docker.sock')), slow: () => new Promise(() => undefined) } } });
    try {
      const r = await fx.call('GET', '/readyz', { token: null });
      expect(r).toMatchObject({
        status: 503,
        body: { ok: false, checks: { redis: { ok: true }, docker: { ok: false, error: 'connect ENOENT /var/run/docker.sock' }, slow: { ok: false, error: 'no answer in 3000 ms' } } },
      });
    } finally {
      await fx.close();
    }
  });

  test('/metrics: a tenant sees its own runs and aggregates only; an operator sees every tenant and the queue', async () => {
    const OPS = 'ops-token-0123456789abc';
    const fx = await startApiFixture({ tokens: `acme=${TOKENS.acme},globex=${TOKENS.globex},ops=${OPS}`, deps: { operatorTenants: ['ops'] } });
    try {
      const a = await submit(fx, { task: 'm1' });
      await submit(fx, { task: 'm2' });
      const g = await submit(fx, { task: 'g1' }, TOKENS.globex);
      await finish(fx, a.id);
      const observe = fx.metrics.observer(a.id);
      const base = { runId: a.id, ts: new Date().toISOString() };
      await observe({ ...base, seq: 1, type: 'sandbox.ready', containerId: 'c', image: 'i', ms: 320, egressAllow: [] });
      await observe({ ...base, seq: 2, type: 'tool.call', callId: 'c1', tool: 'bash', args: {} });
      await observe({ ...base, seq: 3, type: 'policy.decision', callId: 'c1', tool: 'bash', verdict: { decision: 'allow', static: { decision: 'allow', rule: 'r', reason: 'x' }, reason: 'x' } });
      await observe({ ...base, seq: 4, type: 'tool.result', callId: 'c1', tool: 'bash', ok: true, blocked: false, summary: 'ok', ms: 1 });
      await observe({ ...base, seq: 5, type: 'tool.call', callId: 'c2', tool: 'nope', args: {} });
      await observe({ ...base, seq: 6, type: 'tool.result', callId: 'c2', tool: 'nope', ok: false, blocked: false, summary: 'unknown tool', ms: 1 });
      await observe({ ...base, seq: 7, type: 'run.finished', outcome: 'succeeded', finalAnswer: 'ok', reason: 'done', usage: { llmCalls: 1, toolCalls: 2, inputTokens: 1, outputTokens: 1, costUsd: 0, wallTimeMs: 42_000 } });
      // globex's run: one model turn with a secret-looking cost, one denied call.
      const og = fx.metrics.observer(g.id);
      const gb = { runId: g.id, ts: new Date().toISOString() };
      await og({ ...gb, seq: 1, type: 'model.response', turn: 1, content: null, toolCalls: [], usage: { inputTokens: 777, outputTokens: 55 }, costUsd: 1.25, ms: 1, model: 'm', finishReason: 'stop' });
      await og({ ...gb, seq: 2, type: 'policy.decision', callId: 'g1', tool: 'bash', verdict: { decision: 'deny', static: { decision: 'deny', rule: 'r', reason: 'x' }, reason: 'x' } });

      expect((await fx.call('GET', '/metrics', { token: null })).status).toBe(401);
      const r = await fx.call('GET', '/metrics');
      expect(r.status).toBe(200);
      expect(r.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
      const acme = String(r.body);
      expect(acme).toContain('# corral metrics of tenant acme only\n');
      expect(acme).toContain('corral_runs{status="queued"} 1\n');
      expect(acme).toContain('corral_runs{status="succeeded"} 1\n');
      expect(acme).not.toContain('corral_queue_jobs'); // queue depth is every tenant's
      expect(acme).toContain('corral_runs_finished_total{outcome="succeeded"} 1\n');
      expect(acme).toContain('corral_run_duration_seconds_bucket{outcome="succeeded",le="30"} 0\n');
      expect(acme).toContain('corral_run_duration_seconds_bucket{outcome="succeeded",le="60"} 1\n');
      expect(acme).toContain('corral_run_duration_seconds_sum{outcome="succeeded"} 42\n');
      expect(acme).toContain('corral_sandbox_acquire_seconds_bucket{le="0.25"} 0\n');
      expect(acme).toContain('corral_sandbox_acquire_seconds_bucket{le="0.5"} 1\n');
      expect(acme).toContain('corral_sandbox_acquire_seconds_count 1\n');
      expect(acme).toContain('corral_tool_calls_total{decision="allow",by="policy"} 1\n');
      expect(acme).toContain('corral_tool_calls_total{decision="refused",by="none"} 1\n');
      // Nothing of globex's: not its run, its tokens, its cost or its denied call.
      expect(acme).toContain('corral_tool_calls_total{decision="deny",by="policy"} 0\n');
      expect(acme).toContain('corral_model_tokens_total{kind="input"} 0\n');
      expect(acme).toContain('corral_model_cost_usd_total 0\n');

      const globex = String((await fx.call('GET', '/metrics', { token: TOKENS.globex })).body);
      expect(globex).toContain('corral_runs{status="queued"} 1\n');
      expect(globex).toContain('corral_runs{status="succeeded"} 0\n');
      expect(globex).toContain('corral_tool_calls_total{decision="allow",by="policy"} 0\n');
      expect(globex).toContain('corral_tool_calls_total{decision="deny",by="policy"} 1\n');
      expect(globex).toContain('corral_model_cost_usd_total 1.25\n');
      expect(globex).toContain('corral_sandbox_acquire_seconds_count 0\n');

      const ops = String((await fx.call('GET', '/metrics', { token: OPS })).body);
      expect(ops).not.toContain('only');
      expect(ops).toContain('corral_runs{status="queued"} 2\n');
      expect(ops).toContain('corral_runs{status="succeeded"} 1\n');
      expect(ops).toContain(`corral_queue_jobs{queue="${fx.config.CORRAL_QUEUE}",state="waiting"} 3\n`);
      expect(ops).toContain('corral_tool_calls_total{decision="allow",by="policy"} 1\n');
      expect(ops).toContain('corral_tool_calls_total{decision="deny",by="policy"} 1\n');
      expect(ops).toContain('corral_model_tokens_total{kind="input"} 777\n');
    } finally {
      await fx.close();
    }
  });

  test('/metrics status counts are kept as runs change, not scanned: every status write moves one count', async () => {
    const fx = await startApiFixture();
    try {
      const ids = [await submit(fx, { task: 'c1' }), await submit(fx, { task: 'c2' }), await submit(fx, { task: 'c3' }, TOKENS.globex)].map((c) => c.id);
      await fx.store.claim(ids[0]!, 'tok');
      await fx.store.update(ids[0]!, { status: 'running' }, 'tok');
      await fx.store.setPending(ids[0]!, { callId: 'k1', tool: 'bash', args: {}, reason: 'r', since: new Date().toISOString() }, 'tok');
      expect(await fx.store.statusCounts()).toMatchObject({ queued: 2, running: 0, awaiting_approval: 1 });
      await fx.store.clearPending(ids[0]!, 'k1', 'tok');
      await fx.store.update(ids[0]!, { status: 'running' }, 'tok'); // same status again: no double count
      expect(await fx.store.statusCounts('acme')).toMatchObject({ queued: 1, running: 1, awaiting_approval: 0 });
      await fx.store.end(ids[0]!, 'failed', 'x', new Date());
      await fx.store.end(ids[0]!, 'error', 'late', new Date()); // refused: ended already, counts unchanged
      await fx.store.end(ids[2]!, 'cancelled', 'x', new Date());
      expect(await fx.store.statusCounts()).toMatchObject({ queued: 1, running: 0, failed: 1, cancelled: 1 });
      expect(await fx.store.statusCounts()).not.toHaveProperty('error');
      expect(await fx.store.statusCounts('globex')).toMatchObject({ queued: 0, cancelled: 1 });
      // An update of a run that has no record writes nothing (and counts nothing).
      expect(await fx.store.update('run_nosuchrun1', { status: 'running' })).toBe(false);
      expect(await fx.store.statusCounts()).toMatchObject({ running: 0 });
    } finally {
      await fx.close();
    }
  });
});

describe('SSE on a listening server', () => {
  test('history, then live events, heartbeat comments, resume with Last-Event-ID, end after run.finished', async () => {
    // No polling: with a 10-minute wait, new events still arrive at once (XREAD BLOCK wakes on XADD).
    const fx = await startApiFixture({ deps: { sseHeartbeatMs: 150, ssePollMs: 600_000 } });
    const url = await fx.app.listen({ host: '127.0.0.1', port: 0 });
    try {
      const { id } = await submit(fx, { task: 'sse' });
      const ev = (seq: number, type: string, extra: Record<string, unknown> = {}) => ({ runId: id, seq, ts: new Date().toISOString(), type, ...extra }) as unknown as RunEvent;
      await fx.store.appendEvent(ev(1, 'run.started', { workerId: 'w', task: 'sse', policy: 'default', approvals: false, model: 'm', budgets: {} }));
      await fx.store.appendEvent(ev(2, 'sandbox.ready', { containerId: 'c', image: 'i', ms: 1, egressAllow: [] }));

      const res = await fetch(`${url}/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${TOKENS.acme}` } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let text = '';
      const readUntil = async (pred: (t: string) => boolean) => {
        while (!pred(text)) {
          const { value, done } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
        }
      };
      await readUntil((t) => t.includes('event: sandbox.ready'));
      await readUntil((t) => t.includes(': heartbeat'));
      await fx.store.appendEvent(ev(3, 'tool.call', { callId: 'c1', tool: 'bash', args: {} }));
      await readUntil((t) => t.includes('event: tool.call'));
      await fx.store.appendEvent(ev(4, 'run.finished', { outcome: 'succeeded', finalAnswer: 'ok', reason: 'r', usage: {} }));
      await readUntil(() => false); // the server ends the stream after run.finished
      const messages = text.split('\n\n').filter((m) => m.startsWith('id: '));
      expect(messages.map((m) => /^event: (.+)$/m.exec(m)![1])).toEqual(['run.started', 'sandbox.ready', 'tool.call', 'run.finished']);
      expect(text).toMatch(/\n\n: heartbeat\n\n/);
      const data = messages.map((m) => JSON.parse(/^data: (.+)$/m.exec(m)![1]!) as RunEvent);
      expect(data.map((d) => d.seq)).toEqual([1, 2, 3, 4]);

      // Resume after the second message: only what came after it.
      const secondId = /^id: (.+)$/m.exec(messages[1]!)![1]!;
      const resumed = await (await fetch(`${url}/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${TOKENS.acme}`, 'last-event-id': secondId } })).text();
      expect([...resumed.matchAll(/^event: (.+)$/gm)].map((m) => m[1])).toEqual(['tool.call', 'run.finished']);
      // The JSON form pages with ?after=.
      const page = (await fx.call('GET', `/v1/runs/${id}/events?after=${secondId}`)).json<{ events: RunEvent[]; next: string }>();
      expect(page.events.map((e) => e.type)).toEqual(['tool.call', 'run.finished']);
    } finally {
      await fx.close();
    }
  });
});

describe('event ids and server errors (issue 14, defect 9)', () => {
  test('a stream id out of range or malformed is a 400 naming the field, as query and as Last-Event-ID; never Redis\'s text', async () => {
    const { id } = await submit(f, { task: 'events ids' });
    const bad = ['99999999999999999999999-0', '18446744073709551616-0', '0-18446744073709551616', '1-', '-1', '1-1-1', 'abc', '1e3-0', ' 1-0', '0x10-0', '1-0\u0000'];
    for (const after of bad) {
      const r = await f.call('GET', `/v1/runs/${id}/events?after=${encodeURIComponent(after)}`);
      expect({ after, status: r.status, field: r.json<ErrorBody>().error.field }).toEqual({ after, status: 400, field: 'after' });
      expect(r.json<ErrorBody>().error.message).not.toMatch(/ERR|Invalid stream ID|redis/i);
    }
    // the largest ids Redis takes are fine (an empty page)
    const max = await f.call('GET', `/v1/runs/${id}/events?after=18446744073709551615-18446744073709551615`);
    expect(max.status).toBe(200);
    expect(max.json<{ events: unknown[] }>().events).toEqual([]);
    for (const last of ['99999999999999999999999-0', 'abc']) {
      const sse = await f.call('GET', `/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream', 'last-event-id': last } });
      expect({ last, status: sse.status, field: sse.json<ErrorBody>().error.field }).toEqual({ last, status: 400, field: 'last-event-id' });
    }
  });

  test('an unexpected error is a 500 naming only a reference; the log has its cause', async () => {
    const logged: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
    const fx = await startApiFixture({
      deps: {
        log: (msg, fields) => logged.push({ msg, ...(fields ? { fields } : {}) }),
        metrics: { read: async () => { throw Object.assign(new Error('ERR wrong number of arguments for HMGET secret-key-name'), { name: 'ReplyError' }); } } as never,
      },
    });
    try {
      const r = await fx.call('GET', '/metrics');
      expect(r.status).toBe(500);
      const body = r.json<ErrorBody>();
      expect(body.error.code).toBe('internal');
      expect(body.error.message).toMatch(/^internal error \(reference \S+\); the server logged it$/);
      expect(JSON.stringify(body)).not.toMatch(/HMGET|secret-key-name|ERR/);
      expect(logged).toEqual([expect.objectContaining({ msg: 'API request failed', fields: expect.objectContaining({ status: 500, route: '/metrics', error: expect.stringContaining('HMGET secret-key-name') }) })]);
    } finally {
      await fx.close();
    }
  });
});
