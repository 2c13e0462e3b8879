/**
 * A client that trickles a request (a workspace upload sent a few bytes at a time, or headers never
 * finished) cannot hold a connection and a temporary file forever: past CORRAL_API_REQUEST_TIMEOUT_S
 * the API answers 408 and closes; the partial upload is removed. A real listening server, raw sockets.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkspaceUploads } from '../../src/workspaces/workspace-uploads';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';
import { eventually } from '../support/eventually';

jest.setTimeout(20_000);

let root: string;
let app: ReturnType<typeof offlineApp>;
let port: number;
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'corral-uploads-'));
  app = offlineApp({ env: { CORRAL_API_REQUEST_TIMEOUT_S: '2' }, uploads: new WorkspaceUploads(root, 3600) });
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  await app.close();
  rmSync(root, { recursive: true, force: true });
});

/**
 * Opens a socket, writes `head`, then a byte every 300 ms (the trickle: it makes time pass for the
 * server's request timer); resolves with what came back once the server closed.
 */
function trickle(head: string): Promise<{ answer: string }> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect(port, '127.0.0.1', () => s.write(head));
    let answer = '';
    const drip = setInterval(() => s.writable && s.write('a'), 300);
    s.on('data', (d) => (answer += d.toString()));
    s.on('error', () => undefined);
    s.on('close', () => {
      clearInterval(drip);
      resolve({ answer });
    });
    setTimeout(() => reject(new Error(`the server kept the connection for 15 s; it answered: ${answer}`)), 15_000).unref();
  });
}

test('an upload trickled byte by byte gets 408 and is dropped; its temporary file does not stay', async () => {
  const r = await trickle(`PUT /v1/workspaces HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${OFFLINE_TOKENS.acme}\r\ncontent-type: application/x-tar\r\ncontent-length: 100000000\r\n\r\n`);
  expect(r.answer).toMatch(/^HTTP\/1\.1 408 /); // only the request timer answers 408: the trickle never ends
  await eventually(() => readdirSync(join(root, 'acme')), { what: 'the partial upload to be removed', until: (files) => files.length === 0, timeoutMs: 5000 });
});

test('headers that never end get 408 too', async () => {
  const r = await trickle('GET /openapi.json HTTP/1.1\r\nhost: x\r\nx-slow: ');
  expect(r.answer).toMatch(/^HTTP\/1\.1 408 /);
});

test('a request sent in time is answered as usual', async () => {
  const res = await fetch(`http://127.0.0.1:${port}/openapi.json`);
  expect(res.status).toBe(200);
});
