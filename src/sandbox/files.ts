/**
 * Workspace file operations, each one exec of a short script inside the sandbox. Paths are checked
 * twice: lexically on the host (normaliseWorkspacePath: no absolute paths outside /workspace, no
 * `..`), and resolved inside the container (`realpath`), so a symlink the agent planted that leads
 * out of /workspace is refused with path_refused. The host never touches the workspace's files.
 */
import { SandboxError } from '../domain/errors';
import type { FileContent, FileEntry } from '../domain/sandbox';
import { WORKSPACE_DIR } from './container-spec';
import type { ExecOutcome } from './exec';
import { normaliseWorkspacePath } from './archive';

/** Runs a corral-internal command in the sandbox (fixed user/env/cwd, head-only capture). */
export type InternalExec = (
  argv: string[],
  opts: { stdin?: string | Buffer; maxOutputBytes: number; signal?: AbortSignal },
) => Promise<ExecOutcome>;

const REFUSED = 90;
const MISSING = 91;
const WRONG_TYPE = 92;

/** Shared shell prelude: `inside PATH` exits REFUSED unless PATH is /workspace or below it. */
const PRELUDE = `inside() { case "$1/" in ${WORKSPACE_DIR}/*) return 0;; esac; echo "path refused: $2 leads outside ${WORKSPACE_DIR} (to $1)" >&2; exit ${REFUSED}; }\n`;

const READ = `${PRELUDE}r=$(realpath -e -- "$1" 2>/dev/null) || { echo "no such file: $2" >&2; exit ${MISSING}; }
inside "$r" "$2"
[ -f "$r" ] || { echo "not a regular file: $2" >&2; exit ${WRONG_TYPE}; }
find "$r" -maxdepth 0 -printf '%s\\n' && head -c "$3" -- "$r"`;

const WRITE = `${PRELUDE}r=$(realpath -m -- "$1") || exit 1
inside "$r" "$2"
[ "$r" = ${WORKSPACE_DIR} ] && { echo "not a file: $2" >&2; exit ${WRONG_TYPE}; }
d=$(dirname -- "$r")
mkdir -p -- "$d" || exit 1
inside "$(realpath -e -- "$d")" "$2"
[ -d "$r" ] && { echo "is a directory: $2" >&2; exit ${WRONG_TYPE}; }
cat > "$r"`;

const LIST = `${PRELUDE}r=$(realpath -e -- "$1" 2>/dev/null) || { echo "no such directory: $2" >&2; exit ${MISSING}; }
inside "$r" "$2"
[ -d "$r" ] || { echo "not a directory: $2" >&2; exit ${WRONG_TYPE}; }
find "$r" -mindepth 1 \\( -name .git -prune -printf '%y\\t%s\\t%p\\0' \\) -o -printf '%y\\t%s\\t%p\\0' 2>/dev/null | head -z -n "$3"`;

function fail(path: string, o: ExecOutcome, what: string): never {
  const msg = o.stderr.headBuffer().toString('utf8').trim();
  if (o.exitCode === REFUSED) throw new SandboxError('path_refused', msg || `path refused: ${path}`);
  if (o.exitCode === MISSING || o.exitCode === WRONG_TYPE) throw new SandboxError('path_refused', msg || `${what}: ${path} is not usable`);
  if (/No space left on device|Disk quota exceeded/i.test(msg)) {
    throw new SandboxError('limit_exceeded', `${what} ${path}: the workspace is full (${msg})`);
  }
  throw new SandboxError('sandbox_failed', `${what} ${path} failed (exit ${o.exitCode ?? 'none'}${o.timedOut ? ', timed out' : ''}): ${msg}`);
}

function target(path: string): { rel: string; abs: string } {
  const rel = normaliseWorkspacePath(path);
  return { rel, abs: rel ? `${WORKSPACE_DIR}/${rel}` : WORKSPACE_DIR };
}

export async function readWorkspaceFile(exec: InternalExec, path: string, maxBytes: number, signal?: AbortSignal): Promise<FileContent> {
  const { abs } = target(path);
  const o = await exec(['bash', '-c', READ, 'corral-read', abs, path, String(maxBytes)], { maxOutputBytes: maxBytes + 32, signal });
  if (o.exitCode !== 0) fail(path, o, 'read');
  const out = o.stdout.headBuffer();
  const nl = out.indexOf(0x0a);
  const size = Number(out.subarray(0, nl).toString('ascii'));
  const content = out.subarray(nl + 1, nl + 1 + maxBytes);
  return { content: content.toString('utf8'), size, truncated: size > content.length };
}

export async function writeWorkspaceFile(exec: InternalExec, path: string, content: string | Buffer, signal?: AbortSignal): Promise<void> {
  const { rel, abs } = target(path);
  if (!rel) throw new SandboxError('path_refused', `path refused: "${path}" names the workspace itself, not a file`);
  const o = await exec(['bash', '-c', WRITE, 'corral-write', abs, path], { stdin: content, maxOutputBytes: 4096, signal });
  if (o.exitCode !== 0) fail(path, o, 'write');
}

export async function listWorkspace(exec: InternalExec, path: string, maxEntries: number, signal?: AbortSignal): Promise<FileEntry[]> {
  const { abs } = target(path);
  const o = await exec(['bash', '-c', LIST, 'corral-list', abs, path, String(maxEntries)], { maxOutputBytes: maxEntries * 4200 + 1024, signal });
  if (o.exitCode !== 0) fail(path, o, 'list');
  const entries: FileEntry[] = [];
  for (const rec of o.stdout.headBuffer().toString('utf8').split('\0')) {
    if (!rec) continue;
    const i1 = rec.indexOf('\t');
    const i2 = rec.indexOf('\t', i1 + 1);
    if (i1 < 0 || i2 < 0) continue;
    const kind = rec.slice(0, i1);
    const size = rec.slice(i1 + 1, i2);
    const full = rec.slice(i2 + 1);
    const p = full.startsWith(`${WORKSPACE_DIR}/`) ? full.slice(WORKSPACE_DIR.length + 1) : full;
    const type: FileEntry['type'] = kind === 'f' ? 'file' : kind === 'd' ? 'dir' : kind === 'l' ? 'symlink' : 'other';
    entries.push({ path: p, type, size: Number(size) });
  }
  return entries.slice(0, maxEntries).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
