/**
 * Whole runs on a site behind an upstream proxy (all on loopback with the test's resolver): a Node
 * task whose setup runs `npm install` through the operator's upstream proxy (the package name is one
 * only the upstream resolves), and a setup phase that meets a mirror on a private address with no
 * operator exception: it ends `setup_failed` at once with the proxy's readable reason instead of
 * retrying until its timeout.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { decisionsAnswer } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { makeTar } from '../support/make-tar';
import { environmentImages } from '../support/sandbox-env';
import { startTestDns, type TestDns } from '../support/test-dns';
import { startUpstreamProxy, type TestUpstreamProxy } from '../support/upstream-proxy';

jest.setTimeout(300_000);

const PASS = `pw-${randomBytes(6).toString('hex')}`;
let h: Harness;
let registry: Server;
let port: number;
let mirror: Server;
let mirrorPort: number;
let dns: TestDns;
let upstream: TestUpstreamProxy;
const registryHits: string[] = [];
const mirrorHits: string[] = [];

const agent = scriptedAgent({
  'SITE-NODE': [
    toolCallTurn([{ name: 'bash', args: { command: "ls node_modules && sed -i 's/WRONG/padded/' index.js" } }]),
    finalTurn('fixed index.js'),
  ],
  'SITE-PRIVATE': [finalTurn('must never be asked')],
});

beforeAll(async () => {
  const tgz = gzipSync(await makeTar([
    { name: 'package/package.json', body: JSON.stringify({ name: 'leftpad', version: '1.0.0', main: 'index.js' }) },
    { name: 'package/index.js', body: "module.exports = (s, n) => ' '.repeat(Math.max(0, n - s.length)) + s;\n" },
  ]));
  registry = createServer((req, res) => {
    registryHits.push(`${req.headers.host} ${req.url}`);
    if (req.url === '/leftpad-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
    else res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => registry.listen(0, '127.0.0.1', r));
  port = (registry.address() as AddressInfo).port;
  mirror = createServer((req, res) => {
    mirrorHits.push(req.url ?? '');
    res.end('mirror');
  });
  await new Promise<void>((r) => mirror.listen(0, '127.0.0.2', r));
  mirrorPort = (mirror.address() as AddressInfo).port;
  upstream = await startUpstreamProxy('corral', PASS);
  // pkgs.example resolves only at the upstream; mirror.corp.example resolves here, to a "private" address.
  dns = await startTestDns((n) => (n === 'mirror.corp.example' ? ['127.0.0.2'] : undefined));
  const dir = mkdtempSync(join(tmpdir(), 'corral-site-envs-'));
  const image = environmentImages().node;
  writeFileSync(join(dir, 'sitenode.yaml'), `version: 1
description: Node with npm install through the site's upstream proxy
image: ${image}
env:
  npm_config_cache: /tmp/.npm
setup:
  commands:
    - npm install --no-audit --no-fund
  egress: ["pkgs.example:${port}"]
cache: false
`);
  writeFileSync(join(dir, 'privatemirror.yaml'), `version: 1
description: a setup that keeps retrying a mirror on a private address
image: ${image}
setup:
  commands:
    - "until curl -sf -o /dev/null http://mirror.corp.example:${mirrorPort}/simple/; do sleep 1; done"
    - echo never runs > never.txt
  egress: ["mirror.corp.example:${mirrorPort}"]
  timeoutS: 1800
cache: false
`);
  h = await startHarness('site', { chat: agent, decisions: () => decisionsAnswer(0.2, 0.95) }, {
    CORRAL_ENVIRONMENT_DIR: dir, CORRAL_SANDBOX_IMAGES: image,
    CORRAL_EGRESS_UPSTREAM_PROXY: `http://corral:${PASS}@127.0.0.1:${upstream.port}`,
  }, { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});

afterAll(async () => {
  await h?.close();
  await upstream?.close();
  await dns?.close();
  for (const s of [registry, mirror]) await new Promise((r) => s?.close(r));
});

const events = (run: Record<string, unknown>) =>
  readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown> & { type: string });

test('a Node run whose setup installs through the upstream proxy: the package came through it with the operator\'s credentials, npm test passes', async () => {
  const files = {
    'package.json': `${JSON.stringify({ name: 'app', version: '1.0.0', private: true, scripts: { test: 'node test.js' }, dependencies: { leftpad: `http://pkgs.example:${port}/leftpad-1.0.0.tgz` } }, null, 2)}\n`,
    'index.js': "const pad = require('leftpad');\nmodule.exports = () => 'WRONG';\nmodule.exports.pad = pad;\n",
    'test.js': "const f = require('./index.js');\nif (f() !== 'padded') process.exit(1);\nif (f.pad('a', 3) !== '  a') process.exit(2);\nconsole.log('ok');\n",
  };
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: '# Task\nSITE-NODE: make index.js return "padded"\n\n# Done means\n- check: npm test\n', environment: 'sitenode', workspace: { files } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 240_000);
  const ev = events(run);
  expect(run).toMatchObject({ status: 'succeeded' });
  expect(ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true });
  expect(registryHits).toContain(`pkgs.example:${port} /leftpad-1.0.0.tgz`);
  const auth = `Basic ${Buffer.from(`corral:${PASS}`).toString('base64')}`;
  expect(upstream.seen).toContainEqual({ method: 'GET', target: `http://pkgs.example:${port}/leftpad-1.0.0.tgz`, authorization: auth, status: 200 });
  expect(ev.some((e) => e.type === 'egress' && e.decision === 'allow' && e.host === 'pkgs.example' && /through the upstream proxy/.test(String(e.reason)))).toBe(true);
  expect(ev.filter((e) => e.type === 'done.check')).toEqual([expect.objectContaining({ command: 'npm test', ok: true })]);
  // The credentials are in no file the run wrote.
  for (const f of ['events.jsonl', 'report.md', 'workspace.patch']) {
    const text = readFileSync(join(String(run.logPath), '..', f), 'utf8');
    expect(text).not.toContain(PASS);
    expect(text).not.toContain(auth);
  }
});

test('a setup phase refused a private mirror ends setup_failed at once with the readable reason (not at its 30-minute timeout)', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'SITE-PRIVATE: anything', environment: 'privatemirror', workspace: { files: { 'a.txt': 'a\n' } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 240_000);
  expect(run).toMatchObject({ status: 'setup_failed', errorCode: 'setup_failed' });
  const reason = String(run.reason);
  expect(reason).toContain('setup of environment privatemirror: command 1');
  expect(reason).toMatch(/was stopped: the egress proxy refused GET mirror\.corp\.example:\d+: the proxy refused mirror\.corp\.example: it resolves to 127\.0\.0\.2, a loopback address \(127\.0\.0\.0\/8\); an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=mirror\.corp\.example=127\.0\.0\.2/);
  const ev = events(run);
  expect(ev.filter((e) => e.type === 'setup.command').map((e) => e.index)).toEqual([1]);
  expect(ev.some((e) => e.type === 'model.response')).toBe(false);
  expect(ev.some((e) => e.type === 'egress' && e.code === 'forbidden_address' && e.callId === 'setup-1')).toBe(true);
  expect(mirrorHits).toEqual([]);
  // Refused before anything went upstream.
  expect(upstream.seen.some((s) => s.target.includes('mirror.corp.example'))).toBe(false);
  // the report's egress table (markdown-escaped) carries the same reason
  expect(readFileSync(String(run.reportPath), 'utf8')).toContain('an operator can allow it with CORRAL\\_EGRESS\\_INTERNAL\\_HOSTS=mirror.corp.example=127.0.0.2');
});
