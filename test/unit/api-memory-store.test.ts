/**
 * The API's read, approval and event routes over the in-memory run store — no Redis, no queue: a
 * tenant reads its own runs (another tenant's are 404), pages through its list, reads a run's events
 * after an id, answers a pending call once (the waiting side gets it; a second answer is 409).
 */
import { createHash } from 'node:crypto';
import { MemoryRunStore } from '../../src/queue/memory-run-store';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';
import { injectJson } from '../support/api-fixture';

const usage = { llmCalls: 1, toolCalls: 1, inputTokens: 10, outputTokens: 5, costUsd: 0, wallTimeMs: 100 };

async function seeded() {
  const store = new MemoryRunStore();
  for (let i = 0; i < 3; i++) {
    await store.create(`run_mem0000${i}`, { task: `task ${i}` }, new Date(1000 + i), 'acme');
    await store.update(`run_mem0000${i}`, { usage });
  }
  await store.create('run_memglobex', { task: 'theirs' }, new Date(5000), 'globex');
  await store.update('run_mem00001', { status: 'running' });
  await store.setPending('run_mem00001', { callId: 'call_1', tool: 'bash', args: { command: 'rm -rf build' }, reason: 'deletes files', since: new Date(2000).toISOString() });
  for (let seq = 1; seq <= 3; seq++) await store.appendEvent({ runId: 'run_mem00001', seq, ts: new Date(seq).toISOString(), type: 'budget.warning', budget: 'llmCalls', limit: 10, used: seq });
  return { store, app: offlineApp({ store }) };
}

test('a tenant reads its runs and pages through its list; another tenant\'s run is not found', async () => {
  const { app } = await seeded();
  const one = await injectJson(app, 'GET', '/v1/runs/run_mem00001');
  expect(one.status).toBe(200);
  expect(one.json()).toMatchObject({ id: 'run_mem00001', status: 'awaiting_approval', tenant: 'acme', pendingApprovals: [{ callId: 'call_1', reason: 'deletes files' }] });
  expect((await injectJson(app, 'GET', '/v1/runs/run_memglobex')).status).toBe(404);
  expect((await injectJson(app, 'GET', '/v1/runs/run_memglobex', { token: OFFLINE_TOKENS.globex })).status).toBe(200);

  const p1 = (await injectJson(app, 'GET', '/v1/runs?limit=2')).json<{ runs: Array<{ id: string }>; next: string | null }>();
  expect(p1.runs.map((r) => r.id)).toEqual(['run_mem00002', 'run_mem00001']);
  const p2 = (await injectJson(app, 'GET', `/v1/runs?limit=2&cursor=${p1.next}`)).json<{ runs: Array<{ id: string }>; next: string | null }>();
  expect(p2).toMatchObject({ runs: [{ id: 'run_mem00000' }], next: null });
  const running = (await injectJson(app, 'GET', '/v1/runs?status=awaiting_approval')).json<{ runs: Array<{ id: string }> }>();
  expect(running.runs.map((r) => r.id)).toEqual(['run_mem00001']);
  await app.close();
});

test('approvals record the authenticated principal: a named token, never a name the body claims; notes are one plain line', async () => {
  const store = new MemoryRunStore();
  const tokens = { alice: 'alice-token-0123456789', ci: 'ci-token-0123456789ab' };
  const app = offlineApp({ store, tokens: `acme:alice=${tokens.alice},acme:ci=${tokens.ci},globex=${OFFLINE_TOKENS.globex}` });
  await store.create('run_principal1', { task: 't' }, new Date(1000), 'acme');
  for (const c of ['call_a', 'call_b', 'call_c']) await store.setPending('run_principal1', { callId: c, tool: 'bash', args: {}, reason: 'r', since: new Date(2000).toISOString() });
  // The body claims to be someone else: recorded as the note, the principal is the token's.
  const a = await injectJson(app, 'POST', '/v1/runs/run_principal1/approvals/call_a', { token: tokens.ci, body: { decision: 'approve', by: 'acme/alice' } });
  expect(a.json()).toEqual({ id: 'run_principal1', callId: 'call_a', decision: 'approve', by: 'acme/ci', principal: { kind: 'token', tenant: 'acme', token: 'ci' }, note: 'acme/alice' });
  const b = await injectJson(app, 'POST', '/v1/runs/run_principal1/approvals/call_b', { token: tokens.alice, body: { decision: 'deny', note: 'not this one' } });
  expect(b.json()).toMatchObject({ by: 'acme/alice', note: 'not this one' });
  expect(await store.waitAnswer('run_principal1', 'call_b', 1000)).toEqual({ approved: false, by: 'acme/alice', principal: { kind: 'token', tenant: 'acme', token: 'alice' }, note: 'not this one' });
  // A note that could forge log or terminal lines is refused naming the field; both spellings at once too.
  for (const [body, field] of [[{ decision: 'approve', note: 'ok\napproved by root' }, 'note'], [{ decision: 'approve', note: 'x\u202e' }, 'note'], [{ decision: 'approve', note: 'a', by: 'b' }, 'by']] as const) {
    const r = await injectJson(app, 'POST', '/v1/runs/run_principal1/approvals/call_c', { token: tokens.alice, body });
    expect({ status: r.status, field: r.json<{ error: { field: string } }>().error.field }).toEqual({ status: 400, field });
  }
  // Another tenant's token cannot answer at all (the run is not found for it).
  expect((await injectJson(app, 'POST', '/v1/runs/run_principal1/approvals/call_c', { token: OFFLINE_TOKENS.globex, body: { decision: 'approve' } })).status).toBe(404);
  await app.close();
});

test('auth off: the answer is the operator\'s', async () => {
  const store = new MemoryRunStore();
  const app = offlineApp({ store, tokens: '' });
  await store.create('run_principal2', { task: 't' }, new Date(1000), 'default');
  await store.setPending('run_principal2', { callId: 'call_a', tool: 'bash', args: {}, reason: 'r', since: new Date(2000).toISOString() });
  const a = await injectJson(app, 'POST', '/v1/runs/run_principal2/approvals/call_a', { body: { decision: 'approve' } });
  expect(a.json()).toEqual({ id: 'run_principal2', callId: 'call_a', decision: 'approve', by: 'operator (auth off)', principal: { kind: 'operator', name: 'auth off' } });
  await app.close();
});

test('events page after an id; an approval is answered once and reaches the waiting worker', async () => {
  const { app, store } = await seeded();
  const page = (await injectJson(app, 'GET', '/v1/runs/run_mem00001/events')).json<{ events: Array<{ seq: number }>; next: string }>();
  expect(page.events.map((e) => e.seq)).toEqual([1, 2, 3]);
  const first = (await store.readEvents('run_mem00001'))[0]!.id;
  expect((await injectJson(app, 'GET', `/v1/runs/run_mem00001/events?after=${first}`)).json<{ events: Array<{ seq: number }> }>().events.map((e) => e.seq)).toEqual([2, 3]);

  const waiting = store.waitAnswer('run_mem00001', 'call_1', 5000);
  const ok = await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_1', { body: { decision: 'deny', by: 'ann' } });
  expect(ok.status).toBe(200);
  // Who answered is the token that authenticated (unnamed: key- and 8 hex digits of its digest); "by" is only a note.
  const key = `key-${createHash('sha256').update(OFFLINE_TOKENS.acme).digest('hex').slice(0, 8)}`;
  expect(ok.json()).toMatchObject({ by: `acme/${key}`, principal: { kind: 'token', tenant: 'acme', token: key }, note: 'ann' });
  expect(await waiting).toEqual({ approved: false, by: `acme/${key}`, principal: { kind: 'token', tenant: 'acme', token: key }, note: 'ann' });
  const again = await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_1', { body: { decision: 'approve', by: 'bob' } });
  expect(again.status).toBe(409);
  expect((await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_nope', { body: { decision: 'approve' } })).status).toBe(404);
  await app.close();
});
