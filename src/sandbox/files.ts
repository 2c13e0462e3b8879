/**
 * Workspace file operations, each one exec of `corral-fs` (images/sandbox/corral-fs) inside the
 * sandbox. Paths are checked lexically on the host first (normaliseWorkspacePath: no absolute paths
 * outside /workspace, no `..`); the helper then walks them from /workspace one component at a time
 * with O_NOFOLLOW, so no symlink is followed at any step, whatever the agent swaps in meanwhile — a
 * symlink anywhere on the path is refused with path_refused and names its target. Reads and writes
 * open with O_NONBLOCK and refuse anything but a regular file (a fifo or socket is refused at once);
 * writes go to a fresh name in the same directory and are renamed over the target. The host never
 * touches the workspace's files.
 */
import type { Readable } from 'node:stream';
import { SandboxError } from '../domain/errors';
import type { FileContent, FileEntry, WriteOptions } from '../domain/sandbox';
import { normaliseWorkspacePath } from './archive';
import type { ExecOutcome } from './exec';

/** Runs a corral-internal command in the sandbox (fixed user/env/cwd, head-only capture). */
export type InternalExec = (
  argv: string[],
  opts: { stdin?: string | Buffer | Readable; maxOutputBytes: number; signal?: AbortSignal; timeoutMs?: number },
) => Promise<ExecOutcome>;

export const CORRAL_FS = '/usr/local/bin/corral-fs';
const REFUSED = 90;
const MISSING = 91;
const WRONG_TYPE = 92;
const CONFLICT = 93;
const NO_SPACE = 94;

function fail(path: string, o: ExecOutcome, what: string): never {
  const msg = o.stderr.headBuffer().toString('utf8').trim();
  if (o.exitCode === REFUSED || o.exitCode === MISSING || o.exitCode === WRONG_TYPE) throw new SandboxError('path_refused', msg || `${what}: ${path} is not usable`);
  if (o.exitCode === CONFLICT) throw new SandboxError('conflict', msg || `${what}: ${path} changed meanwhile`);
  if (o.exitCode === NO_SPACE || /No space left on device|Disk quota exceeded/i.test(msg)) {
    throw new SandboxError('limit_exceeded', `${what} ${path}: the workspace is full (${msg})`);
  }
  if (o.exitCode === 126 || o.exitCode === 127) {
    throw new SandboxError('sandbox_failed', `${what} ${path}: the sandbox image has no ${CORRAL_FS} (exit ${o.exitCode}); rebuild it from sandbox.Dockerfile`);
  }
  throw new SandboxError('sandbox_failed', `${what} ${path} failed (exit ${o.exitCode ?? 'none'}${o.timedOut ? ', timed out' : ''}): ${msg}`);
}

/** The workspace-relative path; throws path_refused for escapes and, unless `root` is allowed, for the workspace itself. */
function relative(path: string, root = false): string {
  const rel = normaliseWorkspacePath(path);
  if (!rel && !root) throw new SandboxError('path_refused', `path refused: "${path}" names the workspace itself, not a file`);
  return rel;
}

/** Reads at most maxBytes; `sha256` is the digest of the whole file when it was read whole (for writeFile's expectSha256). */
export async function readWorkspaceFile(exec: InternalExec, path: string, maxBytes: number, signal?: AbortSignal): Promise<FileContent & { sha256?: string }> {
  const rel = relative(path);
  const o = await exec([CORRAL_FS, 'read', rel, String(maxBytes)], { maxOutputBytes: maxBytes + 128, signal });
  if (o.exitCode !== 0) fail(path, o, 'read');
  const out = o.stdout.headBuffer();
  const nl = out.indexOf(0x0a);
  const m = /^(\d+) ([0-9a-f]{64}|-)$/.exec(out.subarray(0, Math.max(0, nl)).toString('ascii'));
  if (nl < 0 || !m) throw new SandboxError('sandbox_failed', `read ${path}: the sandbox helper answered something unexpected`);
  const size = Number(m[1]);
  const content = out.subarray(nl + 1, nl + 1 + maxBytes);
  const truncated = size > content.length || m[2] === '-';
  return { content: content.toString('utf8'), size, truncated, ...(m[2] !== '-' ? { sha256: m[2] } : {}) };
}

export async function writeWorkspaceFile(exec: InternalExec, path: string, content: string | Buffer, opts: WriteOptions = {}): Promise<void> {
  const rel = relative(path);
  const expect = opts.expectSha256 ? ['--expect', opts.expectSha256] : [];
  const o = await exec([CORRAL_FS, 'write', rel, ...expect], { stdin: content, maxOutputBytes: 4096, signal: opts.signal });
  if (o.exitCode !== 0) fail(path, o, 'write');
}

export async function removeWorkspaceFile(exec: InternalExec, path: string, opts: { expectSha256?: string; signal?: AbortSignal } = {}): Promise<void> {
  const rel = relative(path);
  const expect = opts.expectSha256 ? ['--expect', opts.expectSha256] : [];
  const o = await exec([CORRAL_FS, 'remove', rel, ...expect], { maxOutputBytes: 4096, signal: opts.signal });
  if (o.exitCode !== 0) fail(path, o, 'remove');
}

const TYPES: Record<string, FileEntry['type']> = { f: 'file', d: 'dir', l: 'symlink' };

export async function listWorkspace(exec: InternalExec, path: string, maxEntries: number, signal?: AbortSignal): Promise<FileEntry[]> {
  const rel = relative(path, true);
  const o = await exec([CORRAL_FS, 'list', rel, String(maxEntries)], { maxOutputBytes: maxEntries * 4200 + 1024, signal });
  if (o.exitCode !== 0) fail(path, o, 'list');
  const entries: FileEntry[] = [];
  for (const rec of o.stdout.headBuffer().toString('utf8').split('\0')) {
    const i1 = rec.indexOf('\t');
    const i2 = rec.indexOf('\t', i1 + 1);
    if (i1 < 0 || i2 < 0) continue;
    entries.push({ path: rec.slice(i2 + 1), type: TYPES[rec.slice(0, i1)] ?? 'other', size: Number(rec.slice(i1 + 1, i2)) });
  }
  return entries.slice(0, maxEntries).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
