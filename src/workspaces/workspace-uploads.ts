/**
 * Uploaded workspaces (PUT /v1/workspaces): a tar, plain or gzip, streamed from the request, checked
 * entry by entry as it arrives (regular files, directories and symbolic links that stay inside the
 * workspace, with relative names only — the seed rules of sandbox/archive.ts — and the size and entry
 * caps, enforced mid-stream, on the bytes after decompression too), re-packed into a clean tar (no
 * owners, no hard links, normalised modes) written to
 * disk while it is hashed. Its id is the SHA-256 of that clean tar, per tenant (a tenant cannot learn
 * whether another uploaded the same bytes); the same tar uploaded again is the same id and refreshes
 * its TTL. Memory stays bounded: nothing holds more than a stream chunk. Host code never extracts the
 * tar onto a host filesystem.
 *
 * With an object store (CORRAL_ARTIFACTS=s3://…) the store holds every upload — its tar and a
 * description with the time of its last use, from which its TTL counts — so an API on one host takes
 * the PUT and a worker on another runs from it: the worker fetches the tar once into its own data
 * dir, which is then only a cache (swept like the uploads). An expired upload is removed from the
 * store when it is next looked up; a bucket lifecycle rule on tenants/ * /workspaces/ removes the ones
 * never looked up again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import * as tar from 'tar-stream';
import { z } from 'zod';
import { readStored, type ArtifactStore } from '../artifacts/artifact-store';
import { InvalidInputError, SandboxError } from '../domain/errors';
import { showName } from '../domain/export-names';
import { WORKSPACE_ID, WorkspacePath } from '../domain/run-spec';
import type { LedgerVerdict, UploadLedger } from '../domain/upload-ledger';
import { checkSeedEntry, SeedLinks } from '../sandbox/archive';

/** Tenant names become directory names: only these. */
const TENANT_DIR = /^[A-Za-z0-9_.-]{1,64}$/;

export interface UploadCaps {
  /** Most bytes of file content (and of the stream, compressed or not, less tar framing). */
  maxBytes: number;
  maxEntries: number;
}

/** What an upload holds, kept beside its tar (`ws_….json`) so admission need not read the tar. */
const UploadMeta = z.object({ files: z.number().int().min(0), dirs: z.number().int().min(0), contentBytes: z.number().int().min(0) }).strict();
type UploadMeta = z.infer<typeof UploadMeta>;

export interface FoundWorkspace extends UploadMeta {
  /** The clean tar on this host's disk. */
  path: string;
  /** Bytes of the clean tar. */
  bytes: number;
}

const metaPathOf = (tarPath: string) => tarPath.replace(/\.tar$/, '.json');

/** The description kept in an object store beside the tar: what the tar holds, and when it was last put or used. */
const RemoteMeta = UploadMeta.extend({ touchedAt: z.number().int().min(0) }).strict();

export interface StoredWorkspace {
  id: string;
  /** Bytes of the clean tar. */
  bytes: number;
  files: number;
  dirs: number;
  /** The same tar was already there (its TTL was refreshed). */
  deduplicated: boolean;
  expiresAt: string;
}

/** A quota's answer: go on, or which cap is full (413: this upload alone is larger than the cap). */
export type { LedgerVerdict, UploadLedger } from '../domain/upload-ledger';

/** An upload stopped by a quota (the ledger's verdict says which cap). */
export class UploadRefusedError extends Error {
  constructor(readonly verdict: Extract<LedgerVerdict, { ok: false }>) {
    super(verdict.message);
    this.name = 'UploadRefusedError';
  }
}

/** Quotas are charged in steps of this many bytes as an upload arrives and is written. */
const CHARGE_STEP = 1024 * 1024;

/** Room for tar headers and padding on top of maxBytes of content (512 bytes per entry, plus blocks). */
const framing = (caps: UploadCaps) => caps.maxEntries * 1024 + 1024 * 1024;

export class WorkspaceUploads {
  constructor(
    private readonly root: string,
    private readonly ttlS: number,
    private readonly clock: () => number = Date.now,
    /** An object store every host shares (not the local store: then `root` is all there is). */
    private readonly remote?: ArtifactStore,
    /** The tenants' upload quotas; absent: uploads are counted nowhere (tests of the tar handling). */
    private readonly ledger?: UploadLedger,
  ) {
    if (remote?.kind === 'local') this.remote = undefined;
  }

  /** The store's description of an upload, or null (absent, unreadable, not a description). */
  private async remoteMeta(tenant: string, id: string): Promise<z.infer<typeof RemoteMeta> | null> {
    const stored = await readStored(this.remote!, this.remote!.uploadKey(tenant, id, 'json'), 4096); // a description is some tens of bytes
    if (!stored || stored.over) return null;
    const m = RemoteMeta.safeParse((() => { try { return JSON.parse(stored.bytes.toString('utf8')) as unknown; } catch { return null; } })());
    return m.success ? m.data : null;
  }

  private async putRemoteMeta(tenant: string, id: string, meta: UploadMeta, touchedAt: number): Promise<void> {
    await this.remote!.putBytes(this.remote!.uploadKey(tenant, id, 'json'), JSON.stringify({ ...meta, touchedAt }), 'application/json');
  }

  /**
   * With an object store: makes this host's copy agree with the store — fetched when missing here,
   * its time set to the store's last use (so the local TTL is the store's), removed when the store
   * no longer has it or it expired (then removed from the store too).
   */
  private async syncFromRemote(tenant: string, id: string, path: string, touch: boolean): Promise<void> {
    const r = this.remote!;
    const meta = await this.remoteMeta(tenant, id);
    const now = this.clock();
    if (!meta || meta.touchedAt + this.ttlS * 1000 <= now) {
      if (meta) await r.delete([r.uploadKey(tenant, id, 'tar'), r.uploadKey(tenant, id, 'json')]);
      await rm(path, { force: true });
      await rm(metaPathOf(path), { force: true });
      return;
    }
    if (!(await stat(path).catch(() => null))) {
      const obj = await r.get(r.uploadKey(tenant, id, 'tar'));
      if (!obj) return;
      await mkdir(this.dir(tenant), { recursive: true, mode: 0o700 });
      const tmp = join(this.dir(tenant), `.fetch-${randomBytes(8).toString('hex')}.tmp`);
      try {
        await pipeline(obj.body, createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
        await writeFile(`${tmp}.json`, JSON.stringify({ files: meta.files, dirs: meta.dirs, contentBytes: meta.contentBytes }), { mode: 0o600 });
        await rename(`${tmp}.json`, metaPathOf(path));
        await rename(tmp, path);
      } finally {
        await rm(tmp, { force: true });
        await rm(`${tmp}.json`, { force: true });
      }
    }
    const at = touch ? now : meta.touchedAt;
    if (touch) await this.putRemoteMeta(tenant, id, { files: meta.files, dirs: meta.dirs, contentBytes: meta.contentBytes }, now);
    await utimes(path, at / 1000, at / 1000).catch(() => undefined);
    await utimes(metaPathOf(path), at / 1000, at / 1000).catch(() => undefined);
  }

  private dir(tenant: string): string {
    if (!TENANT_DIR.test(tenant)) throw new InvalidInputError(`tenant "${tenant}" cannot hold uploads`, 'tenant');
    return join(this.root, tenant);
  }

  /** Where an upload's clean tar is (whether or not it exists). */
  pathOf(tenant: string, id: string): string {
    if (!WORKSPACE_ID.test(id)) throw new InvalidInputError(`workspace.id: "${id.slice(0, 80)}" is not a workspace id (ws_ and 64 hex digits)`, 'workspace.id');
    return join(this.dir(tenant), `${id}.tar`);
  }

  /**
   * The upload's clean tar and what it holds while it exists and has not expired; null otherwise.
   * `touch`: its TTL counts again from now (a run was submitted naming it).
   */
  async find(tenant: string, id: string, o: { touch?: boolean } = {}): Promise<FoundWorkspace | null> {
    const path = this.pathOf(tenant, id);
    if (this.remote) await this.syncFromRemote(tenant, id, path, o.touch === true);
    const meta = metaPathOf(path);
    const st = await stat(path).catch(() => null);
    if (!st) return null;
    if (st.mtimeMs + this.ttlS * 1000 <= this.clock()) {
      await rm(path, { force: true });
      await rm(meta, { force: true });
      return null;
    }
    const m = UploadMeta.safeParse(await readFile(meta, 'utf8').then(JSON.parse, () => null));
    if (!m.success) return null; // an upload whose description is missing or corrupt: as if it were not there
    if (o.touch) {
      await this.ledger?.touch(tenant, id, this.ttlS * 1000);
      const now = this.clock() / 1000;
      await utimes(path, now, now).catch(() => undefined);
      await utimes(meta, now, now).catch(() => undefined);
    }
    return { path, bytes: st.size, ...m.data };
  }

  /** Removes a tenant's upload (its tar, its description, its copy in the store) and frees its quota; false when there was none. */
  async remove(tenant: string, id: string): Promise<boolean> {
    const path = this.pathOf(tenant, id);
    // The quota first: when it cannot be told (Redis away), nothing is removed and the caller may ask again.
    await this.ledger?.remove(tenant, id);
    let existed = (await stat(path).catch(() => null)) !== null;
    if (this.remote) {
      existed = existed || (await this.remoteMeta(tenant, id)) !== null;
      await this.remote.delete([this.remote.uploadKey(tenant, id, 'tar'), this.remote.uploadKey(tenant, id, 'json')]);
    }
    await rm(path, { force: true });
    await rm(metaPathOf(path), { force: true });
    return existed;
  }

  /** Removes expired uploads with their descriptions (and abandoned temporary files); returns how many, a description not counted apart. */
  async sweep(): Promise<number> {
    let n = 0;
    for (const t of await readdir(this.root).catch(() => [] as string[])) {
      const dir = join(this.root, t);
      for (const f of await readdir(dir).catch(() => [] as string[])) {
        const st = await stat(join(dir, f)).catch(() => null);
        if (st && st.mtimeMs + this.ttlS * 1000 <= this.clock()) {
          await rm(join(dir, f), { force: true });
          if (!(f.endsWith('.json') && WORKSPACE_ID.test(f.slice(0, -5)))) n++;
        }
      }
    }
    return n;
  }

  /**
   * Streams `body` (gzip when `gzip`, else a plain tar) into the store. InvalidInputError (400) naming
   * the entry for anything refused; nothing is kept of a refused upload.
   */
  async ingest(tenant: string, body: Readable, o: { gzip: boolean; caps: UploadCaps; holdMs?: number }): Promise<StoredWorkspace> {
    const dir = this.dir(tenant);
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const ref = `.upload-${randomBytes(8).toString('hex')}`;
    const tmp = join(dir, `${ref}.tmp`);
    // Quotas (with a ledger): bytes received per hour, and bytes kept, charged a step ahead of what
    // arrives and is written, so a flood is stopped mid-stream. A refusal is kept here and wins
    // over the stream errors it causes.
    let refusal: UploadRefusedError | undefined;
    const ledger = this.ledger;
    const holdMs = o.holdMs ?? 3600_000;
    const meter = (what: 'received' | 'written') => {
      let charged = 0;
      return async (total: number): Promise<void> => {
        if (!ledger || (total <= charged && charged > 0)) return;
        const next = Math.max(CHARGE_STEP, Math.ceil(total / CHARGE_STEP) * CHARGE_STEP);
        const v = what === 'received' ? await ledger.charge(tenant, next - charged) : await ledger.reserve(tenant, ref, next, holdMs);
        if (!v.ok) throw (refusal = new UploadRefusedError(v));
        charged = next;
      };
    };
    const received = meter('received');
    const written = meter('written');
    try {
      await received(0);
      await written(0);
    } catch (err) {
      await ledger?.abandon(tenant, ref).catch(() => undefined);
      throw err;
    }
    const caps = o.caps;
    const streamCap = caps.maxBytes + framing(caps);
    const hash = createHash('sha256');
    let bytes = 0;
    let current: string | undefined;
    // A name in a tar can be megabytes long (a pax header): the answer quotes at most 500 characters.
    const refuse = (what: string) => new InvalidInputError(`workspace tar refused: ${what.length > 500 ? `${what.slice(0, 500)}…` : what}`, 'body');

    // Counts what arrives (compressed) and what the tar reader sees (after gunzip): each within the cap.
    const counter = (label: string) => {
      let n = 0;
      let first = true;
      return new Transform({
        transform(chunk: Buffer, _enc, cb) {
          if (first && label === 'tar' && chunk.length >= 2 && chunk[0] === 0x1f && chunk[1] === 0x8b) {
            cb(refuse('this is gzip data; send it with Content-Type: application/gzip'));
            return;
          }
          first = false;
          n += chunk.length;
          if (n > streamCap) cb(refuse(`the ${label} stream passes ${streamCap} bytes${current ? ` (in or after entry "${current}")` : ''}; the cap is ${caps.maxBytes} bytes of content`));
          else if (label === 'request') received(n).then(() => cb(null, chunk), cb);
          else cb(null, chunk);
        },
      });
    };

    const extract = tar.extract();
    const pack = tar.pack();
    const hashing = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        hash.update(chunk);
        bytes += chunk.length;
        written(bytes).then(() => cb(null, chunk), cb);
      },
    });
    const writing = pipeline(pack, hashing, createWriteStream(tmp, { flags: 'wx', mode: 0o600 }));
    const feeding = pipeline(body, counter('request'), ...(o.gzip ? [createGunzip(), counter('tar')] : [counter('tar')]), extract);
    let files = 0;
    let dirs = 0;
    let content = 0;
    let symlinks = 0;
    const links = new SeedLinks();
    const mtime = new Date(0); // the id must depend on the content only
    const reading = (async () => {
      for await (const entry of extract) {
        const h = entry.header;
        current = showName(h.name.slice(0, 200));
        if (files + dirs + symlinks >= caps.maxEntries) throw refuse(`more than ${caps.maxEntries} entries (at "${current}")`);
        let path: string;
        try {
          path = checkSeedEntry(h);
        } catch (err) {
          throw refuse((err as SandboxError).message.replace(/^archive entry refused: /, ''));
        }
        if (path === '') {
          entry.resume();
          continue;
        }
        // The names inline files may have, which are the names the workspace export keeps (no control,
        // C1, bidi or separator characters, nothing that was not UTF-8): a run never starts from a file
        // its artifacts would have to leave out.
        const named = WorkspacePath.safeParse(path);
        if (!named.success) throw refuse(`entry "${showName(path.slice(0, 200))}": ${named.error.issues.map((i) => i.message).join('; ')}`);
        try {
          links.check(path, h.type === 'directory' ? 'dir' : h.type === 'symlink' ? 'symlink' : 'file');
        } catch (err) {
          throw refuse((err as SandboxError).message.replace(/^archive entry refused: /, ''));
        }
        if (h.type === 'symlink') {
          // A link that stays inside the workspace (checkSeedEntry checked its target), kept as it is.
          symlinks++;
          pack.entry({ name: path, type: 'symlink', linkname: h.linkname!, mode: 0o777, mtime });
          entry.resume();
          continue;
        }
        if (h.type === 'directory') {
          dirs++;
          pack.entry({ name: `${path}/`, type: 'directory', mode: 0o755, mtime });
          entry.resume();
          continue;
        }
        const size = h.size ?? 0;
        content += size;
        if (content > caps.maxBytes) throw refuse(`entry "${current}" (${size} bytes) passes the cap of ${caps.maxBytes} bytes of content`);
        files++;
        const sink = pack.entry({ name: path, type: 'file', mode: (h.mode ?? 0o644) & 0o100 ? 0o755 : 0o644, mtime, size });
        await pipeline(entry, sink);
      }
      // An empty body is a tar of no entries too: nothing to run from, so a mistake rather than a workspace.
      if (files + dirs === 0) throw refuse('the tar holds no files or directories (an empty body is not a workspace; a run without one needs no upload)');
      pack.finalize();
    })();
    try {
      const results = await Promise.allSettled([feeding, reading]);
      // Our own refusal wins over the stream errors it causes (the reader stopping closes the feed early).
      const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      const failed = errors.find((e) => e instanceof InvalidInputError) ?? errors[0];
      if (failed !== undefined) throw failed;
      await writing;
    } catch (err) {
      extract.destroy();
      pack.destroy();
      body.resume();
      await writing.catch(() => undefined);
      await rm(tmp, { force: true });
      await ledger?.abandon(tenant, ref).catch(() => undefined);
      if (refusal) throw refusal;
      if (err instanceof InvalidInputError) throw err;
      const m = (err as Error).message;
      if (/unexpected end of data|premature close/i.test(m)) throw refuse(current ? `the tar ends inside entry "${current}" (its header promised more bytes than came)` : 'the tar ends before its first entry');
      if (/invalid tar header|unsupported/i.test(m)) throw refuse(current ? `after entry "${current}": not a valid tar header (did a size in a header lie?)` : 'not a tar');
      if (/incorrect header check|unexpected end of file|invalid (block|distance|stored)/i.test(m)) throw refuse(`not valid gzip data (${m})`);
      throw refuse(`unreadable (${m})`);
    }
    const id = `ws_${hash.digest('hex')}`;
    const final = join(dir, `${id}.tar`);
    const now = this.clock();
    const existing = await stat(final).catch(() => null);
    const meta: UploadMeta = { files, dirs, contentBytes: content };
    // Without an object store this host's copy is the upload; with one, the store's is.
    let deduplicated = existing !== null;
    if (this.remote) {
      // The store is what every host sees: the tar goes up once, the description (its TTL) each time.
      const remoteMeta = await this.remoteMeta(tenant, id).catch(() => null);
      deduplicated = remoteMeta !== null && remoteMeta.touchedAt + this.ttlS * 1000 > now && (await this.remote.size(this.remote.uploadKey(tenant, id, 'tar'))) === bytes;
      try {
        if (!deduplicated) await this.remote.putFile(this.remote.uploadKey(tenant, id, 'tar'), tmp, 'application/x-tar');
        await this.putRemoteMeta(tenant, id, meta, now);
      } catch (err) {
        await rm(tmp, { force: true });
        await ledger?.abandon(tenant, ref).catch(() => undefined);
        throw err;
      }
    }
    // The reservation becomes the upload's (counted once, however often the same tar comes).
    try {
      await ledger?.commit(tenant, ref, id, bytes, this.ttlS * 1000);
    } catch (err) {
      await rm(tmp, { force: true });
      await ledger?.abandon(tenant, ref).catch(() => undefined);
      throw err;
    }
    // The description first: a tar is never there without one (find() treats that as absent).
    await writeFile(`${tmp}.json`, JSON.stringify(meta), { mode: 0o600 });
    await rename(`${tmp}.json`, metaPathOf(final));
    if (existing) await rm(tmp, { force: true });
    else await rename(tmp, final);
    // The TTL counts from the last upload.
    await utimes(metaPathOf(final), now / 1000, now / 1000);
    await utimes(final, now / 1000, now / 1000);
    return { id, bytes, files, dirs, deduplicated, expiresAt: new Date(now + this.ttlS * 1000).toISOString() };
  }
}
