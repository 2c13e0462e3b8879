/**
 * `corral submit --workspace` of a large directory streams its tar to PUT /v1/workspaces: a file that
 * vanishes or changes size after the walk ends the upload with a WorkspacePackError naming it (not a
 * crash of the CLI, not "cannot reach the API"). Against a real HTTP server on loopback.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiClient } from '../../src/cli/api-client';
import { planWorkspace, streamWorkspace, WorkspacePackError } from '../../src/cli/workspace-tar';

let server: Server;
let url: string;
let dir: string;
beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end(JSON.stringify({ id: `ws_${'0'.repeat(64)}`, bytes: 0, files: 0, deduplicated: false, expiresAt: 'x' })));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'corral-wsstream-'));
  writeFileSync(join(dir, 'a.bin'), Buffer.alloc(3_000_000, 1));
  writeFileSync(join(dir, 'b.txt'), 'ten bytes!');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

test('a whole directory streams and the answer comes back', async () => {
  await expect(new ApiClient(url).uploadWorkspace(streamWorkspace(await planWorkspace(dir)))).resolves.toMatchObject({ id: expect.stringMatching(/^ws_/) });
});

test.each([
  ['removed', (p: string) => rmSync(p), /cannot read .*b\.txt \(ENOENT\)/],
  ['grown', (p: string) => writeFileSync(p, 'many more bytes than ten'), /b\.txt changed size while it was being uploaded/],
  ['shrunk', (p: string) => writeFileSync(p, 'two'), /b\.txt changed size while it was being uploaded/],
])('a file %s after the walk ends the upload with a WorkspacePackError naming it', async (_what, change, message) => {
  const plan = await planWorkspace(dir);
  change(join(dir, 'b.txt'));
  const err = await new ApiClient(url).uploadWorkspace(streamWorkspace(plan)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(WorkspacePackError);
  expect((err as Error).message).toMatch(message);
});
