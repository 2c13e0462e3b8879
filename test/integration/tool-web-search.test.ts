/**
 * web_search end to end: a whole corral (API + worker, real engine, real Redis, scripted model) whose
 * operator configured a search service — an HTTP server this test runs on loopback, answering in the
 * `json` adapter's shape. The model's call goes through the gate and the worker; the results reach
 * the model; the service's key is sent to the service and nowhere else (not the sandbox's environment
 * or files, not the log, not the report, not the API's answers). A deployment without a search service
 * does not offer the tool, and a task naming it is refused at submit.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startHarness, type Harness } from '../support/corral-harness';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';

jest.setTimeout(180_000);

const KEY = 'sk-websearch-OPERATOR-SECRET-8c1f';
let server: Server;
let url: string;
const seen: Array<{ auth?: string; body: string }> = [];
let h: Harness | undefined;
let plain: Harness | undefined;
const offered: string[][] = [];

const agent = scriptedAgent({
  'SEARCH-TASK': (body, turn) => {
    if (turn === 0) {
      offered.push(((body.tools as Array<{ function: { name: string } }>) ?? []).map((t) => t.function.name));
      return toolCallTurn([{ name: 'web_search', id: 'c_s', args: { query: 'pytest fixture scope', count: 2 } }]);
    }
    if (turn === 1) return toolCallTurn([{ name: 'bash', id: 'c_env', args: { command: 'env; cat /proc/1/environ 2>/dev/null | tr "\\0" "\\n"; echo done' } }]);
    const tool = messagesOf(body).filter((m) => m.role === 'tool').map((m) => String(m.content));
    return finalTurn(`search said: ${tool[0]?.split('\n').slice(0, 4).join(' | ')}; env leaked: ${tool[1]?.includes('OPERATOR-SECRET') ? 'yes' : 'no'}`);
  },
  'NO-SEARCH': (body) => {
    offered.push(((body.tools as Array<{ function: { name: string } }>) ?? []).map((t) => t.function.name));
    return finalTurn('no search here');
  },
});

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      seen.push({ auth: req.headers.authorization, body });
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ results: [
        { title: 'How to use fixtures — pytest documentation', url: 'https://docs.pytest.org/en/stable/how-to/fixtures.html', snippet: 'Fixtures can have <b>scope</b>: function, class, module, package or session.' },
        { title: 'Second result', url: 'https://example.test/2', snippet: 'two' },
      ] }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/search`;
  h = await startHarness('websearch', { chat: agent }, { CORRAL_WEB_SEARCH: 'json', CORRAL_WEB_SEARCH_URL: url, CORRAL_WEB_SEARCH_KEY: KEY });
});
afterAll(async () => {
  await h?.close();
  await plain?.close();
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

test('a run searches through the configured service; the results reach the model; the key reaches only the service', async () => {
  const sub = await h!.api<{ id: string }>('POST', '/v1/runs', { task: 'SEARCH-TASK: find how pytest fixture scopes work', approvals: false });
  expect(sub.status).toBe(201);
  const run = await h!.waitFor(sub.body.id);
  expect(run).toMatchObject({ status: 'succeeded' });
  expect(offered[0]).toContain('web_search');
  expect(seen).toEqual([{ auth: `Bearer ${KEY}`, body: JSON.stringify({ query: 'pytest fixture scope', count: 2 }) }]);
  expect(run.finalAnswer).toBe(
    'search said: Results for "pytest fixture scope" (json at ' + new URL(url).host + '): |  | 1. How to use fixtures — pytest documentation |    https://docs.pytest.org/en/stable/how-to/fixtures.html; env leaked: no',
  );
  const log = readFileSync(run.logPath as string, 'utf8');
  const report = readFileSync(run.reportPath as string, 'utf8');
  const events = log.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  // the gate allowed it (policy entry: allow, medium) and the log records the call and its result
  expect(events.find((e) => e.type === 'policy.decision' && e.callId === 'c_s')).toMatchObject({ verdict: { decision: 'allow', static: { risk: 'medium', rule: 'tool:web_search' } } });
  expect(events.find((e) => e.type === 'tool.result' && e.callId === 'c_s')).toMatchObject({ ok: true, summary: '2 results' });
  for (const [what, text] of [['log', log], ['report', report], ['run', JSON.stringify(run)], ['events page', JSON.stringify((await h!.api('GET', `/v1/runs/${sub.body.id}/events`)).body)]]) {
    expect({ what, leaked: text!.includes(KEY) || text!.includes('OPERATOR-SECRET') }).toEqual({ what, leaked: false });
  }
  expect(report).toContain('web_search');
});

test('without a configured service the tool is not offered, and a task that names it is refused at submit', async () => {
  plain = await startHarness('nosearch', { chat: agent });
  const ok = await plain.api<{ id: string }>('POST', '/v1/runs', { task: 'NO-SEARCH: anything', approvals: false });
  expect(ok.status).toBe(201);
  await plain.waitFor(ok.body.id);
  expect(offered.at(-1)).not.toContain('web_search');
  expect(offered.at(-1)).toContain('fetch_url');
  const bad = await plain.api<{ error: { message: string } }>('POST', '/v1/runs', { task: '# Task\nNO-SEARCH: x\n\n# Allowed tools\n- web_search\n', approvals: false });
  expect(bad.status).toBe(400);
  expect(bad.body.error.message).toMatch(/web_search/);
});
