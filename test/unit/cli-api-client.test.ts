/** The CLI's API client against a small local HTTP server: bearer token, one-line errors with hints, SSE parsing, resuming a dropped event stream. */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config';
import { ApiClient, ApiError, ApiUnreachableError, sseMessages } from '../../src/cli/api-client';
import type { RunEvent } from '../../src/domain/events';

type Route = (req: IncomingMessage, res: ServerResponse) => void;
let server: Server;
let base: string;
let route: Route;
const seen: Array<{ url: string; auth?: string; accept?: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push({ url: req.url!, auth: req.headers.authorization, accept: req.headers.accept });
    route(req, res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));
beforeEach(() => {
  seen.length = 0;
});

const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

function ev(seq: number, body: Record<string, unknown>): RunEvent {
  return { runId: 'run_abcdef', seq, ts: new Date(Date.UTC(2025, 0, 1, 0, 0, seq)).toISOString(), ...body } as RunEvent;
}
const sse = (id: string, e: RunEvent) => `id: ${id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;

test('sends the bearer token from --token, else from CORRAL_API_TOKEN, and none when neither is set', async () => {
  route = (_req, res) => json(res, 200, { id: 'run_abcdef', status: 'running' });
  const config = loadConfig({ CORRAL_API_TOKEN: 'env-token' });
  await ApiClient.from({ api: base, token: 'flag-token' }, config).get('run_abcdef');
  await ApiClient.from({ api: base }, config).get('run_abcdef');
  await ApiClient.from({ api: base }, loadConfig({})).get('run_abcdef');
  expect(seen.map((s) => s.auth)).toEqual(['Bearer flag-token', 'Bearer env-token', undefined]);
});

test('HTTP errors carry the server\'s message plus what to do', async () => {
  const cases: Array<[number, unknown, Record<string, string>, RegExp]> = [
    [401, { error: { code: 'unauthorized', message: 'missing or invalid bearer token' } }, {}, /^missing or invalid bearer token \(HTTP 401 unauthorized from http:\/\/127\.0\.0\.1:\d+\); set CORRAL_API_TOKEN or pass --token with a valid token$/],
    [404, { error: { code: 'not_found', message: 'no run with id run_abcdef' } }, {}, /^no run with id run_abcdef \(HTTP 404 not_found from .*\)$/],
    [429, { error: { code: 'rate_limited', message: 'too many submissions' } }, { 'retry-after': '7' }, /too many submissions .*; try again in 7 s$/],
    [413, { error: { code: 'invalid_input', message: 'body too large' } }, {}, /send less \(for --workspace: --exclude what the task does not need\)$/],
    [502, '<html>Bad Gateway</html>', {}, /^<html>Bad Gateway<\/html> \(HTTP 502 from .*\); see the corral server's log$/],
  ];
  for (const [status, body, headers, message] of cases) {
    route = (_req, res) => (typeof body === 'string' ? (res.writeHead(status, headers), res.end(body)) : json(res, status, body, headers));
    const err = await new ApiClient(base).get('run_abcdef').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect({ status, message: (err as Error).message }).toEqual({ status, message: expect.stringMatching(message) });
    expect((err as ApiError).status).toBe(status);
  }
});

test('nothing listening: ApiUnreachableError that names the URL, the cause and the fix', async () => {
  const closed = createServer();
  await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
  const port = (closed.address() as AddressInfo).port;
  await new Promise<void>((r) => closed.close(() => r()));
  const err = await new ApiClient(`http://127.0.0.1:${port}`).health().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(ApiUnreachableError);
  expect((err as Error).message).toBe(`cannot reach the corral API at http://127.0.0.1:${port} (ECONNREFUSED); is \`corral serve\` running? set CORRAL_API_URL or --api`);
});

test('report() returns the markdown text; cancel() the status', async () => {
  route = (req, res) => {
    if (req.url!.endsWith('/report')) {
      res.writeHead(200, { 'content-type': 'text/markdown' });
      res.end('# Run run_abcdef\n');
    } else json(res, 202, { id: 'run_abcdef', status: 'cancelling' });
  };
  const c = new ApiClient(base);
  await expect(c.report('run_abcdef')).resolves.toBe('# Run run_abcdef\n');
  await expect(c.cancel('run_abcdef')).resolves.toEqual({ id: 'run_abcdef', status: 'cancelling' });
  expect(seen.map((s) => s.url)).toEqual(['/v1/runs/run_abcdef/report', '/v1/runs/run_abcdef/cancel']);
});

test('sseMessages: ids, multi-line data, comments, CRLF, messages split across chunks', async () => {
  const chunks = [': keep-alive\n\nid: 1-0\nevent: a\ndata: {"x":', '1}\n\nid: 2-0\r\ndata: line one\r\ndata: line two\r\n\r\n', 'data:no-space\n\n'];
  const got = [];
  for await (const m of sseMessages((async function* () { for (const c of chunks) yield new TextEncoder().encode(c); })())) got.push(m);
  expect(got).toEqual([
    { id: '1-0', event: 'a', data: '{"x":1}' },
    { id: '2-0', data: 'line one\nline two' },
    { data: 'no-space' },
  ]);
});

test('follow(): a dropped stream is resumed after the last event id, without repeats, until run.finished', async () => {
  const events = [
    ev(1, { type: 'run.started', workerId: 'w', task: 't', policy: 'default', approvals: false, model: 'm', budgets: { llmCalls: 3, toolCalls: 3, tokens: 10_000, wallTimeS: 60, costUsd: 1 } }),
    ev(2, { type: 'sandbox.ready', containerId: 'c'.repeat(64), image: 'i', ms: 5, egressAllow: [] }),
    ev(3, { type: 'run.finished', outcome: 'succeeded', finalAnswer: 'ok', reason: 'done', usage: { llmCalls: 1, toolCalls: 0, inputTokens: 1, outputTokens: 1, costUsd: 0, wallTimeMs: 10 } }),
  ];
  let streams = 0;
  let first: import('node:http').ServerResponse | undefined;
  route = (req, res) => {
    if (req.url!.startsWith('/v1/runs/run_abcdef/events')) {
      streams++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      if (streams === 1) {
        res.write(sse('100-0', events[0]!) + sse('101-0', events[1]!));
        first = res; // the connection drops mid-run, once the client has both events (below)
      } else {
        res.end(sse('102-0', events[2]!));
      }
      return;
    }
    json(res, 200, { id: 'run_abcdef', status: 'running' }); // GET while reconnecting: not finished
  };
  const got: number[] = [];
  await new ApiClient(base, { token: 'tok' }).follow('run_abcdef', (e) => {
    got.push(e.seq);
    if (e.seq === 2) first?.socket?.destroy();
  }, { retryMs: 10 });
  expect(got).toEqual([1, 2, 3]);
  const streamCalls = seen.filter((s) => s.url.includes('/events'));
  expect(streamCalls.map((s) => s.url)).toEqual(['/v1/runs/run_abcdef/events?after=0', '/v1/runs/run_abcdef/events?after=101-0']);
  expect(streamCalls.every((s) => s.accept === 'text/event-stream' && s.auth === 'Bearer tok')).toBe(true);
});

test('follow(): a run that ended without run.finished (cancelled while queued) ends the stream', async () => {
  route = (req, res) => {
    if (req.url!.includes('/events')) {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.end();
    } else json(res, 200, { id: 'run_abcdef', status: 'cancelled', finishedAt: '2025-01-01T00:00:00Z' });
  };
  const got: RunEvent[] = [];
  await new ApiClient(base).follow('run_abcdef', (e) => got.push(e), { retryMs: 10 });
  expect(got).toEqual([]);
});
