/**
 * A git-style unified diff of the exported workspace against its seed, computed on the host from two
 * in-memory file maps. The baseline is kept by the worker (never inside the sandbox, where the agent
 * could rewrite it). Binary or very large files are reported as differing, not diffed.
 */
import { createTwoFilesPatch } from 'diff';

const MAX_DIFF_FILE_BYTES = 1024 * 1024;

function isText(b: Buffer): boolean {
  return b.length <= MAX_DIFF_FILE_BYTES && !b.subarray(0, 8000).includes(0);
}

export function workspacePatch(seed: ReadonlyMap<string, Buffer>, current: ReadonlyMap<string, Buffer>): string {
  const paths = [...new Set([...seed.keys(), ...current.keys()])].sort();
  const out: string[] = [];
  for (const p of paths) {
    const before = seed.get(p);
    const after = current.get(p);
    if (before && after && before.equals(after)) continue;
    const header = [`diff --git a/${p} b/${p}`];
    if (!before) header.push('new file mode 100644');
    if (!after) header.push('deleted file mode 100644');
    const a = before ? `a/${p}` : '/dev/null';
    const b = after ? `b/${p}` : '/dev/null';
    if ((before && !isText(before)) || (after && !isText(after))) {
      out.push(...header, `Binary files ${a} and ${b} differ`);
      continue;
    }
    const text = createTwoFilesPatch(a, b, before?.toString('utf8') ?? '', after?.toString('utf8') ?? '', undefined, undefined, { context: 3 });
    const lines = text.split('\n');
    if (lines[0]?.startsWith('====')) lines.shift();
    if (lines[lines.length - 1] === '') lines.pop();
    if (lines.length <= 2) continue; // no hunks (e.g. both empty)
    out.push(...header, ...lines);
  }
  return out.length ? `${out.join('\n')}\n` : '';
}
