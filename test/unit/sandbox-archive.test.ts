/** Archive checks: only files and dirs under the target; `..`, absolute, links, gzip and caps refused. */
import * as tar from 'tar-stream';
import { normaliseWorkspacePath, packTar, readCheckedTar } from '../../src/sandbox/archive';
import { makeTar } from '../support/make-tar';

test('normal files and dirs pass, names normalised', async () => {
  const buf = await makeTar([{ name: './src/', type: 'directory' }, { name: './src/a.py', body: 'print(1)\n' }]);
  const { entries } = await readCheckedTar(buf);
  expect(entries.map((e) => [e.path, e.type])).toEqual([['src', 'dir'], ['src/a.py', 'file']]);
  expect(entries[1]!.data!.toString()).toBe('print(1)\n');
});

test.each([
  ['..', [{ name: '../evil', body: 'x' }], /contains "\.\."/],
  ['nested ..', [{ name: 'a/../../evil', body: 'x' }], /contains "\.\."/],
  ['absolute', [{ name: '/etc/cron.d/x', body: 'x' }], /absolute/],
  ['symlink out', [{ name: 'link', type: 'symlink' as const, linkname: '/etc' }, { name: 'link/passwd', body: 'x' }], /symbolic link "link" is not kept/],
  ['symlink inside, then an entry through it', [{ name: 'link', type: 'symlink' as const, linkname: 'src' }, { name: 'link/passwd', body: 'x' }], /goes through the symbolic link "link"/],
  ['hard link', [{ name: 'h', type: 'link' as const, linkname: '/etc/shadow' }], /link/],
  ['device', [{ name: 'dev', type: 'character-device' as const }], /character-device/],
])('%s entries are refused', async (_n, entries, msg) => {
  const buf = await makeTar(entries as Array<Partial<tar.Header> & { name: string; body?: string }>);
  await expect(readCheckedTar(buf)).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(msg) });
});

test('symbolic links that stay inside are kept (node_modules/.bin), and packTar keeps them', async () => {
  const buf = await makeTar([
    { name: 'node_modules/vite/bin/vite.js', body: '#!/usr/bin/env node\n' },
    { name: 'node_modules/.bin/vite', type: 'symlink', linkname: '../vite/bin/vite.js' },
    { name: 'self', type: 'symlink', linkname: '.' },
    { name: 'a/b/root', type: 'symlink', linkname: '../..' },
  ] as Array<Partial<tar.Header> & { name: string; body?: string }>);
  const { entries } = await readCheckedTar(buf);
  expect(entries.filter((e) => e.type === 'symlink').map((e) => [e.path, e.linkname])).toEqual([['node_modules/.bin/vite', '../vite/bin/vite.js'], ['self', '.'], ['a/b/root', '../..']]);
  const again = await readCheckedTar(await packTar(entries));
  expect(again.entries.map((e) => [e.path, e.type, e.linkname ?? null])).toEqual(entries.map((e) => [e.path, e.type, e.linkname ?? null]));
});

test('caps on bytes and entries', async () => {
  const buf = await makeTar([{ name: 'a', body: 'x'.repeat(100) }, { name: 'b', body: 'y' }]);
  await expect(readCheckedTar(buf, { maxBytes: 50, maxEntries: 10 })).rejects.toMatchObject({ code: 'limit_exceeded' });
  await expect(readCheckedTar(buf, { maxBytes: 1000, maxEntries: 1 })).rejects.toMatchObject({ code: 'limit_exceeded' });
});

test('compressed archives are refused', async () => {
  await expect(readCheckedTar(Buffer.from([0x1f, 0x8b, 8, 0]))).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/compressed/) });
});

test('packTar round-trips checked entries', async () => {
  const buf = await packTar([{ path: 'd', type: 'dir', mode: 0o755 }, { path: 'd/x', type: 'file', mode: 0o644, data: Buffer.from('hi') }]);
  const { entries } = await readCheckedTar(buf);
  expect(entries.map((e) => e.path)).toEqual(['d', 'd/x']);
});

test('normaliseWorkspacePath', () => {
  expect(normaliseWorkspacePath('./a//b/')).toBe('a/b');
  expect(normaliseWorkspacePath('/workspace/a')).toBe('a');
  expect(normaliseWorkspacePath('.')).toBe('');
  expect(() => normaliseWorkspacePath('/etc/passwd')).toThrow(/absolute/);
  expect(() => normaliseWorkspacePath('a/../../b')).toThrow(/\.\./);
});
