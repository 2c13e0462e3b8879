/**
 * workspace.patch applies: for each kind of change the diff model meets (text, CRLF, a byte-order
 * mark, no final newline, empty files, modes, binary files added, changed and deleted, names git
 * quotes, a text file that turns binary), the patch of one tree against another, applied by the real
 * `git apply` to the first tree, gives the second byte for byte — and `git apply -R` takes it back.
 * A change the patch cannot carry (new content over 1 MiB) is left out and says why.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gitBlobId, literalHunk } from '../../src/sandbox/git-binary-patch';
import { diffFile, MAX_DIFF_BYTES, sideOf, type FileSide } from '../../src/sandbox/workspace-diff';

type Tree = Record<string, { data: Buffer; mode?: number }>;

const f = (text: string | Buffer, mode = 0o644) => ({ data: Buffer.isBuffer(text) ? text : Buffer.from(text), mode });

function patchOf(before: Tree, after: Tree): { text: string; notInPatch: string[] } {
  const paths = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  const side = (t: Tree, p: string): FileSide | null => (t[p] ? sideOf(t[p].data, t[p].mode ?? 0o644) : null);
  const sections = paths.map((p) => diffFile(p, side(before, p), side(after, p))).filter((d) => d !== null);
  return { text: sections.map((d) => d.text).join(''), notInPatch: sections.filter((d) => d.change.notInPatch).map((d) => d.change.path) };
}

function write(dir: string, t: Tree): void {
  mkdirSync(dir, { recursive: true });
  for (const [p, { data, mode }] of Object.entries(t)) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    writeFileSync(join(dir, p), data);
    chmodSync(join(dir, p), mode ?? 0o644);
  }
}

function read(dir: string, rel = ''): Record<string, { data: string; exec: boolean }> {
  const out: Record<string, { data: string; exec: boolean }> = {};
  for (const name of readdirSync(join(dir, rel))) {
    const p = rel ? `${rel}/${name}` : name;
    const st = statSync(join(dir, p));
    if (st.isDirectory()) Object.assign(out, read(dir, p));
    else out[p] = { data: readFileSync(join(dir, p)).toString('base64'), exec: (st.mode & 0o111) !== 0 };
  }
  return out;
}

const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GIT_CONFIG_NOSYSTEM: '1', HOME: cwd } });

let root: string;
beforeEach(() => { root = mkdtempSync(join(tmpdir(), 'corral-patch-apply-')); });
afterEach(() => rmSync(root, { recursive: true, force: true }));

function expectApplies(before: Tree, after: Tree): string {
  const { text } = patchOf(before, after);
  const dir = join(root, 'tree');
  write(dir, before);
  writeFileSync(join(root, 'p.patch'), text);
  git(dir, 'apply', '--check', join(root, 'p.patch'));
  git(dir, 'apply', join(root, 'p.patch'));
  const want = join(root, 'want');
  write(want, after);
  expect(read(dir)).toEqual(read(want));
  // And back: the reverse hunks give the first tree again.
  git(dir, 'apply', '-R', join(root, 'p.patch'));
  const was = join(root, 'was');
  write(was, before);
  expect(read(dir)).toEqual(read(was));
  return text;
}

const png = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]), randomBytes(3000)]);

test.each<[string, Tree, Tree]>([
  ['a text edit', { 'a.py': f('def f():\n    return 1\n') }, { 'a.py': f('def f():\n    return 2\n') }],
  ['CRLF lines', { 'w.txt': f('a\r\nb\r\nc\r\n') }, { 'w.txt': f('a\r\nB\r\nc\r\n') }],
  ['a byte-order mark kept', { 'bom.txt': f('\ufeffone\ntwo\n') }, { 'bom.txt': f('\ufeffone\n2\n') }],
  ['no newline at the end', { 'n.txt': f('x\ny') }, { 'n.txt': f('x\nz') }],
  ['an empty file added and another emptied', { 'e.txt': f('gone\n') }, { 'e.txt': f(''), 'new-empty': f('') }],
  ['modes', { 'run.sh': f('echo\n'), 'x.sh': f('x\n', 0o755) }, { 'run.sh': f('echo\n', 0o755), 'x.sh': f('y\n', 0o644), 'new.sh': f('#!/bin/sh\n', 0o755) }],
  ['a binary file added', {}, { 'img/logo.png': f(png) }],
  ['a binary file changed', { 'img/logo.png': f(png) }, { 'img/logo.png': f(Buffer.concat([png, randomBytes(100)])) }],
  ['a binary file deleted', { 'img/logo.png': f(png), 'keep.txt': f('k\n') }, { 'keep.txt': f('k\n') }],
  ['a binary file made executable and changed', { 'tool.bin': f(png) }, { 'tool.bin': f(randomBytes(500), 0o755) }],
  ['incompressible binary content of many lines', {}, { 'noise.bin': f(randomBytes(200_000)) }],
  ['text that becomes binary, and back', { 'a.dat': f('text\n'), 'b.dat': f(Buffer.from([0, 1, 2])) }, { 'a.dat': f(Buffer.from([0, 1, 2])), 'b.dat': f('text\n') }],
  ['names git quotes', { 'my "q".txt': f('a\n'), 'sp ace.txt': f('a\n') }, { 'my "q".txt': f('b\n'), 'sp ace.txt': f('b\n'), 'back\\slash.bin': f(Buffer.from([0, 9])) }],
  ['unicode names', { 'café/naïve.md': f('a\n') }, { 'café/naïve.md': f('b\n'), '日本語.bin': f(Buffer.from([0, 255])) }],
])('%s: git apply on the first tree gives the second exactly', (_name, before, after) => {
  expectApplies(before, after);
});

test('a binary section is what git writes: the full index line and literal hunks of git base85', () => {
  const text = expectApplies({ 'x.bin': f(Buffer.from([0, 1, 2, 3])) }, { 'x.bin': f(Buffer.from([0, 1, 2, 3, 4])) });
  expect(text).toBe([
    'diff --git a/x.bin b/x.bin',
    `index ${gitBlobId(Buffer.from([0, 1, 2, 3]))}..${gitBlobId(Buffer.from([0, 1, 2, 3, 4]))} 100644`,
    'GIT binary patch',
    literalHunk(Buffer.from([0, 1, 2, 3, 4])).trimEnd(),
    '',
    literalHunk(Buffer.from([0, 1, 2, 3])).trimEnd(),
    '', '',
  ].join('\n'));
  // git's own id for the same bytes.
  const dir = join(root, 'ids');
  mkdirSync(dir);
  writeFileSync(join(dir, 'x'), Buffer.from([0, 1, 2, 3, 4]));
  expect(git(dir, 'hash-object', 'x').toString().trim()).toBe(gitBlobId(Buffer.from([0, 1, 2, 3, 4])));
});

test('new content over 1 MiB is not in the patch: the change says so, and the rest still applies', () => {
  const big = randomBytes(MAX_DIFF_BYTES + 1);
  const before: Tree = { 'a.txt': f('1\n'), 'big.bin': f(png) };
  const after: Tree = { 'a.txt': f('2\n'), 'big.bin': f(big) };
  const { text, notInPatch } = patchOf(before, after);
  expect(notInPatch).toEqual(['big.bin']);
  expect(text).not.toContain('big.bin');
  const dir = join(root, 'tree');
  write(dir, before);
  writeFileSync(join(root, 'p.patch'), text);
  git(dir, 'apply', join(root, 'p.patch'));
  expect(readFileSync(join(dir, 'a.txt'), 'utf8')).toBe('2\n');
});

test('a large old side with only its id at hand still gives an applying patch (forward hunk only)', () => {
  const oldBig = randomBytes(MAX_DIFF_BYTES + 10);
  const before: FileSide = { sha256: 'x'.repeat(64), gitId: gitBlobId(oldBig), size: oldBig.length, mode: 0o644 };
  const small = Buffer.from([0, 7, 7]);
  const d = diffFile('blob.bin', before, sideOf(small, 0o644))!;
  const gone = diffFile('gone.bin', before, null)!;
  const dir = join(root, 'tree');
  write(dir, { 'blob.bin': f(oldBig), 'gone.bin': f(oldBig) });
  writeFileSync(join(root, 'p.patch'), d.text + gone.text);
  git(dir, 'apply', join(root, 'p.patch'));
  expect(readdirSync(dir)).toEqual(['blob.bin']);
  expect(readFileSync(join(dir, 'blob.bin'))).toEqual(small);
});

test('a text change too costly to diff line by line is one hunk replacing the file: text, counted, and it applies', () => {
  const before = Array.from({ length: 20_000 }, (_, i) => `line ${i} of the old file`).join('\n');
  const after = `${Array.from({ length: 20_000 }, (_, i) => `LINE ${i} OF THE NEW FILE`).join('\n')}\n`;
  const d = diffFile('big.txt', sideOf(Buffer.from(before), 0o644), sideOf(Buffer.from(after), 0o644))!;
  expect(d.change).toMatchObject({ added: 20_000, removed: 20_000 });
  expect(d.change.binary).toBeUndefined();
  expect(d.text).toMatch(/^diff --git a\/big\.txt b\/big\.txt\n--- a\/big\.txt\n\+\+\+ b\/big\.txt\n@@ -1,20000 \+1,20000 @@\n-line 0 of the old file\n/);
  expect(d.text).toContain('-line 19999 of the old file\n\\ No newline at end of file\n+LINE 0 OF THE NEW FILE\n');
  expectApplies({ 'big.txt': f(before) }, { 'big.txt': f(after) });
});
