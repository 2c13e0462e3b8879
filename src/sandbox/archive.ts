/**
 * Workspace archives, checked entry by entry on the host: regular files, directories and symbolic
 * links whose names are relative paths without `..` (no absolute names, no hard links, no devices),
 * with caps on entry count and total bytes enforced while reading. Archives are always uncompressed.
 * A symbolic link is kept only when it stays inside the workspace (checkLinkTarget: relative, `..`
 * only at its start and never above the workspace) and no entry of the same archive goes through it
 * (SeedLinks): `node_modules/.bin/vite -> ../vite/bin/vite.js` is kept, `x -> /etc` or `x -> ../..`
 * is refused naming the entry. Host code only parses tar bytes in memory — it never extracts onto a
 * host filesystem, so nothing here can follow a symlink the sandbox wrote.
 */
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { SandboxError } from '../domain/errors';

export interface ArchiveEntry {
  /** Normalised workspace-relative path ("a/b.txt"), never empty, never containing `..`. */
  path: string;
  type: 'file' | 'dir' | 'symlink';
  mode: number;
  data?: Buffer;
  /** A symlink's target (checked: relative, inside the workspace). */
  linkname?: string;
}

/** Longest symlink target kept (Linux's PATH_MAX). */
const MAX_LINK_TARGET_BYTES = 4096;

/**
 * Why a symbolic link at `path` with `target` may not be in a workspace, or null when it may: the
 * target must be relative, without control, C1 or bidi characters, with `..` only as its first
 * segments (`../../lib/x`; never `a/../..`, which a link met on the way would resolve differently),
 * and those may climb no higher than the workspace itself.
 */
export function checkLinkTarget(path: string, target: string): string | null {
  if (target === '') return 'its target is empty';
  if (Buffer.byteLength(target) > MAX_LINK_TARGET_BYTES) return `its target is over ${MAX_LINK_TARGET_BYTES} bytes`;
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f\u0080-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]/.test(target)) return 'its target holds control or bidirectional characters';
  if (target.startsWith('/')) return `it points to the absolute path ${target}, outside the workspace`;
  const segs = target.split('/').filter((s) => s !== '' && s !== '.');
  const ups = segs.findIndex((s) => s !== '..');
  const climb = ups < 0 ? segs.length : ups;
  if (segs.slice(climb).includes('..')) return `its target ${target} has ".." after a name; only leading ".." segments are kept`;
  const depth = path.split('/').length - 1;
  if (climb > depth) return `it points to ${target}, outside the workspace`;
  return null;
}

/**
 * The links of one archive as its entries go by: an entry whose path goes through a link seen before
 * (`lnk/x` after `lnk -> ..`), or a link over a directory that entries already went into, is
 * refused — extraction would write through the link, or fail.
 */
export class SeedLinks {
  private readonly links = new Set<string>();
  private readonly dirs = new Set<string>();

  /** Throws path_refused for such an entry; records the entry otherwise. */
  check(path: string, type: 'file' | 'dir' | 'symlink'): void {
    let at = path.indexOf('/');
    while (at > 0) {
      const parent = path.slice(0, at);
      if (this.links.has(parent)) throw new SandboxError('path_refused', `archive entry refused: "${path}" goes through the symbolic link "${parent}"`);
      this.dirs.add(parent);
      at = path.indexOf('/', at + 1);
    }
    if (type === 'dir') this.dirs.add(path);
    if (type !== 'symlink') return;
    if (this.dirs.has(path)) throw new SandboxError('path_refused', `archive entry refused: the symbolic link "${path}" would replace a directory of the archive`);
    this.links.add(path);
  }
}

export interface ArchiveCaps {
  maxBytes: number;
  maxEntries: number;
}

export const DEFAULT_ARCHIVE_CAPS: ArchiveCaps = { maxBytes: 256 * 1024 * 1024, maxEntries: 50_000 };

/**
 * Normalises a workspace-relative path: strips "./" and a leading "/workspace/", drops "." and
 * empty segments. Returns "" for the workspace itself. Throws path_refused for absolute paths
 * elsewhere, `..`, NUL.
 */
export function normaliseWorkspacePath(input: string): string {
  if (input.includes('\0')) throw new SandboxError('path_refused', `path refused: ${JSON.stringify(input)} contains NUL`);
  let p = input;
  if (p === '/workspace' || p.startsWith('/workspace/')) p = p.slice('/workspace'.length);
  else if (p.startsWith('/')) throw new SandboxError('path_refused', `path refused: "${input}" is absolute; paths are relative to /workspace`);
  const segs = p.split('/').filter((s) => s !== '' && s !== '.');
  if (segs.includes('..')) throw new SandboxError('path_refused', `path refused: "${input}" contains "..", which could leave /workspace`);
  return segs.join('/');
}

/**
 * The workspace path of one entry of a tar a user sent, or path_refused: names over 4096 bytes (or
 * with a segment over 255), absolute names, `..`, NUL, symbolic links that leave the workspace
 * (checkLinkTarget), and anything but a regular file, a directory or such a link (hard links,
 * devices, FIFOs) are refused. Whether an entry goes through a link is the caller's SeedLinks'.
 */
export function checkSeedEntry(h: tar.Header): string {
  const name = h.name;
  // Linux's PATH_MAX and NAME_MAX: a longer name could not be made in the sandbox anyway, and packing
  // one (a pax header) costs time that grows with the square of its length.
  const bytes = Buffer.byteLength(name);
  if (bytes > 4096) throw new SandboxError('path_refused', `archive entry refused: a name of ${bytes} bytes ("${name.slice(0, 100)}…"); at most 4096`);
  const long = name.split('/').find((seg) => Buffer.byteLength(seg) > 255);
  if (long !== undefined) throw new SandboxError('path_refused', `archive entry refused: "${name.slice(0, 300)}" has a name segment of ${Buffer.byteLength(long)} bytes; at most 255`);
  if (name.startsWith('/')) throw new SandboxError('path_refused', `archive entry refused: "${name}" is an absolute name`);
  const path = normaliseWorkspacePath(name);
  if (h.type === 'symlink') {
    const problem = path === '' ? 'it names the workspace itself' : checkLinkTarget(path, h.linkname ?? '');
    if (problem) throw new SandboxError('path_refused', `archive entry refused: the symbolic link "${name}" is not kept: ${problem}`);
    return path;
  }
  if (h.type !== 'file' && h.type !== 'directory' && h.type !== 'contiguous-file') {
    throw new SandboxError('path_refused', `archive entry refused: "${name}" is a ${h.type}${h.linkname ? ` to "${h.linkname}"` : ''}; only files, directories and symbolic links that stay in the workspace are accepted`);
  }
  return path;
}

/**
 * Reads an uncompressed tar that a user sent (a seed): hard links, devices, and symbolic links that
 * leave the workspace or that other entries go through are refused. (The workspace export, which
 * reads what a sandbox wrote, streams through workspace-export.ts instead.)
 */
export async function readCheckedTar(buf: Buffer, caps: ArchiveCaps = DEFAULT_ARCHIVE_CAPS): Promise<{ entries: ArchiveEntry[] }> {
  if (buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b) {
    throw new SandboxError('path_refused', 'archive refused: compressed archives are not accepted; send an uncompressed tar');
  }
  const entries: ArchiveEntry[] = [];
  const links = new SeedLinks();
  let bytes = 0;
  const extract = tar.extract();
  Readable.from([buf]).pipe(extract);
  try {
    for await (const entry of extract) {
      const h = entry.header;
      if (entries.length >= caps.maxEntries) {
        throw new SandboxError('limit_exceeded', `archive refused: more than ${caps.maxEntries} entries`);
      }
      const path = checkSeedEntry(h);
      if (path === '') {
        entry.resume();
        continue;
      }
      links.check(path, h.type === 'directory' ? 'dir' : h.type === 'symlink' ? 'symlink' : 'file');
      if (h.type === 'symlink') {
        entries.push({ path, type: 'symlink', mode: 0o777, linkname: h.linkname! });
        entry.resume();
        continue;
      }
      if (h.type === 'directory') {
        entries.push({ path, type: 'dir', mode: 0o755 });
        entry.resume();
        continue;
      }
      bytes += h.size ?? 0;
      if (bytes > caps.maxBytes) throw new SandboxError('limit_exceeded', `archive refused: more than ${caps.maxBytes} bytes of file content`);
      const chunks: Buffer[] = [];
      for await (const c of entry) chunks.push(c as Buffer);
      entries.push({ path, type: 'file', mode: (h.mode ?? 0o644) & 0o100 ? 0o755 : 0o644, data: Buffer.concat(chunks) });
    }
  } catch (err) {
    extract.destroy();
    if (err instanceof SandboxError) throw err;
    throw new SandboxError('path_refused', `archive refused: not a readable tar (${(err as Error).message})`, { cause: err });
  }
  return { entries };
}

/** Packs checked entries into a clean uncompressed tar (no owners, normalised modes, no hard links; checked symlinks kept). */
export async function packTar(entries: ArchiveEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => { chunks.push(c as Buffer); });
  const done = new Promise<void>((resolve, reject) => {
    pack.on('end', resolve);
    pack.on('error', reject);
  });
  const mtime = new Date();
  for (const e of entries) {
    const path = normaliseWorkspacePath(e.path);
    if (e.type === 'dir') pack.entry({ name: `${path}/`, type: 'directory', mode: 0o755, mtime });
    else if (e.type === 'symlink') pack.entry({ name: path, type: 'symlink', linkname: e.linkname!, mode: 0o777, mtime });
    else pack.entry({ name: path, type: 'file', mode: e.mode, mtime, size: e.data?.length ?? 0 }, e.data ?? Buffer.alloc(0));
  }
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** Inline seed files (path → UTF-8 content) as archive entries. */
export function entriesFromFiles(files: Record<string, string>): ArchiveEntry[] {
  return Object.entries(files).map(([p, content]) => {
    const path = normaliseWorkspacePath(p);
    if (path === '') throw new SandboxError('path_refused', `path refused: "${p}" names the workspace itself, not a file`);
    return { path, type: 'file' as const, mode: 0o644, data: Buffer.from(content, 'utf8') };
  });
}
