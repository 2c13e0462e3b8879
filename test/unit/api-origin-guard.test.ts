/**
 * Auth off (issue 38, break 6): a web page the operator visits can neither read the API through DNS
 * rebinding (a Host that is not this API's: 421) nor change state cross-site (Sec-Fetch-Site or
 * Origin of another site: 403); the CLI (no such headers) and the console (same-origin) are
 * unaffected. With auth on, Host is checked only when names are configured; cross-site state
 * changes are still refused. A request that passes the guard reaches validation (400 here).
 */
import { hostName, isLoopbackHost } from '../../src/api/origin-guard';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';

const off = offlineApp({ tokens: null, env: { CORRAL_API_ALLOWED_HOSTS: 'corral.internal,10.0.0.7' } });
const offDefault = offlineApp({ tokens: null });
const on = offlineApp();
afterAll(async () => {
  await Promise.all([off.close(), offDefault.close(), on.close()]);
});

const post = (app: typeof off, headers: Record<string, string>, token?: string) =>
  app.inject({ method: 'POST', url: '/v1/runs', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers }, payload: '{}' });

describe('Host (DNS rebinding)', () => {
  test.each([
    'evil.example', 'evil.example:8080', 'localhost.evil.example', '127.0.0.1.nip.io:8080', 'rebind.attacker.test:80', '169.254.169.254', '0.0.0.0:8080', '[::2]:8080',
  ])('auth off: Host %j is a 421 naming the names it answers to', async (host) => {
    for (const method of ['GET', 'POST'] as const) {
      const r = await offDefault.inject({ method, url: '/v1/runs', headers: { host } });
      expect(r.statusCode).toBe(421);
      expect(r.json()).toMatchObject({ error: { code: 'misdirected_request', message: expect.stringContaining('localhost, 127.0.0.1, [::1]') } });
    }
  });

  test.each(['localhost:8080', 'LOCALHOST', '127.0.0.1', '127.0.0.1:9999', '[::1]:8080', 'corral.internal:8080', '10.0.0.7'])('auth off: Host %j is this API', async (host) => {
    const r = await post(off, { host });
    expect(r.statusCode).toBe(400); // reached validation
  });

  test('a configured name is this API only where configured; health checks answer any Host', async () => {
    expect((await post(offDefault, { host: 'corral.internal' })).statusCode).toBe(421);
    for (const url of ['/healthz', '/readyz']) expect((await offDefault.inject({ method: 'GET', url, headers: { host: 'pod-10-1-2-3' } })).statusCode).not.toBe(421);
  });

  test('auth on: Host is not checked unless names are configured (a token is needed anyway)', async () => {
    expect((await post(on, { host: 'corral.example.com' }, OFFLINE_TOKENS.acme)).statusCode).toBe(400);
  });
});

describe('cross-origin state changes', () => {
  test.each(['cross-site', 'same-site', 'weird'])('Sec-Fetch-Site: %s on a POST is a 403, auth off or on', async (site) => {
    for (const [app, token] of [[off, undefined], [on, OFFLINE_TOKENS.acme]] as const) {
      const r = await post(app, { host: 'localhost:8080', 'sec-fetch-site': site }, token);
      expect(r.statusCode).toBe(403);
      expect(r.json()).toMatchObject({ error: { code: 'cross_origin' } });
    }
    // Cancel, approvals, schedules, uploads: every method that changes state.
    for (const [method, url] of [['POST', '/v1/runs/run_abcdef123/cancel'], ['DELETE', '/v1/schedules/sch_x'], ['PUT', '/v1/workspaces'], ['POST', '/v1/runs/run_abcdef123/approvals/call_1']] as const) {
      expect((await off.inject({ method, url, headers: { host: 'localhost', 'sec-fetch-site': site } })).statusCode).toBe(403);
    }
  });

  test.each(['same-origin', 'none'])('Sec-Fetch-Site: %s passes', async (site) => {
    expect((await post(off, { host: 'localhost:8080', 'sec-fetch-site': site, origin: 'http://localhost:8080' })).statusCode).toBe(400);
  });

  test.each(['http://evil.example', 'http://localhost:8081', 'https://localhost:8080.evil.example', 'null', 'not a url'])('auth off, no Sec-Fetch-Site (an older browser): Origin %j is a 403', async (origin) => {
    const r = await post(off, { host: 'localhost:8080', origin });
    expect(r.statusCode).toBe(403);
    expect(r.json()).toMatchObject({ error: { code: 'cross_origin', message: expect.stringContaining('Origin') } });
  });

  test('auth off: an Origin that is this API passes; the CLI sends no Origin and passes; reads are never refused for their origin', async () => {
    expect((await post(off, { host: 'localhost:8080', origin: 'http://localhost:8080' })).statusCode).toBe(400);
    expect((await post(off, { host: '127.0.0.1:8080' })).statusCode).toBe(400);
    expect((await off.inject({ method: 'GET', url: '/openapi.json', headers: { host: 'localhost', 'sec-fetch-site': 'cross-site' } })).statusCode).toBe(200);
  });
});

test('hostName and isLoopbackHost', () => {
  expect(['localhost:80', '[::1]:8080', 'Example.COM', '10.0.0.7:1'].map(hostName)).toEqual(['localhost', '[::1]', 'example.com', '10.0.0.7']);
  expect(['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost'].every(isLoopbackHost)).toBe(true);
  expect(['0.0.0.0', '::', '10.0.0.7', 'localhost.evil.example', '127.0.0.1.nip.io'].some(isLoopbackHost)).toBe(false);
});
