/**
 * Reads the state of a workspace's protected files through the Engine API's archive endpoint
 * (`GET /containers/{id}/archive`), parsed here with tar-stream — never through a process in the
 * sandbox, so nothing the agent runs can stand in for the answer, slow it or lie in it.
 *
 * Two ways, chosen per call by the effect guard:
 * - full: one request for /workspace. Every entry is seen (nested AGENTS.md, .git directories at any
 *   depth, every case and Unicode spelling of a protected name), protected files are hashed and kept,
 *   the rest is skipped. Bounded by bytes, entries and time; past a bound the read stops and the guard
 *   switches to targeted reads for the rest of the run.
 * - targeted: a HEAD (stat, ≈1 ms, no archive made) for each distinct root-level name of the protected
 *   set and for git's own sub-directories, then one GET for each that exists (a root directory such as
 *   `.github` is read whole). Names under other spellings and protected names below the root are not
 *   seen per call; the artifacts' review at the end sees them.
 *
 * Hard links: a protected path that the archive gives as a hard link to an earlier, unprotected name
 * is read again by that name, so its content is known. Symbolic links are recorded with their target.
 */
import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import type { EntryType, ProtectedEntry, ProtectedMatcher, ProtectedState } from '../domain/effects';
import { SandboxError, type CorralErrorOptions } from '../domain/errors';

/** A path's stat as the engine's HEAD …/archive answers it (X-Docker-Container-Path-Stat). */
export interface PathStat {
  name: string;
  size: number;
  /** Go's os.FileMode: permission bits plus type bits (1<<31 dir, 1<<27 symlink). */
  mode: number;
  linkTarget: string;
}

/** What the snapshot needs of the engine: fakes in unit tests, dockerode in docker-sandbox.ts. */
export interface ArchiveReader {
  /** null when the path does not exist. */
  stat(path: string, signal?: AbortSignal): Promise<PathStat | null>;
  /** An uncompressed tar of `path` (its entries named from the path's own base name down); null when it no longer exists. */
  get(path: string, signal?: AbortSignal): Promise<Readable | null>;
}

export interface SnapshotLimits {
  /** Bytes a full read may stream; past it the read stops (the guard then reads targeted). */
  fullMaxBytes: number;
  /** Entries a full read may hold (the engine's archiver costs about 50 µs an entry); past it, targeted. */
  fullMaxEntries: number;
  maxEntries: number;
  timeoutMs: number;
  /** A protected file up to this size is kept (restore, diff); a larger one only hashed. */
  keepFileBytes: number;
  /** Kept bytes in all. */
  keepTotalBytes: number;
}

export const DEFAULT_SNAPSHOT_LIMITS: SnapshotLimits = {
  fullMaxBytes: 64 * 1024 * 1024,
  fullMaxEntries: 10_000,
  maxEntries: 100_000,
  timeoutMs: 20_000,
  keepFileBytes: 1024 * 1024,
  keepTotalBytes: 32 * 1024 * 1024,
};

/** The full read went past a bound: the guard reads targeted from now on. */
export class FullReadTooLarge extends SandboxError {
  constructor(why: string, options?: CorralErrorOptions) {
    super('limit_exceeded', `the workspace is too large to read whole after every call (${why})`, options);
  }
}

const WS = '/workspace';
/** Git's own sub-directories and files read in targeted mode (GIT_LEGIT in protected-set.ts is what is skipped). */
const GIT_PROBES = ['config', 'config.worktree', 'hooks', 'info', 'modules', 'worktrees', 'branches', 'remotes', 'objects/info', 'commondir', 'gitdir'];

const GO_DIR = 0x80000000;
const GO_SYMLINK = 0x08000000;

function typeOfStat(s: PathStat): EntryType {
  if ((s.mode & GO_DIR) !== 0) return 'dir';
  if ((s.mode & GO_SYMLINK) !== 0) return 'symlink';
  return (s.mode & 0x8f000000) === 0 ? 'file' : 'other';
}

function typeOfHeader(h: tar.Header): EntryType | 'hardlink' {
  if (h.type === 'file' || h.type === 'contiguous-file') return 'file';
  if (h.type === 'directory') return 'dir';
  if (h.type === 'symlink') return 'symlink';
  if (h.type === 'link') return 'hardlink';
  return 'other';
}

class Reader {
  readonly state: ProtectedState;
  private kept = 0;
  private streamed = 0;
  private entries = 0;
  /** Protected paths given as hard links to a name that was not kept: read again by that name. */
  readonly pendingLinks: Array<{ path: string; target: string }> = [];

  constructor(private readonly set: ProtectedMatcher, private readonly limits: SnapshotLimits, mode: 'full' | 'targeted', private readonly capStream: boolean) {
    this.state = { entries: new Map(), dirs: new Map(), mode, notes: [], bytes: 0, requests: 0, ms: 0 };
  }

  /** Reads one archive whose entry names, after `strip` leading segments, are relative to `under` (a workspace path, '' for the root). */
  async read(stream: Readable | null, strip: number, under: string, onlyPath?: string): Promise<void> {
    this.state.requests += 1;
    if (!stream) return;
    const extract = tar.extract();
    stream.on('data', (c: Buffer) => {
      this.streamed += c.length;
      this.state.bytes += c.length;
      if (this.capStream && this.streamed > this.limits.fullMaxBytes) stream.destroy(new FullReadTooLarge(`more than ${Math.round(this.limits.fullMaxBytes / 1048576)} MiB`));
    });
    stream.on('error', (err) => extract.destroy(err));
    stream.pipe(extract);
    for await (const entry of extract) {
      this.entries += 1;
      if (this.capStream && this.entries > this.limits.fullMaxEntries) {
        stream.destroy();
        throw new FullReadTooLarge(`more than ${this.limits.fullMaxEntries} entries`);
      }
      if (this.entries > this.limits.maxEntries) {
        stream.destroy();
        throw this.capStream ? new FullReadTooLarge(`more than ${this.limits.maxEntries} entries`) : new SandboxError('limit_exceeded', `the protected files hold more than ${this.limits.maxEntries} entries`);
      }
      const h = entry.header;
      const rel = h.name.split('/').filter((s) => s !== '' && s !== '.').slice(strip).join('/');
      const path = [under, rel].filter(Boolean).join('/');
      const t = typeOfHeader(h);
      if (t === 'dir') {
        if (path) this.state.dirs.set(path, (h.mode ?? 0o755) & 0o7777);
        entry.resume();
        continue;
      }
      if (onlyPath !== undefined && path !== onlyPath) {
        entry.resume();
        continue;
      }
      const m = path ? this.set.match(path, t === 'hardlink' ? 'file' : t) : null;
      if (!m && onlyPath === undefined) {
        entry.resume();
        continue;
      }
      const e: ProtectedEntry = { type: t === 'hardlink' ? 'file' : t, mode: (h.mode ?? 0o644) & 0o7777, size: h.size ?? 0 };
      if (t === 'symlink') e.link = h.linkname ?? '';
      if (t === 'hardlink') {
        const target = (h.linkname ?? '').split('/').filter((s) => s !== '' && s !== '.').slice(strip).join('/');
        const known = this.state.entries.get([under, target].filter(Boolean).join('/'));
        e.hardlink = true;
        e.link = [under, target].filter(Boolean).join('/');
        if (known?.sha256) Object.assign(e, { sha256: known.sha256, size: known.size, ...(known.data ? { data: known.data } : {}) });
        else this.pendingLinks.push({ path, target: e.link });
        entry.resume();
      } else if (t === 'file') {
        const hash = createHash('sha256');
        const chunks: Buffer[] = [];
        let n = 0;
        const keep = (h.size ?? 0) <= this.limits.keepFileBytes && this.kept + (h.size ?? 0) <= this.limits.keepTotalBytes;
        for await (const c of entry) {
          hash.update(c as Buffer);
          n += (c as Buffer).length;
          if (keep) chunks.push(c as Buffer);
        }
        e.size = n;
        e.sha256 = hash.digest('hex');
        if (keep) {
          e.data = Buffer.concat(chunks);
          this.kept += n;
        } else this.state.notes.push(`${path}: ${n} bytes, hashed but not kept (a change to it cannot be undone)`);
      } else entry.resume();
      if (onlyPath !== undefined) {
        // a hard link's target, read for its content: give it to the protected path that names it
        this.resolved = e;
        continue;
      }
      this.state.entries.set(path, e);
    }
  }

  resolved: ProtectedEntry | undefined;
}

/** Runs `fn` over `items` with at most `n` at once. */
async function pool<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: Math.min(n, items.length) }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}

const parentOf = (p: string) => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '');

/**
 * The protected files' state. Throws FullReadTooLarge when a full read passes its bounds, a
 * SandboxError when the engine does not answer in time.
 */
export async function readProtectedState(engine: ArchiveReader, set: ProtectedMatcher, mode: 'full' | 'targeted', limits: SnapshotLimits = DEFAULT_SNAPSHOT_LIMITS, signal?: AbortSignal): Promise<ProtectedState> {
  const t0 = performance.now();
  const timeout = AbortSignal.timeout(limits.timeoutMs);
  const all = signal ? AbortSignal.any([signal, timeout]) : timeout;
  const r = new Reader(set, limits, mode, mode === 'full');
  try {
    if (mode === 'full') {
      await r.read(await engine.get(WS, all), 1, '');
    } else {
      // one stat per distinct root-level name; a root that exists is read whole (`.github`, not each of its probes)
      const roots = [...new Set(set.rootProbes().map((p) => p.split('/')[0]!))];
      r.state.scope = [...roots.filter((x) => x !== '.git'), ...GIT_PROBES.map((p) => `.git/${p}`)];
      const found: Array<{ path: string; stat: PathStat }> = [];
      await pool(roots, 16, async (p) => {
        const s = await engine.stat(`${WS}/${p}`, all);
        r.state.requests += 1;
        if (s) found.push({ path: p, stat: s });
      });
      const git = found.find((f) => f.path === '.git');
      if (git && typeOfStat(git.stat) === 'dir') {
        await pool(GIT_PROBES, 8, async (p) => {
          const s = await engine.stat(`${WS}/.git/${p}`, all);
          r.state.requests += 1;
          if (s) found.push({ path: `.git/${p}`, stat: s });
        });
      } else if (git) r.state.scope.push('.git');
      const reads = found.filter((f) => !(f.path === '.git' && typeOfStat(f.stat) === 'dir'));
      await pool(reads, 4, async (f) => {
        await r.read(await engine.get(`${WS}/${f.path}`, all), 0, parentOf(f.path));
      });
    }
    // hard links into the protected set from names that were not kept: read those names for their content
    for (const l of r.pendingLinks.slice(0, 64)) {
      r.resolved = undefined;
      await r.read(await engine.get(`${WS}/${l.target}`, all), 0, parentOf(l.target), l.target);
      const e = r.state.entries.get(l.path);
      const got = r.resolved as ProtectedEntry | undefined;
      if (e && got?.sha256) Object.assign(e, { sha256: got.sha256, size: got.size, ...(got.data ? { data: got.data } : {}) });
    }
    if (r.pendingLinks.length > 64) r.state.notes.push(`${r.pendingLinks.length - 64} more hard links into the protected set were not read`);
  } catch (err) {
    if (err instanceof FullReadTooLarge) throw err;
    if (timeout.aborted) throw new SandboxError('sandbox_failed', `reading the protected files took longer than ${limits.timeoutMs / 1000} s`, { cause: err });
    if (signal?.aborted) throw err;
    throw err instanceof SandboxError ? err : new SandboxError('sandbox_failed', `reading the protected files through the engine failed: ${(err as Error).message}`, { cause: err });
  }
  r.state.ms = Math.round(performance.now() - t0);
  return r.state;
}
