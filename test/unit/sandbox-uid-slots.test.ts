/** uid slots: PID 1 and the agent get adjacent uids of their own; agent uids map back to their slot. */
import { slotOfAgentUid, uidSlot } from '../../src/sandbox/uid-slots';

const range = { base: 2_000_000, slots: 500 };

test('slot n: init uid base+2n, agent uid base+2n+1, named after the agent uid', () => {
  expect(uidSlot(range, 0)).toEqual({ slot: 0, initUid: 2_000_000, agentUid: 2_000_001, name: 'corral-u2000001' });
  expect(uidSlot(range, 499)).toEqual({ slot: 499, initUid: 2_000_998, agentUid: 2_000_999, name: 'corral-u2000999' });
});

test('agent uids map back to their slot; init uids and uids outside the range do not', () => {
  expect(slotOfAgentUid(range, 2_000_001)).toBe(0);
  expect(slotOfAgentUid(range, 2_000_999)).toBe(499);
  for (const u of [2_000_000, 2_000_002, 2_001_001, 1_999_999, 10001, Number.NaN]) expect(slotOfAgentUid(range, u)).toBeUndefined();
});
