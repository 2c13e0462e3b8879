/** Host uid leases (host-leases.ts) and the secure-directory check (secure-dir.ts), on real files. */
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HostLeases } from '../../src/sandbox/host-leases';
import { secureDirProblem } from '../../src/sandbox/secure-dir';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-leases-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('one holder per uid on the host: the same engine and name again is the same lease; anyone else is refused with the holder', async () => {
  const a = new HostLeases(dir, 'engine:A');
  const b = new HostLeases(dir, 'engine:B');
  expect(await a.take(101, 'corral-u101')).toEqual({ ok: true, fresh: true });
  expect(await a.take(101, 'corral-u101')).toEqual({ ok: true, fresh: false });
  expect(await b.take(101, 'corral-u101')).toMatchObject({ ok: false, holder: { engine: 'engine:A', name: 'corral-u101' } });
  expect(await a.take(101, 'corral-u999')).toMatchObject({ ok: false });
  await b.release(101, 'corral-u101'); // not B's: stays
  expect(readdirSync(dir)).toEqual(['u101']);
  await a.release(101, 'corral-u101');
  expect(readdirSync(dir)).toEqual([]);
});

test('a slot leases both its uids, so ranges of two deployments that overlap by one never share a uid', async () => {
  const a = new HostLeases(dir, 'engine:A');
  // deployment A: base 100 → slot 0 is PID 1 100, agent 101; deployment B: base 101 → slot 0 is PID 1 101, agent 102
  expect(await a.takeSlot(101, 'corral-u101')).toMatchObject({ ok: true });
  const b = new HostLeases(dir, 'engine:B');
  expect(await b.takeSlot(102, 'corral-u102')).toMatchObject({ ok: false, holder: { name: 'corral-u101' } });
  expect(readdirSync(dir).sort()).toEqual(['u100', 'u101']);
  await a.releaseSlot(101, 'corral-u101');
  expect(await b.takeSlot(102, 'corral-u102')).toMatchObject({ ok: true, fresh: true });
});

test('a sweep releases only this engine\'s leases whose container is gone, once past the grace', async () => {
  const now = Date.now();
  const a = new HostLeases(dir, 'engine:A', () => new Date(now));
  const b = new HostLeases(dir, 'engine:B', () => new Date(now));
  await a.take(11, 'corral-u11');
  await a.take(13, 'corral-u13');
  await b.take(15, 'corral-u15');
  for (const f of readdirSync(dir)) utimesSync(join(dir, f), new Date(now - 120_000), new Date(now - 120_000));
  await a.take(17, 'corral-u17'); // young
  expect(await a.sweep(new Set(['corral-u13']))).toEqual([11]);
  expect(readdirSync(dir).sort()).toEqual(['u13', 'u15', 'u17']);
});

test('secure directories: every component from / owned by root or us, writable by no one else (a sticky parent is fine), no links', async () => {
  const root = join(dir, 'root');
  mkdirSync(root, { mode: 0o711 });
  chmodSync(dir, 0o755);
  expect(await secureDirProblem(root)).toBeNull();
  chmodSync(root, 0o777);
  expect(await secureDirProblem(root)).toMatch(/writable by its group or others/);
  chmodSync(root, 0o1777);
  expect(await secureDirProblem(root)).toMatch(/writable by its group or others/); // the last component may not be
  chmodSync(root, 0o711);
  chmodSync(dir, 0o1777); // a sticky parent like /tmp
  expect(await secureDirProblem(root)).toBeNull();
  chmodSync(dir, 0o775);
  expect(await secureDirProblem(root)).toMatch(/writable by its group or others/);
  chmodSync(dir, 0o755);
  symlinkSync(root, join(dir, 'link'));
  expect(await secureDirProblem(join(dir, 'link'))).toMatch(/symbolic link/);
  expect(await secureDirProblem(`${root}/`)).toMatch(/normalised/);
  expect(await secureDirProblem('relative/x')).toMatch(/normalised/);
});
