/**
 * The artifact store port: where a run's files (report.md, events.jsonl, workspace.tar,
 * workspace.patch, agent.bundle) and uploaded workspaces live once written, so that any API and any
 * worker reach them whatever host wrote them. Two adapters: the local filesystem under the data dir
 * (one host; today's layout, the default) and an S3-compatible object store (CORRAL_ARTIFACTS=s3://…).
 *
 * Keys are built here only (runFileKey, uploadKey): a key names the tenant, so one tenant's objects
 * are never under another's prefix in the object store. Everything streams: a put reads a file from
 * disk, a get returns a stream; no adapter holds a whole artifact in memory.
 */
import type { Readable } from 'node:stream';

export type RunFileName = 'report.md' | 'events.jsonl' | 'workspace.tar' | 'workspace.patch' | 'agent.bundle' | 'needs-review.jsonl';

export interface StoredObject {
  body: Readable;
  bytes: number;
}

export interface ArtifactStore {
  /** `local` keeps files where the worker wrote them; `s3` copies them to the bucket. */
  readonly kind: 'local' | 's3';
  /** For logs and /readyz: where objects go (never a credential). */
  readonly description: string;
  /** The key of one of a run's files. */
  runFileKey(tenant: string, runId: string, name: RunFileName): string;
  /** The key of an uploaded workspace's clean tar (`.tar`) or its description (`.json`). */
  uploadKey(tenant: string, id: string, ext: 'tar' | 'json'): string;
  /** What to record in a run's record as where the object is (a path or an s3:// URL). */
  locationOf(key: string): string;
  /** Stores the file at `path` under `key`, streamed (multipart when large); a no-op when `path` is the key's own file. */
  putFile(key: string, path: string, contentType: string): Promise<{ bytes: number }>;
  /** Stores a small body (a description, a marker). */
  putBytes(key: string, body: Buffer | string, contentType: string): Promise<void>;
  /** The object as a stream, or null when there is none. */
  get(key: string): Promise<StoredObject | null>;
  /** Its size, or null when there is none. */
  size(key: string): Promise<number | null>;
  /** Removes objects (missing ones are no error). */
  delete(keys: readonly string[]): Promise<void>;
  /** Answers when the store is reachable (bucket exists, directory writable); throws saying why not. */
  check(): Promise<void>;
  /** Releases connections. */
  close(): Promise<void>;
}

/** Where one of a run's files is, as the run record and its events name it (a path or an s3:// URL). */
export function runFileLocation(store: ArtifactStore, tenant: string, runId: string, name: RunFileName): string {
  return store.locationOf(store.runFileKey(tenant, runId, name));
}

/**
 * Reads a small object whole, at most `maxBytes` of it: null when there is none; `over` when it is
 * larger (then `bytes` holds its first `maxBytes`). For logs and descriptions, never for tars.
 */
export async function readStored(store: ArtifactStore, key: string, maxBytes: number): Promise<{ bytes: Buffer; over: boolean } | null> {
  const obj = await store.get(key);
  if (!obj) return null;
  const chunks: Buffer[] = [];
  let n = 0;
  let over = false;
  for await (const c of obj.body as AsyncIterable<Buffer>) {
    chunks.push(c);
    n += c.length;
    if (n > maxBytes) {
      over = true;
      break;
    }
  }
  obj.body.destroy();
  const all = Buffer.concat(chunks);
  return { bytes: over ? all.subarray(0, maxBytes) : all, over };
}

/** Tenant names as they appear in keys (auth already restricts them to [A-Za-z0-9_.-]; anything else is encoded). */
export function keySegment(s: string): string {
  return /^[A-Za-z0-9_.-]{1,64}$/.test(s) && s !== '.' && s !== '..' ? s : encodeURIComponent(s).replace(/\./g, '%2E');
}
