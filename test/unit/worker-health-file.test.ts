/**
 * The worker's health file (its container health check reads it): the /readyz checks, each bounded in
 * time, written atomically every interval; a failing or hanging check makes it not ok and names why;
 * after stop() it is no longer rewritten (so its age shows a stuck or stopped worker).
 */
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startHealthFile } from '../../src/worker/health-file';
import { consistently, eventually } from '../support/eventually';

let dir: string;
beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'corral-health-')); });
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const read = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as { ts: string; ok: boolean; checks: Record<string, { ok: boolean; error?: string }>; workerId: string; active: number };

test('ok while every check answers; a failing or hanging check makes it not ok, naming the check', async () => {
  const path = join(dir, 'health.json');
  let redisUp = true;
  const h = startHealthFile({
    path, intervalMs: 20, workerId: 'w1', active: () => 2, log: () => undefined, checkTimeoutMs: 50,
    checks: {
      redis: async () => { if (!redisUp) throw new Error('ECONNREFUSED'); },
      docker: async () => 'ok',
    },
  });
  try {
    await h.written;
    expect(read(path)).toMatchObject({ ok: true, workerId: 'w1', active: 2, checks: { redis: { ok: true }, docker: { ok: true } } });
    redisUp = false;
    const down = await eventually(() => read(path), { what: 'the file to say Redis is down', until: (v) => !v.ok });
    expect(down.checks.redis).toMatchObject({ ok: false, error: 'ECONNREFUSED' });
  } finally {
    await h.stop();
  }
  expect(readdirSync(dir)).toEqual(['health.json']); // written by rename: no temporary file stays
  const hanging = startHealthFile({ path: join(dir, 'hang.json'), intervalMs: 1000, workerId: 'w2', active: () => 0, log: () => undefined, checkTimeoutMs: 30, checks: { docker: () => new Promise(() => undefined) } });
  await hanging.written;
  await hanging.stop();
  expect(read(join(dir, 'hang.json')).checks.docker).toMatchObject({ ok: false, error: 'no answer in 30 ms' });
});

test('after stop() the file is not rewritten', async () => {
  const path = join(dir, 'health.json');
  const h = startHealthFile({ path, intervalMs: 10, workerId: 'w', active: () => 0, log: () => undefined, checks: {} });
  await h.written;
  await h.stop();
  const ts = read(path).ts;
  // A window in which a running writer would have written several times.
  await consistently(() => read(path).ts, { what: 'the health file to stay as it was', holds: (v) => v === ts, forMs: 60, intervalMs: 10 });
});
