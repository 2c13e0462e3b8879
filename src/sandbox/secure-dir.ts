/**
 * Directories only a trusted uid can change. The Docker engine resolves a bind source when the
 * container starts, following symbolic links, so a bind source is safe only when no one else can
 * replace it — or any directory above it — between a check and that moment. secureDirProblem() walks
 * a path from `/` with lstat (never following a link): every component must be a real directory owned
 * by a trusted uid (root or the caller) and writable by no one else, except a sticky directory (such as
 * /tmp) whose next component is itself owned by a trusted uid (the sticky bit keeps others from
 * renaming or removing that entry). The last component must not be group- or world-writable at all.
 */
import { lstat, mkdir } from 'node:fs/promises';
import { isAbsolute, normalize, sep } from 'node:path';

const STICKY = 0o1000;

/** The uids whose directories are trusted: root and this process's effective uid. */
export function trustedUids(): Set<number> {
  return new Set([0, process.geteuid?.() ?? 0]);
}

/** Why `path` is not a directory only trusted uids can change, or null when it is. */
export async function secureDirProblem(path: string, trusted = trustedUids()): Promise<string | null> {
  if (!isAbsolute(path) || normalize(path) !== path || (path.length > 1 && path.endsWith(sep))) return `${path} is not a normalised absolute path`;
  const parts = path.split(sep).filter(Boolean);
  let cur = '';
  for (let i = 0; i <= parts.length; i++) {
    cur = i === 0 ? '/' : `${cur === '/' ? '' : cur}/${parts[i - 1]}`;
    let st;
    try {
      st = await lstat(cur);
    } catch (err) {
      return `${cur}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
    }
    if (st.isSymbolicLink()) return `${cur} is a symbolic link`;
    if (!st.isDirectory()) return `${cur} is not a directory`;
    if (!trusted.has(st.uid)) return `${cur} is owned by uid ${st.uid}, not by root or this process (uid ${[...trusted].join('/')})`;
    // A sticky directory others can write (/tmp) is fine above us: they cannot rename or remove our entry in it.
    const othersWrite = (st.mode & 0o022) !== 0;
    if (othersWrite && (i === parts.length || (st.mode & STICKY) === 0)) return `${cur} is writable by its group or others (mode ${(st.mode & 0o7777).toString(8)})`;
  }
  return null;
}

/** Creates `path` (mode `mode`, parents 0755) if missing, then insists it is secure; throws naming the problem. */
export async function ensureSecureDir(path: string, mode: number): Promise<void> {
  await mkdir(path, { recursive: true, mode });
  const problem = await secureDirProblem(path);
  if (problem) throw new Error(`${path} is not a directory only this process and root can change: ${problem}`);
}
