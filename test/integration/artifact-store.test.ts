/**
 * The artifact store port, one contract for both adapters: the local data dir and an S3-compatible
 * object store (s3rver on loopback, someone else's implementation of the S3 API). Streams in and
 * out, multipart past one part, missing objects, tenant keys, and a store that goes away.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ArtifactStore } from '../../src/artifacts/artifact-store';
import { parseArtifactsUrl } from '../../src/artifacts/artifacts-url';
import { LocalArtifactStore } from '../../src/artifacts/local-artifact-store';
import { S3ArtifactStore } from '../../src/artifacts/s3-artifact-store';
import { StoreUnavailableError } from '../../src/domain/errors';
import { S3_CREDENTIALS, startS3Server, type S3Server } from '../support/s3-server';
import { eventually } from '../support/eventually';

jest.setTimeout(60_000);

let s3: S3Server;
let scratch: string;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  s3 = await startS3Server();
  scratch = mkdtempSync(join(tmpdir(), 'corral-store-'));
  // The SDK's standard chain reads the AWS environment, as a deployed worker's would.
  for (const [k, v] of Object.entries(S3_CREDENTIALS)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
});
afterAll(async () => {
  await s3?.close();
  rmSync(scratch, { recursive: true, force: true });
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function read(store: ArtifactStore, key: string): Promise<Buffer | null> {
  const o = await store.get(key);
  if (!o) return null;
  const chunks: Buffer[] = [];
  for await (const c of o.body as AsyncIterable<Buffer>) chunks.push(c);
  const b = Buffer.concat(chunks);
  expect(o.bytes).toBe(b.length);
  return b;
}

const stores: Array<[string, () => ArtifactStore]> = [
  ['local', () => new LocalArtifactStore(mkdtempSync(join(tmpdir(), 'corral-local-store-')))],
  ['s3', () => {
    const t = parseArtifactsUrl(`s3://${s3.bucket}/contract?endpoint=${s3.endpoint}`);
    if (t.kind !== 's3') throw new Error('not s3');
    return new S3ArtifactStore(t);
  }],
];

describe.each(stores)('%s store', (kind, make) => {
  let store: ArtifactStore;
  beforeAll(() => {
    store = make();
  });
  afterAll(() => store.close());

  test('a file goes in and comes back byte for byte; size, overwrite, delete; a missing key is null', async () => {
    await store.check();
    const small = randomBytes(4000);
    writeFileSync(join(scratch, `${kind}-small`), small);
    const key = store.runFileKey('team-a', 'run_abcdefghijkl', 'report.md');
    expect(await store.putFile(key, join(scratch, `${kind}-small`), 'text/markdown')).toEqual({ bytes: 4000 });
    expect(sha((await read(store, key))!)).toBe(sha(small));
    expect(await store.size(key)).toBe(4000);
    await store.putBytes(key, 'replaced', 'text/markdown');
    expect((await read(store, key))!.toString()).toBe('replaced');
    await store.delete([key, store.runFileKey('team-a', 'run_abcdefghijkl', 'workspace.tar')]); // a missing one is no error
    expect(await store.get(key)).toBeNull();
    expect(await store.size(key)).toBeNull();
  });

  test('a 20 MB tar is streamed in parts and read back whole', async () => {
    const big = randomBytes(20 * 1024 * 1024);
    const path = join(scratch, `${kind}-big.tar`);
    writeFileSync(path, big);
    const before = { ...s3.requests };
    const key = store.runFileKey('team-a', 'run_abcdefghijkm', 'workspace.tar');
    expect(await store.putFile(key, path, 'application/x-tar')).toEqual({ bytes: big.length });
    if (kind === 's3') {
      // CreateMultipartUpload + CompleteMultipartUpload are POSTs; the three 8 MiB parts are PUTs.
      expect((s3.requests.POST ?? 0) - (before.POST ?? 0)).toBe(2);
      expect((s3.requests.PUT ?? 0) - (before.PUT ?? 0)).toBe(3);
    }
    expect(sha((await read(store, key))!)).toBe(sha(big));
  });

  test('keys keep tenants apart: one tenant\'s key never reaches another\'s object', async () => {
    const a = store.runFileKey('team-a', 'run_abcdefghijkn', 'events.jsonl');
    const b = store.runFileKey('team-b', 'run_abcdefghijkn', 'events.jsonl');
    await store.putBytes(a, '{"a":1}\n', 'application/x-ndjson');
    if (kind === 's3') {
      expect(a).toBe('contract/tenants/team-a/runs/run_abcdefghijkn/events.jsonl');
      expect(b).not.toBe(a);
      expect(await store.get(b)).toBeNull();
      // Names that are not plain are encoded, never path syntax.
      expect(store.runFileKey('../team-a', 'run_abcdefghijkn', 'events.jsonl')).toBe('contract/tenants/%2E%2E%2Fteam-a/runs/run_abcdefghijkn/events.jsonl');
      expect(store.uploadKey('team-a', `ws_${'0'.repeat(64)}`, 'tar')).toBe(`contract/tenants/team-a/workspaces/ws_${'0'.repeat(64)}.tar`);
    } else {
      // One host: run ids are unique across tenants (the server makes them); the API checks the run's tenant.
      expect(a).toBe('runs/run_abcdefghijkn/events.jsonl');
      expect(() => (store as LocalArtifactStore).pathOf('../../etc/passwd')).toThrow(/leaves the store/);
    }
  });
});

test('an object store that goes away: a clear store_unavailable error naming the key and the store, never a credential', async () => {
  const t = parseArtifactsUrl(`s3://${s3.bucket}/away?endpoint=${s3.endpoint}`);
  if (t.kind !== 's3') throw new Error('not s3');
  const store = new S3ArtifactStore(t, { timeoutMs: 3000 });
  writeFileSync(join(scratch, 'away'), 'x');
  await s3.pause();
  try {
    const err = await store.putFile('away/k', join(scratch, 'away'), 'text/plain').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(StoreUnavailableError);
    expect((err as Error).message).toMatch(new RegExp(`could not put away/k \\(1 bytes\\) into s3://${s3.bucket}/away/ at ${s3.endpoint.replace(/[.]/g, '\\.')} after 3 tries`));
    expect((err as Error).message).not.toMatch(/Credential=|Signature=|S3RVER/);
    await expect(store.check()).rejects.toThrow(/is not reachable/);
  } finally {
    await s3.resume();
    await store.close();
  }
  // Back: the same client works again.
  const again = new S3ArtifactStore(t);
  await again.check();
  await again.close();
});

test('a put during a short outage is tried again from the file and lands', async () => {
  const t = parseArtifactsUrl(`s3://${s3.bucket}/blip?endpoint=${s3.endpoint}`);
  if (t.kind !== 's3') throw new Error('not s3');
  const store = new S3ArtifactStore(t, { timeoutMs: 3000 });
  const body = randomBytes(100_000);
  writeFileSync(join(scratch, 'blip'), body);
  await s3.pause();
  const away = s3.turnedAway;
  const put = store.putFile('blip/k', join(scratch, 'blip'), 'application/octet-stream');
  await eventually(() => s3.turnedAway > away, { what: 'the put\'s first try to meet the outage' });
  await s3.resume();
  expect(await put).toEqual({ bytes: body.length });
  expect(sha((await read(store, 'blip/k'))!)).toBe(sha(body));
  await store.close();
});

test('a bucket that does not exist is reported by check()', async () => {
  const t = parseArtifactsUrl(`s3://no-such-bucket/x?endpoint=${s3.endpoint}`);
  if (t.kind !== 's3') throw new Error('not s3');
  const store = new S3ArtifactStore(t);
  await expect(store.check()).rejects.toThrow(/s3:\/\/no-such-bucket\/x\/ at .* is not reachable: .*404/);
  await store.close();
  expect(readdirSync(s3.dir)).toContain(s3.bucket);
});
