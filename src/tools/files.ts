/** read_file, write_file, edit_file, list_files: workspace files through the Sandbox port. */
import { z } from 'zod';
import { CorralError } from '../domain/errors';
import type { FileContent } from '../domain/sandbox';
import { defineTool, type ToolOutcome } from './tool';

const Path = z.string().min(1).max(1024).describe('path relative to /workspace');
const MAX_READ_BYTES = 256 * 1024;
const DEFAULT_READ_LINES = 2000;

/** A refused path or missing file is something the model should see, not a crash. */
async function asOutcome(summary: string, fn: () => Promise<ToolOutcome>): Promise<ToolOutcome> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CorralError && (err.code === 'path_refused' || err.code === 'invalid_input' || err.code === 'limit_exceeded' || err.code === 'not_found' || err.code === 'conflict')) {
      return { ok: false, content: `error: ${err.message}`, summary: `${summary}: ${err.message}` };
    }
    throw err;
  }
}

export const readFileTool = defineTool({
  name: 'read_file',
  description:
    `Read a text file in the workspace. Lines come numbered like \`cat -n\` (line number, a tab, the line; the prefix is not part of the file). ` +
    `offset (1-based) and limit select lines; at most ${DEFAULT_READ_LINES} lines are returned unless limit says otherwise, and a note says how to read on.`,
  schema: z
    .object({
      path: Path,
      offset: z.number().int().min(1).optional().describe('first line to return, 1-based'),
      limit: z.number().int().min(1).max(10_000).optional().describe(`number of lines to return (default ${DEFAULT_READ_LINES})`),
    })
    .strict(),
  execute: (args, ctx) =>
    asOutcome(`read ${args.path}`, async () => {
      const file = await ctx.sandbox.readFile(args.path, { maxBytes: MAX_READ_BYTES, signal: ctx.signal });
      return numberedLines(args.path, file, args.offset ?? 1, args.limit ?? DEFAULT_READ_LINES);
    }),
});

/** `cat -n` style lines offset..offset+limit-1, with a note when the file goes on past them. */
function numberedLines(path: string, file: FileContent, offset: number, limit: number): ToolOutcome {
  const summary = `read ${path} (${file.size} bytes)`;
  const lines = file.content.split('\n');
  // A cut read may end inside a line: drop that partial line unless it is the only one.
  if (file.truncated ? lines.length > 1 : lines[lines.length - 1] === '') lines.pop();
  const total = lines.length;
  const cut = file.truncated ? ` (only the first ${MAX_READ_BYTES} of its ${file.size} bytes were read)` : '';
  const beyond = `use bash (e.g. sed -n '${total + 1},${total + DEFAULT_READ_LINES}p' ${path}) for lines past ${total}`;
  if (total === 0) return { ok: true, content: `[${path} is empty]`, summary };
  if (offset > total) {
    const msg = `offset ${offset} is past the end of ${path}, which has ${total} line${total === 1 ? '' : 's'}${cut}${file.truncated ? `; ${beyond}` : ''}`;
    return { ok: false, content: `error: ${msg}`, summary: `${summary}: offset past the end` };
  }
  const end = Math.min(total, offset - 1 + limit);
  const body = lines.slice(offset - 1, end).map((l, i) => `${String(offset + i).padStart(6)}\t${l}`).join('\n');
  let note = '';
  if (end < total) note = `\n[lines ${offset}-${end} of ${file.truncated ? 'at least ' : ''}${total}${cut}; use offset=${end + 1} to read on]`;
  else if (file.truncated) note = `\n[lines ${offset}-${end} shown; the file goes on${cut}; ${beyond}]`;
  return { ok: true, content: body + note, summary };
}

export const writeFileTool = defineTool({
  name: 'write_file',
  description: 'Create or overwrite a text file in the workspace (parent directories are created).',
  schema: z.object({ path: Path, content: z.string().max(4 * 1024 * 1024) }).strict(),
  execute: (args, ctx) =>
    asOutcome(`write ${args.path}`, async () => {
      await ctx.sandbox.writeFile(args.path, args.content, { signal: ctx.signal });
      const bytes = Buffer.byteLength(args.content);
      return { ok: true, content: `wrote ${bytes} bytes to ${args.path}`, summary: `wrote ${args.path} (${bytes} bytes)` };
    }),
});

export const editFileTool = defineTool({
  name: 'edit_file',
  description: 'Replace one exact occurrence of `old` with `new` in a workspace file. `old` must occur exactly once.',
  schema: z.object({ path: Path, old: z.string().min(1), new: z.string() }).strict(),
  execute: (args, ctx) =>
    asOutcome(`edit ${args.path}`, async () => {
      const file = await ctx.sandbox.readFile(args.path, { maxBytes: 4 * 1024 * 1024, signal: ctx.signal });
      if (file.truncated) return { ok: false, content: `error: ${args.path} is too large to edit (${file.size} bytes)`, summary: `edit ${args.path}: too large` };
      const count = file.content.split(args.old).length - 1;
      if (count !== 1) {
        const msg = count === 0 ? '`old` was not found' : `\`old\` occurs ${count} times; include more context so it is unique`;
        return { ok: false, content: `error: ${msg} in ${args.path}`, summary: `edit ${args.path}: ${msg}` };
      }
      const idx = file.content.indexOf(args.old);
      const updated = file.content.slice(0, idx) + args.new + file.content.slice(idx + args.old.length);
      // Refused (conflict) if something else in the sandbox changed the file since it was read.
      await ctx.sandbox.writeFile(args.path, updated, { signal: ctx.signal, ...(file.sha256 ? { expectSha256: file.sha256 } : {}) });
      return { ok: true, content: `edited ${args.path}`, summary: `edited ${args.path}` };
    }),
});

export const listFilesTool = defineTool({
  name: 'list_files',
  description: 'List files under a workspace directory (recursive, at most 500 entries).',
  schema: z.object({ path: Path.default('.') }).strict(),
  execute: (args, ctx) =>
    asOutcome(`list ${args.path}`, async () => {
      const entries = await ctx.sandbox.listFiles(args.path, { maxEntries: 500, signal: ctx.signal });
      const text = entries.map((e) => `${e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'l' : '-'} ${String(e.size).padStart(9)} ${e.path}`).join('\n');
      return { ok: true, content: text || '(empty)', summary: `listed ${args.path} (${entries.length} entries)` };
    }),
});
