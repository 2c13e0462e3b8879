/**
 * A run that starts from an uploaded workspace (PUT /v1/workspaces → workspace.id), all real: the
 * upload is streamed into the sandbox from the worker's disk, and the run's patch is computed against
 * it without the worker holding it (its small files' content is read back from a spill file only for
 * what changed). Admission refuses ids that are not this tenant's, not kept, or too large for the
 * run; the worker checks the stored tar again, so one planted in the data directory is refused too.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { makeTar, type TarEntry } from '../support/make-tar';

jest.setTimeout(180_000);

const agent = scriptedAgent({
  'UPLOAD-EDIT': [
    toolCallTurn([{ name: 'bash', args: { command: 'sha256sum data/big.bin && find . -type f | wc -l && cat inline.txt && ls -l tools/run.sh | cut -c1-10' } }]),
    toolCallTurn([{ name: 'bash', args: { command: "sed -i 's/^two$/TWO/' src/app.py && rm delete-me.txt && echo fresh > added.txt" } }]),
    finalTurn('edited'),
  ],
  'UPLOAD-LOOK': [toolCallTurn([{ name: 'bash', args: { command: 'ls' } }]), finalTurn('looked')],
});
let h: Harness;

beforeAll(async () => {
  h = await startHarness('upload-run', { chat: agent, decisions: () => decisionsAnswer(0.2, 0.95) });
});
afterAll(async () => {
  await h?.close();
});

async function upload(tarBuf: Buffer): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${h.url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/x-tar' }, body: tarBuf });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const events = (run: Record<string, unknown>) =>
  readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

test('a run starts from a 20 MB upload; its patch is line by line against the upload, deletions included', async () => {
  const big = randomBytes(20 * 1024 * 1024);
  const entries: TarEntry[] = [
    { name: 'src/', type: 'directory' },
    { name: 'src/app.py', body: 'one\ntwo\nthree\n' },
    { name: 'delete-me.txt', body: 'first line\nsecond line\n' },
    { name: 'tools/run.sh', body: '#!/bin/sh\necho hi\n', mode: 0o755 },
    { name: 'data/big.bin', body: big },
  ];
  for (let i = 0; i < 2000; i++) entries.push({ name: `many/d${i % 20}/f${i}.txt`, body: `file ${i}\n` });
  const up = await upload(await makeTar(entries));
  expect(up).toMatchObject({ status: 201, body: { files: 2004, deduplicated: false } });
  const id = up.body.id as string;

  const created = await h.api<{ id: string }>('POST', '/v1/runs', {
    task: 'UPLOAD-EDIT: look at the upload, then edit it',
    workspace: { id, files: { 'inline.txt': 'inline wins\n' } },
  });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: 'edited' });

  // What the sandbox held: the upload (its big file byte for byte, its 2004 files, the executable bit) and the inline file on top.
  const chats = h.fake.requests.filter((r) => r.path === '/v1/chat/completions' && promptText(r.body).includes('UPLOAD-EDIT'));
  const seen = messagesOf(chats[1]!.body).find((m) => m.role === 'tool')?.content ?? '';
  expect(seen).toContain(`${createHash('sha256').update(big).digest('hex')}  data/big.bin`);
  expect(seen).toMatch(/\b2005\b/);
  expect(seen).toContain('inline wins');
  expect(seen).toContain('-rwxr-xr-x');

  // The patch: exactly the three changes, each with its lines (the deleted file's come back from the spill file).
  expect(events(run).find((e) => e.type === 'workspace.changes')).toMatchObject({
    files: [
      { path: 'added.txt', change: 'added', added: 1, removed: 0 },
      { path: 'delete-me.txt', change: 'deleted', added: 0, removed: 2 },
      { path: 'src/app.py', change: 'modified', added: 1, removed: 1 },
    ],
  });
  const patch = readFileSync((run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!.path, 'utf8');
  expect(patch).toContain('-first line\n-second line\n');
  expect(patch).toContain('-two\n+TWO\n');
  expect(patch).not.toContain('big.bin');
  expect(patch).not.toContain('inline.txt'); // the inline file is part of the seed, not a change
  const left = await h.docker.listContainers({ all: true, filters: { label: [`corral.run-id=${created.body.id}`] } });
  expect(left).toEqual([]);
});

test('admission: an id never uploaded, an id with tarBase64, an upload larger than the run\'s workspace — each a 400 naming workspace.id', async () => {
  const never = `ws_${'0'.repeat(64)}`;
  const missing = await h.api<{ error: { message: string; field?: string } }>('POST', '/v1/runs', { task: 'UPLOAD-LOOK: x', workspace: { id: never } });
  expect(missing.status).toBe(400);
  expect(missing.body.error.message).toMatch(new RegExp(`^body: workspace\\.id: no upload ${never} is kept for this tenant`));

  const small = await upload(await makeTar([{ name: 'a.txt', body: 'a' }]));
  const both = await h.api<{ error: { message: string } }>('POST', '/v1/runs', { task: 'UPLOAD-LOOK: x', workspace: { id: small.body.id, tarBase64: '' } });
  expect(both.status).toBe(400);
  expect(both.body.error.message).toMatch(/workspace\.id.*either `id`.*or `tarBase64`/);

  const twoMb = await upload(await makeTar([{ name: 'two.bin', body: randomBytes(2 * 1024 * 1024 + 10) }]));
  expect(twoMb.status).toBe(201);
  const tooBig = await h.api<{ error: { message: string } }>('POST', '/v1/runs', { task: 'UPLOAD-LOOK: x', workspace: { id: twoMb.body.id }, limits: { workspaceMb: 2 } });
  expect(tooBig.status).toBe(400);
  expect(tooBig.body.error.message).toMatch(/^body: workspace\.id: the upload holds 2097162 bytes of files, more than this run's workspace of 2 MB/);
  const fits = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'UPLOAD-LOOK: x', workspace: { id: twoMb.body.id }, limits: { workspaceMb: 3 } });
  expect(fits.status).toBe(201);
  expect(await h.waitFor(fits.body.id)).toMatchObject({ status: 'succeeded' });
});

test('a tar planted in the data directory under an upload id is checked again by the worker: its symlink is refused, nothing runs', async () => {
  // What an attacker with write access to the store would leave there (the API never stores a link).
  const planted = await makeTar([{ name: 'ok.txt', body: 'x' }, { name: 'escape', type: 'symlink', linkname: '/etc/shadow' }]);
  const id = `ws_${createHash('sha256').update(planted).digest('hex')}`;
  const dir = join(h.config.CORRAL_DATA_DIR, 'workspaces', 'default');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, `${id}.tar`), planted);
  writeFileSync(join(dir, `${id}.json`), JSON.stringify({ files: 1, dirs: 0, contentBytes: 1 }));
  const before = h.fake.requests.length;
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'UPLOAD-LOOK: planted', workspace: { id } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id);
  expect(run).toMatchObject({ status: 'error', reason: expect.stringMatching(/archive entry refused: the symbolic link "escape" is not kept: it points to the absolute path \/etc\/shadow, outside the workspace/) });
  expect(h.fake.requests.slice(before).filter((r) => promptText(r.body).includes('planted'))).toEqual([]);
  const left = await h.docker.listContainers({ all: true, filters: { label: [`corral.run-id=${created.body.id}`] } });
  expect(left).toEqual([]);
});
