/**
 * The README's claim, end to end and for real: `git apply` of a run's workspace.patch on the original
 * tree reproduces the sandbox's tree — every file the workspace's .gitignore does not name, byte for
 * byte, with its executable bit — for a Node, a Python and a binary-file run. Each run goes in through
 * `corral submit --workspace DIR` (a child process) and its artifacts come back through
 * `corral artifacts RUN patch|tar -o FILE`.
 *
 * Node (the end-to-end case of items 2–4): a directory over 2 MiB (so it is uploaded, not inline)
 * holding relative symlinks (`bin/check -> ../scripts/check.js`, `node_modules/.bin/leftpad`) that
 * `npm test` needs; the node environment's image runs Node 22; setup installs from a registry the test
 * serves on loopback (under a name the test's DNS answers), through the run's egress proxy; the agent
 * builds (dist/, coverage/, *.tsbuildinfo, node_modules/.vite: ignored, counted, not in the patch),
 * adds and deletes binary files (git binary patches), and commits without `git config`.
 * Python: the python environment makes a venv and installs requirements.txt from a PyPI-style index
 * the test serves, then the project (`pip install -e .`); `python` and `pytest` are the venv's.
 * Binary: binary files added, changed, deleted, made executable, a text file turned binary.
 */
import { execFile, execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmodSync, cpSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { makeTar } from '../support/make-tar';
import { environmentImages } from '../support/sandbox-env';
import { startTestDns, type TestDns } from '../support/test-dns';

jest.setTimeout(600_000);
const CORRAL = resolve(__dirname, '../../bin/corral');
const images = environmentImages();

let h: Harness;
let server: Server;
let port: number;
let dns: TestDns;
let work: string;
const hits: string[] = [];
let wheel: Buffer;

const agent = scriptedAgent({
  // One tool call each: a call that writes code and runs it at once is the gate's to ask about.
  'RT-NODE': (_body: Record<string, unknown>, turn: number) => [
    toolCallTurn([{ name: 'bash', args: { command: "node --version && ls -l bin/check node_modules/.bin/leftpad && sed -i 's/WRONG/padded/' index.js" } }]),
    toolCallTurn([{ name: 'bash', args: { command: 'npm run build --silent' } }]),
    toolCallTurn([{ name: 'bash', args: { command: "printf '\\211PNG\\000\\001\\002\\003\\377' > assets/logo.png && rm assets/old.bin" } }]),
    toolCallTurn([{ name: 'bash', args: { command: 'git init -q && git add index.js && git commit -qm fix && git log --format="%an <%ae>" -1' } }]),
  ][turn] ?? finalTurn('fixed index.js, built, added a logo'),
  'RT-PYTHON': (_body: Record<string, unknown>, turn: number) => [
    toolCallTurn([{ name: 'bash', args: { command: 'command -v python pip pytest; ls .venv/lib/python3*/site-packages | grep -i leftpad' } }]),
    toolCallTurn([{ name: 'bash', args: { command: 'sed -i "s/return 0/return a + b/" myproj/__init__.py' } }]),
    toolCallTurn([{ name: 'bash', args: { command: 'python -m pytest -q' } }]),
  ][turn] ?? finalTurn('fixed add()'),
  'RT-BINARY': (_body: Record<string, unknown>, turn: number) => [
    toolCallTurn([{ name: 'bash', args: { command: 'head -c 1024 /dev/urandom > data/new.bin && head -c 300 /dev/urandom >> data/a.bin && rm data/gone.bin' } }]),
    toolCallTurn([{ name: 'bash', args: { command: "printf 'now\\000binary' > notes.txt && printf 'one\\r\\nTWO\\r\\n' > crlf.txt" } }]),
    toolCallTurn([{ name: 'bash', args: { command: 'chmod +x tool.sh' } }]),
  ][turn] ?? finalTurn('changed the binaries'),
});

async function corral(args: string[]): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(CORRAL, args, { env: { ...process.env, CORRAL_API_URL: h.url }, maxBuffer: 32 * 1024 * 1024 });
}

/** A wheel of a tiny package, made with Python's zipfile (a wheel is a zip with a dist-info). */
function makeWheel(dir: string): Buffer {
  const out = join(dir, 'leftpadpy-1.0-py3-none-any.whl');
  execFileSync('python3', ['-c', `
import zipfile, hashlib, base64, sys
files = {
  'leftpadpy/__init__.py': b'def leftpad(s, n):\\n    return " " * max(0, n - len(s)) + s\\n',
  'leftpadpy-1.0.dist-info/METADATA': b'Metadata-Version: 2.1\\nName: leftpadpy\\nVersion: 1.0\\n',
  'leftpadpy-1.0.dist-info/WHEEL': b'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n',
}
record = ''.join('%s,sha256=%s,%d\\n' % (n, base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode(), len(b)) for n, b in files.items())
record += 'leftpadpy-1.0.dist-info/RECORD,,\\n'
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    for n, b in files.items(): z.writestr(n, b)
    z.writestr('leftpadpy-1.0.dist-info/RECORD', record)
`, out]);
  return readFileSync(out);
}

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'corral-roundtrip-'));
  wheel = makeWheel(work);
  const tgz = gzipSync(await makeTar([
    { name: 'package/package.json', body: JSON.stringify({ name: 'leftpad', version: '1.0.0', main: 'index.js', bin: { leftpad: 'cli.js' } }) },
    { name: 'package/index.js', body: "module.exports = (s, n) => ' '.repeat(Math.max(0, n - s.length)) + s;\n" },
    { name: 'package/cli.js', body: "#!/usr/bin/env node\nconsole.log(require('./index.js')(process.argv[2], Number(process.argv[3])));\n", mode: 0o755 },
  ]));
  const sha256 = createHash('sha256').update(wheel).digest('hex');
  server = createServer((req, res) => {
    hits.push(req.url ?? '');
    if (req.url === '/leftpad-1.0.0.tgz') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(tgz);
    else if (req.url === '/simple/leftpadpy/') res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><body><a href="/files/leftpadpy-1.0-py3-none-any.whl#sha256=${sha256}">leftpadpy-1.0-py3-none-any.whl</a></body></html>`);
    else if (req.url === '/files/leftpadpy-1.0-py3-none-any.whl') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(wheel);
    else res.writeHead(404).end('no');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
  dns = await startTestDns((n) => (n === 'pkgs.test' || n === 'pypi.test' ? ['127.0.0.1'] : undefined));
  const envDir = join(work, 'environments');
  mkdirSync(envDir);
  // The shipped environments with the test's registry and index in place of the public ones.
  writeFileSync(join(envDir, 'node.yaml'), readFileSync(resolve(__dirname, '../../environments/node.yaml'), 'utf8')
    .replace('image: corral/sandbox-node:latest', `image: ${images.node}`)
    .replace(/\n {4}- registry\.npmjs\.org\n/, `\n    - "pkgs.test:${port}"\n`)
    .replace(/\nexamples:[\s\S]*$/, '\n'));
  writeFileSync(join(envDir, 'python.yaml'), readFileSync(resolve(__dirname, '../../environments/python.yaml'), 'utf8')
    .replace('image: corral/sandbox-python:latest', `image: ${images.python}`)
    .replace('PIP_INDEX_URL: https://pypi.org/simple', `PIP_INDEX_URL: http://pypi.test:${port}/simple\n  PIP_TRUSTED_HOST: pypi.test`)
    .replace(/\n {4}- pypi\.org\n {4}- files\.pythonhosted\.org\n/, `\n    - "pypi.test:${port}"\n`)
    .replace(/\nexamples:[\s\S]*$/, '\n'));
  h = await startHarness('roundtrip', { chat: agent }, {
    CORRAL_ENVIRONMENT_DIR: envDir, CORRAL_SANDBOX_IMAGES: `${images.node},${images.python}`,
  }, { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await h?.close();
  await new Promise((r) => server?.close(r));
  await dns?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function writeTree(dir: string, files: Record<string, string | Buffer>, modes: Record<string, number> = {}): void {
  for (const [p, body] of Object.entries(files)) {
    mkdirSync(join(dir, p, '..'), { recursive: true });
    writeFileSync(join(dir, p), body);
    if (modes[p]) chmodSync(join(dir, p), modes[p]);
  }
}

/** The files `git status` would show in `dir` by the tree's own .gitignore: path → digest and executable bit (symlinks apart). */
function visibleFiles(dir: string, setupWrote: readonly string[] = []): Record<string, string> {
  // The sandbox's own .git (the agent committed) is in the tar, never in the patch: not compared.
  rmSync(join(dir, '.git'), { recursive: true, force: true });
  execFileSync('git', ['init', '-q'], { cwd: dir });
  const listed = execFileSync('git', ['-c', 'core.excludesFile=/dev/null', 'ls-files', '--others', '--exclude-standard', '-z'], { cwd: dir }).toString().split('\0').filter(Boolean);
  rmSync(join(dir, '.git'), { recursive: true, force: true });
  const out: Record<string, string> = {};
  for (const p of listed.sort()) {
    if (setupWrote.includes(p)) continue;
    const st = lstatSync(join(dir, p));
    if (!st.isFile()) continue;
    out[p] = `${createHash('sha256').update(readFileSync(join(dir, p))).digest('hex').slice(0, 16)}${st.mode & 0o100 ? ' x' : ''}`;
  }
  return out;
}

/** Submits DIR with the CLI, waits for the run, fetches its patch and tar with the CLI, and checks the claim. */
async function roundTrip(marker: string, dir: string, taskExtra: string, environment?: string, setupWrote: readonly string[] = []): Promise<{ run: Record<string, unknown>; patch: string; submit: string; applied: Record<string, string> }> {
  const taskFile = join(dir, '..', `${marker}.md`);
  writeFileSync(taskFile, `# Task\n${marker}: do the work\n\n${taskExtra}`);
  const sub = await corral(['submit', taskFile, '--workspace', dir, ...(environment ? ['--environment', environment] : [])]);
  const id = sub.stdout.trim();
  expect(id).toMatch(/^run_/);
  const run = await h.waitFor(id, undefined, 300_000);
  if (run.status !== 'succeeded') {
    const told = readFileSync(String(run.logPath), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((e) => ['tool.result', 'done.check', 'setup.command'].includes(String(e.type))).map((e) => JSON.stringify(e).slice(0, 1500));
    throw new Error(`run ${id} ended ${String(run.status)}: ${String(run.reason)}\n${told.join('\n')}`);
  }
  const patchFile = join(dir, '..', `${marker}.patch`);
  const tarFile = join(dir, '..', `${marker}.tar`);
  await corral(['artifacts', id, 'patch', '-o', patchFile]);
  await corral(['artifacts', id, 'tar', '-o', tarFile]);
  const applied = join(dir, '..', `${marker}-applied`);
  cpSync(dir, applied, { recursive: true, verbatimSymlinks: true });
  execFileSync('git', ['apply', '--check', patchFile], { cwd: applied });
  execFileSync('git', ['apply', patchFile], { cwd: applied });
  const sandbox = join(dir, '..', `${marker}-sandbox`);
  mkdirSync(sandbox);
  execFileSync('tar', ['-xf', tarFile, '-C', sandbox]);
  // The claim: the original tree with the patch applied is the sandbox's tree (what .gitignore does not
  // name), but for what the environment's setup wrote: that is the patch's baseline, not the agent's change.
  const got = visibleFiles(applied);
  expect(got).toEqual(visibleFiles(sandbox, setupWrote));
  return { run, patch: readFileSync(patchFile, 'utf8'), submit: sub.stderr, applied: got };
}

test('Node: an uploaded directory with relative symlinks, setup through the proxy, a build and binary files; the patch applies', async () => {
  const dir = join(work, 'node-project');
  writeTree(dir, {
    'package.json': `${JSON.stringify({ name: 'app', version: '1.0.0', private: true, scripts: { test: './bin/check && leftpad x 3 && node test.js', build: 'node build.js' }, dependencies: { leftpad: `http://pkgs.test:${port}/leftpad-1.0.0.tgz` } }, null, 2)}\n`,
    'index.js': "module.exports = () => 'WRONG';\n",
    'test.js': "if (require('./index.js')() !== 'padded') { console.error('not padded'); process.exit(1); }\nconsole.log('ok');\n",
    'build.js': [
      "const fs = require('fs');",
      "for (const d of ['dist', 'coverage', 'node_modules/.vite']) fs.mkdirSync(d, { recursive: true });",
      "fs.writeFileSync('dist/index.js', fs.readFileSync('index.js'));",
      "fs.writeFileSync('coverage/lcov.info', 'TN:\\n');",
      "fs.writeFileSync('tsconfig.tsbuildinfo', '{}');",
      "fs.writeFileSync('node_modules/.vite/deps.json', '{}');",
    ].join('\n'),
    'scripts/check.js': "#!/usr/bin/env node\nconsole.log('check ok');\n",
    '.gitignore': 'node_modules/\ndist/\ncoverage/\n*.tsbuildinfo\n',
    // A developer's directory: dependencies installed, their .bin links with them.
    'node_modules/leftpad/package.json': JSON.stringify({ name: 'leftpad', version: '1.0.0', bin: { leftpad: 'cli.js' } }),
    'node_modules/leftpad/index.js': "module.exports = (s, n) => ' '.repeat(Math.max(0, n - s.length)) + s;\n",
    'node_modules/leftpad/cli.js': "#!/usr/bin/env node\nconsole.log(require('./index.js')(process.argv[2], Number(process.argv[3])));\n",
    'assets/big.bin': randomBytes(2_600_000),
    'assets/old.bin': randomBytes(300),
  }, { 'scripts/check.js': 0o755, 'node_modules/leftpad/cli.js': 0o755 });
  mkdirSync(join(dir, 'bin'));
  symlinkSync('../scripts/check.js', join(dir, 'bin', 'check'));
  mkdirSync(join(dir, 'node_modules', '.bin'));
  symlinkSync('../leftpad/cli.js', join(dir, 'node_modules', '.bin', 'leftpad'));
  symlinkSync(join(work, 'outside.txt'), join(dir, 'escapes'));

  // npm install (setup) wrote package-lock.json: the baseline, not the agent's change.
  const { run, patch, submit } = await roundTrip('RT-NODE', dir, '# Done means\n- check: `npm test`\n', 'node', ['package-lock.json']);
  // Over 2 MiB: uploaded; the links inside kept, the one that leaves named and skipped.
  expect(submit).toMatch(/uploaded .*node-project: .* 2 symbolic link\(s\), \d+ bytes of files as ws_[0-9a-f]{64}/);
  expect(submit).toMatch(/skipped escapes: a symbolic link that is not kept: it points to the absolute path .*outside\.txt/);
  const ev = readFileSync(String(run.logPath), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  // Setup installed through the proxy; the sandbox runs Node 22; npm test (with its symlinks) passed as the done check.
  expect(ev.filter((e) => e.type === 'setup.command').map((e) => e.exitCode)).toEqual([0]);
  expect(hits).toContain('/leftpad-1.0.0.tgz');
  const results = ev.filter((e) => e.type === 'tool.result');
  expect(results.map((r) => [r.ok, r.summary])).toEqual(results.map(() => [true, expect.anything()]));
  const out = results.map((r) => String(r.output)).join('\n');
  expect(out).toMatch(/^v22\./m);
  expect(out).toContain(`corral-agent <${run.id as string}@corral.invalid>`);
  expect(ev.filter((e) => e.type === 'done.check')).toEqual([expect.objectContaining({ command: 'npm test', ok: true })]);
  // Setup's time is reported apart from the agent's wall time (which starts after it).
  const usage = run.usage as { setupMs?: number; wallTimeMs: number };
  const setupFinished = ev.find((e) => e.type === 'setup.finished') as { ms: number };
  expect(usage.setupMs).toBeGreaterThanOrEqual(setupFinished.ms);
  expect(ev.find((e) => e.type === 'run.finished')).toMatchObject({ usage: { setupMs: usage.setupMs } });
  expect((await corral(['report', String(run.id)])).stdout).toMatch(/Setup took \d+\.\d s, apart from the wall time above/);
  // The patch: the agent's change and its binary files; no build output, no node_modules.
  expect(patch).toContain("+module.exports = () => 'padded';");
  expect(patch).toMatch(/diff --git a\/assets\/logo\.png b\/assets\/logo\.png\nnew file mode 100644\nindex 0{40}\.\.[0-9a-f]{40}\nGIT binary patch\nliteral 9\n/);
  expect(patch).toMatch(/diff --git a\/assets\/old\.bin b\/assets\/old\.bin\ndeleted file mode 100644\nindex [0-9a-f]{40}\.\.0{40}\nGIT binary patch\nliteral 0\n/);
  expect(patch).not.toMatch(/dist\/|coverage\/|tsbuildinfo|node_modules/);
  const changes = ev.find((e) => e.type === 'workspace.changes') as { ignored?: { count: number; paths: string[] } };
  expect(changes.ignored?.paths).toEqual(expect.arrayContaining(['coverage/lcov.info', 'dist/index.js', 'node_modules/.vite/deps.json', 'tsconfig.tsbuildinfo']));
  expect((run.workspace as { ignoredChanges: number }).ignoredChanges).toBe(changes.ignored!.count);
});

test('Python: a venv with requirements from the index the environment names, the project installed editable; the patch applies', async () => {
  const dir = join(work, 'py-project');
  writeTree(dir, {
    'setup.py': "from setuptools import setup\nsetup(name='myproj', version='0.1', packages=['myproj'])\n",
    'requirements.txt': 'leftpadpy==1.0\n',
    'myproj/__init__.py': 'def add(a, b):\n    return 0\n',
    'tests/test_add.py': 'from leftpadpy import leftpad\nfrom myproj import add\n\ndef test_add():\n    assert add(2, 3) == 5\n    assert leftpad("x", 2) == " x"\n',
    '.gitignore': '.venv/\n*.egg-info/\n__pycache__/\n',
  });
  const { run, patch } = await roundTrip('RT-PYTHON', dir, '# Done means\n- check: `python -m pytest -q`\n', 'python');
  const ev = readFileSync(String(run.logPath), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  expect(ev.filter((e) => e.type === 'setup.command').map((e) => e.exitCode)).toEqual([0, 0]);
  expect(hits).toEqual(expect.arrayContaining(['/simple/leftpadpy/', '/files/leftpadpy-1.0-py3-none-any.whl']));
  const results = ev.filter((e) => e.type === 'tool.result');
  expect(results.map((r) => [r.ok, r.summary])).toEqual(results.map(() => [true, expect.anything()]));
  const out = results.map((r) => String(r.output)).join('\n');
  expect(out).toContain('leftpadpy');
  expect(out).toContain('/workspace/.venv/bin/python');
  expect(out).toContain('/workspace/.venv/bin/pip');
  expect(out).toContain('1 passed');
  expect(patch).toContain('-    return 0\n+    return a + b\n');
  expect(patch).not.toMatch(/\.venv|egg-info/);
});

test('binary files added, changed, deleted, made executable; text turned binary: the patch applies', async () => {
  const dir = join(work, 'bin-project');
  writeTree(dir, {
    'data/a.bin': randomBytes(2000), 'data/gone.bin': randomBytes(500), 'notes.txt': 'plain text\n', 'crlf.txt': 'one\r\ntwo\r\n', 'tool.sh': '#!/bin/sh\necho hi\n',
  });
  const { run, patch } = await roundTrip('RT-BINARY', dir, '');
  const results = readFileSync(String(run.logPath), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.type === 'tool.result');
  expect(results.map((r) => [r.ok, r.summary])).toEqual(results.map(() => [true, expect.anything()]));
  expect(patch.match(/GIT binary patch/g)).toHaveLength(4); // a.bin, gone.bin, new.bin, notes.txt
  expect(patch).toContain('diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n');
  expect(patch).toContain('-two\r\n+TWO\r\n');
  // Nothing of it could be read as "Binary files … differ", which git apply refuses.
  expect(patch).not.toContain('Binary files');
  expect(readdirSync(join(dir, 'data')).sort()).toEqual(['a.bin', 'gone.bin']); // the original is untouched
});
