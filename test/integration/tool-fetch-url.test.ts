/**
 * fetch_url on the real engine with the run's real egress proxy: names resolve through a DNS server
 * this test runs, the upstream is an HTTP server on loopback (exempt only through test hooks). An
 * allowed page comes back as text (scripts and markup gone, capped); a host not on the allowlist is
 * refused by the proxy and the upstream never hears of it; a run without egress reaches nothing; the
 * connection is attributed to the call; bad URLs are refused by the schema before anything runs.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { EgressAttempt, LeasedSandbox } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { FetchUrl, fetchUrlTool } from '../../src/tools/fetch-url';
import { sandboxTestEnv } from '../support/sandbox-env';
import { startTestDns, type TestDns } from '../support/test-dns';

jest.setTimeout(120_000);
const WORKER = `test-fetch-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const config = loadConfig({ ...sandboxTestEnv() });
let server: Server;
let port: number;
const seen: string[] = [];
let dns: TestDns;
let provider: DockerSandboxProvider;

const PAGE = `<!doctype html><html><head><title>T</title><style>body{color:red}</style><script>var secret="no"</script></head>
<body><h1>Release notes</h1><p>Version <b>2.1</b> fixes the &amp; bug.</p><ul><li>one</li><li>two</li></ul>${'<p>filler text</p>'.repeat(3000)}</body></html>`;

beforeAll(async () => {
  server = createServer((req, res) => {
    seen.push(`${req.headers.host} ${req.url}`);
    if (req.url === '/notes') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(PAGE);
    else if (req.url === '/plain') res.writeHead(200, { 'content-type': 'text/plain' }).end('just text\n');
    else res.writeHead(404, { 'content-type': 'text/plain' }).end('no such page');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  dns = await startTestDns((h) => (h === 'docs.test' || h === 'other.test' ? ['127.0.0.1'] : undefined));
  provider = new DockerSandboxProvider({ docker, config, egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await new Promise((r) => server.close(r));
  await dns?.close();
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
});

async function sandbox(allow: string[]): Promise<{ sb: LeasedSandbox; attempts: EgressAttempt[] }> {
  const attempts: EgressAttempt[] = [];
  const sb = await provider.acquire({
    runId: `run_fetch_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 5 * 60_000), files: {},
    limits: { memoryMb: 256, cpus: 1, pids: 128, workspaceMb: 16 }, egressAllow: allow, onEgress: (a) => attempts.push(a),
  });
  return { sb, attempts };
}
const ctx = (sb: LeasedSandbox) => ({ sandbox: sb, execTimeoutMs: 30_000, maxOutputBytes: 64 * 1024 });

test('an allowed page comes back as its text, capped; the connection is the call\'s; another host is refused by the proxy', async () => {
  const { sb, attempts } = await sandbox([`docs.test:${port}`]);
  try {
    sb.noteToolCall?.('call_fetch_1');
    const r = await fetchUrlTool.execute(FetchUrl.parse({ url: `http://docs.test:${port}/notes`, maxChars: 2000 }), ctx(sb));
    expect(r.ok).toBe(true);
    expect(r.content).toMatch(new RegExp(`^HTTP 200 text/html; charset=utf-8 from http://docs.test:${port}/notes \\(cut to 2000 characters\\)`));
    expect(r.content).toContain('Release notes\nVersion 2.1 fixes the & bug.\none\ntwo');
    expect(r.content).not.toMatch(/secret|color:red|<p>/);
    expect(r.content.length).toBeLessThan(2300);
    expect(seen).toContain(`docs.test:${port} /notes`);

    const plain = await fetchUrlTool.execute(FetchUrl.parse({ url: `http://docs.test:${port}/plain` }), ctx(sb));
    expect(plain.content).toContain('just text');
    const missing = await fetchUrlTool.execute(FetchUrl.parse({ url: `http://docs.test:${port}/nope` }), ctx(sb));
    expect(missing).toMatchObject({ ok: false, summary: expect.stringMatching(/^HTTP 404/) });

    const before = seen.length;
    const other = await fetchUrlTool.execute(FetchUrl.parse({ url: `http://other.test:${port}/notes` }), ctx(sb));
    expect(other.ok).toBe(false);
    expect(other.content).toMatch(/HTTP 403 .*refused by the run's egress proxy/);
    const tunnel = await fetchUrlTool.execute(FetchUrl.parse({ url: `https://other.test/notes` }), ctx(sb));
    expect(tunnel).toMatchObject({ ok: false, content: expect.stringMatching(/refused by the run's egress proxy/) });
    expect(seen.length).toBe(before);
    expect(dns.asked).not.toContain('other.test');
    expect(attempts.filter((a) => a.host === 'docs.test' && a.decision === 'allow').length).toBeGreaterThan(0);
    expect(attempts.find((a) => a.host === 'docs.test')?.callId).toBe('call_fetch_1');
    expect(attempts.filter((a) => a.host === 'other.test').every((a) => a.decision === 'deny')).toBe(true);
  } finally {
    await sb.dispose();
  }
});

test('a run without egress reaches nothing', async () => {
  const { sb } = await sandbox([]);
  try {
    const before = seen.length;
    const r = await fetchUrlTool.execute(FetchUrl.parse({ url: `http://127.0.0.1:${port}/notes` }), ctx(sb));
    expect(r.ok).toBe(false);
    expect(r.content).toMatch(/^fetch_url: http:\/\/127\.0\.0\.1:\d+\/notes: URLError/);
    expect(seen.length).toBe(before);
  } finally {
    await sb.dispose();
  }
});

test.each([
  ['file:///etc/passwd', /only http/],
  ['ftp://docs.test/x', /only http/],
  ['http://user:pw@docs.test/', /no user name or password/],
  ['not a url', /Invalid URL|url/i],
  ['http://[', /Invalid URL|url/i],
  ['', /Invalid URL|url/i],
  [`http://docs.test/${'a'.repeat(2100)}`, /2048/],
])('%s is refused by the schema', (url, message) => {
  const r = FetchUrl.safeParse({ url });
  expect(r.success).toBe(false);
  expect(JSON.stringify(r.error?.issues)).toMatch(message);
});
