/** `corral submit --workspace DIR`: the directory packed into an uncompressed tar the worker accepts — links inside kept, links that leave and special files skipped, excludes, the size cap, the upload id known before sending. */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { readCheckedTar } from '../../src/sandbox/archive';
import { WorkspaceUploads } from '../../src/workspaces/workspace-uploads';
import { excludeMatcher, packWorkspace, planWorkspace, streamWorkspace, workspaceId, WorkspacePackError } from '../../src/cli/workspace-tar';

interface Unpacked {
  name: string;
  type: string;
  mode: number;
  body: string;
  linkname?: string;
}

async function unpack(buf: Buffer): Promise<Unpacked[]> {
  const out: Unpacked[] = [];
  const extract = tar.extract();
  Readable.from([buf]).pipe(extract);
  for await (const entry of extract) {
    const chunks: Buffer[] = [];
    for await (const c of entry) chunks.push(c as Buffer);
    out.push({ name: entry.header.name, type: entry.header.type ?? 'file', mode: entry.header.mode ?? 0, body: Buffer.concat(chunks).toString(), ...(entry.header.linkname ? { linkname: entry.header.linkname } : {}) });
  }
  return out;
}

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-pack-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function tree(files: Record<string, string>): void {
  for (const [p, body] of Object.entries(files)) {
    mkdirSync(join(dir, p, '..'), { recursive: true });
    writeFileSync(join(dir, p), body);
  }
}

test('files, nested and empty directories and links inside go in; links that leave are skipped and named; the tar unpacks to the same tree', async () => {
  tree({ 'README.md': '# hi\n', 'src/app.py': 'print(1)\n', 'src/pkg/deep/util.py': 'X = 2\n', '.git/HEAD': 'ref: refs/heads/main\n', 'run.sh': '#!/bin/sh\necho ok\n' });
  chmodSync(join(dir, 'run.sh'), 0o755);
  mkdirSync(join(dir, 'empty'));
  symlinkSync('/etc/passwd', join(dir, 'passwd-link'));
  symlinkSync('src', join(dir, 'src-link'));
  symlinkSync('../README.md', join(dir, 'src/readme-link'));
  symlinkSync('../../..', join(dir, 'src/pkg/up-link'));
  symlinkSync('deep/../../../..', join(dir, 'src/pkg/sneaky-link'));

  const packed = await packWorkspace(dir);

  expect(packed.skipped).toEqual([
    { path: 'passwd-link', why: 'a symbolic link that is not kept: it points to the absolute path /etc/passwd, outside the workspace' },
    { path: 'src/pkg/sneaky-link', why: 'a symbolic link that is not kept: its target deep/../../../.. has ".." after a name; only leading ".." segments are kept' },
    { path: 'src/pkg/up-link', why: 'a symbolic link that is not kept: it points to ../../.., outside the workspace' },
  ]);
  expect(packed).toMatchObject({ files: 5, dirs: 5, links: 2, excluded: [] });
  expect(packed.bytes).toBe(5 + 9 + 6 + 21 + 18);

  const entries = await unpack(packed.tar);
  expect(entries.map((e) => `${e.type} ${e.name}`)).toEqual([
    'directory .git/', 'file .git/HEAD',
    'file README.md',
    'directory empty/',
    'file run.sh',
    'directory src/', 'file src/app.py', 'directory src/pkg/', 'directory src/pkg/deep/', 'file src/pkg/deep/util.py', 'symlink src/readme-link',
    'symlink src-link',
  ]);
  const byName = Object.fromEntries(entries.map((e) => [e.name, e]));
  expect(byName['src/pkg/deep/util.py']!.body).toBe('X = 2\n');
  expect(byName['.git/HEAD']!.body).toBe('ref: refs/heads/main\n');
  expect(byName['run.sh']!.mode).toBe(0o755);
  expect(byName['README.md']!.mode).toBe(0o644);
  expect(entries.filter((e) => e.type === 'symlink').map((e) => [e.name, e.linkname])).toEqual([['src/readme-link', '../README.md'], ['src-link', 'src']]);

  // The worker's strict archive check (links that leave refused) accepts it as is.
  const checked = await readCheckedTar(packed.tar);
  expect(checked.entries.filter((e) => e.type === 'file').map((e) => e.path).sort()).toEqual(['.git/HEAD', 'README.md', 'run.sh', 'src/app.py', 'src/pkg/deep/util.py']);
  expect(checked.entries.filter((e) => e.type === 'symlink').map((e) => [e.path, e.linkname])).toEqual([['src/readme-link', '../README.md'], ['src-link', 'src']]);
});

test('special files (a FIFO) are skipped like links that leave', async () => {
  tree({ 'a.txt': 'a' });
  execFileSync('mkfifo', [join(dir, 'pipe')]);
  const packed = await packWorkspace(dir);
  expect(packed.skipped).toEqual([{ path: 'pipe', why: 'FIFO' }]);
  expect((await unpack(packed.tar)).map((e) => e.name)).toEqual(['a.txt']);
});

test('--exclude: names match at any depth, patterns with "/" match the whole path; excluded directories are not entered', async () => {
  tree({
    '.git/HEAD': 'x', 'node_modules/a/index.js': 'x', 'src/node_modules/b.js': 'x', 'src/main.ts': 'x', 'debug.log': 'x', 'src/trace.log': 'x',
    'build/out.o': 'x', 'build/keep.txt': 'x', 'docs/a/b/c.md': 'x', 'docs/top.md': 'x',
  });
  const packed = await packWorkspace(dir, { exclude: ['.git', 'node_modules/', '*.log', 'build/*.o', 'docs/**/c.md'] });
  expect(packed.excluded.sort()).toEqual(['.git', 'build/out.o', 'debug.log', 'docs/a/b/c.md', 'node_modules', 'src/node_modules', 'src/trace.log']);
  expect((await unpack(packed.tar)).filter((e) => e.type === 'file').map((e) => e.name)).toEqual(['build/keep.txt', 'docs/top.md', 'src/main.ts']);
});

test('excludeMatcher: *, ? and ** semantics', () => {
  const m = excludeMatcher(['*.pyc', 'a/?/x', 'deep/**/leaf', './dist/']);
  expect(m('x/y/z.pyc')).toBe(true);
  expect(m('z.pyc.txt')).toBe(false);
  expect(m('a/b/x')).toBe(true);
  expect(m('a/bb/x')).toBe(false);
  expect(m('deep/1/2/3/leaf')).toBe(true);
  expect(m('deep/leaf')).toBe(true);
  expect(m('dist')).toBe(true);
  expect(m('src/dist')).toBe(true);
});

test('over the cap: a clear error naming the largest entries and what to exclude', async () => {
  tree({ 'small.txt': 'x' });
  mkdirSync(join(dir, 'data'));
  writeFileSync(join(dir, 'data/big.bin'), Buffer.alloc(300 * 1024, 1));
  writeFileSync(join(dir, 'medium.bin'), Buffer.alloc(100 * 1024, 1));
  const err = await packWorkspace(dir, { maxBytes: 256 * 1024 }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(WorkspacePackError);
  expect((err as Error).message).toMatch(/packs to about 40\d KiB, over the 256 KiB the API accepts \(largest: data 30\d KiB, medium\.bin 10\d KiB, small\.txt 1 KiB\); leave parts out with --exclude, e.g\. --exclude data$/);
  // Excluding the big part makes it fit.
  const ok = await packWorkspace(dir, { maxBytes: 256 * 1024, exclude: ['data'] });
  expect(ok.files).toBe(2);
  expect(ok.tar.length).toBeLessThanOrEqual(256 * 1024);
});

test('the default cap is the API\'s 8 MiB', async () => {
  writeFileSync(join(dir, 'huge.bin'), Buffer.alloc(8 * 1024 * 1024, 1));
  await expect(packWorkspace(dir)).rejects.toThrow(/over the 8\.0 MiB the API accepts/);
});

test('too many entries, a missing directory, a file instead of a directory', async () => {
  tree({ 'a': '1', 'b': '2', 'c': '3' });
  await expect(packWorkspace(dir, { maxEntries: 2 })).rejects.toThrow(/more than 2 files and directories; leave some out with --exclude/);
  await expect(packWorkspace(join(dir, 'nope'))).rejects.toThrow(/nope does not exist/);
  await expect(packWorkspace(join(dir, 'a'))).rejects.toThrow(/a is not a directory/);
});

test('the id a client computes before sending is the id the server gives the upload (so a kept directory is never sent again)', async () => {
  tree({ 'a.txt': 'a\n', [`${'long-name-'.repeat(12)}/${'x'.repeat(120)}.txt`]: 'pax\n', 'bin/tool': '#!/bin/sh\n', 'node_modules/vite/bin/vite.js': 'x' });
  chmodSync(join(dir, 'bin/tool'), 0o755);
  mkdirSync(join(dir, 'node_modules/.bin'));
  symlinkSync('../vite/bin/vite.js', join(dir, 'node_modules/.bin/vite'));
  const plan = await planWorkspace(dir);
  const id = await workspaceId(plan);
  const root = mkdtempSync(join(tmpdir(), 'corral-upload-id-'));
  try {
    const stored = await new WorkspaceUploads(root, 3600, () => Date.now()).ingest('acme', streamWorkspace(plan), { gzip: false, caps: { maxBytes: 1 << 20, maxEntries: 100 } });
    expect(stored.id).toBe(id);
    // A file changed: another id.
    writeFileSync(join(dir, 'a.txt'), 'b\n');
    expect(await workspaceId(await planWorkspace(dir))).not.toBe(id);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
