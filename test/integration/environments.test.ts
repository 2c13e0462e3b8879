/**
 * Environments end to end, all real: a run names an environment (corral/sandbox-node, built by
 * .ci/bootstrap), its setup phase runs `npm install` through the run's egress proxy against a package
 * this test serves on loopback under an injected name (pkgs.test, resolved by the test's DNS), and the
 * agent then works on the Node project with a `- check: npm test` done item.
 *
 * Attacks on the setup phase's egress: setup leaves a loop behind that keeps calling the package
 * server, and the agent tries the setup phase's host itself — the loop is dead before the agent's
 * first call and the agent's request is refused by the proxy (the server never sees either after the
 * narrowing). A second run with the same lockfiles restores setup's result from the cache (the
 * package is not fetched again, the commands do not run); what setup wrote is never in the patch.
 * A failing setup ends the run `setup_failed` with its output's tail, before any model call.
 */
import { createHash } from 'node:crypto';
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
import { startTestDns, type TestDns } from '../support/test-dns';
import { PART_BYTES, putStreamedWorkspace, uploadPart } from '../support/upload-stream';

jest.setTimeout(300_000);

let h: Harness;
let server: Server;
let port: number;
let dns: TestDns;
/** Every request the package server got: path and when. */
const hits: Array<{ path: string; at: number }> = [];

const agent = scriptedAgent({
  // The turns name the package server's port, known once it listens.
  'NODE-FIRST': (_body, turn) => [
    // The attack: the setup phase's host, from the agent (through the proxy, and around it).
    toolCallTurn([{ name: 'bash', args: { command: `curl -s -m 5 -o /dev/null -w 'proxied %{http_code}\\n' http://pkgs.test:${port}/secret; curl -s -m 3 --noproxy '*' http://127.0.0.1:${port}/direct; echo "direct rc=$?"; ps -eo args | grep -c '[B]GLOOP'` } }]),
    toolCallTurn([{ name: 'bash', args: { command: "ls node_modules && sed -i 's/WRONG/padded/' index.js" } }]),
    finalTurn('fixed index.js'),
  ][turn]!,
  'NODE-AGAIN': [
    toolCallTurn([{ name: 'bash', args: { command: "node -e \"console.log(require('leftpad')('x', 4))\" && sed -i 's/WRONG/padded/' index.js" } }]),
    finalTurn('fixed again'),
  ],
  'NODE-BROKEN': [finalTurn('must never be asked')],
  // Two repositories of one tenant, one lockfile: each looks at what setup left it.
  ...Object.fromEntries(['REPO-FIRST', 'REPO-SECOND', 'REPO-THIRD'].map((m) => [m, [
    toolCallTurn([{ name: 'bash', args: { command: 'cat generated.txt src/app.js; ls -A .git/hooks 2>&1 | head -3; ls node_modules' } }]),
    finalTurn('looked'),
  ]])),
  // Both runs of the 200 MB upload look at what they were given, then fix index.js.
  ...Object.fromEntries(['BIGUP-ONE', 'BIGUP-TWO'].map((m) => [m, [
    toolCallTurn([{ name: 'bash', args: { command: "sha256sum data/part-7.bin && cat data/* | wc -c && ls data | wc -l && ls node_modules && sed -i 's/WRONG/padded/' index.js" } }]),
    finalTurn('fixed the big one'),
  ]])),
});

function withPort<T>(v: T): T {
  return JSON.parse(JSON.stringify(v).replaceAll('PORT', String(port))) as T;
}

async function packageTarball(): Promise<Buffer> {
  return gzipSync(await makeTar([
    { name: 'package/package.json', body: JSON.stringify({ name: 'leftpad', version: '1.0.0', main: 'index.js' }) },
    { name: 'package/index.js', body: "module.exports = (s, n) => ' '.repeat(Math.max(0, n - s.length)) + s;\n" },
  ]));
}

beforeAll(async () => {
  const tgz = await packageTarball();
  server = createServer((req, res) => {
    hits.push({ path: req.url ?? '', at: Date.now() });
    if (req.url === '/leftpad-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
    else res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  dns = await startTestDns((n) => (n === 'pkgs.test' ? ['127.0.0.1'] : undefined));
  const dir = mkdtempSync(join(tmpdir(), 'corral-envs-'));
  writeFileSync(join(dir, 'nodetest.yaml'), `version: 1
description: Node with npm install from the test's package server
image: corral/sandbox-node:latest
env:
  npm_config_cache: /tmp/.npm
setup:
  commands:
    - npm install --no-audit --no-fund
    # The attack: a loop left behind that would keep using the setup phase's egress.
    - "setsid nohup bash -c 'while :; do curl -s -o /dev/null http://pkgs.test:${port}/bg; touch /tmp/bg-ran; sleep 0.2; done' BGLOOP >/dev/null 2>&1 &"
    # setup ends once the loop has been through at least once
    - "until [ -e /tmp/bg-ran ]; do sleep 0.1; done"
  egress: ["pkgs.test:${port}"]
cache:
  files: [package.json, package-lock.json]
examples:
  - { phase: setup, target: "pkgs.test:${port}", expect: allow }
  - { phase: agent, target: "pkgs.test:${port}", expect: deny }
`);
  writeFileSync(join(dir, 'nodetwo.yaml'), `version: 1
description: Node with npm install (and the project's own postinstall) from the test's package server
image: corral/sandbox-node:latest
env:
  npm_config_cache: /tmp/.npm
setup:
  commands:
    - npm install --no-audit --no-fund
  egress: ["pkgs.test:${port}"]
cache:
  files: [package.json, package-lock.json]
`);
  writeFileSync(join(dir, 'broken.yaml'), `version: 1
description: a setup that fails
image: corral/sandbox-node:latest
setup:
  commands:
    - echo step one
    - |
      for i in $(seq 1 400); do echo "noise line $i"; done
      echo "fatal: the toolchain is missing" >&2
      exit 3
    - echo never runs > never.txt
`);
  h = await startHarness('envs', { chat: agent, decisions: () => decisionsAnswer(0.2, 0.95) }, {
    CORRAL_ENVIRONMENT_DIR: dir, CORRAL_SANDBOX_IMAGES: 'corral/sandbox-node:latest',
  }, { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await h?.close();
  await new Promise((r) => server?.close(r));
  await dns?.close();
});

const events = (run: Record<string, unknown>) =>
  readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown> & { type: string; ts: string });

const project = () => withPort({
  'package.json': `${JSON.stringify({ name: 'app', version: '1.0.0', private: true, scripts: { test: 'node test.js' }, dependencies: { leftpad: 'http://pkgs.test:PORT/leftpad-1.0.0.tgz' } }, null, 2)}\n`,
  'index.js': "const pad = require('leftpad');\nmodule.exports = () => 'WRONG';\nmodule.exports.pad = pad;\n",
  'test.js': "const f = require('./index.js');\nif (f() !== 'padded') { console.error('expected padded, got', f()); process.exit(1); }\nif (f.pad('a', 3) !== '  a') process.exit(2);\nconsole.log('ok');\n",
});

async function runTask(task: string, environment: string, files: Record<string, string> = project()): Promise<{ run: Record<string, unknown>; ev: ReturnType<typeof events> }> {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task, environment, workspace: { files } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 240_000);
  return { run, ev: events(run) };
}

test('a Node task in the node environment: setup installs from the loopback registry, its egress is gone before the agent starts, npm test passes', async () => {
  const task = '# Task\nNODE-FIRST: make index.js return "padded"\n\n# Done means\n- check: npm test\n';
  const { run, ev } = await runTask(withPort(task), 'nodetest');
  expect(run).toMatchObject({ status: 'succeeded' });

  const types = ev.map((e) => e.type);
  expect(types.indexOf('setup.started')).toBeGreaterThan(types.indexOf('sandbox.ready'));
  expect(types.indexOf('egress.narrowed')).toBeLessThan(types.indexOf('model.response'));
  expect(ev.find((e) => e.type === 'sandbox.ready')).toMatchObject({ image: 'corral/sandbox-node:latest', environment: 'nodetest', egressAllow: [] });
  expect(ev.find((e) => e.type === 'setup.started')).toMatchObject({ environment: 'nodetest', commands: 3, cache: 'miss' });
  const cmds = ev.filter((e) => e.type === 'setup.command');
  expect(cmds.map((c) => c.exitCode)).toEqual([0, 0, 0]);
  expect(ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true, cached: 'stored', baselineFiles: expect.any(Number) });
  const narrowed = ev.find((e) => e.type === 'egress.narrowed')!;
  expect(narrowed).toMatchObject({ allow: [], proxyKilled: false });
  // The package came through the proxy during setup, attributed to setup's first command.
  expect(hits.filter((x) => x.path === '/leftpad-1.0.0.tgz')).toHaveLength(1);
  expect(ev.some((e) => e.type === 'egress' && e.decision === 'allow' && e.host === 'pkgs.test' && e.callId === 'setup-1')).toBe(true);

  // The attack: nothing reached the package server after the narrowing — not the loop, not the agent.
  const narrowedAt = Date.parse(narrowed.ts);
  expect(hits.filter((x) => x.at > narrowedAt + 50)).toEqual([]);
  expect(hits.some((x) => x.path === '/secret' || x.path === '/direct')).toBe(false);
  const probe = ev.find((e) => e.type === 'tool.result')!;
  expect(probe.output).toMatch(/proxied 403/);
  expect(probe.output).toMatch(/direct rc=[1-9]/);
  expect(String(probe.output)).toMatch(/direct rc=[1-9]\d*\n0\n/); // no BGLOOP process left
  // the tool result quotes the proxy's reason (curl shows only the status)
  expect(String(probe.output)).toMatch(/Note: the egress proxy refused connections this call opened: \n- the proxy refused pkgs\.test: pkgs\.test is not on the run's egress allowlist/);
  expect(ev.some((e) => e.type === 'egress' && e.decision === 'deny' && e.host === 'pkgs.test' && typeof e.callId === 'string' && !String(e.callId).startsWith('setup-'))).toBe(true);

  // npm test passed as the done check; the patch is the agent's change only (no node_modules, no lockfile).
  expect(ev.filter((e) => e.type === 'done.check')).toEqual([expect.objectContaining({ command: 'npm test', ok: true })]);
  const patch = readFileSync(join(String(run.logPath), '..', 'workspace.patch'), 'utf8');
  expect(patch).toContain("+module.exports = () => 'padded';");
  expect(patch).not.toMatch(/node_modules|package-lock/);
  const report = readFileSync(String(run.reportPath), 'utf8');
  expect(report).toContain('## Setup');
  expect(report).toMatch(/egress became none/);
});

test('the same lockfiles again: setup\'s result comes from the cache, the package is not fetched, the commands do not run', async () => {
  const before = hits.length;
  const { run, ev } = await runTask('# Task\nNODE-AGAIN: make index.js return "padded"\n\n# Done means\n- check: npm test\n', 'nodetest');
  expect(run).toMatchObject({ status: 'succeeded' });
  expect(ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'hit' });
  expect(ev.filter((e) => e.type === 'setup.command')).toEqual([]);
  expect(ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true, cached: 'restored' });
  expect(hits.length).toBe(before);
  expect(ev.find((e) => e.type === 'tool.result')).toMatchObject({ ok: true, output: expect.stringContaining('   x') });
  const patch = readFileSync(join(String(run.logPath), '..', 'workspace.patch'), 'utf8');
  expect(patch).not.toMatch(/node_modules|package-lock/);

  // A changed lockfile is another key: setup runs again.
  const files = { ...project(), 'package.json': project()['package.json'].replace('"1.0.0"', '"1.0.1"') };
  const third = await runTask('# Task\nNODE-AGAIN: once more\n', 'nodetest', files);
  expect(third.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'miss' });
});

/**
 * Two repositories of one tenant with the same package.json and lockfile, whose setup (npm install,
 * running the project's own postinstall: node setup.js) depends on a file the lockfile does not name.
 * Repository A's setup also rewrites a tracked file and plants a git hook.
 */
function repo(which: 'A' | 'B'): Record<string, string> {
  const p = project();
  const pkg = JSON.parse(p['package.json']!) as Record<string, unknown>;
  pkg.scripts = { ...(pkg.scripts as object), postinstall: 'node setup.js' };
  const setupJs = which === 'A'
    ? "const fs = require('fs');\nfs.writeFileSync('generated.txt', 'generated from repository A\\n');\nfs.appendFileSync('src/app.js', '// touched by A\\n');\nfs.mkdirSync('.git/hooks', { recursive: true });\nfs.writeFileSync('.git/hooks/pre-commit', '#!/bin/sh\\necho planted by A\\n', { mode: 0o755 });\n"
    : "require('fs').writeFileSync('generated.txt', 'generated from repository B\\n');\n";
  return { ...p, 'package.json': `${JSON.stringify(pkg, null, 2)}\n`, 'setup.js': setupJs, 'src/app.js': `module.exports = 'app of repository ${which}';\n` };
}

test('setup cache across two repositories of one tenant with the same lockfile: the second\'s run gets none of the first\'s files', async () => {
  const a = await runTask('# Task\nREPO-FIRST: look\n', 'nodetwo', repo('A'));
  expect(a.run).toMatchObject({ status: 'succeeded' });
  expect(a.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'miss' });
  // A's setup changed its own tracked file and git internals: such a capture is never cached.
  expect(a.ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true, cached: 'not stored', note: expect.stringMatching(/workspace's own files or git internals \(.*(workspace\/src\/app\.js|workspace\/\.git)/) });
  expect(String(a.ev.find((e) => e.type === 'tool.result')!.output)).toMatch(/generated from repository A[\s\S]*touched by A[\s\S]*pre-commit/);

  const b = await runTask('# Task\nREPO-SECOND: look\n', 'nodetwo', repo('B'));
  expect(b.run).toMatchObject({ status: 'succeeded' });
  // Another workspace is another key, whatever the lockfile says: B's own setup ran.
  expect(b.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'miss' });
  expect(b.ev.filter((e) => e.type === 'setup.command')).toHaveLength(1);
  expect(b.ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true, cached: 'stored' });
  const seen = String(b.ev.find((e) => e.type === 'tool.result')!.output);
  expect(seen).toContain('generated from repository B');
  expect(seen).toContain("app of repository B");
  expect(seen).not.toMatch(/repository A|touched by A|pre-commit/);

  // B again: its own entry, holding only what setup made.
  const again = await runTask('# Task\nREPO-THIRD: look\n', 'nodetwo', repo('B'));
  expect(again.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'hit' });
  const seen2 = String(again.ev.find((e) => e.type === 'tool.result')!.output);
  expect(seen2).toMatch(/generated from repository B[\s\S]*app of repository B/);
  expect(seen2).not.toMatch(/repository A|pre-commit/);
});

test('a failing setup ends the run setup_failed with the tail of its output; the model is never called', async () => {
  const { run, ev } = await runTask('NODE-BROKEN: anything', 'broken', { 'a.txt': 'a\n' });
  expect(run).toMatchObject({ status: 'setup_failed', errorCode: 'setup_failed' });
  expect(String(run.reason)).toMatch(/setup of environment broken: command 2 .* exited 3; its output ends:/s);
  expect(String(run.reason)).toContain('fatal: the toolchain is missing');
  expect(String(run.reason)).not.toContain('noise line 1\n');
  expect(ev.filter((e) => e.type === 'setup.command').map((e) => e.exitCode)).toEqual([0, 3]);
  expect(ev.some((e) => e.type === 'model.response')).toBe(false);
  expect((agent as unknown as { served: Record<string, number> }).served['NODE-BROKEN']).toBeUndefined();
  const report = readFileSync(String(run.reportPath), 'utf8');
  expect(report).toMatch(/## Setup[\s\S]*exit 3[\s\S]*fatal: the toolchain is missing/);
});

test('an unknown environment is refused at submission, naming the field', async () => {
  const r = await h.api('POST', '/v1/runs', { task: 'x', environment: 'nosuch' });
  expect(r.status).toBe(400);
  expect(JSON.stringify(r.body)).toMatch(/environment.*nosuch.*default.*nodetest/);
  const plan = await h.api('POST', '/v1/runs?dryRun=true', { task: 'x', environment: 'nodetest' });
  expect(plan.body).toMatchObject({ environment: { name: 'nodetest', image: 'corral/sandbox-node:latest', cached: true } });
});

/** The project (package.json at version 2.0.0) and 20 files of 10 MB, streamed to PUT /v1/workspaces. */
async function uploadBig(): Promise<{ id: string; part7: string; bytes: number }> {
  const files = { ...project(), 'package.json': project()['package.json'].replace('"1.0.0"', '"2.0.0"') };
  const res = await putStreamedWorkspace(h.url, files, 20);
  expect(res).toEqual({ status: 201, body: expect.objectContaining({ files: 23 }) });
  return { id: res.body.id as string, part7: createHash('sha256').update(uploadPart(7)).digest('hex'), bytes: 20 * PART_BYTES };
}

test('a 200 MB upload in the node environment: setup runs once; the same upload again restores it from the cache; the sandbox holds the upload byte for byte', async () => {
  const up = await uploadBig();
  expect(up.bytes).toBe(200 * 1024 * 1024);
  const task = (m: string) => `# Task\n${m}: make index.js return "padded"\n\n# Done means\n- check: npm test\n`;
  const runIt = async (m: string) => {
    const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: task(m), environment: 'nodetest', workspace: { id: up.id } });
    expect(created.status).toBe(201);
    const run = await h.waitFor(created.body.id, undefined, 240_000);
    return { run, ev: events(run) };
  };
  const fetched = () => hits.filter((x) => x.path === '/leftpad-1.0.0.tgz').length;
  const before = fetched();
  const first = await runIt('BIGUP-ONE');
  expect([first.run.status, first.run.reason]).toEqual(['succeeded', expect.any(String)]);
  expect(first.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'miss', environment: 'nodetest' });
  expect(first.ev.find((e) => e.type === 'setup.finished')).toMatchObject({ ok: true, cached: 'stored' });
  expect(fetched()).toBe(before + 1);
  const second = await runIt('BIGUP-TWO');
  expect([second.run.status, second.run.reason]).toEqual(['succeeded', expect.any(String)]);
  expect(second.ev.find((e) => e.type === 'setup.started')).toMatchObject({ cache: 'hit' });
  expect(second.ev.filter((e) => e.type === 'setup.command')).toEqual([]);
  expect(fetched()).toBe(before + 1); // not fetched again
  for (const { run, ev } of [first, second]) {
    const seen = String(ev.find((e) => e.type === 'tool.result')!.output);
    expect(seen).toContain(`${up.part7}  data/part-7.bin`);
    expect(seen).toMatch(/\b209715200\n20\nleftpad\b/);
    expect(ev.filter((e) => e.type === 'done.check')).toEqual([expect.objectContaining({ command: 'npm test', ok: true })]);
    const patch = readFileSync(join(String(run.logPath), '..', 'workspace.patch'), 'utf8');
    expect(patch).toContain("+module.exports = () => 'padded';");
    expect(patch).not.toMatch(/node_modules|package-lock|part-\d/);
  }
});
