/**
 * Git workspaces end to end against git servers this test starts on loopback: `git daemon` (a public
 * repository over git://), `git http-backend` behind HTTP and HTTPS servers with Basic auth (a private
 * one over http:// and https://, its password in the operator's credentials file; the https server's
 * certificate from a test CA given as CORRAL_GIT_CA_FILE, and an impostor's from another CA), and an
 * ssh server serving only git-upload-pack (the operator's key and known_hosts; an impostor host key). The worker clones; the agent
 * works and commits in the checkout; the run returns the patch and a bundle of the agent's commits
 * that applies to the original repository. The password must appear nowhere the agent or the tenant
 * can read: not in the sandbox (its .git/config, its environment, its files), the log, the report,
 * the patch or the workspace tar. Remotes off the allowlist — another port, another path, a user in
 * the URL, file:// and ext::, `..` segments, an option-like host — are refused at submission naming
 * workspace.git.url; a redirect from the allowed server to another is not followed.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as httpsServer } from 'node:https';
import { createServer as netServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decisionsAnswer } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { startSshGitServer, type SshGitServer } from '../support/ssh-git-server';
import { eventually } from '../support/eventually';

jest.setTimeout(240_000);

const SECRET = `s3cret-${Math.random().toString(36).slice(2)}-token`;
let h: Harness;
let root: string;
let daemon: ChildProcess;
let daemonPort: number;
let http: Server;
let httpPort: number;
const httpSeen: string[] = [];
let ssh: SshGitServer;
let https: Server;
let httpsPort: number;
let impostor: Server;
let impostorPort: number;

const gitEnv = { ...process.env, GIT_CONFIG_NOSYSTEM: '1', GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
const git = (cwd: string, ...args: string[]) => execFileSync('git', args, { cwd, env: gitEnv, encoding: 'utf8' }).trim();

function makeRepo(name: string, files: Record<string, string>): string {
  const work = join(root, `${name}-work`);
  mkdirSync(work, { recursive: true });
  git(work, 'init', '-q', '-b', 'main');
  for (const [p, c] of Object.entries(files)) {
    mkdirSync(join(work, p, '..'), { recursive: true });
    writeFileSync(join(work, p), c);
  }
  git(work, 'add', '.');
  git(work, 'commit', '-qm', `first commit of ${name}`);
  git(root, 'clone', '-q', '--bare', work, join(root, 'srv', `${name}.git`));
  return git(work, 'rev-parse', 'HEAD');
}

const freePort = () => new Promise<number>((r) => {
  const s = netServer().listen(0, '127.0.0.1', () => {
    const p = (s.address() as AddressInfo).port;
    s.close(() => r(p));
  });
});

/** git http-backend as CGI behind Basic auth (only /private/…); /private/moved.git redirects to the daemon. */
function startHttpGit(tls?: { key: string; cert: string }): Promise<Server> {
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    httpSeen.push(`${tls ? 'https' : 'http'} ${req.method} ${req.url} ${req.headers.authorization ? 'auth' : 'anon'}`);
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname.startsWith('/private/moved.git/')) {
      res.writeHead(302, { location: `git://127.0.0.1:${daemonPort}/public.git` }).end();
      return;
    }
    const auth = req.headers.authorization ?? '';
    if (auth !== `Basic ${Buffer.from(`bot:${SECRET}`).toString('base64')}`) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end('auth needed');
      return;
    }
    const cgi = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH!, GIT_PROJECT_ROOT: join(root, 'srv'), GIT_HTTP_EXPORT_ALL: '1', REMOTE_USER: 'bot',
        PATH_INFO: url.pathname.replace(/^\/private/, ''), QUERY_STRING: url.search.slice(1), REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '', ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
      },
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let headersDone = false;
    cgi.stdout.on('data', (c: Buffer) => {
      if (headersDone) return void res.write(c);
      head = Buffer.concat([head, c]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      headersDone = true;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString('latin1').split('\r\n')) {
        const i = line.indexOf(':');
        const k = line.slice(0, i).trim().toLowerCase();
        const v = line.slice(i + 1).trim();
        if (k === 'status') status = Number(v.split(' ')[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
    });
    cgi.on('close', () => res.end());
  };
  const server = tls ? httpsServer(tls, handler) : createServer(handler);
  return new Promise((r) => server.listen(0, '127.0.0.1', () => r(server)));
}

/** A CA and a certificate it signed for 127.0.0.1 (openssl), under `dir`. */
function makeCa(dir: string, name: string): { caFile: string; key: string; cert: string } {
  mkdirSync(dir, { recursive: true });
  const ssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  ssl('req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-subj', `/CN=${name} CA`, '-days', '2');
  ssl('req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=127.0.0.1');
  writeFileSync(join(dir, 'ext.cnf'), 'subjectAltName=IP:127.0.0.1\n');
  ssl('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'ext.cnf');
  return { caFile: join(dir, 'ca.pem'), key: readFileSync(join(dir, 'leaf.key'), 'utf8'), cert: readFileSync(join(dir, 'leaf.pem'), 'utf8') };
}

let publicHead: string;
let privateHead: string;
// The agent looks for the password everywhere it can (the http and https runs).
const lookForPassword = [
  toolCallTurn([{ name: 'bash', args: { command: 'cat .git/config; env; ls -la ~ /tmp; grep -rs "s3cret" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; echo scanned' } }]),
  finalTurn('looked around'),
];
const agent = scriptedAgent({
  'GIT-PUBLIC': [
    toolCallTurn([{ name: 'bash', args: { command: "git log --oneline | head -3 && sed -i 's/return a - b/return a + b/' calc.py && git commit -qam 'fix add' && git log --oneline | head -1" } }]),
    finalTurn('fixed and committed'),
  ],
  'GIT-PRIVATE': lookForPassword,
  'GIT-HTTPS': lookForPassword,
  'GIT-SSH': [
    // The agent looks for any private key (the gate would refuse a look into ~/.ssh; grep over / is allowed).
    toolCallTurn([{ name: 'bash', args: { command: 'cat .git/config; env | grep -i ssh; grep -rlsIF "BEGIN OPENSSH PRIVATE KEY" / --exclude-dir=proc --exclude-dir=sys 2>/dev/null | head -3; echo scanned' } }]),
    finalTurn('looked around'),
  ],
});

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'corral-git-'));
  mkdirSync(join(root, 'srv'));
  publicHead = makeRepo('public', { 'calc.py': 'def add(a, b):\n    return a - b\n', 'README.md': '# calc\n' });
  privateHead = makeRepo('private', { 'secret-plans.txt': 'world domination\n', 'src/app.py': 'print(1)\n' });
  daemonPort = await freePort();
  daemon = spawn('git', ['daemon', '--reuseaddr', '--export-all', `--base-path=${join(root, 'srv')}`, '--listen=127.0.0.1', `--port=${daemonPort}`, join(root, 'srv')], { stdio: 'ignore' });
  await eventually(() => { execFileSync('git', ['ls-remote', `git://127.0.0.1:${daemonPort}/public.git`], { stdio: 'ignore', timeout: 10_000 }); return true; }, { what: 'the git daemon to serve' });
  http = await startHttpGit();
  httpPort = (http.address() as AddressInfo).port;
  const trusted = makeCa(join(root, 'tls'), 'corral-test');
  const untrusted = makeCa(join(root, 'tls-impostor'), 'impostor');
  https = await startHttpGit(trusted);
  httpsPort = (https.address() as AddressInfo).port;
  impostor = await startHttpGit(untrusted);
  impostorPort = (impostor.address() as AddressInfo).port;
  ssh = await startSshGitServer({ dir: join(root, 'ssh'), reposDir: join(root, 'srv'), user: 'git' });
  const creds = join(root, 'git-credentials.json');
  writeFileSync(creds, JSON.stringify({
    default: [
      { url: `http://127.0.0.1:${httpPort}/private/`, username: 'bot', password: SECRET },
      { url: `https://127.0.0.1:${httpsPort}/private/`, username: 'bot', password: SECRET },
      { url: `https://127.0.0.1:${impostorPort}/private/`, username: 'bot', password: SECRET },
      { url: `ssh://git@127.0.0.1:${ssh.port}/`, sshKeyFile: ssh.keyFile, knownHostsFile: ssh.knownHostsFile },
      // The same server under another path, with a known_hosts that names another host key.
      { url: `ssh://git@127.0.0.1:${ssh.port}/wrong/`, sshKeyFile: ssh.keyFile, knownHostsFile: ssh.wrongKnownHostsFile },
    ],
  }));
  h = await startHarness('git', { chat: agent, decisions: () => decisionsAnswer(0.2, 0.95) }, {
    CORRAL_GIT_REMOTES: [
      `git://127.0.0.1:${daemonPort}/`, `http://127.0.0.1:${httpPort}/private/`, `https://127.0.0.1:${httpsPort}/private/`,
      `https://127.0.0.1:${impostorPort}/private/`, `ssh://git@127.0.0.1:${ssh.port}/`,
    ].join(','),
    CORRAL_GIT_CREDENTIALS_FILE: creds,
    CORRAL_GIT_CA_FILE: trusted.caFile,
  });
});
afterAll(async () => {
  await h?.close();
  daemon?.kill();
  await new Promise((r) => http?.close(r));
  await new Promise((r) => https?.close(r));
  await new Promise((r) => impostor?.close(r));
  await ssh?.close();
});

/** The run's files and what the API and worker said: none may hold `secret`. */
async function expectNowhere(run: Record<string, unknown>, id: string, secret: string): Promise<void> {
  const runDir = join(String(run.logPath), '..');
  for (const f of ['events.jsonl', 'report.md', 'workspace.tar', 'workspace.patch']) {
    expect([f, readFileSync(join(runDir, f)).includes(secret)]).toEqual([f, false]);
  }
  expect(JSON.stringify(await h.api('GET', `/v1/runs/${id}`))).not.toContain(secret);
  expect(JSON.stringify(h.logs)).not.toContain(secret);
}

const events = (run: Record<string, unknown>) => readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);

test('a public repository over git://: cloned by the worker, the agent commits, the patch and a bundle that applies to the original come back', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-PUBLIC: fix add()', workspace: { git: { url: `git://127.0.0.1:${daemonPort}/public.git`, ref: 'main', bundle: true } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'succeeded' });
  const ev = events(run);
  expect(ev.find((e) => e.type === 'workspace.cloned')).toMatchObject({ url: `git://127.0.0.1:${daemonPort}/public.git`, ref: 'main', commit: publicHead, credential: false });
  expect(String(ev.find((e) => e.type === 'tool.result')!.output)).toContain('first commit of public');
  const runDir = join(String(run.logPath), '..');
  const patch = readFileSync(join(runDir, 'workspace.patch'), 'utf8');
  expect(patch).toContain('+    return a + b');
  expect(ev.find((e) => e.type === 'git.bundle')).toMatchObject({ branch: `corral/${created.body.id}`, commits: 1, path: expect.any(String) });
  // The bundle applies to a fresh clone of the original.
  const check = mkdtempSync(join(tmpdir(), 'corral-git-check-'));
  git(check, 'clone', '-q', join(root, 'srv', 'public.git'), 'c');
  git(join(check, 'c'), 'fetch', '-q', join(runDir, 'agent.bundle'), `corral/${created.body.id}:agent`);
  expect(git(join(check, 'c'), 'log', '--format=%s', '-1', 'agent')).toBe('fix add');
  expect(git(join(check, 'c'), 'show', 'agent:calc.py')).toContain('return a + b');
  expect(git(join(check, 'c'), 'rev-parse', 'agent~1')).toBe(publicHead);
  // The agent committed without `git config`: its identity came from the run's environment, and
  // .git/config was never touched (no git-config flag).
  expect(git(join(check, 'c'), 'log', '--format=%an <%ae> / %cn <%ce>', '-1', 'agent')).toBe(`corral-agent <${created.body.id}@corral.invalid> / corral-agent <${created.body.id}@corral.invalid>`);
  expect((run.workspace as { needsReview: Array<{ rule: string }> }).needsReview.map((f) => f.rule)).not.toContain('git-config');
});

test('a private repository over http with the tenant\'s credentials: the password is nowhere the agent or the tenant can read', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-PRIVATE: look around', workspace: { git: { url: `http://127.0.0.1:${httpPort}/private/private.git` } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'succeeded' });
  const ev = events(run);
  expect(ev.find((e) => e.type === 'workspace.cloned')).toMatchObject({ commit: privateHead, credential: true, ref: null });
  expect(httpSeen.some((s) => s.endsWith(' auth'))).toBe(true);
  const out = String(ev.find((e) => e.type === 'tool.result')!.output);
  expect(out).toContain(`url = http://127.0.0.1:${httpPort}/private/private.git`);
  expect(out).toContain('scanned');
  expect(out).not.toContain(SECRET);
  expect(readFileSync(join(String(run.logPath), '..', 'workspace.tar')).includes('world domination')).toBe(true);
  await expectNowhere(run, created.body.id, SECRET);
});

test('remotes off the allowlist are refused at submission, naming workspace.git.url', async () => {
  const bad = [
    `git://127.0.0.1:${daemonPort + 1}/public.git`, // another port
    `http://127.0.0.1:${httpPort}/other/private.git`, // outside the prefix
    `http://bot:${SECRET}@127.0.0.1:${httpPort}/private/private.git`, // a password in the URL
    `http://bot@127.0.0.1:${httpPort}/private/private.git`, // a user in the URL
    'file:///etc', 'ext::sh -c touch% /tmp/pwned', `${join(root, 'srv', 'public.git')}`,
    `git://127.0.0.1:${daemonPort}/../../etc`, `http://127.0.0.1:${httpPort}/private/../other/x.git`, `http://127.0.0.1:${httpPort}/private/%2e%2e/x.git`,
    'ssh://-oProxyCommand=touch%20/tmp/x/repo', 'git@-oProxyCommand=x:repo', `git://localhost:${daemonPort}/public.git`,
  ];
  for (const url of bad) {
    const r = await h.api<{ error: { message: string; field?: string } }>('POST', '/v1/runs', { task: 'x', workspace: { git: { url } } });
    expect([url, r.status]).toEqual([url, 400]);
    expect(JSON.stringify(r.body)).toContain('workspace.git.url');
    expect(JSON.stringify(r.body)).not.toContain(SECRET);
  }
  const refs = ['--upload-pack=touch /tmp/x', 'a..b', 'main.lock', 'x y'];
  for (const ref of refs) {
    const r = await h.api('POST', '/v1/runs', { task: 'x', workspace: { git: { url: `git://127.0.0.1:${daemonPort}/public.git`, ref } } });
    expect([ref, r.status]).toEqual([ref, 400]);
  }
  const both = await h.api('POST', '/v1/runs', { task: 'x', workspace: { git: { url: `git://127.0.0.1:${daemonPort}/public.git` }, tarBase64: '' } });
  expect(both.status).toBe(400);
});

test('a redirect from the allowed server to another remote is not followed: the run ends with the clone\'s error, no secret in it', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-MOVED: never runs', workspace: { git: { url: `http://127.0.0.1:${httpPort}/private/moved.git` } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'error', errorCode: 'invalid_input' });
  expect(String(run.reason)).toMatch(/git fetch of http:\/\/127\.0\.0\.1:\d+\/private\/moved\.git failed/);
  expect(String(run.reason)).not.toContain(SECRET);
  expect(events(run).some((e) => e.type === 'model.response')).toBe(false);
});

test('a private repository over ssh with the operator\'s key: the host key is checked, the key is nowhere the agent or the tenant can read', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-SSH: look around', workspace: { git: { url: `ssh://git@127.0.0.1:${ssh.port}/private.git`, ref: 'main' } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect([run.status, run.reason]).toEqual(['succeeded', expect.any(String)]);
  const ev = events(run);
  expect(ev.find((e) => e.type === 'workspace.cloned')).toMatchObject({ commit: privateHead, credential: true, url: `ssh://git@127.0.0.1:${ssh.port}/private.git` });
  expect(ssh.seen).toEqual(expect.arrayContaining(['git publickey ok', "exec git-upload-pack '/private.git'"]));
  expect(ssh.seen.filter((s) => s.includes(' password ') || s.includes('keyboard'))).toEqual([]);
  const out = String(ev.find((e) => e.type === 'tool.result')!.output);
  expect(out).toContain(`url = ssh://git@127.0.0.1:${ssh.port}/private.git`);
  expect(out).toContain('scanned');
  expect(out).not.toContain(ssh.keySecret);
  expect(out).not.toMatch(/^\/.*\n.*scanned/m); // grep found no file holding a private key
  expect(out).not.toContain(ssh.keyFile);
  expect(readFileSync(join(String(run.logPath), '..', 'workspace.tar')).includes('world domination')).toBe(true);
  await expectNowhere(run, created.body.id, ssh.keySecret);
});

test('an ssh server whose host key is not the one the operator knows is offered no key and yields no clone', async () => {
  const before = ssh.seen.filter((s) => s.includes('publickey')).length;
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-IMPOSTOR: never runs', workspace: { git: { url: `ssh://git@127.0.0.1:${ssh.port}/wrong/private.git` } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'error', errorCode: 'invalid_input' });
  expect(String(run.reason)).toMatch(/git fetch of ssh:\/\/git@127\.0\.0\.1:\d+\/wrong\/private\.git failed .*Host key verification failed/s);
  expect(ssh.seen.filter((s) => s.includes('publickey')).length).toBe(before); // the client stopped before authenticating
  expect(events(run).some((e) => e.type === 'model.response')).toBe(false);
  expect(String(run.reason)).not.toContain(ssh.keySecret);
});

test('https with the operator\'s CA (CORRAL_GIT_CA_FILE): the private repository is cloned with the tenant\'s password, which stays out of every file', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-HTTPS: look around', workspace: { git: { url: `https://127.0.0.1:${httpsPort}/private/private.git` } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect([run.status, run.reason]).toEqual(['succeeded', expect.any(String)]);
  expect(events(run).find((e) => e.type === 'workspace.cloned')).toMatchObject({ commit: privateHead, credential: true });
  expect(httpSeen.some((s) => s.startsWith('https ') && s.endsWith(' auth'))).toBe(true);
  const out = String(events(run).find((e) => e.type === 'tool.result')!.output);
  expect(out).toContain('scanned');
  expect(out).not.toContain(SECRET);
  await expectNowhere(run, created.body.id, SECRET);
});

test('an https server whose certificate no trusted CA signed gets no request, so no password: the clone fails on the certificate', async () => {
  const before = httpSeen.length;
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'GIT-IMPOSTOR: never runs', workspace: { git: { url: `https://127.0.0.1:${impostorPort}/private/private.git` } } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'error', errorCode: 'invalid_input' });
  expect(String(run.reason)).toMatch(/git fetch of https:\/\/127\.0\.0\.1:\d+\/private\/private\.git failed .*(certificate|SSL)/is);
  expect(httpSeen.slice(before).filter((s) => s.startsWith('https '))).toEqual([]);
  expect(String(run.reason)).not.toContain(SECRET);
});
