/** read_file, write_file, edit_file, list_files: workspace files through the Sandbox port. */
import { z } from 'zod';
import { CorralError } from '../domain/errors';
import { defineTool, type ToolOutcome } from './tool';

const Path = z.string().min(1).max(1024).describe('path relative to /workspace');
const MAX_READ_BYTES = 256 * 1024;

/** A refused path or missing file is something the model should see, not a crash. */
async function asOutcome(summary: string, fn: () => Promise<ToolOutcome>): Promise<ToolOutcome> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof CorralError && (err.code === 'path_refused' || err.code === 'invalid_input' || err.code === 'limit_exceeded' || err.code === 'not_found')) {
      return { ok: false, content: `error: ${err.message}`, summary: `${summary}: ${err.message}` };
    }
    throw err;
  }
}

export const readFileTool = defineTool({
  name: 'read_file',
  description: 'Read a text file in the workspace. offset/limit select lines (1-based offset).',
  schema: z
    .object({
      path: Path,
      offset: z.number().int().min(1).optional().describe('first line to return, 1-based'),
      limit: z.number().int().min(1).max(10_000).optional().describe('number of lines to return'),
    })
    .strict(),
  readOnly: true,
  execute: (args, ctx) =>
    asOutcome(`read ${args.path}`, async () => {
      const file = await ctx.sandbox.readFile(args.path, { maxBytes: MAX_READ_BYTES, signal: ctx.signal });
      let text = file.content;
      if (args.offset !== undefined || args.limit !== undefined) {
        const lines = text.split('\n');
        const start = (args.offset ?? 1) - 1;
        text = lines.slice(start, args.limit !== undefined ? start + args.limit : undefined).join('\n');
      }
      const note = file.truncated ? `\n[file is ${file.size} bytes; only the first ${MAX_READ_BYTES} were read]` : '';
      return { ok: true, content: text + note, summary: `read ${args.path} (${file.size} bytes)` };
    }),
});

export const writeFileTool = defineTool({
  name: 'write_file',
  description: 'Create or overwrite a text file in the workspace (parent directories are created).',
  schema: z.object({ path: Path, content: z.string().max(4 * 1024 * 1024) }).strict(),
  readOnly: false,
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
  readOnly: false,
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
      await ctx.sandbox.writeFile(args.path, updated, { signal: ctx.signal });
      return { ok: true, content: `edited ${args.path}`, summary: `edited ${args.path}` };
    }),
});

export const listFilesTool = defineTool({
  name: 'list_files',
  description: 'List files under a workspace directory (recursive, at most 500 entries).',
  schema: z.object({ path: Path.default('.') }).strict(),
  readOnly: true,
  execute: (args, ctx) =>
    asOutcome(`list ${args.path}`, async () => {
      const entries = await ctx.sandbox.listFiles(args.path, { maxEntries: 500, signal: ctx.signal });
      const text = entries.map((e) => `${e.type === 'dir' ? 'd' : e.type === 'symlink' ? 'l' : '-'} ${String(e.size).padStart(9)} ${e.path}`).join('\n');
      return { ok: true, content: text || '(empty)', summary: `listed ${args.path} (${entries.length} entries)` };
    }),
});
