/**
 * indexSeedFile: a large seed on disk is checked and indexed while streamed; content of files small
 * enough to diff waits in an unlinked spill file and comes back byte for byte; nothing is left on disk.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gitBlobId } from '../../src/sandbox/git-binary-patch';
import { indexSeedFile } from '../../src/sandbox/seed-file';
import { MAX_DIFF_BYTES } from '../../src/sandbox/workspace-diff';
import { makeTar, type TarEntry } from '../support/make-tar';

let dir: string;
let spillRoot: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-seedfile-'));
  spillRoot = mkdtempSync(join(tmpdir(), 'corral-spill-'));
});
afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(spillRoot, { recursive: true, force: true });
});

async function tarFile(entries: TarEntry[]): Promise<string> {
  const p = join(dir, 'seed.tar');
  writeFileSync(p, await makeTar(entries));
  return p;
}
const caps = { maxBytes: 8 * 1024 * 1024, maxEntries: 100 };

test('sides carry digest, size and mode; small files load back exactly, large ones are only hashed; no file stays', async () => {
  const mid = randomBytes(300_000);
  const large = randomBytes(MAX_DIFF_BYTES + 1);
  const idx = await indexSeedFile(await tarFile([
    { name: 'd/', type: 'directory' }, { name: 'd/a.txt', body: 'alpha\n' }, { name: 'mid.bin', body: mid },
    { name: 'run.sh', body: '#!/bin/sh\n', mode: 0o755 }, { name: 'large.bin', body: large }, { name: 'empty', body: '' },
    { name: 'd/a.txt', body: 'later wins\n' },
  ]), caps, spillRoot);
  expect(readdirSync(spillRoot)).toEqual([]); // the spill file was unlinked at once
  expect({ files: idx.files, dirs: idx.dirs, bytes: idx.bytes }).toEqual({ files: 6, dirs: 1, bytes: 6 + mid.length + 10 + large.length + 0 + 11 });
  expect(await idx.sides.get('d/a.txt')!.load!()).toEqual(Buffer.from('later wins\n'));
  expect(await idx.sides.get('mid.bin')!.load!()).toEqual(mid);
  expect(await idx.sides.get('empty')!.load!()).toEqual(Buffer.alloc(0));
  expect(idx.sides.get('run.sh')).toMatchObject({ mode: 0o755, size: 10 });
  expect(idx.sides.get('large.bin')).toEqual({ sha256: createHash('sha256').update(large).digest('hex'), gitId: gitBlobId(large), size: large.length, mode: 0o644 });
  await idx.close();
  await expect(idx.sides.get('mid.bin')!.load!()).rejects.toThrow(/closed/);
});

test.each([
  ['a symlink out of the workspace', [{ name: 'ok', body: 'x' }, { name: 'l', type: 'symlink', linkname: '/etc/shadow' }], /the symbolic link "l" is not kept: it points to the absolute path/],
  ['an entry through a symlink', [{ name: 'l', type: 'symlink', linkname: 'd' }, { name: 'l/x', body: 'x' }], /"l\/x" goes through the symbolic link "l"/],
  ['a .. name', [{ name: 'a/../../x', body: 'x' }], /contains "\.\."/],
  ['a device', [{ name: 'zero', type: 'character-device', devmajor: 1, devminor: 5 }], /is a character-device/],
  ['a bidi name', [{ name: 'a\u202eb', body: 'x' }], /bidirectional overrides/],
  ['content past the cap', [{ name: 'a', body: 'x'.repeat(600) }, { name: 'b', body: 'y'.repeat(600) }], /more than 1000 bytes of file content \(at "b"\)/],
  ['entries past the cap', Array.from({ length: 4 }, (_, i) => ({ name: `f${i}`, body: '' })), /more than 3 entries/],
] as Array<[string, TarEntry[], RegExp]>)('refuses %s, and leaves nothing', async (_w, entries, message) => {
  await expect(indexSeedFile(await tarFile(entries), { maxBytes: 1000, maxEntries: 3 }, spillRoot)).rejects.toMatchObject({ message: expect.stringMatching(message) });
  expect(readdirSync(spillRoot)).toEqual([]);
});

test('a file that is not a tar, or is cut inside an entry, is refused', async () => {
  const p = join(dir, 'junk.tar');
  writeFileSync(p, Buffer.from('not a tar at all '.repeat(100)));
  await expect(indexSeedFile(p, caps, spillRoot)).rejects.toMatchObject({ code: 'path_refused' });
  const whole = await makeTar([{ name: 'big', body: 'x'.repeat(5000) }]);
  writeFileSync(p, whole.subarray(0, 2048));
  await expect(indexSeedFile(p, caps, spillRoot)).rejects.toMatchObject({ code: 'path_refused' });
});
