/**
 * Git's binary patch format, so that workspace.patch carries binary changes that `git apply` applies
 * (instead of a `Binary files … differ` line that makes it fail): the blob id git checks the preimage
 * against (SHA-1 of `blob SIZE\0` + content), and `GIT binary patch` hunks — the zlib-deflated
 * content in git's base85, one line per 52 bytes, a length character first — as git's diff.c
 * (emit_binary_diff_body) and apply.c (parse_binary) read them. Only `literal` hunks: the forward one
 * holds the new content, the reverse one (when the old content is at hand) the old, so `git apply -R`
 * works too.
 */
import { createHash } from 'node:crypto';
import { deflateSync } from 'node:zlib';

/** git's blob id of `data`: what an `index OLD..NEW` line names. */
export function gitBlobId(data: Buffer): string {
  return createHash('sha1').update(`blob ${data.length}\0`).update(data).digest('hex');
}

/** A running blob id, for content that arrives in chunks (its size must be known first). */
export function gitBlobHasher(size: number): { update(chunk: Buffer): void; digest(): string } {
  const h = createHash('sha1').update(`blob ${size}\0`);
  return { update: (c) => void h.update(c), digest: () => h.digest('hex') };
}

export const NULL_BLOB_ID = '0'.repeat(40);

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~';

/** git's base85 of up to 52 bytes: 5 characters per 4 bytes (big-endian), the last group zero-padded. */
function base85(chunk: Buffer): string {
  let out = '';
  for (let i = 0; i < chunk.length; i += 4) {
    let acc = 0;
    for (let j = 0; j < 4; j++) acc = acc * 256 + (i + j < chunk.length ? chunk[i + j]! : 0);
    let group = '';
    for (let k = 0; k < 5; k++) {
      group = ALPHABET[acc % 85]! + group;
      acc = Math.floor(acc / 85);
    }
    out += group;
  }
  return out;
}

/** One `literal SIZE` hunk: the content deflated, in lines of at most 52 bytes, then a blank line. */
export function literalHunk(data: Buffer): string {
  const z = deflateSync(data);
  const lines = [`literal ${data.length}`];
  for (let i = 0; i < z.length; i += 52) {
    const part = z.subarray(i, i + 52);
    const n = part.length;
    lines.push(`${n <= 26 ? String.fromCharCode(64 + n) : String.fromCharCode(96 + n - 26)}${base85(part)}`);
  }
  return `${lines.join('\n')}\n\n`;
}

/**
 * The body of a binary section after its `diff --git` and mode lines: the full `index` line (git
 * refuses a binary patch without one) and the hunks. `after` null: the file is deleted (the forward
 * hunk is empty); `before` null: it is new. `beforeData` is the old content for the reverse hunk,
 * when it is at hand. `mode` is the git mode when it is the same on both sides (it then ends the
 * index line, as git writes it).
 */
export function binaryBody(o: { beforeId: string | null; afterId: string | null; after: Buffer | null; beforeData?: Buffer | null; mode?: string }): string {
  const index = `index ${o.beforeId ?? NULL_BLOB_ID}..${o.afterId ?? NULL_BLOB_ID}${o.mode ? ` ${o.mode}` : ''}\n`;
  const forward = literalHunk(o.after ?? Buffer.alloc(0));
  const reverse = o.beforeId === null ? literalHunk(Buffer.alloc(0)) : o.beforeData ? literalHunk(o.beforeData) : '';
  return `${index}GIT binary patch\n${forward}${reverse}`;
}
