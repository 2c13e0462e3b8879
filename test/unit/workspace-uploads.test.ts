/**
 * Workspace uploads, streamed and checked entry by entry: a good tar (plain or gzip) is stored once per
 * tenant under the SHA-256 of its clean re-pack; every class of bad tar — names that leave the
 * workspace, links and devices, headers that lie about sizes, caps passed mid-stream (content, entry
 * count, a gzip bomb), gzip sent as plain — is refused with a 400 naming the entry, and nothing stays.
 */
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { readFile } from 'node:fs/promises';
import { readCheckedTar } from '../../src/sandbox/archive';
import { loadConfig } from '../../src/config';
import { admitSpec } from '../../src/domain/admit-spec';
import { nameProblem } from '../../src/domain/export-names';
import { RunSpec, WORKSPACE_ID, WorkspacePath } from '../../src/domain/run-spec';
import { WorkspaceUploads, type UploadCaps } from '../../src/workspaces/workspace-uploads';
import { makeTar, type TarEntry } from '../support/make-tar';

const CAPS: UploadCaps = { maxBytes: 1024 * 1024, maxEntries: 100 };
let root: string;
let clock: { now: number };
let store: WorkspaceUploads;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'corral-uploads-'));
  clock = { now: 1_700_000_000_000 };
  store = new WorkspaceUploads(root, 3600, () => clock.now);
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const left = (tenant = 'acme') => {
  try {
    return readdirSync(join(root, tenant));
  } catch {
    return [];
  }
};
const put = (buf: Buffer, o: { gzip?: boolean; caps?: UploadCaps; tenant?: string } = {}) =>
  store.ingest(o.tenant ?? 'acme', Readable.from([buf]), { gzip: o.gzip ?? false, caps: o.caps ?? CAPS });
const GOOD: TarEntry[] = [
  { name: 'src/', type: 'directory' },
  { name: 'src/app.py', body: 'print("hi")\n', mode: 0o644 },
  { name: './run.sh', body: '#!/bin/sh\necho ok\n', mode: 0o755, uname: 'root', uid: 0 },
];

test('a good tar is stored under the hash of its clean re-pack; the same tar (or its gzip) again is the same id', async () => {
  const tarBuf = await makeTar(GOOD);
  const a = await put(tarBuf);
  expect(a).toMatchObject({ files: 2, dirs: 1, deduplicated: false, expiresAt: new Date(clock.now + 3600_000).toISOString() });
  expect(a.id).toMatch(WORKSPACE_ID);
  const found = await store.find('acme', a.id);
  expect(found).toEqual({ path: join(root, 'acme', `${a.id}.tar`), bytes: a.bytes, files: 2, dirs: 1, contentBytes: 12 + 18 });
  const { entries } = await readCheckedTar(await readFile(found!.path));
  expect(entries.map((e) => [e.path, e.type, e.mode, e.data?.toString()])).toEqual([
    ['src', 'dir', 0o755, undefined], ['src/app.py', 'file', 0o644, 'print("hi")\n'], ['run.sh', 'file', 0o755, '#!/bin/sh\necho ok\n'],
  ]);
  clock.now += 1000;
  expect(await put(tarBuf)).toMatchObject({ id: a.id, deduplicated: true, expiresAt: new Date(clock.now + 3600_000).toISOString() });
  expect(await put(gzipSync(tarBuf), { gzip: true })).toMatchObject({ id: a.id, deduplicated: true });
  expect(left().sort()).toEqual([`${a.id}.json`, `${a.id}.tar`]);
});

test('uploads are per tenant; they expire after their TTL and the sweep removes them', async () => {
  const a = await put(await makeTar(GOOD));
  expect(await store.find('globex', a.id)).toBeNull();
  clock.now += 3600_000 - 1;
  expect(await store.find('acme', a.id)).not.toBeNull();
  await put(await makeTar([{ name: 'other.txt', body: 'x' }]), { tenant: 'globex' });
  clock.now += 1;
  expect(await store.find('acme', a.id)).toBeNull(); // expired: gone
  expect(left()).toEqual([]);
  expect(await store.sweep()).toBe(0); // globex's is 1 ms old
  clock.now += 3600_000;
  expect(await store.sweep()).toBe(1);
  expect(left('globex')).toEqual([]);
  await expect(store.find('acme', 'ws_../../etc')).rejects.toMatchObject({ code: 'invalid_input' });
  await expect(store.ingest('../x', Readable.from([Buffer.alloc(0)]), { gzip: false, caps: CAPS })).rejects.toMatchObject({ code: 'invalid_input' });
});

/** A tar whose first header's size field says `size` (checksum fixed), whatever the data is. */
async function lyingSize(size: number, entries: TarEntry[]): Promise<Buffer> {
  const buf = await makeTar(entries);
  buf.write(size.toString(8).padStart(11, '0') + '\0', 124, 12, 'ascii');
  buf.fill(' ', 148, 156);
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += buf[i]!;
  buf.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
  return buf;
}

describe('refused with the entry named, nothing kept', () => {
  test.each([
    ['a name with ..', [{ name: '../escape.txt', body: 'x' }], /"\.\.\/escape\.txt" contains "\.\."/],
    ['.. deeper in', [{ name: 'a/b/../../../x', body: 'x' }], /"a\/b\/\.\.\/\.\.\/\.\.\/x" contains "\.\."/],
    ['an absolute name', [{ name: '/etc/cron.d/x', body: 'x' }], /"\/etc\/cron\.d\/x" is an absolute name/],
    ['a symlink out of the workspace', [{ name: 'link', type: 'symlink', linkname: '/etc/passwd' }], /the symbolic link "link" is not kept: it points to the absolute path \/etc\/passwd/],
    ['a symlink above the workspace', [{ name: 'a/link', type: 'symlink', linkname: '../..' }], /"a\/link" is not kept: it points to \.\.\/\.\., outside the workspace/],
    ['a symlink that climbs after a name', [{ name: 'a/link', type: 'symlink', linkname: 'b/../../..' }], /has "\.\." after a name/],
    ['a symlink then a write through it', [{ name: 'd', type: 'symlink', linkname: 'sub' }, { name: 'd/x', body: 'x' }], /"d\/x" goes through the symbolic link "d"/],
    ['a chain: a link to .. then a link through it', [{ name: 'p/q/up', type: 'symlink', linkname: '..' }, { name: 'p/q/up/esc', type: 'symlink', linkname: '../../x' }], /"p\/q\/up\/esc" goes through the symbolic link "p\/q\/up"/],
    ['a symlink over a directory of the archive', [{ name: 'd/x', body: 'x' }, { name: 'd', type: 'symlink', linkname: 'e' }], /"d" would replace a directory/],
    ['a hard link', [{ name: 'a.txt', body: 'a' }, { name: 'h', type: 'link', linkname: 'a.txt' }], /"h" is a link to "a\.txt"/],
    ['a character device', [{ name: 'null', type: 'character-device', devmajor: 1, devminor: 3 }], /"null" is a character-device/],
    ['a FIFO', [{ name: 'pipe', type: 'fifo' }], /"pipe" is a fifo/],
    // Names that would garble a report or a terminal, or read as something else: the rules of inline files.
    ['a newline in a name', [{ name: 'ok.txt', body: 'x' }, { name: 'a\nb.txt', body: 'x' }], /entry "a\\u000ab\.txt": must not contain control characters/],
    ['an escape sequence in a name', [{ name: 'x\u001b[31m.txt', body: 'x' }], /must not contain control characters/],
    ['a bidi override in a name', [{ name: 'invoice\u202etxt.exe', body: 'x' }], /must not contain C1 control characters or bidirectional overrides/],
    ['a C1 control in a directory name', [{ name: 'd\u0085/f.txt', body: 'x' }], /must not contain C1 control characters/],
  ] as Array<[string, TarEntry[], RegExp]>)('%s', async (_what, entries, message) => {
    await expect(put(await makeTar(entries))).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(message) });
    expect(left()).toEqual([]);
  });

  // Every name the workspace export would later leave out (export-names.ts) is refused at upload, in
  // every spelling a tar can carry it: the ustar name field, a pax path record, raw bytes.
  test.each([
    ['a line separator', 'a\u2028b.txt', /entry "a\\u2028b\.txt": must be a name the workspace export keeps: it contains the control or bidi character U\+2028/],
    ['a paragraph separator in a directory', 'd\u2029/x.txt', /U\+2029/],
    ['a lone surrogate (written as UTF-8, it becomes U+FFFD)', 'x\ud800.txt', /entry "x\ufffd\.txt": must be a name the workspace export keeps: it is not valid UTF-8/],
    ['U+FFFD itself', 'caf\ufffd.txt', /not valid UTF-8/],
    ['a left-to-right mark', 'a\u200eb', /bidirectional/],
    ['an Arabic letter mark', 'a\u061cb', /bidirectional/],
    ['a separator in a long (pax) name', `${'p/'.repeat(60)}\u2028`, /U\+2028/],
  ])('%s', async (_what, name, message) => {
    await expect(put(await makeTar([{ name: 'fine.txt', body: 'x' }, { name, body: 'x' }]))).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(message) });
    expect(left()).toEqual([]);
  });

  test.each([
    ['a CESU-8 surrogate (ED A0 80)', Buffer.from([0x61, 0xed, 0xa0, 0x80])],
    ['a Latin-1 byte (E9)', Buffer.from([0x63, 0x61, 0x66, 0xe9])],
    ['an overlong slash (C0 AF)', Buffer.from([0x61, 0xc0, 0xaf, 0x62])],
  ])('raw name bytes that are not UTF-8: %s', async (_what, bytes) => {
    const buf = await makeTar([{ name: 'placeholder.txt', body: 'x' }]);
    buf.fill(0, 0, 100);
    bytes.copy(buf, 0);
    buf.fill(' ', 148, 156);
    let sum = 0;
    for (let i = 0; i < 512; i++) sum += buf[i]!;
    buf.write(sum.toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
    await expect(put(buf)).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/must be a name the workspace export keeps: it is not valid UTF-8/) });
    expect(left()).toEqual([]);
  });

  test('the class, not the cases: every UTF-16 code unit and every code point the export refuses is refused by the upload rules', () => {
    const missed: string[] = [];
    const probe = (c: string) => {
      const name = `dir/a${c}b.txt`;
      if (nameProblem(name) !== null && WorkspacePath.safeParse(name).success) missed.push(c.codePointAt(0)!.toString(16));
    };
    for (let u = 0; u <= 0xffff; u++) probe(String.fromCharCode(u)); // lone surrogates included
    for (let cp = 0x10000; cp <= 0x10ffff; cp += 97) probe(String.fromCodePoint(cp));
    expect(missed).toEqual([]);
  });

  test('an empty body, a tar of end blocks only, and a tar of only "./" are refused: no entries', async () => {
    for (const buf of [Buffer.alloc(0), Buffer.alloc(1024), await makeTar([{ name: './', type: 'directory' }])]) {
      await expect(put(buf)).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/the tar holds no files or directories/) });
    }
    await expect(put(gzipSync(Buffer.alloc(0)), { gzip: true })).rejects.toMatchObject({ message: expect.stringMatching(/no files or directories/) });
    expect(left()).toEqual([]);
  });

  test('names longer than Linux allows (a pax header can carry megabytes) are refused before any packing, with a bounded message', async () => {
    const long = await put(await makeTar([{ name: `${'a/'.repeat(3000)}x`, body: 'x' }])).catch((e: Error) => e);
    expect(long).toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/a name of 6001 bytes \("a\/a\/.*…"\); at most 4096/) });
    expect((long as Error).message.length).toBeLessThan(600);
    await expect(put(await makeTar([{ name: `dir/${'b'.repeat(300)}`, body: 'x' }]))).rejects.toMatchObject({ message: expect.stringMatching(/has a name segment of 300 bytes; at most 255/) });
    expect(left()).toEqual([]);
  });

  test('headers that lie about sizes: more bytes than come (truncated), more than the rest of the tar, a size past the cap', async () => {
    const whole = await makeTar([{ name: 'big.bin', body: 'x'.repeat(5000) }, { name: 'next.txt', body: 'y' }]);
    await expect(put(whole.subarray(0, 512 + 2048))).rejects.toMatchObject({ message: expect.stringMatching(/ends inside entry "big\.bin"/) });
    await expect(put(await lyingSize(9000, [{ name: 'liar.txt', body: 'short' }, { name: 'after.txt', body: 'z' }]))).rejects.toMatchObject({ message: expect.stringMatching(/entry "liar\.txt"/) });
    await expect(put(await lyingSize(8 * 1024 * 1024, [{ name: 'huge.bin', body: 'tiny' }]))).rejects.toMatchObject({ message: expect.stringMatching(/entry "huge\.bin" \(8388608 bytes\) passes the cap/) });
    expect(left()).toEqual([]);
  });

  test('caps passed mid-stream: content, entries, a gzip bomb, a body past the cap', async () => {
    const small: UploadCaps = { maxBytes: 10_000, maxEntries: 5 };
    await expect(put(await makeTar([{ name: 'a', body: 'x'.repeat(6000) }, { name: 'b', body: 'y'.repeat(6000) }]), { caps: small })).rejects.toMatchObject({ message: expect.stringMatching(/entry "b" \(6000 bytes\) passes the cap of 10000 bytes/) });
    await expect(put(await makeTar(Array.from({ length: 7 }, (_, i) => ({ name: `f${i}`, body: '' }))), { caps: small })).rejects.toMatchObject({ message: expect.stringMatching(/more than 5 entries \(at "f5"\)/) });
    const bomb = gzipSync(Buffer.alloc(64 * 1024 * 1024)); // 64 MiB of zeros, ~65 KB compressed
    await expect(put(bomb, { gzip: true, caps: small })).rejects.toMatchObject({ message: expect.stringMatching(/stream passes \d+ bytes/) });
    await expect(put(Buffer.alloc(20 * 1024 * 1024, 1), { caps: small })).rejects.toMatchObject({ code: 'invalid_input' });
    expect(left()).toEqual([]);
  });

  test('gzip sent as a plain tar, garbage sent as gzip, and not a tar at all', async () => {
    const tarBuf = await makeTar(GOOD);
    await expect(put(gzipSync(tarBuf))).rejects.toMatchObject({ message: expect.stringMatching(/this is gzip data; send it with Content-Type: application\/gzip/) });
    await expect(put(Buffer.from('definitely not gzip'), { gzip: true })).rejects.toMatchObject({ message: expect.stringMatching(/not valid gzip data/) });
    await expect(put(Buffer.from('hello world, this is not a tar'.repeat(40)))).rejects.toMatchObject({ code: 'invalid_input', message: expect.stringMatching(/workspace tar refused/) });
    expect(left()).toEqual([]);
  });
});

describe('a RunSpec naming an upload (admission)', () => {
  const config = loadConfig({});
  const ctx = (tenant: string) => ({ config, policyNames: ['default'], toolNames: ['bash'], tenant, uploads: store });
  const spec = (id: string, limits = {}) => RunSpec.parse({ task: 't', workspace: { id }, limits });

  test('is admitted for its own tenant only, while kept, when it fits the run; admission refreshes its TTL', async () => {
    const a = await put(await makeTar([{ name: 'f.bin', body: 'x'.repeat(300_000) }]));
    const admitted = await admitSpec(spec(a.id), ctx('acme'));
    expect(admitted.upload).toMatchObject({ path: join(root, 'acme', `${a.id}.tar`), files: 1, contentBytes: 300_000 });
    // Another tenant with the same id (it knows it: the hash of a public tar) gets nothing.
    await expect(admitSpec(spec(a.id), ctx('globex'))).rejects.toMatchObject({ field: 'workspace.id', message: expect.stringMatching(/^workspace\.id: no upload ws_[0-9a-f]{64} is kept for this tenant/) });
    await expect(admitSpec(spec(a.id), { ...ctx('acme'), uploads: undefined })).rejects.toMatchObject({ message: 'workspace.id: this server keeps no uploaded workspaces' });
    clock.now += 3000_000;
    await admitSpec(spec(a.id), ctx('acme')); // touched: counts from now
    clock.now += 3000_000;
    expect(await store.find('acme', a.id)).not.toBeNull();
    clock.now += 600_001;
    await expect(admitSpec(spec(a.id), ctx('acme'))).rejects.toMatchObject({ message: expect.stringMatching(/expired after CORRAL_WORKSPACE_TTL_S/) });
  });

  test('an upload whose content passes the run\'s workspaceMb, or whose description is missing or forged, is not admitted', async () => {
    const a = await put(await makeTar([{ name: 'f.bin', body: 'x'.repeat(1024 * 1024 + 1) }]), { caps: { maxBytes: 4 * 1024 * 1024, maxEntries: 10 } });
    await expect(admitSpec(spec(a.id, { workspaceMb: 1 }), ctx('acme'))).rejects.toMatchObject({ message: expect.stringMatching(/holds 1048577 bytes of files, more than this run's workspace of 1 MB/) });
    expect((await admitSpec(spec(a.id, { workspaceMb: 2 }), ctx('acme'))).upload).toBeDefined();
    writeFileSync(join(root, 'acme', `${a.id}.json`), '{"files":1,"dirs":0,"contentBytes":-5}');
    await expect(admitSpec(spec(a.id), ctx('acme'))).rejects.toMatchObject({ field: 'workspace.id' });
    rmSync(join(root, 'acme', `${a.id}.json`));
    await expect(admitSpec(spec(a.id), ctx('acme'))).rejects.toMatchObject({ field: 'workspace.id' });
  });

  test('the schema: an id of another shape, or an id with tarBase64, is refused naming workspace.id', () => {
    for (const id of ['ws_abc', `WS_${'a'.repeat(64)}`, `ws_${'g'.repeat(64)}`, `ws_${'a'.repeat(64)}.tar`, `../ws_${'a'.repeat(64)}`]) {
      const r = RunSpec.safeParse({ task: 't', workspace: { id } });
      expect(r.success ? null : r.error.issues[0]?.path.join('.')).toBe('workspace.id');
    }
    const both = RunSpec.safeParse({ task: 't', workspace: { id: `ws_${'a'.repeat(64)}`, tarBase64: '' } });
    expect(both.success ? null : both.error.issues[0]).toMatchObject({ path: ['workspace', 'id'], message: expect.stringMatching(/either `id`/) });
  });
});
