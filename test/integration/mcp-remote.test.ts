/**
 * A remote (Streamable-HTTP) MCP server, for real: the test serves one with the SDK's
 * StreamableHTTPServerTransport on loopback under an injected name (tracker.test, resolved by the
 * test's DNS); an environment declares it by `url:`. corral's bridge runs in the sandbox and reaches it
 * through the run's egress proxy (the worker never connects to it): the call's result comes back, the
 * proxy logged the connection, and a run whose egress does not allow the server's host is refused at
 * admission, naming the field.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { environmentImages } from '../support/sandbox-env';
import { startTestDns, type TestDns } from '../support/test-dns';

jest.setTimeout(300_000);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Ev = Record<string, any> & { type: string };
const events = (run: Record<string, unknown>): Ev[] => readFileSync(String(run.logPath), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Ev);

let h: Harness;
let server: Server;
let port: number;
let dns: TestDns;
/** JSON-RPC methods the remote server was sent, in order. */
const methods: string[] = [];

const agent = scriptedAgent({
  'MCP-REMOTE': [
    toolCallTurn([{ id: 'r_ticket', name: 'mcp__tracker__ticket', args: { id: 'T-7' } }]),
    finalTurn('looked it up'),
  ],
});

/** A stateless Streamable-HTTP MCP server: a fresh SDK server and transport per request. */
function tracker(): McpServer {
  const s = new McpServer({ name: 'tracker', version: '1.0.0' });
  s.registerTool('ticket', { description: 'Reads a ticket', inputSchema: { id: z.string() } }, ({ id }) => ({ content: [{ type: 'text', text: `ticket ${id}: open, assigned to dana` }] }));
  return s;
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => { body += c.toString(); });
    req.on('end', () => {
      void (async () => {
        const parsed = body ? (JSON.parse(body) as { method?: string }) : undefined;
        if (parsed?.method) methods.push(parsed.method);
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        const s = tracker();
        res.on('close', () => { void transport.close(); void s.close(); });
        await s.connect(transport);
        await transport.handleRequest(req, res, parsed);
      })().catch(() => res.writeHead(500).end());
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  dns = await startTestDns((n) => (n === 'tracker.test' ? ['127.0.0.1'] : undefined));
  const dir = mkdtempSync(join(tmpdir(), 'corral-mcp-remote-'));
  const image = environmentImages().node;
  writeFileSync(join(dir, 'remote.yaml'), `version: 1
description: a remote MCP server through the egress proxy
image: ${image}
egress: ["tracker.test:${port}"]
mcp:
  tracker:
    url: http://tracker.test:${port}/mcp
    startTimeoutS: 60
    tools: { ticket: allow }
`);
  h = await startHarness('mcp-remote', { chat: agent }, { CORRAL_ENVIRONMENT_DIR: dir, CORRAL_SANDBOX_IMAGES: image },
    { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await h?.close();
  await new Promise((r) => server?.close(r));
  await dns?.close();
});

test('a remote server is reached from the sandbox through the egress proxy; its tool answers', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'MCP-REMOTE: look up ticket T-7', environment: 'remote', workspace: { files: { 'a.txt': 'a\n' } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 240_000);
  const ev = events(run);
  expect([run.status, run.reason]).toEqual(['succeeded', expect.anything()]);
  expect(ev.find((e) => e.type === 'mcp.started')).toMatchObject({ server: 'tracker', argv: ['corral-mcp-remote', `http://tracker.test:${port}/mcp`], tools: [expect.objectContaining({ name: 'mcp__tracker__ticket' })] });
  expect(ev.find((e) => e.type === 'tool.result' && e.callId === 'r_ticket')).toMatchObject({ ok: true, output: expect.stringContaining('ticket T-7: open, assigned to dana') });
  expect(methods).toEqual(expect.arrayContaining(['initialize', 'tools/list', 'tools/call']));
  // through the run's proxy, as any host the sandbox reaches
  expect(ev.some((e) => e.type === 'egress' && e.decision === 'allow' && e.host === 'tracker.test')).toBe(true);
});

test('a run whose egress does not allow the remote server\'s host is refused at submission', async () => {
  const r = await h.api('POST', '/v1/runs', { task: 'x', environment: 'remote', egress: { allow: ['example.test'] } });
  expect(r.status).toBe(400);
  expect(JSON.stringify(r.body)).toMatch(/MCP server \\"tracker\\" is remote \(tracker\.test:\d+\).*does not allow it/);
});
