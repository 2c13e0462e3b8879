/**
 * The worker's side of the writes that matter: durably() writes again until a replica confirms (or
 * its bound passes, then goes on and says so), and the event writer fills a hole a failover left in a
 * run's log before it appends anything after it. Both against our own ports (a scripted
 * RunStore.durable; MemoryRunStore with events taken out of it as a lost write would be).
 */
import type { RunEvent } from '../../src/domain/events';
import { NotDurableError } from '../../src/queue/durability';
import { MemoryRunStore } from '../../src/queue/memory-run-store';
import { durably } from '../../src/worker/durable-write';
import { EventStreamWriter } from '../../src/worker/event-stream-writer';

function clockAndSleep() {
  let now = 0;
  const slept: number[] = [];
  return { clock: () => now, sleep: async (ms: number) => { slept.push(ms); now += ms; }, slept };
}

describe('durably', () => {
  test('writes again until the replicas confirm, then returns the write\'s result', async () => {
    const t = clockAndSleep();
    const logs: string[] = [];
    let writes = 0;
    let confirmations = 0;
    const store = {
      durable: async <T>(write: () => Promise<T>): Promise<T> => {
        const r = await write();
        confirmations += 1;
        if (confirmations < 4) throw new NotDurableError('only 0 of 1 replica(s) confirmed', r);
        return r;
      },
    };
    const r = await durably(async () => ++writes, { store, log: (m) => logs.push(m), runId: 'run_a', what: 'end', maxWaitMs: 60_000, ...t });
    expect(r).toBe(4);
    expect(writes).toBe(4);
    expect(t.slept).toEqual([100, 200, 300]);
    expect(logs).toEqual(['waiting for a Redis replica to confirm the write', 'a replica confirmed the write']);
  });

  test('past its bound it goes on with the primary\'s answer, and logs a warning', async () => {
    const t = clockAndSleep();
    const logs: Array<Record<string, unknown>> = [];
    const store = { durable: async <T>(write: () => Promise<T>): Promise<T> => { throw new NotDurableError('none', await write()); } };
    const r = await durably(async () => true, { store, log: (msg, f) => logs.push({ msg, ...f }), runId: 'run_b', what: 'claim', maxWaitMs: 5000, ...t });
    expect(r).toBe(true);
    expect(logs.at(-1)).toMatchObject({ level: 'warn', what: 'claim', runId: 'run_b', msg: expect.stringContaining('going on with the primary') });
    expect(t.clock()).toBeGreaterThanOrEqual(5000);
  });

  test('other errors are not retried', async () => {
    const store = { durable: async <T>(write: () => Promise<T>): Promise<T> => write() };
    await expect(durably(async () => { throw new Error('Connection is closed.'); }, { store, log: () => undefined, runId: 'r', what: 'end', maxWaitMs: 1000 }))
      .rejects.toThrow('Connection is closed.');
  });
});

describe('EventStreamWriter', () => {
  const ev = (seq: number): RunEvent => ({ runId: 'run_w1', seq, ts: `2030-01-01T00:00:0${seq}.000Z`, type: 'budget.warning', budget: 'llmCalls', limit: 10, used: seq });

  test('a hole a failover left (events 2-3 lost) is filled, in order, before event 4 goes on', async () => {
    const store = new MemoryRunStore();
    await store.create('run_w1', { task: 't' }, new Date(0));
    await store.claim('run_w1', 'tok');
    const all = [1, 2, 3, 4, 5].map(ev);
    const refills: Array<[number, number]> = [];
    const w = new EventStreamWriter({ store, fence: 'tok', base: 0, events: () => all, onStale: () => { throw new Error('not stale'); }, onError: (e) => { throw e; }, onRefill: (a, b) => refills.push([a, b]) });
    await w.push(all[0]!);
    // As if 2 and 3 were appended to a primary that died before its replica had them: the new primary never saw them.
    await w.push(all[3]!);
    await w.push(all[4]!);
    expect((await store.readEvents('run_w1')).map((r) => r.event.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(refills).toEqual([[2, 3]]);
    // Sent again (ioredis re-sends a command whose answer a failover cut off): nothing doubles.
    await w.push(all[4]!);
    expect((await store.readEvents('run_w1')).map((r) => r.event.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  test('after another attempt claimed the run, its events are discarded as stale', async () => {
    const store = new MemoryRunStore();
    await store.create('run_w1', { task: 't' }, new Date(0));
    await store.claim('run_w1', 'old');
    await store.claim('run_w1', 'new');
    const stale: number[] = [];
    const w = new EventStreamWriter({ store, fence: 'old', base: 0, events: () => [ev(1)], onStale: (e) => stale.push(e.seq), onError: (e) => { throw e; } });
    await w.push(ev(1));
    expect(stale).toEqual([1]);
    expect(await store.readEvents('run_w1')).toEqual([]);
  });
});
