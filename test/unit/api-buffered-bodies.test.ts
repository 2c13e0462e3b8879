/**
 * Bodies the API buffers whole (JSON) count against CORRAL_API_MAX_BUFFERED_MB for the process and a
 * quarter of it per tenant while they are read and handled (issue 38, break 2): a tenant holding its
 * quarter with bodies it sends slowly gets a 429 naming the cap for the next, another tenant is still
 * served, and the bytes are given back when a request ends. A real listening server, raw sockets.
 */
import { connect, type AddressInfo, type Socket } from 'node:net';
import { BufferedBodies } from '../../src/api/request-guards';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';
import { eventually } from '../support/eventually';

let app: ReturnType<typeof offlineApp>;
let port: number;
beforeAll(async () => {
  app = offlineApp({ env: { CORRAL_API_MAX_BUFFERED_MB: '1' } }); // 1 MiB in all, 256 KiB per tenant
  await app.listen({ host: '127.0.0.1', port: 0 });
  port = (app.server.address() as AddressInfo).port;
});
afterAll(() => app.close());

/** A POST of `declared` bytes of which `send` are sent now; resolves with the socket and what came back so far. */
async function post(token: string, declared: number, send: number): Promise<{ sock: Socket; answer: () => string }> {
  const sock = connect(port, '127.0.0.1');
  let answer = '';
  sock.on('data', (d) => (answer += d.toString()));
  sock.on('error', () => undefined);
  await new Promise<void>((r) => sock.once('connect', () => r()));
  const body = `{"task":"${'x'.repeat(Math.max(0, declared - 12))}"}`;
  sock.write(`POST /v1/runs HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer ${token}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`);
  sock.write(body.slice(0, send));
  return { sock, answer: () => answer };
}

test('a tenant past its quarter gets 429 naming the cap; another tenant is served; the bytes come back when a request ends', async () => {
  const holder = await post(OFFLINE_TOKENS.acme, 250_000, 200_000); // 200 KB held, not finished
  const second = await post(OFFLINE_TOKENS.acme, 100_000, 100_000);
  await eventually(() => second.answer(), { what: 'the second body of acme to be refused', until: (a) => a.startsWith('HTTP/1.1 429') });
  expect(second.answer()).toContain('"limit":"body_bytes_per_tenant"');
  expect(second.answer()).toContain('CORRAL_API_MAX_BUFFERED_MB');
  // globex has its own quarter: its (invalid) body reaches validation.
  const other = await post(OFFLINE_TOKENS.globex, 100_000, 100_000);
  await eventually(() => other.answer(), { what: 'globex to be answered', until: (a) => a.startsWith('HTTP/1.1 ') });
  expect(other.answer()).toMatch(/^HTTP\/1\.1 400/);
  holder.sock.destroy();
  const third = await eventually(async () => {
    const p = await post(OFFLINE_TOKENS.acme, 100_000, 100_000);
    const a = await eventually(() => p.answer(), { what: 'an answer', until: (x) => x.startsWith('HTTP/1.1 ') });
    p.sock.destroy();
    return a;
  }, { what: 'acme\'s bytes to come back', until: (a) => a.startsWith('HTTP/1.1 400') });
  expect(third).toMatch(/^HTTP\/1\.1 400/);
  for (const s of [second.sock, other.sock]) s.destroy();
});

test('BufferedBodies: the process cap holds across tenants; release gives back exactly what was held', () => {
  const b = new BufferedBodies(1000);
  const holds = ['a', 'b', 'c', 'd'].map((t) => b.hold(t));
  for (const h of holds) expect(h.add(240)).toBeNull();
  expect(b.hold('e').add(100)).toMatchObject({ limit: 'body_bytes_global', max: 1000 });
  expect(holds[0]!.add(20)).toMatchObject({ limit: 'body_bytes_per_tenant', max: 250 });
  holds[0]!.release();
  holds[0]!.release(); // twice: no effect
  expect(b.stats()).toEqual({ total: 720, byTenant: { b: 240, c: 240, d: 240 } });
  expect(b.hold('e').add(100)).toBeNull();
});
