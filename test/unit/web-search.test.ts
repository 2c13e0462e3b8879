/**
 * web_search's adapters against HTTP servers this test runs on loopback, answering in each service's
 * documented JSON shape: the request each adapter makes (path, query, method, where the key goes),
 * the text the model sees, and a hostile service (huge, slow, redirecting, malformed, markup and
 * control characters, non-http URLs) handled as a failure or cleaned, never a crash or a hang.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config';
import type { Sandbox } from '../../src/domain/sandbox';
import { toolsFor } from '../../src/tools/registry';
import { plain, WebSearch, webSearchEngine, webSearchTool } from '../../src/tools/web-search';

interface Seen { method: string; url: string; headers: IncomingMessage['headers']; body: string }
let server: Server;
let base: string;
const seen: Seen[] = [];
let answer: (req: IncomingMessage, res: import('node:http').ServerResponse) => void;

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      answer(req, res);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise((r) => { server.closeAllConnections(); server.close(r); }));
beforeEach(() => (seen.length = 0));

const json = (o: unknown) => (_req: IncomingMessage, res: import('node:http').ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(o));
const cfg = (kind: string, extra: Record<string, string> = {}) => loadConfig({ CORRAL_WEB_SEARCH: kind, CORRAL_WEB_SEARCH_URL: `${base}/api`, ...extra });
const ctx = { sandbox: {} as Sandbox, execTimeoutMs: 30_000, maxOutputBytes: 65536 };
const run = async (kind: string, query = 'vitest coverage thresholds', extra: Record<string, string> = {}) =>
  webSearchTool(webSearchEngine(cfg(kind, extra))!).execute(WebSearch.parse({ query, count: 3 }), ctx);

test('searxng: GET URL/search?q=…&format=json, the key as a bearer token; results as numbered text', async () => {
  answer = json({ query: 'x', results: [
    { title: 'Coverage | Vitest', url: 'https://vitest.dev/guide/coverage', content: 'Set <b>thresholds</b> &amp; more' },
    { title: 'Second', url: 'https://example.test/2', content: 'two' },
  ] });
  const r = await run('searxng', 'vitest coverage thresholds', { CORRAL_WEB_SEARCH_KEY: 'sx-key' });
  expect(seen[0]).toMatchObject({ method: 'GET', url: '/api/search?q=vitest+coverage+thresholds&format=json' });
  expect(seen[0]!.headers.authorization).toBe('Bearer sx-key');
  expect(r).toEqual({
    ok: true, summary: '2 results',
    content: `Results for "vitest coverage thresholds" (searxng at 127.0.0.1:${base.split(':').at(-1)}):\n\n` +
      '1. Coverage | Vitest\n   https://vitest.dev/guide/coverage\n   Set thresholds & more\n\n2. Second\n   https://example.test/2\n   two',
  });
});

test('brave: GET URL?q=…&count=… with X-Subscription-Token; web.results[].description', async () => {
  answer = json({ type: 'search', web: { results: [{ title: 'Go <strong>modules</strong>', url: 'https://go.dev/ref/mod', description: 'Reference' }] } });
  const r = await run('brave', 'go modules', { CORRAL_WEB_SEARCH_KEY: 'brave-token' });
  expect(seen[0]).toMatchObject({ method: 'GET', url: '/api?q=go+modules&count=3' });
  expect(seen[0]!.headers['x-subscription-token']).toBe('brave-token');
  expect(seen[0]!.headers.authorization).toBeUndefined();
  expect(r.content).toContain('1. Go modules\n   https://go.dev/ref/mod\n   Reference');
  // no web section (a query with no results) is an empty list, not a failure
  answer = json({ type: 'search' });
  expect(await run('brave', 'nothing', { CORRAL_WEB_SEARCH_KEY: 'k' })).toMatchObject({ ok: true, summary: '0 results' });
});

test('json: POST {query, count}; at most count results; results without an http(s) URL are dropped', async () => {
  answer = json({ results: [
    { title: 'js', url: 'javascript:alert(1)', snippet: 'x' },
    { title: 'file', url: 'file:///etc/passwd', snippet: 'x' },
    { title: 'no url' },
    { title: 'ok1', url: 'https://a.test/1', snippet: 's1' },
    { title: 'ok2', url: 'http://b.test/2' },
    { title: 'ok3', url: 'https://c.test/3' },
    { title: 'ok4', url: 'https://d.test/4' },
    'not an object', 42, null,
  ] });
  const r = await run('json');
  expect(seen[0]).toMatchObject({ method: 'POST', url: '/api', body: JSON.stringify({ query: 'vitest coverage thresholds', count: 3 }) });
  expect(seen[0]!.headers.authorization).toBeUndefined();
  expect(r.summary).toBe('3 results');
  expect(r.content).not.toMatch(/javascript:|file:|no url/);
  expect(r.content).toMatch(/1\. ok1[\s\S]*2\. ok2[\s\S]*3\. ok3\n {3}https:\/\/c\.test\/3$/);
});

test('what the service wrote is cleaned: control and bidi characters, escape sequences, markup, over-long text', async () => {
  answer = json({ results: [{
    title: 'T\u001b[31mred\u001b[0m\u202eevil\u0085' + 'x'.repeat(1000),
    url: 'https://a.test/\u001b',
    content: '<script>alert(1)</script>line\u0000one\nline two\u200b' + 'y'.repeat(5000),
  }] });
  const r = await run('json');
  // eslint-disable-next-line no-control-regex
  expect(r.content).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e\u200b]/);
  expect(r.content).not.toMatch(/<script>/);
  const lines = r.content.split('\n');
  expect(lines.find((l) => l.startsWith('1. '))!.length).toBeLessThanOrEqual(3 + 300);
  expect(lines.at(-1)!.trim().length).toBeLessThanOrEqual(1000);
  expect(plain('a <b>b</b> &lt;c&gt; &amp;amp;', 100)).toBe('a b <c> &amp;');
});

test('a hostile or broken service is a failure the model reads, never a crash, a hang or the key', async () => {
  const key = 'sk-search-SECRET-1234';
  const cases: Array<[string, typeof answer, RegExp]> = [
    ['status', (_q, res) => res.writeHead(502).end(`upstream says ${key}`), /answered HTTP 502$/],
    ['not json', (_q, res) => res.writeHead(200).end('<html>hi</html>'), /not JSON/],
    ['wrong shape', json({ results: 'many' }), /not a json result list/],
    ['redirect', (_q, res) => res.writeHead(302, { location: 'http://127.0.0.1:1/steal' }).end(), /redirect, which is not followed/],
    ['huge declared', (_q, res) => res.writeHead(200, { 'content-length': String(50 * 1024 * 1024) }).end(), /over the 1048576-byte cap/],
    ['huge streamed', (_q, res) => { res.writeHead(200); const chunk = Buffer.alloc(64 * 1024, 0x20); let n = 0; const w = () => { while (n++ < 40) if (!res.write(chunk)) return void res.once('drain', w); res.end(); }; w(); }, /more than the 1048576-byte cap/],
    ['slow', () => undefined, /did not answer within 1 s/],
  ];
  for (const [name, a, expected] of cases) {
    answer = a;
    const r = await run('json', 'q', { CORRAL_WEB_SEARCH_KEY: key, CORRAL_WEB_SEARCH_TIMEOUT_MS: '1000' });
    expect({ name, ok: r.ok }).toEqual({ name, ok: false });
    expect(r.content).toMatch(/^web_search: the search service \(127\.0\.0\.1:\d+\) /);
    expect(r.content).toMatch(expected);
    expect(r.content).not.toContain(key);
  }
  // a service that is not there
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise((r) => closed.close(r));
  const gone = webSearchTool(webSearchEngine(loadConfig({ CORRAL_WEB_SEARCH: 'json', CORRAL_WEB_SEARCH_URL: `http://127.0.0.1:${port}/x` }))!);
  expect((await gone.execute(WebSearch.parse({ query: 'q' }), ctx)).content).toMatch(/could not be used: ECONNREFUSED/);
});

test('a cancel aborts the search in flight', async () => {
  let reached!: () => void;
  const inFlight = new Promise<void>((r) => (reached = r));
  answer = () => reached(); // never answers
  const ac = new AbortController();
  const tool = webSearchTool(webSearchEngine(cfg('json'))!);
  const p = tool.execute(WebSearch.parse({ query: 'q' }), { ...ctx, signal: ac.signal });
  await inFlight; // the search reached the service
  ac.abort(new Error('cancelled'));
  await expect(p).rejects.toThrow();
});

test('arguments: a query is 1–400 characters of text; count 1–10; nothing else', () => {
  expect(WebSearch.safeParse({ query: '  ' }).success).toBe(false);
  expect(WebSearch.safeParse({ query: 'x'.repeat(401) }).success).toBe(false);
  expect(WebSearch.safeParse({ query: 'x', count: 11 }).success).toBe(false);
  expect(WebSearch.safeParse({ query: 'x', url: 'http://a' }).success).toBe(false);
  expect(WebSearch.parse({ query: ' x ' })).toEqual({ query: 'x', count: 5 });
});

test('configuration: the tool is offered only when configured; half a configuration stops start-up naming the variable', () => {
  expect(toolsFor(loadConfig({})).map((t) => t.name)).not.toContain('web_search');
  const names = toolsFor(cfg('searxng')).map((t) => t.name);
  expect(names.slice(-2)).toEqual(['web_search', 'delegate']);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH: 'json' })).toThrow(/CORRAL_WEB_SEARCH and CORRAL_WEB_SEARCH_URL go together/);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH_URL: 'http://127.0.0.1/x' })).toThrow(/go together/);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH: 'brave', CORRAL_WEB_SEARCH_URL: 'http://127.0.0.1/x' })).toThrow(/needs CORRAL_WEB_SEARCH_KEY/);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH: 'json', CORRAL_WEB_SEARCH_URL: 'ftp://127.0.0.1/x' })).toThrow(/CORRAL_WEB_SEARCH_URL.*http\(s\)/);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH: 'json', CORRAL_WEB_SEARCH_URL: 'http://u:p@127.0.0.1/x' })).toThrow(/user name or password/);
  expect(() => loadConfig({ CORRAL_WEB_SEARCH: 'bing', CORRAL_WEB_SEARCH_URL: 'http://127.0.0.1/x' })).toThrow(/CORRAL_WEB_SEARCH/);
});
