/**
 * The egress proxy applies the current call's network expectation (run/effect-guard.ts): `open` goes
 * on under the allowlist, `refuse` answers 403 before any upstream connection, `hold` parks the
 * connection until the worker releases it — and a held connection whose call ended is refused. The
 * proxy runs in-process on a real unix socket; the upstream is a recording server on loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEgressEntry, type EgressEntry } from '../../src/domain/egress-rules';
import { forbiddenRangeChecker } from '../../src/sandbox/egress-address';
import { EgressProxy, type HeldConnection } from '../../src/sandbox/egress-proxy';
import type { TallyOut } from '../../src/sandbox/egress-tally';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';
import { eventually } from '../support/eventually';

let up: RecordingUpstream;
let dir: string;
let n = 0;
beforeAll(async () => {
  up = await startRecordingUpstream();
  dir = mkdtempSync(join(tmpdir(), 'corral-expect-'));
});
afterAll(async () => {
  await up.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(): Promise<{ proxy: EgressProxy; sock: string; out: TallyOut[]; held: HeldConnection[] }> {
  const out: TallyOut[] = [];
  const held: HeldConnection[] = [];
  const proxy = new EgressProxy({
    allow: [parseEgressEntry(`allowed.test:${up.port}`) as EgressEntry],
    resolve: async () => ['127.0.0.1'],
    forbidden: forbiddenRangeChecker([], ['127.0.0.1']),
    caps: { maxConnections: 16, connectionsPerS: 1000, requestsPerS: 1000, maxBytesOut: 1e9, maxBytesIn: 1e9, wildcardResolvesPerS: 10, wildcardMaxNames: 10, idleTimeoutMs: 30_000 },
    report: (m) => out.push(m),
    onHold: (h) => held.push(h),
  });
  const sock = join(dir, `e${n++}.sock`);
  await proxy.listen(sock);
  return { proxy, sock, out, held };
}

/** Opens a CONNECT tunnel; resolves with the proxy's answer head and the socket. */
function tunnel(sock: string): { answer: Promise<string>; socket: Socket } {
  const socket = connect(sock);
  const answer = new Promise<string>((resolve) => {
    let got = '';
    socket.on('data', (c) => {
      got += c.toString('latin1');
      if (got.includes('\r\n\r\n')) resolve(got);
    });
    socket.on('close', () => resolve(got));
    socket.on('error', () => undefined);
  });
  socket.write(`CONNECT allowed.test:${up.port} HTTP/1.1\r\nHost: allowed.test:${up.port}\r\n\r\n`);
  return { answer, socket };
}

test('refuse: a call predicted to use no network gets 403 and the upstream hears nothing', async () => {
  const p = await start();
  up.reset();
  p.proxy.setCall('call_1', 'refuse');
  const t = tunnel(p.sock);
  expect(await t.answer).toMatch(/^HTTP\/1\.1 403[\s\S]*predicted no network use/);
  t.socket.destroy();
  p.proxy.tally.flush();
  expect(p.out.find((m) => m.kind === 'attempt')).toMatchObject({ attempt: { code: 'unpredicted', decision: 'deny', callId: 'call_1' } });
  expect(up.raw.join('')).toBe('');
  await p.proxy.close();
});

test('no call running: refused too, and the reason says so', async () => {
  const p = await start();
  p.proxy.setCall(null, 'refuse');
  const t = tunnel(p.sock);
  expect(await t.answer).toMatch(/no tool call is running/);
  t.socket.destroy();
  await p.proxy.close();
});

test('hold: the connection waits; released, it goes through; refused, it is 403', async () => {
  const p = await start();
  up.reset();
  p.proxy.setCall('call_2', 'hold');
  const a = tunnel(p.sock);
  const h1 = await eventually(() => p.held[0], { what: 'the first hold' });
  expect(h1).toMatchObject({ callId: 'call_2', host: 'allowed.test', port: up.port, method: 'CONNECT' });
  expect(up.raw.join('')).toBe('');
  p.proxy.release(h1.id, true);
  expect(await a.answer).toMatch(/^HTTP\/1\.1 200 Connection Established/);
  a.socket.write('GET /approved HTTP/1.1\r\nHost: allowed.test\r\n\r\n');
  await eventually(() => up.requests.find((r) => r.url === '/approved'), { what: 'the approved request upstream' });
  a.socket.destroy();

  const b = tunnel(p.sock);
  const h2 = await eventually(() => p.held[1], { what: 'the second hold' });
  p.proxy.release(h2.id, false);
  expect(await b.answer).toMatch(/^HTTP\/1\.1 403[\s\S]*held and not approved/);
  b.socket.destroy();
  await p.proxy.close();
});

test('a connection still held when its call ends is refused', async () => {
  const p = await start();
  p.proxy.setCall('call_3', 'hold');
  const a = tunnel(p.sock);
  await eventually(() => p.held[0], { what: 'the hold' });
  p.proxy.setCall(null, 'refuse');
  expect(await a.answer).toMatch(/^HTTP\/1\.1 403/);
  a.socket.destroy();
  await p.proxy.close();
});

test('plain HTTP is held and refused the same way', async () => {
  const p = await start();
  up.reset();
  p.proxy.setCall('call_4', 'refuse');
  const s = connect(p.sock);
  const got = new Promise<string>((resolve) => {
    let t = '';
    s.on('data', (c) => (t += c.toString('latin1')));
    s.on('close', () => resolve(t));
  });
  s.write(`POST http://allowed.test:${up.port}/leak HTTP/1.1\r\nHost: allowed.test:${up.port}\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret`);
  expect(await got).toMatch(/^HTTP\/1\.1 403/);
  expect(up.requests).toEqual([]);
  await p.proxy.close();
});
