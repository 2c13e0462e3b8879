/**
 * The API's front door without Redis (app.inject over stand-ins that throw when touched): 401 on every
 * route that needs a token, bad input answered with 400 naming every offending path, 413 for large
 * bodies, uploaded workspace tars checked at submit, and the OpenAPI document covering every route.
 */
import { gzipSync } from 'node:zlib';
import { makeTar, type TarEntry } from '../support/make-tar';
import { OFFLINE_TOKENS, offlineApp } from '../support/offline-api';

/** The tar as the REST body carries it (workspace.tarBase64). */
const tarAsBase64 = async (entries: TarEntry[]): Promise<string> => (await makeTar(entries)).toString('base64');

type ErrorBody = { error: { code: string; message: string; field?: string; issues?: Array<{ path: Array<string | number>; message: string }> } };

const app = offlineApp({ env: { CORRAL_API_MAX_BODY_BYTES: String(64 * 1024) } });
beforeAll(() => app.ready());
afterAll(() => app.close());

async function call(method: string, url: string, o: { token?: string | null; auth?: string; body?: unknown; headers?: Record<string, string> } = {}) {
  const token = o.token === undefined ? OFFLINE_TOKENS.acme : o.token;
  const res = await app.inject({
    method: method as 'GET', url,
    headers: {
      ...(o.auth ? { authorization: o.auth } : token ? { authorization: `Bearer ${token}` } : {}),
      ...(o.body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...o.headers,
    },
    ...(o.body !== undefined ? { payload: typeof o.body === 'string' ? o.body : JSON.stringify(o.body) } : {}),
  });
  let body: unknown = res.body;
  try {
    body = JSON.parse(res.body);
  } catch {
    /* text */
  }
  return { status: res.statusCode, headers: res.headers, body: body as ErrorBody, text: res.body };
}

const concrete = (url: string) => url.replace(':id', 'run_abcdef123').replace(':callId', 'call_1');

describe('auth', () => {
  test('every route but /healthz, /readyz, /openapi.json and /docs answers 401 JSON without a valid token', async () => {
    const guarded = app.routeDocs.filter((d) => !d.public);
    expect(guarded.length).toBe(21);
    expect(app.routeDocs.filter((d) => d.public).map((d) => d.url).sort()).toEqual(['/docs', '/healthz', '/openapi.json', '/readyz', '/ui', '/ui/console.css', '/ui/console.js', '/ui/icon.svg']);
    for (const d of guarded) {
      for (const [how, o] of [
        ['no header', { token: null }],
        ['wrong token', { token: 'not-a-valid-token-at-all' }],
        ['other scheme', { auth: `Basic ${Buffer.from(`acme:${OFFLINE_TOKENS.acme}`).toString('base64')}` }],
        ['token of a different length', { token: 'x' }],
      ] as const) {
        const r = await call(d.method, concrete(d.url), { ...o, ...(d.method === 'POST' ? { body: {} } : {}) });
        expect({ route: `${d.method} ${d.url}`, how, status: r.status, code: r.body.error?.code }).toEqual({ route: `${d.method} ${d.url}`, how, status: 401, code: 'unauthorized' });
        expect(r.headers['www-authenticate']).toBe('Bearer realm="corral"');
        expect(r.text).not.toContain(OFFLINE_TOKENS.acme);
      }
    }
  });

  test('401 messages say what to send; an unknown route is 401 without a token and 404 with one', async () => {
    expect((await call('GET', '/v1/runs', { token: null })).body.error.message).toMatch(/Authorization: Bearer <token>/);
    expect((await call('GET', '/v1/runs', { auth: 'Bearer' })).body.error.message).toMatch(/must be "Bearer <token>"/);
    expect((await call('GET', '/v1/runs', { token: 'wrong-token-wrong-token' })).body.error.message).toBe('the bearer token is not valid');
    expect((await call('GET', '/v2/nothing', { token: null })).status).toBe(401);
    expect(await call('GET', '/v2/nothing')).toMatchObject({ status: 404, body: { error: { code: 'not_found', message: 'no route GET /v2/nothing' } } });
  });

  test('the public documents need no token and do not touch Redis', async () => {
    const doc = await call('GET', '/openapi.json', { token: null });
    expect(doc.status).toBe(200);
    const page = await call('GET', '/docs', { token: null });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
  });
});

describe('OpenAPI', () => {
  test('/openapi.json documents every route Fastify registered, with parameters, bodies and responses', async () => {
    const doc = (await call('GET', '/openapi.json', { token: null })).body as unknown as {
      openapi: string; paths: Record<string, Record<string, { parameters: Array<{ name: string; in: string }>; requestBody?: unknown; responses: Record<string, unknown>; security?: unknown[] }>>;
      components: { schemas: { RunSpec: { properties: Record<string, { description?: string }> } } };
    };
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths).flatMap(([p, ms]) => Object.keys(ms).map((m) => `${m.toUpperCase()} ${p.replace(/\{(\w+)\}/g, ':$1')}`)).sort();
    expect(documented).toEqual([...app.registeredRoutes].sort());
    expect(documented).toEqual(expect.arrayContaining([
      'POST /v1/runs', 'GET /v1/runs', 'GET /v1/runs/:id', 'GET /v1/runs/:id/events', 'GET /v1/runs/:id/report', 'GET /v1/runs/:id/logs',
      'GET /v1/runs/:id/artifacts/workspace.tar', 'GET /v1/runs/:id/artifacts/patch', 'POST /v1/runs/:id/approvals/:callId',
      'POST /v1/runs/:id/cancel', 'POST /v1/runs/:id/replay', 'GET /healthz', 'GET /readyz', 'GET /metrics', 'GET /openapi.json', 'GET /docs',
    ]));
    const submit = doc.paths['/v1/runs']!.post!;
    expect(submit.requestBody).toEqual({ required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/RunSpec' } } } });
    expect(submit.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header' }));
    expect(Object.keys(submit.responses).sort()).toEqual(['200', '201', '400', '401', '409', '413', '415', '429', '503']);
    expect(doc.paths['/v1/runs']!.get!.parameters.map((p) => p.name).sort()).toEqual(['cursor', 'limit', 'status']);
    expect(doc.paths['/v1/runs/{id}/approvals/{callId}']!.post!.parameters.map((p) => `${p.in}:${p.name}`)).toEqual(['path:id', 'path:callId']);
    expect(doc.paths['/healthz']!.get!.security).toEqual([]);
    expect(doc.paths['/metrics']!.get!.security).toBeUndefined();
    const spec = doc.components.schemas.RunSpec.properties;
    expect(Object.keys(spec)).toEqual(expect.arrayContaining(['task', 'workspace', 'policy', 'approvals', 'egress', 'limits', 'budgets', 'labels']));
    expect(spec.task!.description).toMatch(/NUL is refused/);
  });

  test('/docs renders every endpoint as HTML, without scripts or outside links', async () => {
    const page = (await call('GET', '/docs', { token: null })).text;
    for (const r of app.routeDocs) expect(page).toContain(`${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`);
    expect(page).not.toMatch(/<script|https?:\/\/(?!json-schema)/);
    expect(page).toContain('<a href="/openapi.json">');
  });
});

describe('bad input: 400 with every issue and its path', () => {
  const post = (body: unknown, headers?: Record<string, string>) => call('POST', '/v1/runs', { body, ...(headers ? { headers } : {}) });

  test('all zod issues are listed, each with its path; field names the first', async () => {
    const r = await post({ task: '', budgets: { llmCalls: 'many', toolCalls: -1 }, egress: { allow: ['*'] }, surprise: 1, workspace: { files: { '../x': 'a' }, extra: true } });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe('invalid_input');
    const paths = r.body.error.issues!.map((i) => i.path.join('.'));
    expect(paths.sort()).toEqual(['budgets.llmCalls', 'budgets.toolCalls', 'egress.allow.0', 'surprise', 'task', 'workspace.extra', 'workspace.files.../x'].sort());
    expect(r.body.error.issues).toContainEqual({ path: ['surprise'], message: 'unknown field (not in the schema)' });
    expect(r.body.error.issues).toContainEqual({ path: ['workspace', 'files', '../x'], message: 'must not contain ".", ".." or empty segments' });
    expect(r.body.error.field).toBe(r.body.error.issues![0]!.path.join('.'));
    for (const p of paths) expect(r.body.error.message).toContain(p);
  });

  test('a NUL in the task is refused; other control characters in it are not', async () => {
    const r = await post({ task: 'a\u0000b' });
    expect(r.status).toBe(400);
    expect(r.body.error.issues).toEqual([{ path: ['task'], message: 'must not contain NUL (other control characters are kept)' }]);
    // With only other control characters the body passes validation and reaches the store (not present here).
    const ok = await post({ task: 'bell\u0007 tab\t escape\u001b[31m' });
    expect(ok.status).toBe(500);
    expect(String(app.logged.at(-1)?.fields?.error)).toMatch(/reached (store|quota|idempotency)/);
  });

  test.each([
    ['newline', 'a\nb.txt'],
    ['escape', 'x\u001b[2J.txt'],
    ['DEL', 'x\u007f'],
    ['NUL', 'x\u0000'],
    ['carriage return', 'dir/a\r.txt'],
  ])('a file name with a control character (%s) is refused', async (_n, name) => {
    const r = await post({ task: 'x', workspace: { files: { [name]: 'content' } } });
    expect(r.status).toBe(400);
    expect(r.body.error.issues).toContainEqual({ path: ['workspace', 'files', name], message: expect.stringMatching(/control characters|NUL/) });
  });

  test('a file name segment over 255 bytes is refused; a long task is refused with its limit', async () => {
    const r = await post({ task: 'x', workspace: { files: { [`${'a'.repeat(256)}/b`]: '' } } });
    expect(r.body.error.issues![0]!.message).toBe('each path segment may be at most 255 bytes');
    const long = await post({ task: 'x'.repeat(50_001) });
    expect(long.status).toBe(400);
    expect(long.body.error.issues).toEqual([{ path: ['task'], message: expect.stringMatching(/50000/) }]);
  });

  test('errors from other checks (limits, policy) carry issues too', async () => {
    const lim = await post({ task: 'x', limits: { memoryMb: 999_999 } });
    expect(lim).toMatchObject({ status: 400, body: { error: { field: 'limits.memoryMb', issues: [{ path: ['limits', 'memoryMb'] }] } } });
    const pol = await post({ task: 'x', policy: 'nosuch' });
    expect(pol).toMatchObject({ status: 400, body: { error: { field: 'policy', issues: [{ path: ['policy'], message: expect.stringContaining('unknown policy') }] } } });
  });

  test('bad JSON, a non-JSON content type and an invalid Idempotency-Key are 400/415 JSON errors', async () => {
    const bad = await post('{"task": ');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_input');
    const xml = await call('POST', '/v1/runs', { headers: { 'content-type': 'application/xml' }, body: '<task/>' });
    expect(xml.status).toBe(415);
    expect(xml.body.error).toEqual({ code: 'unsupported_media_type', message: 'the body must be JSON: send Content-Type: application/json (got "application/xml")' });
    // text/plain too: never taken as a string body
    const text = await call('POST', '/v1/runs', { headers: { 'content-type': 'text/plain' }, body: 'hello' });
    expect(text).toMatchObject({ status: 415, body: { error: { code: 'unsupported_media_type' } } });
    const key = await post({ task: 'x' }, { 'idempotency-key': 'has space' });
    expect(key).toMatchObject({ status: 400, body: { error: { message: expect.stringContaining('Idempotency-Key'), issues: [{ path: [], message: 'must be 1–255 visible ASCII characters' }] } } });
  });

  test('bad path and query parameters name themselves', async () => {
    expect(await call('GET', '/v1/runs/nope')).toMatchObject({ status: 400, body: { error: { field: 'id', issues: [{ path: ['id'], message: 'is not a run id' }] } } });
    const q = await call('GET', '/v1/runs?status=running,nonsense&limit=0');
    expect(q.status).toBe(400);
    expect(q.body.error.issues!.map((i) => i.path.join('.')).sort()).toEqual(['limit', 'status']);
    expect(q.body.error.message).toContain('"nonsense"');
    expect(await call('GET', '/v1/runs?color=red')).toMatchObject({ status: 400, body: { error: { issues: [{ path: ['color'] }] } } });
  });
});

describe('413', () => {
  test('a body over CORRAL_API_MAX_BODY_BYTES is a 413 JSON error', async () => {
    const r = await call('POST', '/v1/runs', { body: { task: 'x'.repeat(70 * 1024) } });
    expect(r.status).toBe(413);
    expect(r.body.error.code).toBe('payload_too_large');
    expect(r.body.error.message).toContain('CORRAL_API_MAX_BODY_BYTES');
  });

  test('without a token the size does not matter: 401 first', async () => {
    const r = await call('POST', '/v1/runs', { token: null, body: { task: 'x'.repeat(70 * 1024) } });
    expect(r.status).toBe(401);
  });
});

describe('uploaded workspace tars are checked at submit', () => {
  const post = (tarBase64: string) => call('POST', '/v1/runs', { body: { task: 'x', workspace: { tarBase64 } } });

  test.each([
    ['a symlink out of the workspace', [{ name: 'link', type: 'symlink' as const, linkname: '/etc' }], /symbolic link "link" is not kept: it points to the absolute path \/etc/],
    ['a symlink above the workspace', [{ name: 'a/link', type: 'symlink' as const, linkname: '../..' }], /symbolic link "a\/link" is not kept/],
    ['a hard link', [{ name: 'h', type: 'link' as const, linkname: '/etc/shadow' }], /link/],
    ['an absolute name', [{ name: '/etc/cron.d/x', body: 'x' }], /absolute/],
    ['a ".." name', [{ name: 'a/../../x', body: 'x' }], /"\.\."/],
    ['a device', [{ name: 'dev', type: 'character-device' as const }], /character-device/],
    ['a control character in a name', [{ name: 'ok.txt', body: 'x' }, { name: 'bad\nname.txt', body: 'x' }], /control characters/],
  ])('%s → 400 naming workspace.tarBase64', async (_n, entries, msg) => {
    const r = await post(await tarAsBase64(entries as TarEntry[]));
    expect(r.status).toBe(400);
    expect(r.body.error.field).toBe('workspace.tarBase64');
    expect(r.body.error.message).toMatch(msg);
    expect(r.body.error.issues).toEqual([{ path: ['workspace', 'tarBase64'], message: expect.stringMatching(msg) }]);
  });

  test('a compressed tar, and bytes that are no tar, are refused', async () => {
    const gz = await post(gzipSync(Buffer.from(await tarAsBase64([{ name: 'a', body: 'x' }]), 'base64')).toString('base64'));
    expect(gz.body.error).toMatchObject({ field: 'workspace.tarBase64', message: expect.stringContaining('compressed') });
    const junk = await post(Buffer.from('this is not a tar archive at all, just text padded out '.repeat(20)).toString('base64'));
    expect(junk.status).toBe(400);
    expect(junk.body.error.field).toBe('workspace.tarBase64');
  });

  test('a tar larger than the run\'s workspace limit is refused', async () => {
    const r = await call('POST', '/v1/runs', { body: { task: 'x', limits: { workspaceMb: 1 }, workspace: { tarBase64: await tarAsBase64([{ name: 'big', body: 'x'.repeat(1024 * 1024 + 1) }]) } } });
    // 1 MiB of content in base64 is over this app's 64 KiB body limit: 413 first; the cap is checked below with a larger limit app.
    expect(r.status).toBe(413);
  });

  test('a clean tar passes the check (and the request goes on to the store)', async () => {
    const r = await post(await tarAsBase64([{ name: 'src/', type: 'directory' }, { name: 'src/a.py', body: 'print(1)\n' }]));
    expect(r.status).toBe(500);
    expect(String(app.logged.at(-1)?.fields?.error)).toMatch(/reached (store|quota|idempotency)/);
  });
});

test('the workspace size cap applies to the unpacked tar content', async () => {
  const big = offlineApp();
  try {
    const tarBase64 = await tarAsBase64([{ name: 'big', body: 'x'.repeat(1024 * 1024 + 1) }]);
    const res = await big.inject({ method: 'POST', url: '/v1/runs', headers: { authorization: `Bearer ${OFFLINE_TOKENS.acme}`, 'content-type': 'application/json' }, payload: JSON.stringify({ task: 'x', limits: { workspaceMb: 1 }, workspace: { tarBase64 } }) });
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body).error).toMatchObject({ field: 'workspace.tarBase64', message: expect.stringContaining('more than 1048576 bytes') });
  } finally {
    await big.close();
  }
});

describe('workspace file names (issue 14, defect 8)', () => {
  test.each(['a\u0085b.txt', 'x\u009b31m.txt', 'invoice\u202Etxt.exe', 'a\u2066b', 'a\u2067b', 'a\u2068b', 'dir/a\u2069b', 'a\u200Fb'])('a name with a C1 control or bidi override (%j) is a 400 naming the file', async (name) => {
    const r = await call('POST', '/v1/runs', { body: { task: 't', workspace: { files: { [name]: 'x' } } } });
    expect(r.status).toBe(400);
    expect(r.body.error.field).toBe(`workspace.files.${name}`);
    expect(r.body.error.message).toMatch(/C1 control characters or bidirectional overrides/);
  });

  // The names the workspace export would leave out (issue 38, break 8): refused at submit too.
  test.each([['a\u2028b.txt', /U\+2028/], ['a\u2029b.txt', /U\+2029/], ['x\ud800.txt', /lone surrogate \(U\+D800\)/], ['x\udfff/y.txt', /lone surrogate \(U\+DFFF\)/], ['caf\ufffd.txt', /not valid UTF-8/]])('a name the export refuses (%j) is a 400 naming the file', async (name, why) => {
    const r = await call('POST', '/v1/runs', { body: { task: 't', workspace: { files: { [name]: 'x' } } } });
    expect(r.status).toBe(400);
    expect(r.body.error.field).toBe(`workspace.files.${name}`);
    expect(r.body.error.message).toMatch(why);
  });
});

describe('labels (issue 14, defect 8)', () => {
  test('more than 32 labels, a key over 64 characters or a value over 256 is a 400 naming the field', async () => {
    const many = Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`k${i}`, 'v']));
    for (const [labels, field] of [[many, 'labels'], [{ ['k'.repeat(65)]: 'v' }, `labels.${'k'.repeat(65)}`], [{ team: 'v'.repeat(257) }, 'labels.team']] as const) {
      const r = await call('POST', '/v1/runs', { body: { task: 't', labels } });
      expect({ status: r.status, field: r.body.error.field }).toEqual({ status: 400, field });
    }
  });
});

describe('request body encoding (issue 14, defect 8)', () => {
  test.each([['a lone continuation byte', [0x80]], ['a truncated sequence', [0xe2, 0x82]], ['an overlong encoding', [0xc0, 0xaf]], ['a surrogate', [0xed, 0xa0, 0x80]], ['0xff', [0xff]]])('%s in a JSON body is a 400, not U+FFFD', async (_what, bytes) => {
    const payload = Buffer.concat([Buffer.from('{"task":"t'), Buffer.from(bytes), Buffer.from('"}')]);
    const res = await app.inject({ method: 'POST', url: '/v1/runs', headers: { authorization: `Bearer ${OFFLINE_TOKENS.acme}`, 'content-type': 'application/json' }, payload });
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'invalid_input', message: 'the request body is not valid UTF-8' } });
  });
});
