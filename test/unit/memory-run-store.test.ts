/** The run store's contract (test/support/run-store-contract.ts) against MemoryRunStore, plus its clock-driven expiry. */
import { MemoryRunStore } from '../../src/queue/memory-run-store';
import { FINISHED_TTL_S } from '../../src/queue/run-store';
import { runStoreContract } from '../support/run-store-contract';

describe('MemoryRunStore', () => {
  runStoreContract(async () => {
    const locks = new Map<string, string>();
    const store = new MemoryRunStore({ lockOf: (k) => locks.get(k) });
    return {
      store,
      setLock: async (key, token) => {
        if (token === null) locks.delete(key);
        else locks.set(key, token);
      },
      setRaw: async (runId, field, value) => {
        (store as unknown as { records: Map<string, Map<string, string>> }).records.get(runId)!.set(field, value);
      },
    };
  });

  test('a finished run and its log expire after the retention; a live one stays', async () => {
    const clock = { now: 1_000_000 };
    const store = new MemoryRunStore({ clock: () => clock.now });
    await store.create('run_ttl00001', { task: 'a' }, new Date(clock.now));
    await store.create('run_ttl00002', { task: 'b' }, new Date(clock.now));
    await store.appendEvent({ runId: 'run_ttl00001', seq: 1, ts: '', type: 'budget.warning', budget: 'llmCalls', limit: 1, used: 1 });
    await store.end('run_ttl00001', 'succeeded', 'done', new Date(clock.now));
    clock.now += FINISHED_TTL_S * 1000 - 1;
    expect(await store.get('run_ttl00001')).not.toBeNull();
    clock.now += 1;
    expect(await store.get('run_ttl00001')).toBeNull();
    expect(await store.readEvents('run_ttl00001')).toEqual([]);
    expect((await store.listPage({ tenant: 'default', limit: 10 })).runs.map((r) => r.id)).toEqual(['run_ttl00002']);
  });

  test('cancel requests reach its listeners', async () => {
    const store = new MemoryRunStore();
    const got: string[] = [];
    const off = store.onCancel((id) => got.push(id));
    await store.requestCancel('run_cxl00001');
    off();
    await store.requestCancel('run_cxl00002');
    expect(got).toEqual(['run_cxl00001']);
  });
});
