/**
 * DeltaPublisher: streamed pieces are coalesced into few live deltas, a turn's deltas all go out
 * before flush() returns (the worker flushes right before the turn's model.response), the per-run cap
 * ends live output with a note, and a failed publish never throws into the run. The flush timer is
 * the publisher's own: jest's fake timers drive it.
 */
import type { LiveDelta } from '../../src/domain/events';
import { DeltaPublisher } from '../../src/worker/delta-publisher';

function publisher(maxDeltas = 100, fail = false) {
  const out: LiveDelta[] = [];
  const errors: string[] = [];
  const p = new DeltaPublisher({
    runId: 'run_delta01', now: () => new Date(0), maxDeltas, flushMs: 20, maxChars: 50,
    publish: async (d) => {
      if (fail) throw new Error('redis is down');
      out.push(d);
    },
    onError: (e) => errors.push(e.message),
  });
  return { p, out, errors };
}

beforeEach(() => jest.useFakeTimers());
afterEach(() => jest.useRealTimers());

test('pieces are coalesced: many tokens make one delta per flush interval', async () => {
  const { p, out } = publisher();
  for (const w of 'one two three four'.split(' ')) p.push(1, { kind: 'text', text: `${w} ` });
  p.push(1, { kind: 'tool', index: 0, name: 'bash', argumentsChars: 3 });
  p.push(1, { kind: 'tool', index: 0, name: 'bash', argumentsChars: 9 });
  expect(out).toEqual([]);
  await jest.advanceTimersByTimeAsync(19);
  expect(out).toEqual([]);
  await jest.advanceTimersByTimeAsync(1);
  expect(out).toEqual([{ type: 'model.delta', runId: 'run_delta01', turn: 1, ts: new Date(0).toISOString(), text: 'one two three four ', tools: [{ index: 0, name: 'bash', argumentsChars: 9 }] }]);
});

test('a long text is published when it reaches maxChars; a new turn flushes the old one first; flush() sends at once', async () => {
  const { p, out } = publisher();
  p.push(1, { kind: 'text', text: 'x'.repeat(60) });
  await Promise.resolve();
  expect(out.map((d) => d.text?.length)).toEqual([60]);
  p.push(1, { kind: 'text', text: 'tail' });
  p.push(2, { kind: 'text', text: 'next' });
  p.flush();
  await Promise.resolve();
  expect(out.map((d) => [d.turn, d.text])).toEqual([[1, 'x'.repeat(60)], [1, 'tail'], [2, 'next']]);
  p.flush(); // nothing buffered: nothing sent
  await Promise.resolve();
  expect(out).toHaveLength(3);
});

test('the cap: the last delta says live output stops there; later pieces are dropped', async () => {
  const { p, out } = publisher(3);
  for (let i = 0; i < 10; i++) {
    p.push(1, { kind: 'text', text: `piece ${i}` });
    p.flush();
  }
  await Promise.resolve();
  expect(out).toHaveLength(3);
  expect(out[2]!.note).toContain('live output stops here: this run published 3 deltas (CORRAL_STREAM_MAX_DELTAS)');
  expect(p.count).toBe(3);
});

test('a failed publish is reported, never thrown; close() drops what is buffered', async () => {
  const { p, errors } = publisher(10, true);
  p.push(1, { kind: 'text', text: 'lost' });
  expect(() => p.flush()).not.toThrow();
  await jest.advanceTimersByTimeAsync(0);
  expect(errors).toEqual(['redis is down']);
  const q = publisher();
  q.p.push(1, { kind: 'text', text: 'buffered' });
  q.p.close();
  expect(jest.getTimerCount()).toBe(0);
  await jest.advanceTimersByTimeAsync(1000);
  expect(q.out).toEqual([]);
});
