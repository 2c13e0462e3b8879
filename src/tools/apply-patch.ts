/**
 * apply_patch: applies a unified diff to workspace files through the Sandbox port. All or nothing:
 * the patch is parsed, every path checked and every hunk of every file matched in memory before
 * anything is written; a rejected hunk names its file, its number and header, and the line that
 * differs. Every write and deletion names the content it expects to replace (the sha256 read while
 * planning, or "absent"), so a file another process in the sandbox changed meanwhile is not
 * clobbered. If a write fails part-way (a symlink on the path, a full disk, such a conflict), the
 * files already changed are put back as they were.
 */
import { z } from 'zod';
import { CorralError } from '../domain/errors';
import { applyHunks } from './apply-hunks';
import { defineTool, type ToolContext, type ToolOutcome } from './tool';
import { parseUnifiedDiff, type FilePatch } from './unified-diff';
import { checkWorkspacePath } from './workspace-path';

const MAX_FILE_BYTES = 4 * 1024 * 1024;

/** What the patch does to one path: its content before (null: absent) and after (null: deleted); the digest read. */
interface PathState { original: string | null; current: string | null; sha256?: string }

interface Change { mark: 'A' | 'M' | 'D' | 'R'; path: string; from?: string; added: number; removed: number }

class Rejected extends Error {}

function failure(message: string, unchanged = true): ToolOutcome {
  const first = message.split('\n')[0]!;
  return {
    ok: false,
    content: `error: ${message}${unchanged ? '\nNo file was changed.' : ''}`,
    summary: `apply_patch failed: ${first.length > 160 ? `${first.slice(0, 157)}...` : first}`,
  };
}

function isExpected(err: unknown): err is CorralError {
  return err instanceof CorralError && ['path_refused', 'not_found', 'invalid_input', 'limit_exceeded', 'conflict'].includes(err.code);
}

/** Reads a workspace file for patching; null when it does not exist. */
async function load(ctx: ToolContext, path: string): Promise<{ content: string; sha256?: string } | null> {
  try {
    const f = await ctx.sandbox.readFile(path, { maxBytes: MAX_FILE_BYTES, signal: ctx.signal });
    if (f.truncated) throw new Rejected(`${path} is too large to patch (${f.size} bytes; the limit is ${MAX_FILE_BYTES})`);
    return { content: f.content, ...(f.sha256 ? { sha256: f.sha256 } : {}) };
  } catch (err) {
    if (isExpected(err) && (err.code === 'not_found' || /^no such file/i.test(err.message))) return null;
    if (isExpected(err)) throw new Rejected(err.message);
    throw err;
  }
}

function checked(name: string | null, section: FilePatch): string | null {
  if (name === null) return null;
  const p = checkWorkspacePath(name);
  if (!p.ok) throw new Rejected(`${p.reason} (in the file section at line ${section.line} of the patch)`);
  return p.path;
}

/** Works out the new content of every path the patch touches, without writing anything. */
async function plan(ctx: ToolContext, files: FilePatch[]): Promise<{ states: Map<string, PathState>; changes: Change[] }> {
  const states = new Map<string, PathState>();
  const state = async (path: string): Promise<PathState> => {
    let s = states.get(path);
    if (!s) {
      const loaded = await load(ctx, path);
      s = { original: loaded?.content ?? null, current: loaded?.content ?? null, ...(loaded?.sha256 ? { sha256: loaded.sha256 } : {}) };
      states.set(path, s);
    }
    return s;
  };
  const changes: Change[] = [];
  for (const fp of files) {
    const oldPath = checked(fp.oldPath, fp);
    const newPath = checked(fp.newPath, fp);
    const name = newPath ?? oldPath!;
    const source = oldPath === null ? null : await state(oldPath);
    if (oldPath === null && (await state(newPath!)).current !== null) {
      throw new Rejected(`${newPath} already exists, but the patch creates it (from /dev/null); patch it as a change instead`);
    }
    if (source && source.current === null) throw new Rejected(`${oldPath} does not exist (the patch changes it; to create a file, diff it from /dev/null)`);
    const r = applyHunks(source?.current ?? null, fp.hunks);
    if (!r.ok) throw new Rejected(`hunk ${r.hunk} of ${name} (${r.header}) does not apply: ${r.why}`);
    if (newPath === null) {
      if (r.content !== '') {
        const left = r.content.split('\n').length - (r.content.endsWith('\n') ? 1 : 0);
        throw new Rejected(`the patch deletes ${oldPath} but would leave ${left} line(s) in it; its - lines must be the whole file`);
      }
      source!.current = null;
      changes.push({ mark: 'D', path: oldPath!, added: r.added, removed: r.removed });
      continue;
    }
    const target = await state(newPath);
    if (oldPath !== null && oldPath !== newPath) {
      if (target.current !== null) throw new Rejected(`the patch renames ${oldPath} to ${newPath}, which already exists`);
      source!.current = null;
    }
    target.current = r.content;
    const mark = oldPath === null ? 'A' : oldPath !== newPath ? 'R' : 'M';
    changes.push({ mark, path: newPath, ...(mark === 'R' ? { from: oldPath! } : {}), added: r.added, removed: r.removed });
  }
  return { states, changes };
}

/** What a write or deletion of a planned path expects to find there: the content read, or nothing. */
function expected(s: PathState): { expectSha256?: string } {
  if (s.original === null) return { expectSha256: 'absent' };
  return s.sha256 ? { expectSha256: s.sha256 } : {};
}

/** Writes the planned contents, then deletes; on a failure puts back what was already changed. */
async function commit(ctx: ToolContext, states: Map<string, PathState>): Promise<ToolOutcome | null> {
  const writes = [...states].filter(([, s]) => s.current !== null && s.current !== s.original);
  const deletes = [...states].filter(([, s]) => s.current === null && s.original !== null);
  const done: Array<[string, PathState]> = [];
  try {
    for (const entry of writes) {
      await ctx.sandbox.writeFile(entry[0], entry[1].current!, { signal: ctx.signal, ...expected(entry[1]) });
      done.push(entry);
    }
    for (const entry of deletes) {
      await ctx.sandbox.removeFile(entry[0], { signal: ctx.signal, ...expected(entry[1]) });
      done.push(entry);
    }
    return null;
  } catch (err) {
    if (!(err instanceof Rejected) && !isExpected(err)) throw err;
    const failed = (err as Error).message;
    const notRestored: string[] = [];
    for (const [path, s] of done.reverse()) {
      try {
        if (s.original === null) await ctx.sandbox.removeFile(path, { signal: ctx.signal });
        else await ctx.sandbox.writeFile(path, s.original, { signal: ctx.signal });
      } catch (e) {
        if (!(e instanceof Rejected) && !isExpected(e)) throw e;
        notRestored.push(path);
      }
    }
    if (notRestored.length === 0) return failure(failed);
    return failure(`${failed}\nThese files could not be restored and may be left changed: ${notRestored.join(', ')}`, false);
  }
}

function report(changes: Change[]): { content: string; summary: string } {
  const added = changes.reduce((n, c) => n + c.added, 0);
  const removed = changes.reduce((n, c) => n + c.removed, 0);
  const rows = changes.map((c) => `${c.mark} ${c.from ? `${c.from} -> ${c.path}` : c.path} (+${c.added} -${c.removed})`);
  const n = `${changes.length} file${changes.length === 1 ? '' : 's'}`;
  return {
    content: `applied the patch: ${n} changed, +${added} -${removed} lines\n${rows.join('\n')}`,
    summary: `patched ${n} (+${added} -${removed}): ${changes.map((c) => c.path).join(', ')}`,
  };
}

export const applyPatchTool = defineTool({
  name: 'apply_patch',
  description:
    'Apply a unified diff (as `git diff` or `diff -u` print it) to workspace files: several files and hunks at once, ' +
    'new files from /dev/null, deletions to /dev/null, renames. Context and removed lines must match the files exactly ' +
    '(hunks may sit at other line numbers than their headers say). All or nothing: if any hunk does not apply, no file is changed.',
  schema: z.object({ patch: z.string().min(1).max(4 * 1024 * 1024).describe('the unified diff: "--- a/path" / "+++ b/path" headers, then @@ hunks') }).strict(),
  async execute(args, ctx) {
    const parsed = parseUnifiedDiff(args.patch);
    if (!parsed.ok) return failure(`the patch cannot be parsed: ${parsed.error}`);
    if (parsed.files.length === 0) return failure('the patch names no files; expected "--- a/path" / "+++ b/path" headers followed by @@ hunks');
    let planned: Awaited<ReturnType<typeof plan>>;
    try {
      planned = await plan(ctx, parsed.files);
    } catch (err) {
      if (err instanceof Rejected) return failure(err.message);
      throw err;
    }
    const failed = await commit(ctx, planned.states);
    if (failed) return failed;
    return { ok: true, ...report(planned.changes) };
  },
});
