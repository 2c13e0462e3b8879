/**
 * Workspace archives, checked entry by entry on the host: only regular files and directories whose
 * names are relative paths without `..` (no absolute names, no symlinks, no hard links, no devices),
 * with caps on entry count and total bytes enforced while reading. Archives are always uncompressed.
 * Host code only parses tar bytes in memory — it never extracts onto a host filesystem, so nothing
 * here can follow a symlink the sandbox wrote.
 */
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { SandboxError } from '../domain/errors';

export interface ArchiveEntry {
  /** Normalised workspace-relative path ("a/b.txt"), never empty, never containing `..`. */
  path: string;
  type: 'file' | 'dir';
  mode: number;
  data?: Buffer;
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
 * with a segment over 255), absolute names, `..`, NUL, and anything but a regular file or a directory
 * (links, devices, FIFOs) are refused.
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
  if (h.type !== 'file' && h.type !== 'directory' && h.type !== 'contiguous-file') {
    throw new SandboxError('path_refused', `archive entry refused: "${name}" is a ${h.type}${h.linkname ? ` to "${h.linkname}"` : ''}; only files and directories are accepted`);
  }
  return path;
}

/**
 * Reads an uncompressed tar that a user sent (a seed): any link or device entry is refused. (The
 * workspace export, which reads what a sandbox wrote, streams through workspace-export.ts instead.)
 */
export async function readCheckedTar(buf: Buffer, caps: ArchiveCaps = DEFAULT_ARCHIVE_CAPS): Promise<{ entries: ArchiveEntry[] }> {
  if (buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b) {
    throw new SandboxError('path_refused', 'archive refused: compressed archives are not accepted; send an uncompressed tar');
  }
  const entries: ArchiveEntry[] = [];
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

/** Packs checked entries into a clean uncompressed tar (no owners, normalised modes, no links). */
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
