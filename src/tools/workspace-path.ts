/**
 * The lexical path check the file tools apply before asking the sandbox: a path is relative to
 * /workspace (a leading `/workspace/` is accepted and dropped), never absolute elsewhere, never
 * contains a `..` segment or NUL, and names a file rather than the workspace itself. The same rules
 * the Sandbox adapter applies; the sandbox additionally refuses symlinks that lead out.
 */
export type WorkspacePath = { ok: true; path: string } | { ok: false; reason: string };

export function checkWorkspacePath(input: string): WorkspacePath {
  if (input.includes('\0')) return { ok: false, reason: `path refused: ${JSON.stringify(input)} contains NUL` };
  let p = input;
  if (p === '/workspace' || p.startsWith('/workspace/')) p = p.slice('/workspace'.length);
  else if (p.startsWith('/')) return { ok: false, reason: `path refused: "${input}" is absolute; paths are relative to /workspace` };
  const segs = p.split('/').filter((s) => s !== '' && s !== '.');
  if (segs.includes('..')) return { ok: false, reason: `path refused: "${input}" contains "..", which could leave /workspace` };
  if (segs.length === 0) return { ok: false, reason: `path refused: "${input}" names the workspace itself, not a file` };
  return { ok: true, path: segs.join('/') };
}
