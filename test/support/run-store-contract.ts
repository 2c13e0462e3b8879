/**
 * One set of tests for every RunStore implementation (the Redis one against the real test Redis in
 * test/integration/run-store-contract.test.ts, the in-memory one in test/unit/memory-run-store.test.ts):
 * fencing of every worker write, records and their listing, counts, the event log, approvals,
 * parking, and corrupt records refused by field.
 */
import type { LiveDelta, RunEvent } from '../../src/domain/events';
import type { RunStore } from '../../src/queue/run-store';

export interface ContractSubject {
  store: RunStore;
  /** Sets (or, with null, removes) the queue's lock of a job, as BullMQ would. */
  setLock(lockKey: string, token: string | null): Promise<void>;
  /** Writes one raw field of a run's record (to plant a corrupt one). */
  setRaw(runId: string, field: string, value: string): Promise<void>;
  close?(): Promise<void>;
}

const event = (runId: string, seq: number): RunEvent => ({
  runId, seq, ts: new Date(0).toISOString(), type: 'budget.warning', budget: 'llmCalls', limit: 10, used: 8,
});
const delta = (runId: string, text: string): LiveDelta => ({ type: 'model.delta', runId, turn: 1, ts: new Date(0).toISOString(), text });
const pending = (callId: string, since = new Date(0).toISOString()) => ({ callId, tool: 'bash', args: { command: 'rm -r x' }, reason: 'asks', since });

export function runStoreContract(make: () => Promise<ContractSubject>): void {
  let s: ContractSubject;
  let store: RunStore;
  beforeEach(async () => {
    s = await make();
    store = s.store;
  });
  afterEach(async () => {
    await s.close?.();
  });

  describe('fencing', () => {
    test('a stale attempt cannot overwrite the run or add events after another attempt claimed it', async () => {
      const id = 'run_fencing1';
      await store.create(id, { task: 'x' }, new Date());
      await store.claim(id, 'token-A');
      expect(await store.update(id, { status: 'running', workerId: 'worker-a' }, 'token-A')).toBe(true);
      expect(await store.appendEvent(event(id, 1), 'token-A')).toBe(true);

      await store.claim(id, 'token-B'); // the job was taken over (stalled → started again)
      expect(await store.update(id, { status: 'running', workerId: 'worker-b' }, 'token-B')).toBe(true);

      expect(await store.update(id, { status: 'succeeded', outcome: 'succeeded', finalAnswer: 'late' }, 'token-A')).toBe(false);
      expect(await store.appendEvent(event(id, 2), 'token-A')).toBe(false);
      expect(await store.appendDelta(delta(id, 'late'), 'token-A')).toBe(false);

      const run = await store.get(id);
      expect(run).toMatchObject({ status: 'running', workerId: 'worker-b' });
      expect(run).not.toHaveProperty('finalAnswer');
      expect(run).not.toHaveProperty('owner');
      expect((await store.readEvents(id)).map((r) => r.event.seq)).toEqual([1]);
      expect(await store.appendEvent(event(id, 2), 'token-B')).toBe(true);
    });

    test('an end never lands over a different recorded end; the same end written again (a retry after a failover) is a no-op', async () => {
      const id = 'run_fencing9';
      await store.create(id, { task: 'x' }, new Date());
      await store.claim(id, 'token-A');
      const end = { status: 'succeeded' as const, outcome: 'succeeded' as const, finalAnswer: 'done', finishedAt: '2030-01-01T00:00:00.000Z' };
      expect(await store.update(id, end, 'token-A')).toBe(true);
      expect(await store.update(id, end, 'token-A')).toBe(true);
      expect(await store.statusCounts()).toMatchObject({ succeeded: 1 });
      // Another end (a stalled-job sweep that lost the race, a stale attempt's late end) is refused.
      expect(await store.update(id, { status: 'error', outcome: 'error', reason: 'late', finishedAt: '2030-01-01T00:00:01.000Z' }, 'token-A')).toBe(false);
      expect(await store.update(id, { status: 'error', outcome: 'error', reason: 'late', finishedAt: '2030-01-01T00:00:01.000Z' })).toBe(false);
      expect(await store.get(id)).toMatchObject({ status: 'succeeded', outcome: 'succeeded', finalAnswer: 'done', finishedAt: end.finishedAt });
      expect(await store.end(id, 'error', 'worker lost', new Date())).toBe(false);
      // A plain durable() runs its write and hands back what it returned.
      expect(await store.durable(async () => 42)).toBe(42);
    });

    test('appendInOrder: only right after its predecessor, once per seq, only for the owner; a hole is reported with the last seq', async () => {
      const id = 'run_ordered1';
      await store.create(id, { task: 'x' }, new Date());
      await store.claim(id, 'token-A');
      expect(await store.appendInOrder(event(id, 1), 'token-A', 0)).toEqual({ kind: 'appended' });
      expect(await store.appendInOrder(event(id, 1), 'token-A', 0)).toEqual({ kind: 'duplicate' });
      expect(await store.appendInOrder(event(id, 4), 'token-A', 0)).toEqual({ kind: 'gap', last: 1 });
      expect(await store.appendInOrder(event(id, 2), 'token-A', 0)).toEqual({ kind: 'appended' });
      expect(await store.appendInOrder(event(id, 3), 'token-A', 0)).toEqual({ kind: 'appended' });
      expect(await store.appendInOrder(event(id, 4), 'token-A', 0)).toEqual({ kind: 'appended' });
      expect((await store.readEvents(id)).map((r) => r.event.seq)).toEqual([1, 2, 3, 4]);
      // A new attempt (a resumed run goes on after seq 4; its base says so) — and the old one is stale.
      await store.claim(id, 'token-B');
      expect(await store.appendInOrder(event(id, 6), 'token-B', 4)).toEqual({ kind: 'gap', last: 4 });
      expect(await store.appendInOrder(event(id, 5), 'token-B', 4)).toEqual({ kind: 'appended' });
      expect(await store.appendInOrder(event(id, 5), 'token-A', 0)).toEqual({ kind: 'stale' });
      // A fresh attempt after a crash numbers from 1 again (base 0): its events follow the old ones.
      await store.claim(id, 'token-C');
      expect(await store.appendInOrder(event(id, 1), 'token-C', 0)).toEqual({ kind: 'appended' });
      expect((await store.readEvents(id)).map((r) => r.event.seq)).toEqual([1, 2, 3, 4, 5, 1]);
      expect(await store.get(id)).not.toHaveProperty('lastSeq');
    });

    test('setPending and clearPending of a stale attempt are discarded', async () => {
      const id = 'run_fencing2';
      await store.create(id, { task: 'x' }, new Date());
      expect(await store.claim(id, 'token-A')).toBe(true);
      expect(await store.setPending(id, pending('call_a'), 'token-A')).toBe(true);
      expect((await store.get(id))!.status).toBe('awaiting_approval');

      expect(await store.claim(id, 'token-B')).toBe(true);
      expect(await store.update(id, { status: 'running' }, 'token-B')).toBe(true);
      expect(await store.setPending(id, pending('call_stale'), 'token-A')).toBe(false);
      expect(await store.clearPending(id, 'call_a', 'token-A')).toBe(false);
      const run = await store.get(id);
      expect(run!.pendingApprovals.map((p) => p.callId)).toEqual(['call_a']);
      expect(run!.status).toBe('running');
      // The owner's own clear works and sets the status back only when nothing is pending.
      expect(await store.setPending(id, pending('call_b', new Date(1).toISOString()), 'token-B')).toBe(true);
      expect(await store.clearPending(id, 'call_a', 'token-B')).toBe(true);
      expect((await store.get(id))!.status).toBe('awaiting_approval');
      expect(await store.clearPending(id, 'call_b', 'token-B')).toBe(true);
      expect(await store.get(id)).toMatchObject({ status: 'running', pendingApprovals: [] });
    });

    test('a claim lands only while the job lock holds the token, and never on an ended run', async () => {
      const id = 'run_fencing3';
      const lockKey = `contract:bull:q:${id}:lock`;
      await store.create(id, { task: 'x' }, new Date());
      expect(await store.claim(id, 'token-A', lockKey)).toBe(false); // no lock at all
      await s.setLock(lockKey, 'token-B');
      expect(await store.claim(id, 'token-A', lockKey)).toBe(false); // another worker's lock
      expect(await store.claim(id, 'token-B', lockKey)).toBe(true);
      expect(await store.update(id, { status: 'running' }, 'token-B')).toBe(true);
      expect(await store.update(id, { status: 'running' }, 'token-A')).toBe(false);

      expect(await store.end(id, 'succeeded', 'done', new Date(), { fence: 'token-B' })).toBe(true);
      await s.setLock(lockKey, 'token-C');
      expect(await store.claim(id, 'token-C', lockKey)).toBe(false);
      expect((await store.get(id))!.status).toBe('succeeded');
      await s.setLock(lockKey, null);
    });

    test('end never overwrites a recorded end, and its guards hold', async () => {
      const [a, b, c] = ['run_fencing4', 'run_fencing5', 'run_fencing6'];
      for (const id of [a, b, c]) await store.create(id, { task: 'x' }, new Date());
      expect(await store.end(a, 'succeeded', 'the model gave its final answer', new Date(1000))).toBe(true);
      expect(await store.end(a, 'error', 'late', new Date(2000))).toBe(false);
      expect(await store.get(a)).toMatchObject({ status: 'succeeded', reason: 'the model gave its final answer', finishedAt: new Date(1000).toISOString() });
      expect(await store.get(a)).not.toHaveProperty('errorCode');

      await store.claim(b, 'token-W');
      expect(await store.end(b, 'cancelled', 'cancelled before it started', new Date(), 'unclaimed')).toBe(false);
      expect((await store.get(b))!.finishedAt).toBeUndefined();
      expect(await store.end(c, 'cancelled', 'cancelled before it started', new Date(), 'unclaimed')).toBe(true);
      expect(await store.get(c)).toMatchObject({ status: 'cancelled', errorCode: 'cancelled' });

      await store.claim(b, 'token-X');
      expect(await store.end(b, 'error', 'stale', new Date(), { fence: 'token-W' })).toBe(false);
      expect(await store.end(b, 'error', 'the owner ends it', new Date(), { fence: 'token-X' }, 'sandbox_failed')).toBe(true);
      expect(await store.get(b)).toMatchObject({ reason: 'the owner ends it', errorCode: 'sandbox_failed' });

      expect(await store.end('run_nosuchrun', 'error', 'x', new Date())).toBe(false);
      expect(await store.get('run_nosuchrun')).toBeNull();
    });

    test('an end under the job\'s lock lands only while that attempt holds the job, and claims the run for it (issue 40, defect 7)', async () => {
      const [a, b] = ['run_lockend1', 'run_lockend2'];
      const lockKey = (id: string) => `contract:bull:q:${id}:lock`;
      for (const id of [a, b]) await store.create(id, { task: 'x' }, new Date());
      // Attempt B holds the job and owns the run; A's lock is gone (stalled, started again as B).
      await s.setLock(lockKey(a), 'token-B');
      expect(await store.claim(a, 'token-B', lockKey(a))).toBe(true);
      expect(await store.end(a, 'error', 'stale refusal', new Date(), { fence: 'token-A', lockKey: lockKey(a) }, 'invalid_input')).toBe(false);
      expect(await store.end(a, 'error', 'stale end', new Date(), { fence: 'token-A' })).toBe(false);
      expect((await store.get(a))!.finishedAt).toBeUndefined();
      // No lock at all (the job is gone or failed for good): nothing is written under it either.
      expect(await store.end(b, 'error', 'no lock', new Date(), { fence: 'token-C', lockKey: lockKey(b) })).toBe(false);
      // The attempt that holds the job ends a run it never claimed (a crashed earlier attempt owned it) …
      await store.claim(b, 'token-OLD');
      await s.setLock(lockKey(b), 'token-C');
      expect(await store.end(b, 'error', 'refused', new Date(), { fence: 'token-C', lockKey: lockKey(b) }, 'invalid_input')).toBe(true);
      expect(await store.get(b)).toMatchObject({ status: 'error', reason: 'refused', errorCode: 'invalid_input' });
      // … and the run is now its: the old owner's late writes are discarded.
      expect(await store.update(b, { reason: 'late' }, 'token-OLD')).toBe(false);
      for (const id of [a, b]) await s.setLock(lockKey(id), null);
    });

    test('a claim of an ended run fails, and setPending on an ended run is discarded', async () => {
      const id = 'run_fencing7';
      await store.create(id, { task: 'x' }, new Date());
      await store.claim(id, 'token-A');
      await store.end(id, 'failed', 'the checks failed', new Date(), { fence: 'token-A' });
      expect(await store.claim(id, 'token-B')).toBe(false);
      expect(await store.setPending(id, pending('call_late'), 'token-A')).toBe(false);
      expect(await store.get(id)).toMatchObject({ status: 'failed', pendingApprovals: [], errorCode: 'run_failed' });
    });
  });

  describe('records', () => {
    test('create never overwrites; ensure creates only what is missing; tenantOf and getSpec', async () => {
      const spec = { task: 'first', workspace: { files: {} }, labels: { team: 'a' } } as never;
      await store.create('run_rec00001', spec, new Date(1000), 'acme');
      await store.create('run_rec00001', { task: 'second' }, new Date(2000), 'globex');
      await store.ensure('run_rec00001', { task: 'third' }, new Date(3000));
      expect(await store.get('run_rec00001')).toEqual({
        id: 'run_rec00001', status: 'queued', tenant: 'acme', task: 'first', createdAt: new Date(1000).toISOString(), labels: { team: 'a' }, pendingApprovals: [],
      });
      expect(await store.getSpec('run_rec00001')).toEqual(spec);
      expect(await store.tenantOf('run_rec00001')).toBe('acme');
      await store.ensure('run_rec00002', { task: 'from another producer' }, new Date(4000));
      expect(await store.tenantOf('run_rec00002')).toBe('default');
      expect(await store.getSpec('run_rec00002')).toBeNull();
      expect(await store.tenantOf('run_rec00003')).toBeNull();
      expect(await store.update('run_rec00003', { status: 'running' })).toBe(false); // no record: nothing made
      expect(await store.get('run_rec00003')).toBeNull();
    });

    test('update writes JSON fields and keeps the rest; an empty update is a no-op', async () => {
      await store.create('run_upd00001', { task: 't' }, new Date(0));
      const usage = { llmCalls: 1, toolCalls: 2, inputTokens: 3, outputTokens: 4, costUsd: 0.5, wallTimeMs: 6 };
      expect(await store.update('run_upd00001', { status: 'running', usage, finalAnswer: null, artifacts: [{ name: 'report.md', path: '/x', bytes: 3 }] })).toBe(true);
      expect(await store.update('run_upd00001', {})).toBe(true);
      expect(await store.get('run_upd00001')).toMatchObject({ status: 'running', usage, finalAnswer: null, artifacts: [{ name: 'report.md', path: '/x', bytes: 3 }], task: 't' });
    });

    test('listPage: newest first, a tenant\'s own runs only, cursors chain without gaps, status filter', async () => {
      for (let i = 0; i < 7; i++) await store.create(`run_lst0000${i}`, { task: `t${i}` }, new Date(1000 + i), i % 3 === 2 ? 'globex' : 'acme');
      await store.update('run_lst00004', { status: 'running' });
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let pages = 0; pages < 10; pages++) {
        const p = await store.listPage({ tenant: 'acme', limit: 2, ...(cursor ? { cursor } : {}) });
        seen.push(...p.runs.map((r) => r.id));
        if (!p.next) break;
        cursor = p.next;
      }
      expect(seen).toEqual(['run_lst00006', 'run_lst00004', 'run_lst00003', 'run_lst00001', 'run_lst00000']);
      expect((await store.listPage({ tenant: 'acme', limit: 10, statuses: ['running'] })).runs.map((r) => r.id)).toEqual(['run_lst00004']);
      expect((await store.listPage({ tenant: 'globex', limit: 10 })).runs.map((r) => r.id)).toEqual(['run_lst00005', 'run_lst00002']);
      expect(await store.listPage({ tenant: 'nobody', limit: 10 })).toEqual({ runs: [], next: null });
      expect((await store.list(3)).map((r) => r.id)).toEqual(['run_lst00006', 'run_lst00005', 'run_lst00004']);
      await expect(store.listPage({ tenant: 'acme', limit: 2, cursor: 'bm90LWEtY3Vyc29y' })).rejects.toMatchObject({ code: 'invalid_input', details: { field: 'cursor' } });
    });

    test('statusCounts: all tenants and one, moved by every status change', async () => {
      await store.create('run_cnt00001', { task: 'a' }, new Date(0), 'acme');
      await store.create('run_cnt00002', { task: 'b' }, new Date(0), 'globex');
      await store.update('run_cnt00001', { status: 'running' });
      await store.setPending('run_cnt00001', pending('call_1'));
      expect(await store.statusCounts()).toMatchObject({ queued: 1, awaiting_approval: 1, running: 0 });
      await store.clearPending('run_cnt00001', 'call_1');
      await store.end('run_cnt00001', 'succeeded', 'done', new Date(1));
      expect(await store.statusCounts('acme')).toMatchObject({ queued: 0, running: 0, awaiting_approval: 0, succeeded: 1 });
      expect(await store.statusCounts('globex')).toMatchObject({ queued: 1 });
      expect(await store.statusCounts()).toMatchObject({ queued: 1, succeeded: 1, running: 0 });
    });

    test('countDockerWait counts per run', async () => {
      await store.create('run_dkw00001', { task: 'a' }, new Date(0));
      expect(await store.countDockerWait('run_dkw00001')).toBe(1);
      expect(await store.countDockerWait('run_dkw00001')).toBe(2);
      expect(await store.get('run_dkw00001')).not.toHaveProperty('dockerWaits');
    });

    test.each([
      ['status', 'exploded', /field status does not hold what it should/],
      ['usage', '{not json', /field usage is not JSON/],
      ['usage', '{"llmCalls":"many"}', /field usage does not hold what it should/],
      ['labels', '{"a":1}', /field labels does not hold what it should/],
      ['pending:call_x', '{"callId":1}', /field pending:call_x is not a pending call/],
      ['errorCode', 'oops', /field errorCode does not hold what it should/],
    ])('a corrupt record is refused naming the field: %s = %s', async (field, value, message) => {
      await store.create('run_bad00001', { task: 'a' }, new Date(0));
      await s.setRaw('run_bad00001', field, value);
      await expect(store.get('run_bad00001')).rejects.toMatchObject({ code: 'internal', message: expect.stringMatching(message) });
    });
  });

  describe('event log', () => {
    test('events and live deltas in order; readEvents skips deltas; `after` resumes; fenced appends need the owner', async () => {
      const id = 'run_log00001';
      await store.create(id, { task: 'a' }, new Date(0));
      expect(await store.appendEvent(event(id, 1))).toBe(true);
      expect(await store.appendDelta(delta(id, 'hel'))).toBe(true);
      expect(await store.appendEvent(event(id, 2))).toBe(true);
      const live = await store.readLive(id);
      expect(live.map((r) => (r.event ? `e${r.event.seq}` : 'd'))).toEqual(['e1', 'd', 'e2']);
      const all = await store.readEvents(id);
      expect(all.map((r) => r.event.seq)).toEqual([1, 2]);
      expect((await store.readEvents(id, all[0]!.id)).map((r) => r.event.seq)).toEqual([2]);
      expect(await store.readEvents(id, all[1]!.id)).toEqual([]);
      expect((await store.readEvents(id, '0', 1)).map((r) => r.event.seq)).toEqual([1]);
      expect(await store.appendEvent(event(id, 3), 'token-nobody')).toBe(false);
      expect(await store.readEvents('run_log00404')).toEqual([]);
    });

    test('the live feed hands over the rows after a cursor as the log grows; empty at its timeout or on abort', async () => {
      const id = 'run_log00002';
      const other = 'run_log00003';
      await store.create(id, { task: 'a' }, new Date(0));
      await store.create(other, { task: 'b' }, new Date(0));
      await store.appendEvent(event(id, 1));
      const [first] = await store.readEvents(id);
      const feed = store.liveFeed();
      expect(await feed.next(id, first!.id, 50)).toEqual([]);
      // Rows already there come at once; from "0" too.
      expect((await feed.next(id, '0', 5000)).map((r) => r.event?.seq)).toEqual([1]);
      // Three subscribers of one run at two cursors, and one of another run, all waiting at once.
      const a = feed.next(id, first!.id, 5000);
      const b = feed.next(id, first!.id, 5000);
      const c = feed.next(other, '0', 5000);
      const early = feed.next(id, '0', 5000);
      expect((await early).map((r) => r.event?.seq)).toEqual([1]);
      // The appends come after the waits began (whether or not the reader is blocked yet, each must wake).
      await store.appendEvent(event(id, 2));
      await store.appendDelta({ runId: id, type: 'model.delta', turn: 1, ts: new Date(0).toISOString(), text: 'x' });
      const [ra, rb] = await Promise.all([a, b]);
      expect(ra.map((r) => r.event?.seq)).toEqual([2]);
      expect(rb.map((r) => r.event?.seq)).toEqual([2]);
      await store.appendEvent(event(other, 1));
      expect((await c).map((r) => r.event?.seq)).toEqual([1]);
      // The delta after event 2 (live rows carry deltas too).
      const [second] = (await store.readEvents(id)).slice(1);
      expect((await feed.next(id, second!.id, 5000)).map((r) => (r.delta ? 'delta' : r.event?.seq))).toEqual(['delta']);
      const ac = new AbortController();
      const aborted = feed.next(id, '18446744073709551615-0', 60_000, ac.signal);
      ac.abort();
      expect(await aborted).toEqual([]);
    });
  });

  describe('approvals and parking', () => {
    test('an answer reaches the waiter once; a second answer is a conflict; unknown runs and calls are not found', async () => {
      const id = 'run_apr00001';
      await store.create(id, { task: 'a' }, new Date(0));
      await store.setPending(id, pending('call_1'));
      await expect(store.answer('run_apr00404', 'call_1', { approved: true, by: 'ann' })).rejects.toMatchObject({ code: 'not_found', message: 'no run with id run_apr00404' });
      await expect(store.answer(id, 'call_nope', { approved: true, by: 'ann' })).rejects.toMatchObject({ code: 'not_found', message: `run ${id} has no pending approval for call call_nope` });
      const waiting = store.waitAnswer(id, 'call_1', 5000);
      await store.answer(id, 'call_1', { approved: false, by: 'ann' });
      expect(await waiting).toEqual({ approved: false, by: 'ann' });
      await expect(store.answer(id, 'call_1', { approved: true, by: 'bob' })).rejects.toMatchObject({ code: 'conflict' });
      await store.clearPending(id, 'call_1');
      await expect(store.answer(id, 'call_1', { approved: true, by: 'bob' })).rejects.toMatchObject({ code: 'conflict' });
    });

    test('waitAnswer: null at its timeout; the abort reason when aborted', async () => {
      const id = 'run_apr00002';
      await store.create(id, { task: 'a' }, new Date(0));
      await store.setPending(id, pending('call_1'));
      expect(await store.waitAnswer(id, 'call_1', 100)).toBeNull();
      const ac = new AbortController();
      const waiting = store.waitAnswer(id, 'call_1', 10_000, ac.signal);
      ac.abort(new Error('run cancelled')); // while it waits (however far its set-up got)
      await expect(waiting).rejects.toThrow('run cancelled');
    });

    test('parking: a tenant has at most `cap` parked runs; expired entries free the cap', async () => {
      const now = Date.now();
      expect(await store.reserveParking('acme', 'run_p1', now + 10_000, 2, now)).toBe(true);
      expect(await store.reserveParking('acme', 'run_p2', now + 10_000, 2, now)).toBe(true);
      expect(await store.reserveParking('acme', 'run_p3', now + 10_000, 2, now)).toBe(false);
      expect(await store.reserveParking('acme', 'run_p1', now + 20_000, 2, now)).toBe(true); // the same run again
      expect(await store.reserveParking('globex', 'run_g1', now + 10_000, 2, now)).toBe(true); // another tenant's own cap
      expect(await store.parkedCount('acme', now)).toBe(2);
      await store.releaseParking('acme', 'run_p2');
      expect(await store.reserveParking('acme', 'run_p3', now + 10_000, 2, now)).toBe(true);
      expect(await store.reserveParking('acme', 'run_p4', now + 30_000, 2, now + 15_000)).toBe(true);
      expect(await store.parkedCount('acme', now + 15_000)).toBe(2);
    });
  });
}
