/**
 * The egress proxy on a real unix socket, with a loopback upstream the test starts. Names map to
 * addresses through an injected resolver; the forbidden-address predicate is relaxed for exactly the
 * upstream's address, and a separate case proves the default predicate refuses loopback.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { EgressAttempt } from '../../src/domain/sandbox';
import { ipLiteral, isForbiddenAddress } from '../../src/sandbox/egress-address';
import { EgressProxy } from '../../src/sandbox/egress-proxy';

describe('ipLiteral: every spelling of an IP address is recognised', () => {
  test.each([
    ['127.0.0.1', '127.0.0.1'],
    ['2130706433', '127.0.0.1'],
    ['0177.0.0.1', '127.0.0.1'],
    ['0x7f000001', '127.0.0.1'],
    ['0x7f.1', '127.0.0.1'],
    ['127.1', '127.0.0.1'],
    ['169.254.169.254', '169.254.169.254'],
    ['[::1]', '::1'],
    ['::ffff:127.0.0.1', '::ffff:127.0.0.1'],
    ['1.2.3.4.', '1.2.3.4'],
  ])('%s', (host, canonical) => expect(ipLiteral(host)).toBe(canonical));
  test('host names are not literals', () => {
    expect(ipLiteral('example.com')).toBeUndefined();
    expect(ipLiteral('1a.example')).toBeUndefined();
    expect(ipLiteral('999.1.1.1')).toBe('?');
  });
});

describe('isForbiddenAddress', () => {
  test.each(['127.0.0.1', '10.1.2.3', '172.17.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '224.0.0.1',
    '::1', '::', 'fd00:ec2::254', 'fe80::1', 'fc00::1', '::ffff:127.0.0.1', '::ffff:7f00:1', '64:ff9b::a00:1', '2002:7f00:1::'])(
    '%s is forbidden', (a) => expect(isForbiddenAddress(a)).toBe(true));
  test.each(['93.184.216.34', '1.1.1.1', '2606:4700::1111'])('%s is allowed', (a) => expect(isForbiddenAddress(a)).toBe(false));
});

describe('EgressProxy', () => {
  let upstream: Server;
  let upstreamPort: number;
  let dir: string;
  let proxy: EgressProxy;
  let sock: string;
  const attempts: EgressAttempt[] = [];
  const names: Record<string, string[]> = {
    'allowed.test': ['127.0.0.1'],
    'api.allowed.test': ['127.0.0.1'],
    'blocked.allowed.test': ['127.0.0.1'],
    'sneaky.allowed.test': ['127.0.0.53'],
    'private.allowed.test': ['10.0.0.7'],
    'meta.allowed.test': ['169.254.169.254'],
  };

  beforeAll(async () => {
    upstream = createServer((req, res) => res.end(`upstream saw ${req.method} ${req.url} host=${req.headers.host}`));
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamPort = (upstream.address() as AddressInfo).port;
    dir = mkdtempSync(join(tmpdir(), 'corral-proxy-test-'));
    sock = join(dir, 'egress.sock');
    proxy = new EgressProxy({
      allow: ['allowed.test', '*.allowed.test', '127.0.0.1', '10.9.9.9'],
      deny: ['blocked.allowed.test'],
      resolve: async (h) => {
        const a = names[h];
        if (!a) throw new Error('ENOTFOUND');
        return a;
      },
      // Only the test upstream's exact address is let through; everything else keeps the default rules.
      isForbiddenAddress: (a) => (a === '127.0.0.1' ? false : isForbiddenAddress(a)),
      connectPorts: [443, upstreamPort],
      httpPorts: [80, upstreamPort],
      onAttempt: (a) => attempts.push(a),
    });
    await proxy.listen(sock);
  });
  afterAll(async () => {
    await proxy.close();
    await new Promise((r) => upstream.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  function viaProxy(absUrl: string): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      const req = request({ socketPath: sock, path: absUrl, method: 'GET', headers: { host: 'x' } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.end();
    });
  }

  function rawConnect(target: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = connect(sock);
      let out = '';
      s.on('data', (c) => {
        out += c.toString();
        if (out.startsWith('HTTP/1.1 200')) {
          s.write(`GET /tunnel HTTP/1.1\r\nHost: ${target}\r\nConnection: close\r\n\r\n`);
        }
      });
      s.on('end', () => resolve(out));
      s.on('error', reject);
      s.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    });
  }

  test('an allowed name reaches the upstream over HTTP, at the address that was checked', async () => {
    const r = await viaProxy(`http://allowed.test:${upstreamPort}/hello?x=1`);
    expect(r.status).toBe(200);
    expect(r.body).toBe(`upstream saw GET /hello?x=1 host=allowed.test:${upstreamPort}`);
    expect(attempts.at(-1)).toMatchObject({ host: 'allowed.test', port: upstreamPort, method: 'GET', decision: 'allow' });
  });

  test('a wildcard entry allows subdomains through a CONNECT tunnel', async () => {
    const out = await rawConnect(`api.allowed.test:${upstreamPort}`);
    expect(out).toMatch(/^HTTP\/1.1 200 Connection Established/);
    expect(out).toContain('upstream saw GET /tunnel');
  });

  test.each([
    ['a name not on the list', 'http://other.test/', /not on the run's egress allowlist/],
    ['deny wins over a wildcard', 'http://blocked.allowed.test/', /deny list/],
    ['a name resolving to loopback', 'http://sneaky.allowed.test/', /resolves to 127\.0\.0\.53/],
    ['a name resolving to a private address', 'http://private.allowed.test/', /resolves to 10\.0\.0\.7/],
    ['a name resolving to the metadata address', 'http://meta.allowed.test/', /169\.254\.169\.254/],
    ['a dotted IP literal', 'http://93.184.216.34/', /IP address literal/],
    ['a decimal IP literal', 'http://2130706433/', /IP address literal \(= 127\.0\.0\.1\)/],
    ['an octal IP literal', 'http://0177.0.0.1/', /IP address literal/],
    ['a shorthand IP literal', 'http://127.1/', /IP address literal/],
    ['an IPv6 literal', 'http://[::1]/', /IP address literal/],
    ['a listed IP that is private', 'http://10.9.9.9/', /private/],
    ['a port that is not allowed', 'http://allowed.test:8081/', /port 8081 is not allowed/],
  ])('refuses %s with a clear message', async (_name, url, reason) => {
    const r = await viaProxy(url);
    expect(r.status).toBeGreaterThanOrEqual(400);
    expect(r.body).toMatch(/^corral egress denied: /);
    expect(r.body).toMatch(reason);
    expect(attempts.at(-1)).toMatchObject({ decision: 'deny', reason: expect.stringMatching(reason) });
  });

  test('CONNECT to a decimal IP, a denied name or a wrong port is refused', async () => {
    expect(await rawConnect('2130706433:443')).toMatch(/^HTTP\/1.1 403[\s\S]*IP address literal/);
    expect(await rawConnect('evil.test:443')).toMatch(/^HTTP\/1.1 403[\s\S]*not on the run's egress allowlist/);
    expect(await rawConnect('allowed.test:22')).toMatch(/^HTTP\/1.1 403[\s\S]*port 22/);
  });

  test('with the default predicate, a name resolving to 127.0.0.1 is refused', async () => {
    const strict = new EgressProxy({ allow: ['allowed.test'], resolve: async () => ['127.0.0.1'], httpPorts: [upstreamPort] });
    const d = await strict.decide('allowed.test', upstreamPort, 'GET');
    expect(d).toMatchObject({ ok: false, reason: expect.stringMatching(/resolves to 127\.0\.0\.1/) });
  });

  test('a wildcard never matches its apex', async () => {
    const p = new EgressProxy({ allow: ['*.example.test'], resolve: async () => ['93.184.216.34'] });
    expect(await p.decide('example.test', 443, 'CONNECT')).toMatchObject({ ok: false });
    expect(await p.decide('a.example.test', 443, 'CONNECT')).toMatchObject({ ok: true, address: '93.184.216.34' });
    expect(await p.decide('aexample.test', 443, 'CONNECT')).toMatchObject({ ok: false });
  });
});
