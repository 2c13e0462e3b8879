/**
 * Egress on a site's real network, end to end on the real engine with the real proxy process, all on
 * loopback with the test's resolver:
 * - an upstream proxy the test starts (with Basic auth): allowed names go through it (HTTPS by
 *   CONNECT, plain HTTP in absolute form), NO_PROXY names go direct, names off the allowlist never
 *   reach it, wrong credentials are a readable refusal; the credentials are nowhere in the sandbox or
 *   the events;
 * - an internal mirror on a name that resolves to a "private" address (127.0.0.2, which no test hook
 *   exempts): reachable only by the operator's CORRAL_EGRESS_INTERNAL_HOSTS, never for another name
 *   resolving there, never outside its ranges, and the refusal says what to do;
 * - a CA the test makes: a TLS server with a certificate from it, reached from inside the sandbox
 *   by curl, node and python without -k, through the upstream proxy; the trust store is read-only.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { EgressAttempt, EgressSummary, LeasedSandbox } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { environmentImages, sandboxTestEnv } from '../support/sandbox-env';
import { startTestDns, type TestDns } from '../support/test-dns';
import { startUpstreamProxy, type TestUpstreamProxy } from '../support/upstream-proxy';

jest.setTimeout(240_000);

const WORKER = `test-egress-site-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const PASS = `s3cret-${randomBytes(6).toString('hex')}`;
let dir: string;
let dns: TestDns;
let upstream: TestUpstreamProxy;
let origin: Server;
let originPort: number;
let mirror: Server;
let mirrorPort: number;
let tls: TlsServer;
let tlsPort: number;
const originHits: string[] = [];
const mirrorHits: string[] = [];

/** A CA and a server certificate for secure.example from it, made with openssl in a scratch directory. */
function makeCa(d: string): { caPem: string; key: string; cert: string } {
  const o = (args: string[]) => execFileSync('openssl', args, { cwd: d, stdio: 'pipe' });
  o(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=corral test site CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  o(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=secure.example']);
  writeFileSync(join(d, 'ext.cnf'), 'subjectAltName=DNS:secure.example\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  o(['x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '2', '-extfile', 'ext.cnf']);
  return { caPem: readFileSync(join(d, 'ca.pem'), 'utf8'), key: readFileSync(join(d, 'srv.key'), 'utf8'), cert: readFileSync(join(d, 'srv.pem'), 'utf8') };
}

function providerWith(env: Record<string, string>): DockerSandboxProvider {
  const config = loadConfig({ ...sandboxTestEnv(), ...env });
  return new DockerSandboxProvider({ docker, config, egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
}

/** GET https://HOST:PORT/PATH through $HTTPS_PROXY, verifying the server with node's default trust. */
const NODE_TUNNEL = `
const http = require('http'), tls = require('tls');
const [host, port, path] = process.argv.slice(2);
const p = new URL(process.env.HTTPS_PROXY);
http.request({ host: p.hostname, port: p.port, method: 'CONNECT', path: host + ':' + port }).on('connect', (res, sock) => {
  if (res.statusCode !== 200) return console.log('NODE-ERR tunnel', res.statusCode);
  const t = tls.connect({ socket: sock, servername: host }, () => t.write('GET ' + path + ' HTTP/1.1\\r\\nHost: ' + host + '\\r\\nConnection: close\\r\\n\\r\\n'));
  t.on('data', (d) => process.stdout.write(d));
  t.on('error', (e) => console.log('NODE-ERR', e.message));
}).on('error', (e) => console.log('NODE-ERR', e.message)).end();
`;

interface Run { sb: LeasedSandbox; attempts: EgressAttempt[]; summaries: EgressSummary[] }
const open: LeasedSandbox[] = [];

async function acquire(p: DockerSandboxProvider, allow: string[], image?: string): Promise<Run> {
  const attempts: EgressAttempt[] = [];
  const summaries: EgressSummary[] = [];
  const sb = await p.acquire({
    runId: `run_site_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000), files: {},
    limits: { memoryMb: 512, cpus: 1, pids: 256, workspaceMb: 16 }, egressAllow: allow, ...(image ? { image } : {}),
    onEgress: (a) => attempts.push(a), onEgressSummary: (s) => summaries.push(s),
  });
  open.push(sb);
  return { sb, attempts, summaries };
}

const sh = async (sb: LeasedSandbox, script: string) => {
  await sb.egressSync?.();
  const r = await sb.exec({ argv: ['bash', '-c', script], timeoutMs: 60_000, maxOutputBytes: 64 * 1024 });
  await sb.egressSync?.();
  return r;
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'corral-site-'));
  const ca = makeCa(dir);
  writeFileSync(join(dir, 'site-ca.pem'), ca.caPem);
  origin = createServer((q, r) => {
    originHits.push(`${q.headers.host} ${q.url}`);
    r.end(`ORIGIN ${q.url}\n`);
  });
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  originPort = (origin.address() as AddressInfo).port;
  mirror = createServer((q, r) => {
    mirrorHits.push(`${q.headers.host} ${q.url}`);
    r.end(`MIRROR ${q.url}\n`);
  });
  await new Promise<void>((r) => mirror.listen(0, '127.0.0.2', r));
  mirrorPort = (mirror.address() as AddressInfo).port;
  tls = createTlsServer({ key: ca.key, cert: ca.cert }, (q, r) => r.end(`SECURE ${q.url}\n`));
  await new Promise<void>((r) => tls.listen(0, '127.0.0.1', r));
  tlsPort = (tls.address() as AddressInfo).port;
  upstream = await startUpstreamProxy('corral', PASS);
  dns = await startTestDns((n) => {
    if (n === 'direct.example') return ['127.0.0.1'];
    if (n === 'mirror.corp.example' || n === 'sneaky.example') return ['127.0.0.2'];
    if (n === 'mirror3.corp.example') return ['127.0.0.3'];
    return undefined; // registry.example, secure.example: only the upstream knows them
  });
});

afterAll(async () => {
  await Promise.all(open.map((sb) => sb.dispose().catch(() => undefined)));
  await upstream?.close();
  await dns?.close();
  for (const s of [origin, mirror, tls]) await new Promise((r) => s?.close(r));
  rmSync(dir, { recursive: true, force: true });
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
});

describe('upstream proxy', () => {
  test('allowed names go through the upstream with its credentials (HTTP and HTTPS with the site CA); NO_PROXY goes direct; others never leave', async () => {
    const p = providerWith({
      CORRAL_EGRESS_UPSTREAM_PROXY: `http://corral:${PASS}@127.0.0.1:${upstream.port}`,
      CORRAL_EGRESS_NO_PROXY: 'direct.example',
      CORRAL_EGRESS_CA_FILE: join(dir, 'site-ca.pem'),
    });
    const run = await acquire(p, [`registry.example:${originPort}`, `direct.example:${originPort}`, `secure.example:${tlsPort}`], environmentImages().node);
    const before = upstream.seen.length;
    await run.sb.exec({ argv: ['bash', '-c', 'cat > /tmp/tunnel.js'], stdin: NODE_TUNNEL, timeoutMs: 10_000, maxOutputBytes: 1024 });
    const r = await sh(run.sb, [
      `curl -sS -m 20 http://registry.example:${originPort}/pkg.tgz`,
      `curl -sS -m 20 https://secure.example:${tlsPort}/curl`,
      // node's https does not read HTTPS_PROXY by itself: the tunnel by hand, TLS with node's default roots (+ NODE_EXTRA_CA_CERTS)
      `node /tmp/tunnel.js secure.example ${tlsPort} /node`,
      `python3 -c "import urllib.request; print(urllib.request.urlopen('https://secure.example:${tlsPort}/python').read().decode().strip())"`,
      `curl -sS -m 20 http://direct.example:${originPort}/direct`,
      `curl -sS -m 20 -o /dev/null -w 'other %{http_code}\\n' http://other.example:${originPort}/no`,
    ].join('; '));
    expect(r.stdout).toContain(`ORIGIN /pkg.tgz`);
    expect(r.stdout).toContain('SECURE /curl');
    expect(r.stdout).toContain('SECURE /node');
    expect(r.stdout).toContain('SECURE /python');
    expect(r.stdout).toContain('ORIGIN /direct');
    expect(r.stdout).toContain('other 403');
    const seen = upstream.seen.slice(before);
    // Through the upstream, with the operator's credentials: the plain-HTTP request and the three tunnels.
    expect(seen).toEqual(expect.arrayContaining([
      expect.objectContaining({ method: 'GET', target: `http://registry.example:${originPort}/pkg.tgz`, status: 200 }),
      expect.objectContaining({ method: 'CONNECT', target: `secure.example:${tlsPort}`, status: 200 }),
    ]));
    expect(seen.filter((s) => s.method === 'CONNECT' && s.status === 200)).toHaveLength(3);
    expect(seen.every((s) => s.authorization === `Basic ${Buffer.from(`corral:${PASS}`).toString('base64')}`)).toBe(true);
    // NO_PROXY went direct; the name off the allowlist never reached the upstream.
    expect(seen.some((s) => s.target.includes('direct.example') || s.target.includes('other.example'))).toBe(false);
    expect(originHits).toContain(`direct.example:${originPort} /direct`);
    // The credentials are nowhere the sandbox or the run's events can see.
    const env = await sh(run.sb, 'env; cat /proc/1/environ 2>/dev/null | tr "\\0" "\\n"; cat /etc/corral/ca/* | head -c 0');
    const b64 = Buffer.from(`corral:${PASS}`).toString('base64');
    expect(env.stdout).not.toContain(PASS);
    expect(env.stdout).not.toContain(b64);
    expect(JSON.stringify([run.attempts, run.summaries])).not.toContain(PASS);
    expect(JSON.stringify([run.attempts, run.summaries])).not.toContain(b64);
    expect(run.attempts.find((a) => a.host === 'registry.example')?.reason).toMatch(/through the upstream proxy 127\.0\.0\.1:\d+/);
  });

  test('wrong credentials: the sandbox gets a readable refusal naming the setting, not a bare 407', async () => {
    const p = providerWith({ CORRAL_EGRESS_UPSTREAM_PROXY: `http://corral:wrong@127.0.0.1:${upstream.port}` });
    const run = await acquire(p, [`registry.example:${originPort}`, 'secure.example']);
    const r = await sh(run.sb, `curl -sS -m 20 http://registry.example:${originPort}/x; echo; curl -sS -m 20 -o /dev/null https://secure.example/ 2>&1; true`);
    expect(r.stdout).toMatch(/corral egress denied: the upstream proxy 127\.0\.0\.1:\d+ refused GET http:\/\/registry\.example:\d+: 407 .*CORRAL_EGRESS_UPSTREAM_PROXY/);
    const codes = run.attempts.filter((a) => a.decision === 'deny').map((a) => a.code);
    expect(codes).toEqual(expect.arrayContaining(['upstream_refused']));
    expect(run.attempts.find((a) => a.method === 'CONNECT' && a.code === 'upstream_refused')?.reason).toMatch(/refused CONNECT secure\.example:443: 407 .*check the credentials in CORRAL_EGRESS_UPSTREAM_PROXY/);
    expect(JSON.stringify(run.attempts)).not.toContain('wrong');
  });
});

describe('internal hosts', () => {
  test('the operator\'s internal name reaches the mirror; another name resolving there, or the name outside its ranges, is refused with a readable reason', async () => {
    const p = providerWith({ CORRAL_EGRESS_INTERNAL_HOSTS: 'mirror.corp.example=127.0.0.2,mirror3.corp.example=127.0.0.2/32' });
    const allow = [`mirror.corp.example:${mirrorPort}`, `sneaky.example:${mirrorPort}`, `mirror3.corp.example:${mirrorPort}`];
    const run = await acquire(p, allow);
    const r = await sh(run.sb, `curl -sS -m 20 http://mirror.corp.example:${mirrorPort}/ok; curl -sS -m 20 http://sneaky.example:${mirrorPort}/sneak; curl -sS -m 20 http://mirror3.corp.example:${mirrorPort}/three`);
    expect(r.stdout).toContain('MIRROR /ok');
    expect(r.stdout).toContain(`corral egress denied: the proxy refused sneaky.example: it resolves to 127.0.0.2, a loopback address (127.0.0.0/8); an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=sneaky.example=127.0.0.2 (a run's allowlist cannot)`);
    expect(r.stdout).toMatch(/the proxy refused mirror3\.corp\.example: it resolves to 127\.0\.0\.3, .*outside the ranges the operator allows for it \(CORRAL_EGRESS_INTERNAL_HOSTS: 127\.0\.0\.2\/32\)/);
    expect(mirrorHits).toEqual([`mirror.corp.example:${mirrorPort} /ok`]);
    expect(run.attempts.find((a) => a.host === 'sneaky.example')).toMatchObject({ decision: 'deny', code: 'forbidden_address' });
    // HTTPS by CONNECT to the mirror name too (the tunnel opens; no TLS server there, so only the tunnel is checked).
    const t = await sh(run.sb, `curl -sS -m 20 -p -o /dev/null -w '%{http_connect}\\n' http://mirror.corp.example:${mirrorPort}/tunnel`);
    expect(t.stdout.trim()).toBe('200');
  });

  test('without the operator setting the same mirror name is refused (a run cannot add the exception)', async () => {
    const p = providerWith({});
    const run = await acquire(p, [`mirror.corp.example:${mirrorPort}`]);
    const hits = mirrorHits.length;
    const r = await sh(run.sb, `curl -sS -m 20 http://mirror.corp.example:${mirrorPort}/no; curl -sS -m 20 -p -o /dev/null -w 'tunnel %{http_connect}\\n' http://mirror.corp.example:${mirrorPort}/no`);
    expect(r.stdout).toContain('corral egress denied: the proxy refused mirror.corp.example: it resolves to 127.0.0.2, a loopback address (127.0.0.0/8); an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=mirror.corp.example=127.0.0.2');
    expect(r.stdout).toContain('tunnel 403');
    expect(mirrorHits.length).toBe(hits);
  });
});

describe('site CA', () => {
  test('the bundle is in the system store and the tool variables, read-only for the agent; without the CA the same server is refused by curl', async () => {
    const p = providerWith({ CORRAL_EGRESS_UPSTREAM_PROXY: `http://corral:${PASS}@127.0.0.1:${upstream.port}`, CORRAL_EGRESS_CA_FILE: join(dir, 'site-ca.pem') });
    // The first sandbox of an image on a worker: its bundle is read from this container; the variables and /etc/corral/ca cover it.
    const first = await acquire(p, [`secure.example:${tlsPort}`]);
    const f = await sh(first.sb, `grep -c "BEGIN CERTIFICATE" /etc/corral/ca/bundle.crt; curl -sS -m 20 https://secure.example:${tlsPort}/first; python3 -c "import urllib.request; print(urllib.request.urlopen('https://secure.example:${tlsPort}/py').read().decode().strip())"`);
    expect(Number(f.stdout.split('\n')[0])).toBeGreaterThan(50);
    expect(f.stdout).toContain('SECURE /first');
    expect(f.stdout).toContain('SECURE /py');
    // Every later one: the system store itself is covered too.
    const run = await acquire(p, [`secure.example:${tlsPort}`]);
    const r = await sh(run.sb, [
      'grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt',
      'echo "$SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $PIP_CERT $GIT_SSL_CAINFO"',
      // the system store alone (no variables) trusts it
      `env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -sS -m 20 https://secure.example:${tlsPort}/system`,
      `python3 -c "import ssl; print(ssl.get_default_verify_paths().openssl_cafile)"`,
      'echo tamper >> /etc/ssl/certs/ca-certificates.crt 2>/dev/null && echo WROTE-SYSTEM; echo tamper >> /etc/corral/ca/bundle.crt 2>/dev/null && echo WROTE-BUNDLE; rm -f /etc/corral/ca/operator.crt 2>/dev/null && echo REMOVED; true',
    ].join('; '));
    const count = Number(r.stdout.split('\n')[0]);
    expect(count).toBeGreaterThan(50); // the image's roots plus the site's
    expect(r.stdout).toContain('/etc/corral/ca/bundle.crt /etc/corral/ca/operator.crt /etc/corral/ca/bundle.crt /etc/corral/ca/bundle.crt /etc/corral/ca/bundle.crt');
    expect(r.stdout).toContain('SECURE /system');
    expect(r.stdout).not.toMatch(/WROTE-SYSTEM|WROTE-BUNDLE|REMOVED/);

    const plain = await acquire(providerWith({ CORRAL_EGRESS_UPSTREAM_PROXY: `http://corral:${PASS}@127.0.0.1:${upstream.port}` }), [`secure.example:${tlsPort}`]);
    const n = await sh(plain.sb, `curl -sS -m 20 https://secure.example:${tlsPort}/untrusted; echo "rc=$?"`);
    expect(n.stdout + n.stderr).toMatch(/certificate|SSL/i);
    expect(n.stdout).toContain('rc=60');
  });

  test('a bad CA file or upstream URL stops start-up naming the variable', () => {
    writeFileSync(join(dir, 'not-a-ca.pem'), 'hello\n');
    expect(() => loadConfig({ CORRAL_EGRESS_CA_FILE: join(dir, 'not-a-ca.pem') })).toThrow(/CORRAL_EGRESS_CA_FILE: holds no PEM certificate/);
    expect(() => loadConfig({ CORRAL_EGRESS_CA_FILE: join(dir, 'missing.pem') })).toThrow(/CORRAL_EGRESS_CA_FILE: cannot be read \(ENOENT\)/);
    expect(() => loadConfig({ CORRAL_EGRESS_UPSTREAM_PROXY: `https://u:${PASS}@proxy.example:3128` })).toThrow(/must be an http:\/\/ URL/);
    try {
      loadConfig({ CORRAL_EGRESS_UPSTREAM_PROXY: `http://u:${PASS}@proxy.example` });
    } catch (err) {
      expect((err as Error).message).toMatch(/must name its port/);
      expect((err as Error).message).not.toContain(PASS);
    }
  });
});
