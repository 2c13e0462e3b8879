/**
 * The API's read, approval and event routes over the in-memory run store — no Redis, no queue: a
 * tenant reads its own runs (another tenant's are 404), pages through its list, reads a run's events
 * after an id, answers a pending call once (the waiting side gets it; a second answer is 409).
 */
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

test('events page after an id; an approval is answered once and reaches the waiting worker', async () => {
  const { app, store } = await seeded();
  const page = (await injectJson(app, 'GET', '/v1/runs/run_mem00001/events')).json<{ events: Array<{ seq: number }>; next: string }>();
  expect(page.events.map((e) => e.seq)).toEqual([1, 2, 3]);
  const first = (await store.readEvents('run_mem00001'))[0]!.id;
  expect((await injectJson(app, 'GET', `/v1/runs/run_mem00001/events?after=${first}`)).json<{ events: Array<{ seq: number }> }>().events.map((e) => e.seq)).toEqual([2, 3]);

  const waiting = store.waitAnswer('run_mem00001', 'call_1', 5000);
  const ok = await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_1', { body: { decision: 'deny', by: 'ann' } });
  expect(ok.status).toBe(200);
  expect(await waiting).toEqual({ approved: false, by: 'ann' });
  const again = await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_1', { body: { decision: 'approve', by: 'bob' } });
  expect(again.status).toBe(409);
  expect((await injectJson(app, 'POST', '/v1/runs/run_mem00001/approvals/call_nope', { body: { decision: 'approve' } })).status).toBe(404);
  await app.close();
});
