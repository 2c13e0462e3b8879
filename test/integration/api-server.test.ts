/**
 * The API as `corral serve` runs it — a real listening server with a worker, real containers and the
 * scripted OpenAI-compatible server — with tokens on (tenants acme and globex): an idempotent submit,
 * SSE from the start of a run to its end, budget use, the log, report and artifacts of a finished run
 * and another tenant's 404s for all of them; cancel of a running run (the sleep in the sandbox is
 * killed and the container is gone within seconds); /readyz with Docker, /metrics after real runs.
 */
import { readCheckedTar } from '../../src/sandbox/archive';
import type { RunEvent } from '../../src/domain/events';
import { promptText } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';

jest.setTimeout(120_000);

const TOKENS = { acme: 'acme-server-token-0123', globex: 'globex-server-token-0123', ops: 'ops-server-token-01234' };

const agent = scriptedAgent({
  'SRV-COUNT': [
    toolCallTurn([{ name: 'bash', args: { command: 'wc -l < hello.txt > count.txt && cat count.txt' } }]),
    finalTurn('3 lines, written to count.txt'),
  ],
  // Says what memory it was shown, and proposes a note of its own.
  'SRV-MEMORY': (body) => finalTurn(`saw: ${promptText(body).includes('acme-only note') ? 'the acme note' : 'nothing'}\nMEMORY: acme-only note`),
  'SRV-SLEEP': (_body, turn) => (turn === 0 ? toolCallTurn([{ name: 'bash', id: 'call_sleep', args: { command: 'sleep 600' } }]) : finalTurn('woke up')),
});

let h: Harness;
beforeAll(async () => {
  h = await startHarness('api-server', { chat: agent }, {
    CORRAL_API_TOKENS: `acme=${TOKENS.acme},globex=${TOKENS.globex},ops=${TOKENS.ops}`,
    CORRAL_OPERATOR_TENANTS: 'ops',
  });
});
afterAll(async () => {
  await h?.close();
});

async function api(method: string, path: string, o: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {}) {
  const token = o.token === undefined ? TOKENS.acme : o.token;
  const res = await fetch(`${h.url}${path}`, {
    method,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}), ...o.headers },
    ...(o.body !== undefined ? { body: JSON.stringify(o.body) } : {}),
  });
  const buf = Buffer.from(await res.arrayBuffer());
  let json: unknown;
  try {
    json = JSON.parse(buf.toString('utf8'));
  } catch {
    json = undefined;
  }
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  return { status: res.status, headers: res.headers, buf, text: buf.toString('utf8'), body: json as any };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function waitFor(id: string, until: (run: any) => boolean, timeoutMs = 60_000): Promise<any> {
  return eventually(async () => (await api('GET', `/v1/runs/${id}`)).body, { what: `run ${id} in the expected state`, until, timeoutMs });
}

/** Reads an SSE response to its end; returns the events, the live model.delta messages apart, and the raw text. */
async function readSse(res: Response): Promise<{ events: RunEvent[]; deltas: Array<{ type: string; turn: number; text?: string; seq?: unknown }>; text: string }> {
  const text = await res.text();
  const messages = text.split('\n\n').filter((m) => m.includes('\ndata: '));
  const data = (m: string) => JSON.parse(/^data: (.+)$/m.exec(m)![1]!) as never;
  return {
    events: messages.filter((m) => !/^event: model\.delta$/m.test(m)).map(data),
    deltas: messages.filter((m) => /^event: model\.delta$/m.test(m)).map(data),
    text,
  };
}

test('a run end to end over HTTP with a token: idempotent submit, live SSE, budget use, log, report, artifacts; another tenant sees none of it', async () => {
  const body = { task: 'SRV-COUNT: count the lines of hello.txt into count.txt', workspace: { files: { 'hello.txt': 'one\ntwo\nthree\n' } }, budgets: { llmCalls: 4, toolCalls: 5 } };
  const key = { 'idempotency-key': `srv-${Date.now()}` };
  const created = await api('POST', '/v1/runs', { body, headers: key });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  // SSE from (almost) the start: history first, then live until run.finished.
  const ssePromise = fetch(`${h.url}/v1/runs/${id}/events`, { headers: { accept: 'text/event-stream', authorization: `Bearer ${TOKENS.acme}` } }).then(readSse);
  const again = await api('POST', '/v1/runs', { body, headers: key });
  expect(again).toMatchObject({ status: 200, body: { id, idempotentReplay: true } });

  const run = await waitFor(id, (r) => !!r.finishedAt);
  expect(run).toMatchObject({
    id, tenant: 'acme', status: 'succeeded', finalAnswer: '3 lines, written to count.txt',
    budgets: { llmCalls: { used: 2, limit: 4, percent: 50 }, toolCalls: { used: 1, limit: 5, percent: 20 } },
  });
  expect(run.budgets.wallTimeS.used).toBeGreaterThan(0);
  const sse = await ssePromise;
  expect(sse.events[0]!.type).toBe('run.started');
  expect(sse.events.at(-1)!.type).toBe('run.finished');
  expect(sse.events.map((e) => e.seq)).toEqual(sse.events.map((_, i) => i + 1));
  // The model's streamed text came as live deltas between the events: no seq, every turn's text.
  expect(sse.deltas.length).toBeGreaterThan(0);
  expect(sse.deltas.every((d) => d.type === 'model.delta' && d.seq === undefined)).toBe(true);
  expect(sse.deltas.filter((d) => d.turn === 2).map((d) => d.text ?? '').join('')).toBe('3 lines, written to count.txt');

  const logs = await api('GET', `/v1/runs/${id}/logs`);
  expect(logs.status).toBe(200);
  expect(logs.headers.get('content-type')).toBe('application/x-ndjson');
  const logged = logs.text.trim().split('\n').map((l) => JSON.parse(l) as RunEvent);
  expect(logged.map((e) => e.type)).toEqual(sse.events.map((e) => e.type));

  const tar = await api('GET', `/v1/runs/${id}/artifacts/workspace.tar`);
  expect(tar.status).toBe(200);
  expect(tar.headers.get('content-type')).toBe('application/x-tar');
  const { entries } = await readCheckedTar(tar.buf);
  expect(entries.find((e) => e.path === 'count.txt')?.data?.toString().trim()).toBe('3');
  const patch = await api('GET', `/v1/runs/${id}/artifacts/patch`);
  expect(patch.text).toMatch(/count\.txt[\s\S]*\+3/);
  const report = await api('GET', `/v1/runs/${id}/report`);
  expect(report.text).toContain('wc -l < hello.txt');

  for (const p of ['', '/events', '/logs', '/report', '/artifacts/workspace.tar', '/artifacts/patch']) {
    const r = await api('GET', `/v1/runs/${id}${p}`, { token: TOKENS.globex });
    expect({ p, status: r.status, body: r.body }).toEqual({ p, status: 404, body: { error: { code: 'not_found', message: `no run with id ${id}` } } });
  }
  for (const p of ['/cancel', '/replay', '/approvals/call_1']) {
    const r = await api('POST', `/v1/runs/${id}${p}`, { token: TOKENS.globex, ...(p.startsWith('/approvals') ? { body: { decision: 'approve' } } : {}) });
    expect({ p, status: r.status }).toEqual({ p, status: 404 });
  }
  expect((await api('GET', '/v1/runs?limit=500', { token: TOKENS.globex })).body.runs.map((r: { id: string }) => r.id)).not.toContain(id);
  expect((await api('GET', '/v1/runs?status=succeeded')).body.runs.map((r: { id: string }) => r.id)).toContain(id);
  expect((await api('GET', `/v1/runs/${id}`, { token: null })).status).toBe(401);
});

test('cancel of a running run: the command in the sandbox is killed and the container is gone within seconds', async () => {
  const created = await api('POST', '/v1/runs', { body: { task: 'SRV-SLEEP: wait a long time', budgets: { wallTimeS: 900 }, limits: { execTimeoutS: 900 } } });
  expect(created.status).toBe(201);
  const id = created.body.id as string;
  const running = await waitFor(id, (r) => r.status === 'running' && !!r.containerId);
  const label = { label: [`corral.run-id=${id}`] };
  // Wait until `sleep 600` really runs inside the container.
  await eventually(async () => ((await h.docker.getContainer(running.containerId).top({ ps_args: '-eo pid,args' }).catch(() => ({ Processes: [] as string[][] }))).Processes ?? []).some((p: string[]) => p.join(' ').includes('sleep 600')), { what: 'sleep 600 to run in the sandbox' });
  expect(await h.docker.listContainers({ all: true, filters: label })).toHaveLength(1);

  const cancel = await api('POST', `/v1/runs/${id}/cancel`);
  expect(cancel).toMatchObject({ status: 202, body: { id, status: 'cancelling' } });
  // the sleep would take ten minutes (and the run's budgets allow 15): an end at all means the cancel killed it
  const ended = await waitFor(id, (r) => !!r.finishedAt);
  expect(ended).toMatchObject({ status: 'cancelled', outcome: 'cancelled', reason: expect.stringContaining('cancelled') });
  expect(await h.docker.listContainers({ all: true, filters: label })).toEqual([]);
  await expect(h.docker.getContainer(running.containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  const events = (await api('GET', `/v1/runs/${id}/events`)).body.events as RunEvent[];
  expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['tool.call', 'sandbox.removed', 'run.finished']));
  expect(events.at(-1)).toMatchObject({ type: 'run.finished', outcome: 'cancelled' });
  expect(await api('POST', `/v1/runs/${id}/cancel`)).toMatchObject({ status: 409 });
});

test('run memory is per tenant: the same key in another tenant is another memory', async () => {
  const run = async (token: string, task: string) => {
    const r = await api('POST', '/v1/runs', { token, body: { task, memory: { key: 'shared-key', trusted: true } } });
    expect(r.status).toBe(201);
    return eventually(async () => (await api('GET', `/v1/runs/${r.body.id}`, { token })).body, { what: `run ${r.body.id} to finish`, until: (b) => !!b.finishedAt, timeoutMs: 60_000 });
  };
  expect((await run(TOKENS.acme, 'SRV-MEMORY: acme first')).finalAnswer).toMatch(/^saw: nothing/);
  expect((await run(TOKENS.acme, 'SRV-MEMORY: acme second')).finalAnswer).toMatch(/^saw: the acme note/);
  expect((await run(TOKENS.globex, 'SRV-MEMORY: globex')).finalAnswer).toMatch(/^saw: nothing/);
});

test('/readyz checks Redis, Docker and the docker gate the worker reaches it through; /metrics counts the real runs; /healthz, /openapi.json and /docs need no token', async () => {
  const ready = await api('GET', '/readyz', { token: null });
  expect(ready).toMatchObject({ status: 200, body: { ok: true, checks: { redis: { ok: true }, docker: { ok: true }, 'docker-gate': { ok: true } }, workers: expect.any(Number) } });
  expect(ready.body.workers).toBeGreaterThanOrEqual(1);
  expect((await api('GET', '/healthz', { token: null })).status).toBe(200);
  expect((await api('GET', '/openapi.json', { token: null })).body.openapi).toBe('3.1.0');
  expect((await api('GET', '/docs', { token: null })).headers.get('content-type')).toBe('text/html; charset=utf-8');

  expect((await api('GET', '/metrics', { token: null })).status).toBe(401);
  const metrics = await api('GET', '/metrics');
  const sample = (text: string, series: string) => Number(new RegExp(`^${series.replace(/[{}"=+.]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const value = (series: string) => sample(metrics.text, series);
  // Other test files share this Redis: at least what this file's runs added.
  expect(value('corral_runs_finished_total{outcome="succeeded"}')).toBeGreaterThanOrEqual(1);
  expect(value('corral_runs_finished_total{outcome="cancelled"}')).toBeGreaterThanOrEqual(1);
  expect(value('corral_tool_calls_total{decision="allow",by="policy"}')).toBeGreaterThanOrEqual(2);
  expect(value('corral_sandbox_acquire_seconds_count')).toBeGreaterThanOrEqual(2);
  expect(value('corral_run_duration_seconds_count{outcome="succeeded"}')).toBeGreaterThanOrEqual(1);
  expect(value('corral_model_calls_total')).toBeGreaterThanOrEqual(3);
  expect(value('corral_runs{status="succeeded"}')).toBeGreaterThanOrEqual(1);
  // A tenant sees its own numbers and not the queue, which is shared by every tenant.
  expect(metrics.text).toContain('# corral metrics of tenant acme only');
  expect(metrics.text).not.toContain('corral_queue_jobs');
  // Another tenant gets its own scope, not acme's.
  const globex = await api('GET', '/metrics', { token: TOKENS.globex });
  expect(globex.text).toContain('# corral metrics of tenant globex only');
  // The operator sees the queue and everyone's runs.
  const ops = await api('GET', '/metrics', { token: TOKENS.ops });
  expect(ops.status).toBe(200);
  expect(ops.text).not.toContain('of tenant');
  const opsValue = (series: string) => sample(ops.text, series);
  expect(opsValue(`corral_queue_jobs{queue="${h.config.CORRAL_QUEUE}",state="waiting"}`)).toBe(0);
  expect(opsValue('corral_runs_finished_total{outcome="succeeded"}')).toBeGreaterThanOrEqual(value('corral_runs_finished_total{outcome="succeeded"}'));
});
