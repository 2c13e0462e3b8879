/**
 * Puts protected files back as a snapshot had them, through the Engine API's archive endpoint
 * (`PUT /containers/{id}/archive` into /workspace): a tar of those files (content, mode, the agent's
 * uid and gid; their parent directories as they were) that replaces whatever is at each path now —
 * a file, a directory or a link of the agent's. What did not exist before is removed first by `rm`
 * run as the agent (the archive endpoint cannot delete); the guard then reads the state again, so a
 * restore that a racing process undid is noticed.
 */
import * as tar from 'tar-stream';
import type { ProtectedState } from '../domain/effects';
import { SandboxError } from '../domain/errors';

export interface RestorePlan {
  /** Workspace paths to remove (they did not exist before). */
  remove: string[];
  /** An uncompressed tar to extract at /workspace, or null when nothing is to be put back. */
  tar: Buffer | null;
}

const ancestors = (p: string) => {
  const segs = p.split('/');
  return segs.slice(0, -1).map((_, i) => segs.slice(0, i + 1).join('/'));
};

/** The plan that brings `paths` back to `before` (owner `uid`:`gid`); throws when a file's content was too large to keep. */
export async function restorePlan(before: ProtectedState, paths: readonly string[], uid: number, gid: number, now = new Date()): Promise<RestorePlan> {
  const remove = paths.filter((p) => !before.entries.has(p));
  const put = paths.filter((p) => before.entries.has(p)).sort();
  if (put.length === 0) return { remove, tar: null };
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => { chunks.push(c as Buffer); });
  const done = new Promise<void>((resolve, reject) => { pack.on('end', resolve); pack.on('error', reject); });
  const dirsDone = new Set<string>();
  // ustar's uid field holds 6 octal digits (at most 262143) and sandbox uids are larger: the owner goes in PAX records
  const owner = { uid: 0, gid: 0, pax: { uid: String(uid), gid: String(gid) } };
  for (const p of put) {
    for (const d of ancestors(p)) {
      if (dirsDone.has(d)) continue;
      dirsDone.add(d);
      pack.entry({ name: `${d}/`, type: 'directory', mode: (before.dirs.get(d) ?? 0o755) & 0o1777, ...owner, mtime: now });
    }
    const e = before.entries.get(p)!;
    const mode = e.mode & 0o1777; // never a setuid or setgid bit (the docker gate refuses them)
    if (e.type === 'symlink') pack.entry({ name: p, type: 'symlink', linkname: e.link ?? '', mode: 0o777, ...owner, mtime: now });
    else if (e.type === 'file') {
      if (!e.data) throw new SandboxError('sandbox_failed', `${p} cannot be put back: at ${e.size} bytes it was too large to keep`);
      pack.entry({ name: p, type: 'file', mode, ...owner, mtime: now, size: e.data.length }, e.data);
    } else throw new SandboxError('sandbox_failed', `${p} cannot be put back: it was a special file`);
  }
  pack.finalize();
  await done;
  return { remove, tar: Buffer.concat(chunks) };
}
