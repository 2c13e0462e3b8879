/**
 * A large seed on the worker's disk (an upload of PUT /v1/workspaces): read once, streamed, to check
 * it entry by entry (the seed rules of archive.ts, the run's caps) and to index it as the baseline of
 * the run's patch — for each file its digest, size and mode. The content of the files small enough
 * to diff goes to one spill file (opened, then unlinked at once: nothing is left behind even if the
 * worker dies), read back only for the files the run changed or deleted. The worker's memory holds
 * the index, never the workspace.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar-stream';
import { CorralError, SandboxError } from '../domain/errors';
import { WorkspacePath } from '../domain/run-spec';
import { checkSeedEntry, SeedLinks, type ArchiveCaps } from './archive';
import { gitBlobHasher } from './git-binary-patch';
import { MAX_DIFF_BYTES, type FileSide } from './workspace-diff';

export interface SeedFileIndex {
  /** Each file's side (later entries of the same name win, as when the tar is extracted). */
  sides: Map<string, FileSide>;
  files: number;
  dirs: number;
  /** Bytes of file content. */
  bytes: number;
  /** Closes the spill file; the sides' load() fails after it. */
  close(): Promise<void>;
}

/**
 * Reads the clean tar at `path`; SandboxError (path_refused, limit_exceeded) for what the seed rules refuse.
 * With `under` (a setup phase's capture, written by the sandbox: see environments/setup-phase.ts) only
 * entries below that directory are indexed, under their names below it, and an entry the seed rules
 * or the name rules refuse (a symlink in node_modules/.bin) is skipped instead: the index is a patch's
 * baseline, and the sandbox keeps such entries as they are. The caps hold either way.
 */
export async function indexSeedFile(path: string, caps: ArchiveCaps, spillRoot = tmpdir(), o: { under?: string } = {}): Promise<SeedFileIndex> {
  const dir = await mkdtemp(join(spillRoot, 'corral-seed-'));
  let spill: FileHandle;
  try {
    spill = await open(join(dir, 'spill'), 'w+', 0o600);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const sides = new Map<string, FileSide>();
  let files = 0;
  let dirs = 0;
  let bytes = 0;
  let spilled = 0;
  let linkCount = 0;
  let closed = false;
  const links = new SeedLinks();
  const extract = tar.extract();
  const feeding = pipeline(createReadStream(path), extract);
  try {
    const reading = (async () => {
      for await (const entry of extract) {
        const h = entry.header;
        if (files + dirs + linkCount >= caps.maxEntries) throw new SandboxError('limit_exceeded', `workspace refused: more than ${caps.maxEntries} entries`);
        let name: string;
        if (o.under !== undefined) {
          const prefix = `${o.under}/`;
          const raw = h.name.replace(/^\.\//, '');
          let checked: string | null = null;
          if (raw.startsWith(prefix) && raw.length > prefix.length) {
            try {
              checked = checkSeedEntry({ ...h, name: raw.slice(prefix.length) });
            } catch {
              checked = null;
            }
          }
          if (!checked || !WorkspacePath.safeParse(checked).success) {
            entry.resume();
            continue;
          }
          name = checked;
        } else {
          name = checkSeedEntry(h);
          if (name === '') {
            entry.resume();
            continue;
          }
          const named = WorkspacePath.safeParse(name);
          if (!named.success) throw new SandboxError('path_refused', `workspace refused: entry ${JSON.stringify(name.slice(0, 200))}: ${named.error.issues[0]?.message}`);
          links.check(name, h.type === 'directory' ? 'dir' : h.type === 'symlink' ? 'symlink' : 'file');
        }
        if (h.type === 'symlink') {
          // Extracted as it is; not a file of the patch's baseline (a file it replaces is not either).
          sides.delete(name);
          linkCount += 1;
          entry.resume();
          continue;
        }
        if (h.type === 'directory') {
          dirs++;
          entry.resume();
          continue;
        }
        const size = h.size ?? 0;
        bytes += size;
        if (bytes > caps.maxBytes) throw new SandboxError('limit_exceeded', `workspace refused: more than ${caps.maxBytes} bytes of file content (at "${name.slice(0, 200)}")`);
        files++;
        const hash = createHash('sha256');
        const blob = gitBlobHasher(size);
        const keep = size <= MAX_DIFF_BYTES;
        const at = spilled;
        for await (const chunk of entry as AsyncIterable<Buffer>) {
          hash.update(chunk);
          blob.update(chunk);
          if (keep) {
            await spill.write(chunk, 0, chunk.length, spilled);
            spilled += chunk.length;
          }
        }
        const side: FileSide = { sha256: hash.digest('hex'), gitId: blob.digest(), size, mode: (h.mode ?? 0o644) & 0o100 ? 0o755 : 0o644 };
        if (keep) {
          side.load = async () => {
            if (closed) throw new SandboxError('sandbox_failed', 'the seed index was closed');
            const buf = Buffer.alloc(size);
            if (size > 0) await spill.read(buf, 0, size, at);
            return buf;
          };
        }
        sides.set(name, side);
      }
    })();
    const [fed, read] = await Promise.allSettled([feeding, reading]);
    if (read.status === 'rejected') throw read.reason;
    if (fed.status === 'rejected') throw fed.reason;
  } catch (err) {
    extract.destroy();
    await spill.close();
    if (err instanceof CorralError) throw err;
    throw new SandboxError('path_refused', `workspace refused: not a readable tar (${(err as Error).message})`, { cause: err });
  }
  return {
    sides, files, dirs, bytes,
    close: async () => {
      if (closed) return;
      closed = true;
      await spill.close();
    },
  };
}
