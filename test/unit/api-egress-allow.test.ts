/**
 * egress.allow at submit (app.inject, no Redis): IP literals in every spelling, localhost, private-use
 * names and metadata addresses are a 400 naming the entry; with CORRAL_EGRESS_WILDCARDS=false a
 * wildcard entry is too. (The worker parses job data with the same schema and the same check.)
 */
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';

type ErrorBody = { error: { code: string; message: string; field?: string; issues?: Array<{ path: Array<string | number>; message: string }> } };

async function post(app: ReturnType<typeof offlineApp>, allow: string[]): Promise<{ status: number; body: ErrorBody }> {
  const res = await app.inject({
    method: 'POST', url: '/v1/runs', headers: { authorization: `Bearer ${OFFLINE_TOKENS.acme}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ task: 'fetch something', egress: { allow } }),
  });
  return { status: res.statusCode, body: JSON.parse(res.body) as ErrorBody };
}

const app = offlineApp();
const noWild = offlineApp({ env: { CORRAL_EGRESS_WILDCARDS: 'false' } });
beforeAll(() => Promise.all([app.ready(), noWild.ready()]));
afterAll(() => Promise.all([app.close(), noWild.close()]));

test.each([
  ['169.254.169.254', /IP address literal/], ['2130706433', /IP address literal \(= 127\.0\.0\.1\)/], ['0x7f.1', /IP address literal/], ['[::1]', /IPv6 address literal/],
  ['[::ffff:169.254.169.254]:80', /IPv6 address literal/], ['localhost', /single-label/], ['api.localhost:8080', /\.localhost/], ['metadata.google.internal', /\.internal/],
])('%s is a 400 naming egress.allow.1', async (entry, why) => {
  const r = await post(app, ['pypi.org', entry]);
  expect(r.status).toBe(400);
  expect(r.body.error.field).toBe('egress.allow.1');
  expect(r.body.error.message).toMatch(why);
  expect(r.body.error.message).toContain(entry.toLowerCase());
});

test('with CORRAL_EGRESS_WILDCARDS=false a wildcard is a 400 naming it', async () => {
  const r = await post(noWild, ['pypi.org', '*.pythonhosted.org']);
  expect(r.status).toBe(400);
  expect(r.body.error.field).toBe('egress.allow.1');
  expect(r.body.error.message).toMatch(/wildcard entries are turned off on this server \(CORRAL_EGRESS_WILDCARDS=false\)/);
});
