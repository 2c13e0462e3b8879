/**
 * ExportWriter: turns the tar stream of `corral-fs export` (images/sandbox/corral-fs) into the run's
 * artifacts on disk, entry by entry, never holding more than one file of at most MAX_DIFF_BYTES
 * (plus the one the diff thread is working on — line diffs and binary patches are made there, off the
 * worker's event loop):
 * each entry is checked, copied into a clean tar (tar-stream pack → workspace.tar) and compared
 * with the seed (workspace-diff.ts → workspace.patch, one section per changed file, written as it
 * is computed). The stream is sorted by path, so deletions (seed files the stream never names) come
 * out by a merge, in order.
 *
 * The helper in the sandbox skips what must not be exported and says so in a manifest entry first
 * and a trailer entry last. Nothing it sends is trusted: a file over the size caps, too many entries,
 * an absolute or `..` name, names out of order, a missing manifest or trailer → the export fails
 * (the helper would never send them, so the stream was tampered with); a refused name or a link is
 * dropped and listed. Artifacts appear under their final names only when everything succeeded.
 */
import { createHash } from 'node:crypto';
import { createWriteStream, type WriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import * as tar from 'tar-stream';

/** An entry's content stream. */
type Source = tar.ExtractEvents['entry'][1];
import { z } from 'zod';
import { SandboxError, type CorralErrorOptions } from '../domain/errors';
import { NOT_EXPORTED_CODES, type FileChange, type NotExported, type NotExportedCode, type ReviewFlag, type WorkspaceExport } from '../domain/sandbox';
import { normaliseWorkspacePath } from './archive';
import type { ByteSink } from './exec';
import { comparePaths, isGitPath, nameProblem } from '../domain/export-names';
import { reviewFlags } from '../domain/review-flags';
import type { ProtectedMatcher } from '../domain/effects';
import { gitBlobHasher } from './git-binary-patch';
import { ignoreMatcher, type IgnoreMatcher, type PatchIgnoreRules } from './patch-ignore';
import { diffFile, MAX_DIFF_BYTES, needsLineDiff, withData, type DiffSection, type FileSide } from './workspace-diff';
import { diffThread } from './diff-thread';

export const MANIFEST_ENTRY = '\u0001corral-export-manifest';
export const TRAILER_ENTRY = '\u0001corral-export-trailer';
const MAX_MANIFEST_BYTES = 1024 * 1024;
/** notExported entries kept in the result; the rest are counted in notExportedOmitted. */
const MAX_LISTED = 2000;

export interface ExportCaps {
  /** Largest apparent size of one file. */
  maxFileBytes: number;
  /** Largest sum of the files' apparent sizes. */
  maxTotalBytes: number;
  /** Most entries (files and directories). */
  maxEntries: number;
}

const CODES = NOT_EXPORTED_CODES;
const Manifest = z.object({
  skipped: z.array(z.object({
    path: z.string().max(8192),
    reason: z.string().max(2000),
    code: z.enum(CODES),
    size: z.number().int().min(0).optional(),
  })).max(1000),
  omitted: z.partialRecord(z.enum(CODES), z.number().int().min(0)),
  notes: z.array(z.string().max(10_000)).max(100).optional(),
});

class Tampered extends SandboxError {
  constructor(why: string, options?: CorralErrorOptions) {
    super('sandbox_failed', `export refused: the export stream from the sandbox broke its rules (${why}); no artifacts were written`, options);
  }
}

export interface ExportWriterOptions {
  /** The workspace's seed: the patch's baseline. */
  seed: ReadonlyMap<string, FileSide>;
  caps: ExportCaps;
  /** Changes these rules name stay out of the patch (counted in `ignored`; still in the tar). */
  ignore?: PatchIgnoreRules;
  tarPath: string;
  patchPath: string;
  /** Called once when the export fails, so the producer (the exec) can be stopped. */
  onFatal: (err: Error) => void;
  /** The run's protected set, for the review flags (default: the built-in one). */
  protectedSet?: ProtectedMatcher;
  /** Computes a diff away from the event loop (default: the process's diff thread, diff-thread.ts). */
  diff?: (path: string, before: FileSide | null, after: FileSide | null) => Promise<DiffSection | null>;
  now?: () => number;
}

type Result = Omit<WorkspaceExport, 'stats'> & { stats: Omit<WorkspaceExport['stats'], 'ms'> };

export class ExportWriter {
  /** Where the tar bytes go (runExec's stdout sink). */
  readonly input: ByteSink;
  private readonly extract: tar.Extract;
  /** Settles when the artifacts are on disk (or the export failed). */
  readonly done: Promise<Result>;

  private readonly pack = tar.pack();
  private readonly tarOut: WriteStream;
  private readonly patchOut: WriteStream;
  private readonly tarTmp: string;
  private readonly patchTmp: string;
  private readonly seedPaths: string[];
  private seedAt = 0;
  private entries = 0;
  private bytes = 0;
  private prev: string | null = null;
  private sawManifest = false;
  private sawTrailer = false;
  private failed: Error | null = null;
  private readonly skippedPaths = new Set<string>();
  private readonly ignore: IgnoreMatcher | null;
  private readonly r: Result;
  private fail: (err: Error) => void = () => {};

  constructor(private readonly o: ExportWriterOptions) {
    const suffix = `.${process.pid}.${Date.now().toString(36)}.tmp`;
    this.tarTmp = o.tarPath + suffix;
    this.patchTmp = o.patchPath + suffix;
    this.seedPaths = [...o.seed.keys()].sort(comparePaths);
    this.ignore = o.ignore ? ignoreMatcher(o.ignore) : null;
    this.r = {
      tar: { path: o.tarPath, bytes: 0 }, patch: { path: o.patchPath, bytes: 0 },
      files: [], gitFiles: [], ignored: { count: 0, paths: [] }, notExported: [], notExportedOmitted: {}, needsReview: [], notes: [],
      stats: { files: 0, dirs: 0, bytes: 0 },
    };
    this.tarOut = createWriteStream(this.tarTmp, { flags: 'wx', mode: 0o640 });
    this.patchOut = createWriteStream(this.patchTmp, { flags: 'wx', mode: 0o640 });
    this.pack.pipe(this.tarOut);
    // A 1 MiB buffer before backpressure pauses the exec stream (streamx's default of 16 KiB pauses on every chunk).
    this.extract = tar.extract({ highWaterMark: 1024 * 1024 });
    this.input = this.extract as unknown as ByteSink;
    this.done = new Promise<Result>((resolve, reject) => {
      const fail = (err: Error) => {
        if (this.failed) return;
        this.failed = err;
        this.o.onFatal(err);
        this.extract.destroy();
        this.pack.destroy();
        // A file stream still opening creates its file after destroy(): remove the files once both are closed.
        // Removal is best effort (a file left behind is the export sweeper's); the export fails with `err` either way.
        Promise.all([this.tarOut, this.patchOut].map(closedOf))
          .then(() => Promise.all([rm(this.tarTmp, { force: true }), rm(this.patchTmp, { force: true })]))
          .finally(() => reject(err))
          .catch(() => undefined);
        this.tarOut.destroy();
        this.patchOut.destroy();
      };
      this.fail = fail;
      for (const s of [this.tarOut, this.patchOut]) s.on('error', (e: Error) => fail(new SandboxError('sandbox_failed', `export: writing ${s.path as string} failed: ${e.message}`, { cause: e })));
      this.extract.on('entry', (header, stream, next) => {
        this.onEntry(header, stream).then(() => next(), (err: Error) => fail(err));
      });
      this.extract.on('error', (err: Error) => fail(err instanceof SandboxError ? err : new Tampered(`not a readable tar: ${err.message}`)));
      this.extract.on('finish', () => {
        this.finish().then(resolve, (err: Error) => fail(err));
      });
    });
    this.done.catch(() => {});
  }

  /** Fails the export from outside (the producer died before or while streaming): removes what was written. */
  abort(err: Error): void {
    this.fail(err);
  }

  private async onEntry(h: tar.Header, stream: Source): Promise<void> {
    if (this.failed) throw this.failed;
    this.entries += 1;
    if (this.entries > this.o.caps.maxEntries + 2) throw new Tampered(`more than ${this.o.caps.maxEntries} entries`);
    const size = h.size ?? 0;
    const isFile = h.type === 'file' || h.type === 'contiguous-file';
    if (size > 0 && !isFile) throw new Tampered(`a ${h.type} entry carries ${size} bytes`);
    const manifest = h.name === MANIFEST_ENTRY || h.name === TRAILER_ENTRY;
    const cap = manifest ? MAX_MANIFEST_BYTES : this.o.caps.maxFileBytes;
    if (size > cap) throw new Tampered(`an entry of ${size} bytes is over the per-file cap of ${cap}`);
    if (manifest) return this.onManifest(h.name, isFile, stream);
    if (!this.sawManifest) throw new Tampered('it does not start with its manifest');
    if (this.sawTrailer) throw new Tampered('entries follow the trailer');
    this.bytes += isFile ? size : 0;
    if (this.bytes > this.o.caps.maxTotalBytes) throw new Tampered(`more than ${this.o.caps.maxTotalBytes} bytes of files`);

    let path: string;
    try {
      path = normaliseWorkspacePath(h.name);
    } catch (err) {
      throw new Tampered((err as Error).message);
    }
    if (path === '') return drain(stream);
    if (this.prev !== null && comparePaths(this.prev, path) >= 0) throw new Tampered(`"${path}" is out of order or repeated`);
    this.prev = path;
    const problem = nameProblem(path);
    if (problem) {
      this.notExported({ path, code: 'bad-name', reason: problem });
      return drain(stream);
    }
    if (!isFile && h.type !== 'directory') {
      this.notExported({ path, code: 'special', reason: `a ${h.type} entry; only regular files and directories are exported` });
      return drain(stream);
    }
    await this.deletionsBefore(path);
    const before = this.seedPaths[this.seedAt] === path ? this.o.seed.get(this.seedPaths[this.seedAt++]!)! : null;
    if (!isFile) {
      this.pack.entry({ name: `${path}/`, type: 'directory', mode: 0o755, mtime: mtimeOf(h) });
      this.r.stats.dirs += 1;
      await drain(stream);
      if (before) await this.record(await this.diff(path, await withData(before, null), null));
      return;
    }
    const after = await this.copy(h, path, stream);
    this.r.stats.files += 1;
    this.r.stats.bytes += size;
    await this.record(await this.diff(path, await withData(before, after), after));
  }

  /** One path's change: a line diff in the diff thread, the rest (unchanged, binary, large) here. */
  private diff(path: string, before: FileSide | null, after: FileSide | null): Promise<DiffSection | null> {
    if (!needsLineDiff(before, after)) return Promise.resolve(diffFile(path, before, after));
    return (this.o.diff ?? ((p, b, a) => diffThread().diff(p, b, a)))(path, before, after);
  }

  /** Streams one file into the clean tar, hashing it and keeping it when small enough to diff. */
  private async copy(h: tar.Header, path: string, stream: Source): Promise<FileSide> {
    const size = h.size ?? 0;
    const mode = (h.mode ?? 0o644) & 0o7777;
    const hash = createHash('sha256');
    const blob = gitBlobHasher(size);
    const keep: Buffer[] | null = size <= MAX_DIFF_BYTES ? [] : null;
    const entry = this.pack.entry({ name: path, type: 'file', size, mode: mode & 0o111 ? 0o755 : 0o644, mtime: mtimeOf(h) });
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      hash.update(chunk);
      blob.update(chunk);
      keep?.push(chunk);
      if (!entry.write(chunk)) await new Promise<void>((r) => entry.once('drain', r));
    }
    await new Promise<void>((resolve, reject) => {
      entry.once('error', reject);
      entry.end(() => resolve());
    });
    return { ...(keep ? { data: Buffer.concat(keep) } : {}), sha256: hash.digest('hex'), gitId: blob.digest(), size, mode };
  }

  private async onManifest(name: string, isFile: boolean, stream: Source): Promise<void> {
    const first = name === MANIFEST_ENTRY;
    if (!isFile) throw new Tampered(`the ${first ? 'manifest' : 'trailer'} is not a file`);
    if (first ? this.entries !== 1 : !this.sawManifest || this.sawTrailer) throw new Tampered(`the ${first ? 'manifest' : 'trailer'} is out of place`);
    const chunks: Buffer[] = [];
    for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
    let m: z.infer<typeof Manifest>;
    try {
      m = Manifest.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')));
    } catch (err) {
      throw new Tampered(`its ${first ? 'manifest' : 'trailer'} is not valid: ${(err as Error).message.slice(0, 300)}`);
    }
    for (const s of m.skipped) {
      this.notExported(s);
      this.skippedPaths.add(s.path);
    }
    for (const [code, n] of Object.entries(m.omitted) as Array<[NotExportedCode, number]>) {
      this.r.notExportedOmitted[code] = (this.r.notExportedOmitted[code] ?? 0) + n;
    }
    this.r.notes.push(...(m.notes ?? []).slice(0, 100 - this.r.notes.length));
    if (first) this.sawManifest = true;
    else this.sawTrailer = true;
  }

  private notExported(e: NotExported): void {
    if (this.r.notExported.length < MAX_LISTED) this.r.notExported.push(e);
    else this.r.notExportedOmitted[e.code] = (this.r.notExportedOmitted[e.code] ?? 0) + 1;
  }

  /** Seed files that sort before `path` and never appeared: deleted, unless the helper said why it left them out. */
  private async deletionsBefore(path: string | null): Promise<void> {
    while (this.seedAt < this.seedPaths.length && (path === null || comparePaths(this.seedPaths[this.seedAt]!, path) < 0)) {
      const p = this.seedPaths[this.seedAt++]!;
      if (!this.skippedPaths.has(p)) await this.record(await this.diff(p, await withData(this.o.seed.get(p)!, null), null));
    }
  }

  private async record(section: DiffSection | null): Promise<void> {
    if (!section) return;
    const c: FileChange = section.change;
    const flags: ReviewFlag[] = reviewFlags(c, this.o.protectedSet, section.text);
    this.r.needsReview.push(...flags);
    if (isGitPath(c.path)) {
      this.r.gitFiles.push(c);
      return;
    }
    if (this.ignore?.ignored(c.path)) {
      this.r.ignored.count += 1;
      if (this.r.ignored.paths.length < MAX_LISTED) this.r.ignored.paths.push(c.path);
      return;
    }
    this.r.files.push(c);
    if (section.text && !this.patchOut.write(section.text)) await new Promise<void>((r) => this.patchOut.once('drain', r));
  }

  private async finish(): Promise<Result> {
    if (this.failed) throw this.failed;
    if (!this.sawTrailer) throw new Tampered('it ended before its trailer (the export was cut short)');
    await this.deletionsBefore(null);
    for (const n of this.ignore?.notes() ?? []) if (this.r.notes.length < 100) this.r.notes.push(n);
    const closed = (s: WriteStream) => new Promise<void>((resolve, reject) => {
      s.once('close', resolve);
      s.once('error', reject);
    });
    const tarClosed = closed(this.tarOut);
    this.pack.finalize();
    const patchClosed = closed(this.patchOut);
    this.patchOut.end();
    await Promise.all([tarClosed, patchClosed]);
    this.r.tar.bytes = this.tarOut.bytesWritten;
    this.r.patch.bytes = this.patchOut.bytesWritten;
    await rename(this.tarTmp, this.o.tarPath);
    await rename(this.patchTmp, this.o.patchPath);
    return this.r;
  }
}

function closedOf(s: WriteStream): Promise<void> {
  return s.closed ? Promise.resolve() : new Promise((resolve) => s.once('close', () => resolve()));
}

function mtimeOf(h: tar.Header): Date {
  const t = h.mtime instanceof Date ? h.mtime.getTime() : NaN;
  return Number.isFinite(t) && t >= 0 && t < 4102444800000 ? new Date(t) : new Date(0);
}

function drain(stream: Source): Promise<void> {
  return new Promise((resolve, reject) => {
    stream.on('end', () => resolve());
    stream.on('error', (err: Error) => reject(err));
    stream.resume();
  });
}
