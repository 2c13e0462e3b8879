/** Which files a workspace patch (git-style unified diff) changes, with added/removed line counts. */
export interface FileChange {
  path: string;
  change: 'added' | 'modified' | 'deleted';
  added: number;
  removed: number;
}

export function patchChanges(patch: string): FileChange[] {
  const out: FileChange[] = [];
  let cur: FileChange | undefined;
  for (const line of patch.split('\n')) {
    const head = /^diff --git a\/(.+) b\/(.+)$/.exec(line);
    if (head) {
      cur = { path: head[2]!, change: 'modified', added: 0, removed: 0 };
      out.push(cur);
    } else if (!cur) continue;
    else if (line.startsWith('new file mode')) cur.change = 'added';
    else if (line.startsWith('deleted file mode')) cur.change = 'deleted';
    else if (line.startsWith('+++ ') || line.startsWith('--- ')) continue;
    else if (line.startsWith('+')) cur.added += 1;
    else if (line.startsWith('-')) cur.removed += 1;
  }
  return out;
}
