/**
 * Packs a local directory into the uncompressed tar that RunSpec.workspace.tarBase64 carries (in
 * memory) or PUT /v1/workspaces receives (streamed). Regular files, directories and the symbolic
 * links that stay inside the directory go in (what the server accepts: archive.ts's checkLinkTarget,
 * so `node_modules/.bin/*` works in the sandbox); links that leave it, sockets, FIFOs and devices are
 * skipped and reported so the caller can warn, naming each. `exclude` patterns leave paths out. The
 * size is checked against the cap before any file is read, and the error names the largest top-level
 * entries so the user knows what to exclude. Entries carry no times and normalised modes, exactly as
 * the server re-packs an upload: the SHA-256 of the streamed tar is the upload's id, so a client can
 * ask whether the server has it before sending a byte (workspaceId).
 */
import type { Dirent, Stats } from 'node:fs';
import { createReadStream } from 'node:fs';
import { lstat, readdir, readFile, readlink, stat } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { join } from 'node:path';
import * as tar from 'tar-stream';
import { MAX_WORKSPACE_TAR_BYTES } from '../domain/run-spec';
import { checkLinkTarget } from '../sandbox/archive';

/** More entries than the API's upload check accepts by default (CORRAL_WORKSPACE_MAX_ENTRIES). */
export const MAX_WORKSPACE_ENTRIES = 100_000;
/** A workspace whose tar is larger than this is uploaded (PUT /v1/workspaces) and named by id; a smaller one travels inline. */
export const INLINE_WORKSPACE_MAX_BYTES = 2 * 1024 * 1024;

export interface PackOptions {
  /** Names or globs (see excludeMatcher). */
  exclude?: readonly string[];
  /** Cap on the tar's size in bytes (default: what the API accepts). */
  maxBytes?: number;
  maxEntries?: number;
}

export interface PackedWorkspace {
  tar: Buffer;
  files: number;
  dirs: number;
  /** Bytes of file content. */
  bytes: number;
  /** Symbolic links kept (they stay inside the directory). */
  links: number;
  /** Entries left out: links that leave the directory, special files. */
  skipped: Array<{ path: string; why: string }>;
  /** Entries left out by an exclude pattern (a directory counts once). */
  excluded: string[];
}

/** Packing failed for a reason the user can fix (too big, not a directory, unreadable). */
export class WorkspacePackError extends Error {
  override readonly name = 'WorkspacePackError';
}

interface Entry {
  path: string;
  abs: string;
  type: 'file' | 'dir' | 'symlink';
  size: number;
  mode: number;
  /** A symlink's target. */
  linkname?: string;
}

/** Every entry's time: the server re-packs uploads with this one, and the id is the re-pack's digest. */
const MTIME = new Date(0);

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      re += '.*';
      i++;
      if (glob[i + 1] === '/') i++;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * A predicate over workspace-relative paths ("a/b/c.txt"). A pattern without "/" (`.git`,
 * `node_modules`, `*.log`) matches an entry's name at any depth; one with "/" (`build/*.o`,
 * `docs/**`) is matched against the whole path. A trailing "/" is ignored; `*` and `?` stay within one
 * path segment, `**` crosses segments.
 */
export function excludeMatcher(patterns: readonly string[]): (path: string) => boolean {
  const rules = patterns
    .map((p) => p.trim().replace(/^\.\//, '').replace(/\/+$/, ''))
    .filter((p) => p !== '')
    .map((p) => (p.includes('/') ? { whole: true, re: globToRegExp(p.replace(/^\/+/, '')) } : { whole: false, re: globToRegExp(p) }));
  return (path) => {
    const name = path.slice(path.lastIndexOf('/') + 1);
    return rules.some((r) => r.re.test(r.whole ? path : name));
  };
}

function kindOf(st: Stats | Dirent): string {
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isSocket()) return 'socket';
  if (st.isFIFO()) return 'FIFO';
  if (st.isBlockDevice() || st.isCharacterDevice()) return 'device';
  return 'special file';
}

/** Bytes a file of `size` takes in a tar with a name of `nameBytes`: header, padded data, long-name header. */
function tarBytes(nameBytes: number, size: number): number {
  return 512 + Math.ceil(size / 512) * 512 + (nameBytes > 99 ? 512 + Math.ceil((nameBytes + 32) / 512) * 512 : 0);
}

function mib(n: number): string {
  return n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${Math.max(1, Math.round(n / 1024))} KiB`;
}

function fsMessage(err: unknown, path: string): string {
  const e = err as NodeJS.ErrnoException;
  return `cannot read ${path} (${e.code ?? e.message})`;
}

/** Walks `root` (lstat only, names sorted) into entries, skipped and excluded paths. */
async function walk(root: string, isExcluded: (p: string) => boolean, maxEntries: number) {
  const entries: Entry[] = [];
  const skipped: PackedWorkspace['skipped'] = [];
  const excluded: string[] = [];
  const visit = async (absDir: string, relDir: string): Promise<void> => {
    let names: string[];
    try {
      names = (await readdir(absDir)).sort();
    } catch (err) {
      throw new WorkspacePackError(fsMessage(err, absDir));
    }
    for (const name of names) {
      const path = relDir ? `${relDir}/${name}` : name;
      const abs = join(absDir, name);
      if (isExcluded(path)) {
        excluded.push(path);
        continue;
      }
      let st: Stats;
      try {
        st = await lstat(abs);
      } catch (err) {
        throw new WorkspacePackError(fsMessage(err, abs));
      }
      if (st.isDirectory() || st.isFile()) {
        if (entries.length >= maxEntries) {
          throw new WorkspacePackError(`the workspace has more than ${maxEntries} files and directories; leave some out with --exclude`);
        }
        entries.push({ path, abs, type: st.isFile() ? 'file' : 'dir', size: st.isFile() ? st.size : 0, mode: st.mode });
        if (st.isDirectory()) await visit(abs, path);
      } else if (st.isSymbolicLink()) {
        let target: string;
        try {
          target = await readlink(abs);
        } catch (err) {
          throw new WorkspacePackError(fsMessage(err, abs));
        }
        const problem = checkLinkTarget(path, target);
        if (problem) {
          skipped.push({ path, why: `a symbolic link that is not kept: ${problem}` });
          continue;
        }
        if (entries.length >= maxEntries) {
          throw new WorkspacePackError(`the workspace has more than ${maxEntries} files and directories; leave some out with --exclude`);
        }
        entries.push({ path, abs, type: 'symlink', size: 0, mode: 0o777, linkname: target });
      } else {
        skipped.push({ path, why: kindOf(st) });
      }
    }
  };
  await visit(root, '');
  return { entries, skipped, excluded };
}

/** A directory walked, not yet read: what would go into its tar, and about how big the tar is. */
export interface WorkspacePlan {
  dir: string;
  entries: Entry[];
  skipped: PackedWorkspace['skipped'];
  excluded: string[];
  /** Bytes of the tar, from the sizes lstat saw. */
  estimate: number;
  files: number;
  dirs: number;
  /** Bytes of file content. */
  bytes: number;
  /** Symbolic links kept. */
  links: number;
}

/** Walks `dir` (lstat only); throws WorkspacePackError when it is not a readable directory or has too many entries. */
export async function planWorkspace(dir: string, opts: Pick<PackOptions, 'exclude' | 'maxEntries'> = {}): Promise<WorkspacePlan> {
  let rootStat: Stats;
  try {
    rootStat = await stat(dir);
  } catch (err) {
    throw new WorkspacePackError(`the workspace ${dir} ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'does not exist' : `cannot be read (${(err as NodeJS.ErrnoException).code})`}`);
  }
  if (!rootStat.isDirectory()) throw new WorkspacePackError(`the workspace ${dir} is not a directory`);
  const { entries, skipped, excluded } = await walk(dir, excludeMatcher(opts.exclude ?? []), opts.maxEntries ?? MAX_WORKSPACE_ENTRIES);
  const estimate = 1024 + entries.reduce((n, e) => n + tarBytes(Buffer.byteLength(e.path) + (e.type === 'dir' ? 1 : 0), e.size) + (e.linkname && Buffer.byteLength(e.linkname) > 99 ? 1024 + Buffer.byteLength(e.linkname) : 0), 0);
  const files = entries.filter((e) => e.type === 'file');
  const links = entries.filter((e) => e.type === 'symlink').length;
  return { dir, entries, skipped, excluded, estimate, files: files.length, dirs: entries.length - files.length - links, links, bytes: files.reduce((n, e) => n + e.size, 0) };
}

/**
 * The tar of a planned directory as a stream, each file read as it is packed (never the whole tar in
 * memory): the body of PUT /v1/workspaces. A file that changed size since the walk fails the stream.
 */
export function streamWorkspace(plan: WorkspacePlan): Readable {
  const pack = tar.pack();
  let current: Entry | undefined;
  // What went wrong with the entry being packed, said for the user (tar-stream itself says only "Size mismatch").
  const packError = (err: Error, e: Entry | undefined) =>
    err instanceof WorkspacePackError ? err
      : !e ? new WorkspacePackError(`packing the workspace ${plan.dir} failed (${err.message})`)
        : /size mismatch/i.test(err.message) ? new WorkspacePackError(`${e.abs} changed size while it was being uploaded`)
          : new WorkspacePackError(fsMessage(err, e.abs));
  void (async () => {
    for (const e of plan.entries) {
      current = e;
      if (e.type === 'dir') {
        pack.entry({ name: `${e.path}/`, type: 'directory', mode: 0o755, mtime: MTIME });
        continue;
      }
      if (e.type === 'symlink') {
        pack.entry({ name: e.path, type: 'symlink', linkname: e.linkname!, mode: 0o777, mtime: MTIME });
        continue;
      }
      await new Promise<void>((resolve, reject) => {
        const sink = pack.entry({ name: e.path, type: 'file', mode: e.mode & 0o111 ? 0o755 : 0o644, mtime: MTIME, size: e.size }, (err) => (err ? reject(err) : resolve()));
        // Both ends report errors here: the sink too, or its error when the pack is destroyed would go unhandled.
        sink.on('error', reject);
        const source = createReadStream(e.abs);
        source.once('error', reject);
        source.pipe(sink);
      });
    }
    current = undefined;
    pack.finalize();
  })().catch((err: Error) => pack.destroy(packError(err, current)));
  // tar-stream's pack is a streamx stream: a Node Readable over it is what fetch and pipeline expect,
  // failing with a WorkspacePackError that names the file.
  return Readable.from((async function* () {
    try {
      for await (const chunk of pack as AsyncIterable<Buffer>) yield chunk;
    } catch (err) {
      throw packError(err as Error, current);
    }
  })(), { objectMode: false });
}

/** Packs `dir` into an uncompressed tar; throws WorkspacePackError when it cannot or the tar would be too big. */
export async function packWorkspace(dir: string, opts: PackOptions = {}): Promise<PackedWorkspace> {
  return packPlanned(await planWorkspace(dir, opts), opts.maxBytes ?? MAX_WORKSPACE_TAR_BYTES);
}

/** Packs a planned directory into an uncompressed tar in memory, refused past `maxBytes`. */
export async function packPlanned(plan: WorkspacePlan, maxBytes: number = MAX_WORKSPACE_TAR_BYTES): Promise<PackedWorkspace> {
  const { dir, entries, skipped, excluded, estimate } = plan;
  if (estimate > maxBytes) {
    const top = new Map<string, number>();
    for (const e of entries) {
      const head = e.path.split('/')[0]!;
      top.set(head, (top.get(head) ?? 0) + tarBytes(Buffer.byteLength(e.path), e.size));
    }
    const biggest = [...top.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3).map(([p, n]) => `${p} ${mib(n)}`).join(', ');
    throw new WorkspacePackError(
      `the workspace ${dir} packs to about ${mib(estimate)}, over the ${mib(maxBytes)} the API accepts (largest: ${biggest}); leave parts out with --exclude, e.g. --exclude ${top.size ? [...top.entries()].sort((a, b) => b[1] - a[1])[0]![0] : 'PATTERN'}`,
    );
  }

  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => {
    chunks.push(c as Buffer);
  });
  const ended = new Promise<void>((resolve, reject) => {
    pack.on('end', resolve);
    pack.on('error', reject);
  });
  let files = 0;
  let dirs = 0;
  let bytes = 0;
  for (const e of entries) {
    if (e.type === 'dir') {
      pack.entry({ name: `${e.path}/`, type: 'directory', mode: 0o755, mtime: MTIME });
      dirs++;
      continue;
    }
    if (e.type === 'symlink') {
      pack.entry({ name: e.path, type: 'symlink', linkname: e.linkname!, mode: 0o777, mtime: MTIME });
      continue;
    }
    let data: Buffer;
    try {
      data = await readFile(e.abs);
    } catch (err) {
      pack.destroy();
      throw new WorkspacePackError(fsMessage(err, e.abs));
    }
    pack.entry({ name: e.path, type: 'file', mode: e.mode & 0o111 ? 0o755 : 0o644, mtime: MTIME, size: data.length }, data);
    files++;
    bytes += data.length;
  }
  pack.finalize();
  await ended;
  const out = Buffer.concat(chunks);
  if (out.length > maxBytes) {
    throw new WorkspacePackError(`the workspace ${dir} packs to ${mib(out.length)}, over the ${mib(maxBytes)} the API accepts (files grew while packing?); leave parts out with --exclude`);
  }
  return { tar: out, files, dirs, bytes, links: plan.links, skipped, excluded };
}

/**
 * The id the server gives this directory's upload (`ws_` + the SHA-256 of the tar streamWorkspace
 * sends, which is the server's clean re-pack byte for byte): one read of every file, nothing sent.
 */
export async function workspaceId(plan: WorkspacePlan): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of streamWorkspace(plan)) hash.update(chunk as Buffer);
  return `ws_${hash.digest('hex')}`;
}
