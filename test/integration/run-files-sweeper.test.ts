/**
 * Run files are not kept forever (issue 40, defect 5), keyed on the run store (real Redis): a run
 * finished longer ago than the retention, or one the store has forgotten, loses its directory (and
 * its objects); a run still going keeps everything; a finished run keeps no checkpoint tars; a
 * publish the object store refused (a real s3rver taken away) leaves a marker, and the next sweep
 * stores the files and removes the directory.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { artifactStoreFor } from '../../src/artifacts';
import { LocalArtifactStore } from '../../src/artifacts/local-artifact-store';
import { loadConfig } from '../../src/config';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { PUBLISH_PENDING, publishOrMark } from '../../src/worker/run-files';
import { sweepRunFiles } from '../../src/worker/run-files-sweeper';
import { S3_CREDENTIALS, startS3Server, type S3Server } from '../support/s3-server';

const DAY = 86_400_000;
let redis: Redis;
let dataDir: string;
let store: RedisRunStore;
let prefix: string;
beforeAll(() => {
  redis = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
});
beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'corral-sweep-'));
  prefix = `sweep-${process.pid}-${Date.now().toString(36)}`;
  store = new RedisRunStore(redis, prefix);
});
afterEach(async () => {
  rmSync(dataDir, { recursive: true, force: true });
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
});
afterAll(async () => {
  await redis.quit();
});

/** A run directory as a worker leaves it: a log, a report, a tar, and `extra` files (checkpoints). */
function runDir(id: string, extra: string[] = []): string {
  const dir = join(dataDir, 'runs', id);
  mkdirSync(dir, { recursive: true });
  for (const f of ['events.jsonl', 'report.md', 'workspace.tar', ...extra]) writeFileSync(join(dir, f), `${f} of ${id}\n`);
  return dir;
}

async function run(id: string, finishedAt?: Date): Promise<void> {
  await store.create(id, { task: 'x' }, new Date(), 'acme');
  if (finishedAt) await store.update(id, { status: 'succeeded', outcome: 'succeeded', reason: 'done', finishedAt: finishedAt.toISOString() });
}

test('keyed on the run store: expired and forgotten runs go, running ones stay, finished ones lose their checkpoints', async () => {
  const now = Date.now();
  await run('run_oldfinished', new Date(now - 8 * DAY));
  await run('run_newfinished', new Date(now - DAY));
  await run('run_stillgoing');
  runDir('run_oldfinished', ['checkpoint-1.tar']);
  runDir('run_newfinished', ['checkpoint-1.tar', 'checkpoint-2.patch']);
  runDir('run_stillgoing', ['checkpoint-1.tar']);
  const forgotten = runDir('run_forgotten');
  const young = runDir('run_beingsetup');
  const old = new Date(now - 2 * 3600_000);
  utimesSync(forgotten, old, old);
  mkdirSync(join(dataDir, 'runs', 'not-a-run'));
  const r = await sweepRunFiles({ dataDir, runs: store, artifacts: new LocalArtifactStore(dataDir), retentionMs: 7 * DAY, clock: () => now });
  expect(r.removed.sort()).toEqual(['run_forgotten', 'run_oldfinished']);
  expect(r.checkpoints).toBe(2);
  expect(readdirSync(join(dataDir, 'runs')).sort()).toEqual(['not-a-run', 'run_beingsetup', 'run_newfinished', 'run_stillgoing']);
  expect(readdirSync(join(dataDir, 'runs', 'run_newfinished')).sort()).toEqual(['events.jsonl', 'report.md', 'workspace.tar']);
  expect(readdirSync(join(dataDir, 'runs', 'run_stillgoing'))).toContain('checkpoint-1.tar');
  expect(existsSync(young)).toBe(true);
  // The retention is the configured one: a second pass a week on removes the run finished yesterday.
  const later = await sweepRunFiles({ dataDir, runs: store, artifacts: new LocalArtifactStore(dataDir), retentionMs: 7 * DAY, clock: () => now + 7 * DAY });
  expect(later.removed.sort()).toEqual(['run_beingsetup', 'run_newfinished']);
});

test('CORRAL_RUN_FILES_RETENTION_DAYS is checked', () => {
  expect(loadConfig({}).CORRAL_RUN_FILES_RETENTION_DAYS).toBe(14);
  expect(loadConfig({ CORRAL_RUN_FILES_RETENTION_DAYS: '3' }).CORRAL_RUN_FILES_RETENTION_DAYS).toBe(3);
  for (const bad of ['0', '-1', 'soon', '1.5']) expect(() => loadConfig({ CORRAL_RUN_FILES_RETENTION_DAYS: bad })).toThrow(/CORRAL_RUN_FILES_RETENTION_DAYS/);
});

describe('with an object store', () => {
  let s3: S3Server;
  const saved: Record<string, string | undefined> = {};
  beforeAll(async () => {
    s3 = await startS3Server();
    for (const [k, v] of Object.entries(S3_CREDENTIALS)) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterAll(async () => {
    await s3?.close();
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  test('a refused publish leaves a marker; the next sweep stores the files, then the run\'s objects expire with it', async () => {
    const artifacts = artifactStoreFor(loadConfig({ CORRAL_ARTIFACTS: s3.env(`sweep-${Date.now().toString(36)}`).CORRAL_ARTIFACTS!, AWS_REGION: 'us-east-1' }));
    const now = Date.now();
    await run('run_pending', new Date(now - DAY));
    const dir = runDir('run_pending');
    await s3.pause();
    const published = await publishOrMark({ store: artifacts, tenant: 'acme', runId: 'run_pending', runDir: dir, at: new Date(now) }).finally(() => s3.resume());
    expect(published.failed).toEqual(expect.any(String));
    expect(existsSync(join(dir, PUBLISH_PENDING))).toBe(true);
    // While the store is still away the marker stays and nothing is lost.
    await s3.pause();
    const still = await sweepRunFiles({ dataDir, runs: store, artifacts, retentionMs: 7 * DAY, clock: () => now }).finally(() => s3.resume());
    expect(still).toMatchObject({ pending: ['run_pending'], published: [], removed: [] });
    expect(existsSync(join(dir, 'workspace.tar'))).toBe(true);
    // Back: stored, marker and directory gone.
    const r = await sweepRunFiles({ dataDir, runs: store, artifacts, retentionMs: 7 * DAY, clock: () => now });
    expect(r).toMatchObject({ published: ['run_pending'], pending: [] });
    expect(existsSync(dir)).toBe(false);
    const key = artifacts.runFileKey('acme', 'run_pending', 'workspace.tar');
    expect(await artifacts.size(key)).toBe('workspace.tar of run_pending\n'.length);
    // Past the retention, a directory left on the host goes with the run's objects.
    runDir('run_pending');
    const expired = await sweepRunFiles({ dataDir, runs: store, artifacts, retentionMs: 7 * DAY, clock: () => now + 8 * DAY });
    expect(expired.removed).toEqual(['run_pending']);
    expect(await artifacts.size(key)).toBeNull();
    await artifacts.close();
  });
});
