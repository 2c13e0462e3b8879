import { WorkerSlots } from '../../src/worker/slots';

const tick = () => new Promise((r) => setImmediate(r));

test('at most `size` leases hold a slot; the next waits for a release', async () => {
  const slots = new WorkerSlots(2);
  const [a, b, c] = [slots.lease(), slots.lease(), slots.lease()];
  await a.acquire();
  await b.acquire();
  let cHeld = false;
  const cDone = c.acquire().then(() => (cHeld = true));
  await tick();
  expect(cHeld).toBe(false);
  expect(slots.inUse).toBe(2);
  a.release();
  await cDone;
  expect(c.held).toBe(true);
  expect(slots.inUse).toBe(2);
});

test('a parked lease frees its slot and counts as parked; on unpark it goes ahead of new runs', async () => {
  const seen: number[] = [];
  const slots = new WorkerSlots(1, (n) => seen.push(n));
  const parkedRun = slots.lease();
  await parkedRun.acquire();
  parkedRun.park();
  expect(slots.parked).toBe(1);
  expect(parkedRun.held).toBe(false);
  const other = slots.lease();
  await other.acquire(); // the freed slot
  const late = slots.lease();
  const order: string[] = [];
  const lateDone = late.acquire().then(() => order.push('new'));
  const backDone = parkedRun.unpark().then(() => order.push('resumed'));
  await tick();
  expect(order).toEqual([]);
  other.release();
  await backDone;
  expect(order).toEqual(['resumed']);
  expect(slots.parked).toBe(0);
  parkedRun.release();
  await lateDone;
  expect(order).toEqual(['resumed', 'new']);
  expect(seen).toEqual([1, 0]);
});

test('a cancelled wait gives up cleanly; release is safe in every state', async () => {
  const slots = new WorkerSlots(1);
  const a = slots.lease();
  await a.acquire();
  a.park();
  const b = slots.lease();
  await b.acquire();
  const ctl = new AbortController();
  const back = a.unpark(ctl.signal);
  ctl.abort();
  await expect(back).rejects.toThrow(/cancelled while it waited for a slot/);
  expect(slots.parked).toBe(0);
  a.release();
  a.release();
  b.release();
  expect(slots.inUse).toBe(0);
  const c = slots.lease();
  c.park(); // not held: nothing to give back
  expect(slots.parked).toBe(0);
  c.release();
  expect(slots.inUse).toBe(0);
});

test('a lease released while parked stops counting as parked', async () => {
  const seen: number[] = [];
  const slots = new WorkerSlots(2, (n) => seen.push(n));
  const a = slots.lease();
  await a.acquire();
  a.park();
  a.release();
  expect(slots.parked).toBe(0);
  expect(slots.inUse).toBe(0);
  expect(seen).toEqual([1, 0]);
});
