/**
 * What a setup capture holds of the workspace's own: a capture (a tar of what setup wrote, names
 * `workspace/…` and `home/agent/…`) may be cached and restored into another run only when it holds
 * nothing but new files — none of the seed's files (a repository's tracked files and whatever else it
 * came with) and no git internals (`.git` anywhere under the workspace: hooks, config, objects).
 * The scan reads the tar from disk, entry headers only (contents are skipped as they stream).
 */
import { createReadStream } from 'node:fs';
import * as tar from 'tar-stream';

export interface OwnEntries {
  /** The first few offending paths. */
  paths: string[];
  count: number;
}

const KEEP = 20;

/** Whether a capture entry name is a git internal of the workspace (a `.git` component under it). */
export function isWorkspaceGitPath(name: string): boolean {
  const parts = name.replace(/^\.?\//, '').split('/').filter(Boolean);
  return parts[0] === 'workspace' && parts.slice(1).includes('.git');
}

/** The capture's entries that are seed files (`seed`: workspace-relative paths) or git internals. */
export function scanCapture(path: string, seed: { has(path: string): boolean }): Promise<OwnEntries> {
  return new Promise((resolve, reject) => {
    const out: OwnEntries = { paths: [], count: 0 };
    const extract = tar.extract();
    extract.on('entry', (header, stream, next) => {
      const name = header.name.replace(/^\.?\//, '').replace(/\/+$/, '');
      const rel = name.startsWith('workspace/') ? name.slice('workspace/'.length) : null;
      const own = isWorkspaceGitPath(name) || (rel !== null && header.type !== 'directory' && seed.has(rel));
      if (own) {
        out.count++;
        if (out.paths.length < KEEP) out.paths.push(name);
      }
      stream.on('end', () => next());
      stream.resume();
    });
    extract.once('finish', () => resolve(out));
    extract.once('error', reject);
    const src = createReadStream(path);
    src.once('error', reject);
    src.pipe(extract);
  });
}
