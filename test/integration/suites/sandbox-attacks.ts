/**
 * Attacks on the sandbox, on the real Docker engine (a missing engine fails; nothing skips), run once
 * per isolation class (sandbox-attacks.test.ts: runc, sandbox-attacks-gvisor.test.ts: gVisor). Each
 * case aims at something real: a server this test started on the host, a second sandbox's server, an
 * upstream reached through the run's proxy. No traffic leaves this machine: names like allowed.test
 * map to the test's loopback upstream through the proxy's injectable resolver.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { loadConfig } from '../../../src/config';
import type { EgressAttempt, EgressSummary, IsolationClass, LeasedSandbox, SandboxRequest } from '../../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../../src/sandbox';
import { egressTestHooks } from '../../../src/sandbox/egress-test-hooks';
import { slotOfAgentUid } from '../../../src/sandbox/uid-slots';
import { consistently, eventually } from '../../support/eventually';
import { makeTar } from '../../support/make-tar';
import { startTestDns, type TestDns } from '../../support/test-dns';
import { isolationEnv } from '../../support/sandbox-env';

export function sandboxAttacks(isolation: IsolationClass): void {
jest.setTimeout(60_000);

const WORKER = `test-attacks-${isolation}-${randomBytes(3).toString('hex')}`;
const SECRET = `corral-secret-${randomBytes(8).toString('hex')}`;
const docker = new Docker();
const config = loadConfig(isolationEnv(isolation));
const gvisor = isolation === 'gvisor';
let upstream: Server;
let upstreamPort: number;
let hostServer: Server;
let hostPort: number;
let provider: DockerSandboxProvider;
let main: LeasedSandbox;
let peer: LeasedSandbox;
let dns: TestDns;
const attempts: EgressAttempt[] = [];
const summaries: EgressSummary[] = [];
/** Denied attempts with this code in a proxy's reports: those reported one by one plus those only counted in aggregates. */
const deniedIn = (att: EgressAttempt[], sums: EgressSummary[]) => (code: string) =>
  att.filter((a) => a.decision === 'deny' && a.code === code).length +
  sums.reduce((n, s) => n + (s.kind === 'aggregate' && s.decision === 'deny' && s.code === code ? s.count : 0), 0);

function request(over: Partial<SandboxRequest> = {}): SandboxRequest {
  return {
    runId: `run_attack_${randomBytes(4).toString('hex')}`,
    workerId: WORKER,
    deadline: new Date(Date.now() + 5 * 60_000),
    files: {},
    limits: { memoryMb: 128, cpus: 1, pids: 64, workspaceMb: 32 },
    egressAllow: [],
    ...over,
  };
}

const sh = (sb: LeasedSandbox, script: string, timeoutMs = 10_000) => sb.exec({ argv: ['bash', '-c', script], timeoutMs });

beforeAll(async () => {
  process.env.CORRAL_ATTACK_SECRET = SECRET; // must never appear inside a sandbox
  upstream = createServer((req, res) => res.end(`upstream-ok ${req.method} ${req.url}`));
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upstreamPort = (upstream.address() as AddressInfo).port;
  hostServer = createServer((_req, res) => res.end('HOST-SERVER-REACHED'));
  await new Promise<void>((r) => hostServer.listen(0, '0.0.0.0', r));
  hostPort = (hostServer.address() as AddressInfo).port;
  // Names resolve through a DNS server this test runs; only the upstream's exact address is exempt.
  dns = await startTestDns((h) => ({ 'allowed.test': ['127.0.0.1'], 'private.allowed.test': ['172.17.0.1'], 'loop.allowed.test': ['127.0.0.2'] })[h]);
  provider = new DockerSandboxProvider({ docker, config, egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
  const p = upstreamPort;
  [main, peer] = await Promise.all([
    provider.acquire(request({ egressAllow: ['allowed.test', '*.allowed.test', `allowed.test:${p}`, `*.allowed.test:${p}`], onEgress: (a) => attempts.push(a), onEgressSummary: (s) => summaries.push(s), files: { 'README.md': '# seed\n' } })),
    provider.acquire(request()),
  ]);
});

afterAll(async () => {
  await Promise.allSettled([main?.dispose(), peer?.dispose()]);
  await new Promise((r) => upstream.close(r));
  await new Promise((r) => hostServer.close(r));
  await dns?.close();
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
  delete process.env.CORRAL_ATTACK_SECRET;
});

test(`the sandbox runs under ${isolation}`, async () => {
  const r = await sh(main, 'uname -r');
  if (gvisor) expect(r.stdout.trim()).toBe('4.4.0'); // gVisor's Sentry, not the host kernel
  else expect(r.stdout.trim()).toBe((await import('node:os')).release());
  expect((await docker.getContainer(main.id).inspect()).HostConfig.Runtime).toBe(gvisor ? config.CORRAL_GVISOR_RUNTIME : 'runc');
});

test('runs as a non-root uid of its own slot, with an empty capability set', async () => {
  const r = await sh(main, 'id -u; id -g; grep CapEff /proc/self/status; grep NoNewPrivs /proc/self/status || true');
  const [uid, gid, ...rest] = r.stdout.trim().split('\n');
  expect(slotOfAgentUid({ base: config.CORRAL_SANDBOX_UID_BASE, slots: config.CORRAL_SANDBOX_SLOTS }, Number(uid))).toBeDefined();
  expect(gid).toBe(uid);
  expect(rest[0]).toBe('CapEff:\t0000000000000000');
  // gVisor's /proc has no NoNewPrivs line; the flag is in the container's spec either way
  if (!gvisor) expect(rest[1]).toBe('NoNewPrivs:\t1');
  const peerUid = (await sh(peer, 'id -u')).stdout.trim();
  expect(peerUid).not.toBe(uid);
});

test('the worker\'s environment does not leak: env, /proc/self/environ and the container spec show no secret; PID 1\'s environ is not even readable', async () => {
  const r = await sh(main, 'tr "\\0" "\\n" < /proc/self/environ; echo ---; env; echo ---; cat /proc/1/environ >/dev/null; echo "pid1 rc=$?"');
  expect(r.stdout).toContain('HOME=/home/agent');
  expect(r.stdout).not.toContain(SECRET);
  expect(r.stdout).not.toMatch(/REDIS_URL|OPENAI|CORRAL_ATTACK/);
  if (gvisor) {
    // gVisor lets any uid read another process's environ; PID 1's is the fixed sandbox env anyway
    expect(r.stdout).toContain('pid1 rc=0');
  } else {
    expect(r.stdout).toContain('pid1 rc=1');
    expect(r.stderr).toMatch(/Permission denied/);
  }
  const spec = await docker.getContainer(main.id).inspect();
  expect(JSON.stringify(spec.Config.Env)).not.toContain(SECRET);
});

test('no docker socket anywhere', async () => {
  const r = await sh(main, 'for s in /var/run/docker.sock /run/docker.sock; do test -e $s && echo "FOUND $s"; done; echo ---; find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null');
  expect(r.stdout).not.toContain('FOUND');
  expect(r.stdout.split('---\n')[1]!.trim().split('\n')).toEqual(['/run/corral/egress.sock']);
});

test('the root filesystem is read-only; only /workspace, /tmp and home take writes', async () => {
  const r = await sh(main, 'touch /etc/x 2>&1; touch /usr/x 2>&1; touch /workspace/ok /tmp/ok /home/agent/ok && echo writable-ok; grep -E "^[^ ]+ / " /proc/self/mounts');
  // gVisor checks permissions before the read-only flag, so a non-root writer sees EACCES there
  const refused = gvisor ? '(Read-only file system|Permission denied)' : 'Read-only file system';
  expect(r.stdout).toMatch(new RegExp(`${refused}[\\s\\S]*${refused}[\\s\\S]*writable-ok`));
  expect(r.stdout).toMatch(/^\S+ \/ \S+ ro[ ,]/m);
});

test('a server on the host (0.0.0.0) is unreachable, directly and through the proxy', async () => {
  const ips = ['172.17.0.1', '127.0.0.1', ...Object.values(networkInterfaces()).flat().filter((i) => i && i.family === 'IPv4').map((i) => i!.address)];
  const targets = [...new Set(ips)].map((ip) => `http://${ip}:${hostPort}/`);
  const direct = await sh(main, `for u in ${targets.join(' ')}; do curl --noproxy '*' -sS -m 3 "$u"; echo " rc=$?"; done`, 30_000);
  expect(direct.stdout).not.toContain('HOST-SERVER-REACHED');
  expect(direct.stdout.match(/rc=(7|28)/g)?.length).toBe(targets.length);
  const proxied = await sh(main, `for u in ${targets.join(' ')}; do curl -sS -m 3 "$u"; echo " rc=$?"; done`, 30_000);
  expect(proxied.stdout).not.toContain('HOST-SERVER-REACHED');
  expect(proxied.stdout).toMatch(/corral egress denied: .*IP address literal/);
  // raw TCP from the sandbox to the host server and to the test Redis (REDIS_URL from global setup), on every host address
  const redisPort = Number(new URL(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379').port || 6379);
  const tcp = await sh(main, [...new Set(ips)].flatMap((ip) => [hostPort, redisPort].map((p) =>
    `(exec 3<>/dev/tcp/${ip}/${p}) 2>/dev/null && echo "OPEN ${ip}:${p}" || echo "closed ${ip}:${p}"`)).join('; '), 30_000);
  // positive control: both ports really are open to the host itself
  for (const p of [hostPort, redisPort]) {
    await new Promise<void>((resolve, reject) => {
      const c = connect(p, '127.0.0.1', () => { c.destroy(); resolve(); });
      c.once('error', reject);
    });
  }
  expect(tcp.stdout).not.toContain('OPEN');
  expect(tcp.stdout.match(/closed/g)?.length).toBe(new Set(ips).size * 2);
  // and a permitted name that resolves to the host's bridge address is refused too
  const viaName = await sh(main, `curl -sS -m 3 http://private.allowed.test:${upstreamPort}/`);
  expect(viaName.stdout).toMatch(/corral egress denied: the proxy refused private\.allowed\.test: it resolves to 172\.17\.0\.1, a private-use address \(172\.16\.0\.0\/12\)/);
});

test('a second sandbox\'s server is unreachable (while it reaches itself)', async () => {
  // the server answers once it is up (curl retries a refused connection once a second)
  const started = await sh(peer, 'nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 & curl -s -m2 --noproxy "*" --retry 60 --retry-connrefused --retry-delay 1 http://127.0.0.1:8000/ >/dev/null && echo self-ok', 90_000);
  expect(started.stdout).toContain('self-ok');
  const r = await sh(main, 'curl --noproxy "*" -sS -m 2 http://127.0.0.1:8000/; echo " rc=$?"; curl -sS -m 2 http://127.0.0.1:8000/; echo " rc=$?"; cat /proc/net/tcp | wc -l');
  expect(r.stdout).toMatch(/rc=7/);
  expect(r.stdout).toMatch(/corral egress denied/);
  expect(r.stdout).not.toContain('Directory listing');
});

test('an allowed name reaches the test upstream through the proxy, over HTTP and a CONNECT tunnel', async () => {
  const r = await sh(main, `curl -sS -m 5 http://allowed.test:${upstreamPort}/hi; echo; curl -sS -m 5 -p http://allowed.test:${upstreamPort}/tunnel`);
  expect(r.stdout).toBe(`upstream-ok GET /hi\nupstream-ok GET /tunnel`);
  expect(attempts.filter((a) => a.decision === 'allow').map((a) => a.method)).toEqual(expect.arrayContaining(['GET', 'CONNECT']));
});

test('the agent cannot kill or replace the egress relay (it runs as PID 1\'s uid)', async () => {
  const r = await sh(main, 'for p in $(pgrep -x socat); do kill -9 $p 2>/dev/null; echo "kill $p rc=$?"; done; kill -STOP -1; kill -CONT -1; ' +
    `curl -sS -m 5 http://allowed.test:${upstreamPort}/still-there`);
  expect(r.stdout).toMatch(/kill \d+ rc=1/);
  expect(r.stdout).not.toMatch(/kill \d+ rc=0/);
  expect(r.stdout).toMatch(/upstream-ok GET \/still-there$/);
});

test('a denied name, an IP literal, a decimal IP and a name resolving to a private address are refused with a clear error', async () => {
  const raw = (target: string) =>
    `python3 -c "import socket;s=socket.create_connection(('127.0.0.1',3128));s.sendall(b'CONNECT ${target} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n');print(s.recv(400).decode())"`;
  // A sandbox of its own, so its proxy's counts are this test's alone; once it is disposed its proxy has
  // stopped and its final totals are in (they arrive before it exits), so the counts are whole.
  const att: EgressAttempt[] = [];
  const sums: EgressSummary[] = [];
  const p = upstreamPort;
  const own = await provider.acquire(request({ egressAllow: ['allowed.test', '*.allowed.test', `allowed.test:${p}`, `*.allowed.test:${p}`], onEgress: (a) => att.push(a), onEgressSummary: (s) => sums.push(s) }));
  const r = await sh(own, [
    'curl -sS -m 3 http://denied.test/', 'echo',
    'curl -sS -m 3 http://93.184.216.34/', 'echo',
    raw('2130706433:443'), raw('0x7f.1:443'),
    'curl -sS -m 3 http://loop.allowed.test/', 'echo',
    'curl -sS -m 3 https://denied.test/; echo " rc=$?"',
  ].join('; '), 20_000).finally(() => own.dispose());
  expect(r.stdout).toMatch(/corral egress denied: the proxy refused denied\.test: denied\.test is not on the run's egress allowlist/);
  expect(r.stdout).toMatch(/corral egress denied: the proxy refused 93\.184\.216\.34: 93\.184\.216\.34 is an IP address literal/);
  expect(r.stdout).toMatch(/HTTP\/1\.1 403[\s\S]*2130706433 is an IP address literal \(= 127\.0\.0\.1\)/);
  expect(r.stdout).toMatch(/0x7f\.1 is an IP address literal/);
  expect(r.stdout).toMatch(/loop\.allowed\.test: it resolves to 127\.0\.0\.2, a loopback address \(127\.0\.0\.0\/8\)/);
  expect(r.stderr).toMatch(/CONNECT tunnel failed, response 403/);
  // Every refusal is in the log: one by one while few of its kind came before, else counted in an aggregate, so count both.
  const deniedWith = deniedIn(att, sums);
  expect(deniedWith('ip_literal')).toBe(3);
  expect(deniedWith('not_allowed')).toBeGreaterThanOrEqual(2);
  expect(deniedWith('forbidden_address')).toBe(1);
});

test('output flood (`yes`): truncated and marked, worker RSS stays flat', async () => {
  global.gc?.();
  const before = process.memoryUsage().rss;
  const r = await main.exec({ argv: ['yes'], timeoutMs: 3000, maxOutputBytes: 4096 });
  const after = process.memoryUsage().rss;
  expect(r.timedOut).toBe(true);
  expect(r.truncated).toBe(true);
  // a flood far past the 4 KiB cap (its size depends on how fast the runtime writes: gVisor under load makes less)
  expect(r.stdoutBytes).toBeGreaterThan(8 * 1024 * 1024);
  expect(r.stdout).toMatch(/\[\.\.\. corral cut \d+ bytes of stdout here/);
  expect(r.stdout.length).toBeLessThan(4096 + 200);
  expect(after - before).toBeLessThan(64 * 1024 * 1024);
});

test('infinite loop: killed at the timeout, and gone from the container afterwards (with its children)', async () => {
  const r = await main.exec({ argv: ['bash', '-c', 'sleep 4242 & while :; do :; done'], timeoutMs: 1500 });
  expect(r.timedOut).toBe(true); // the loop never ends: only the timeout can end the call
  // a SIGKILLed process can stay listed for a moment (gVisor reaps late); a survivor never leaves the list
  await eventually(async () => (await main.exec({ argv: ['ps', '-eo', 'pid,args'], timeoutMs: 5000 })).stdout, { what: 'the loop and its child to be gone', until: (ps) => !/while|sleep 4242/.test(ps) });
});

test('cancel: an aborted exec kills its process inside the container', async () => {
  const ac = new AbortController();
  const ps = async () => (await main.exec({ argv: ['ps', '-eo', 'args'], timeoutMs: 5000 })).stdout;
  const call = main.exec({ argv: ['sleep', '4343'], timeoutMs: 60_000, signal: ac.signal });
  await eventually(ps, { what: 'sleep 4343 to run', until: (out) => out.includes('sleep 4343') });
  ac.abort();
  await expect(call).rejects.toMatchObject({ code: 'cancelled' });
  await eventually(ps, { what: 'sleep 4343 to be gone', until: (out) => !out.includes('sleep 4343') });
});

test('fork bomb: the pids limit holds; the host, the worker and other sandboxes are fine', async () => {
  // A sandbox of its own: a fork bomb outlives its exec, and the sandbox stays at its pids limit.
  // gVisor charges ≈3.5 MB of host memory per forked python (runc: almost nothing), so it gets more room: this is about pids
  const bombed = await provider.acquire(request({ limits: { memoryMb: gvisor ? 512 : 128, cpus: 0.5, pids: 64, workspaceMb: 8 } }));
  try {
    const count = await sh(bombed, `python3 -c "
import os, time
n = 0
for i in range(500):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(1.5); os._exit(0)  # makes time pass: each child holds its slot a while, then exits on its own
    n += 1
print(n)"`, 20_000);
    expect(Number(count.stdout.trim())).toBeLessThan(64);
    expect(Number(count.stdout.trim())).toBeGreaterThan(10);
    // the forks' children (each sleeps 1.5 s) are gone before the bomb
    await eventually(async () => Number((await bombed.exec({ argv: ['sh', '-c', 'ls -d /proc/[0-9]* | wc -l'], timeoutMs: 5000 })).stdout.trim()), {
      what: "the forks' children to exit", until: (n) => n < 10, timeoutMs: 15_000, intervalMs: 250,
    });
    const bomb = await bombed.exec({ argv: ['bash', '-c', ':(){ :|:& };:'], timeoutMs: 3000 }).catch((e: Error) => e);
    // the bomb's call either ended (its shell returns at once, the forks go on) or could not be
    // killed at its timeout and stopped the sandbox — a typed error, never fake output
    if (bomb instanceof Error) expect((bomb as { code?: string }).code).toBe('sandbox_failed');
    else expect(bomb.exitCode === 0 || bomb.timedOut).toBe(true);
    if (gvisor) {
      // runsc's `docker top` lists only the container's first process tree; what matters here is that
      // the Sentry survives its sandbox's bomb (a pids cgroup too tight for its threads ends the sandbox)
      await consistently(async () => (await docker.getContainer(bombed.id).inspect()).State.Running, { what: 'the bombed gVisor sandbox to keep running', holds: (r) => r, forMs: 3000 });
    } else {
      // Counted from the host (docker top) while the bomb ramps up, runs and dies out (each of its forks
      // fails at the limit, so it may burn out on its own): never above the pids limit.
      await consistently(async () => (await docker.getContainer(bombed.id).top({ ps_args: '-e' })).Processes.length, { what: 'the process count to stay within the pids limit (64)', holds: (n) => n <= 64, forMs: 3000 });
    }
    // The worker and another sandbox are unaffected (a call there runs to its end, well within its own timeout).
    expect((await main.exec({ argv: ['true'], timeoutMs: 30_000 })).exitCode).toBe(0);
    // A new exec in the bombed sandbox is a typed error or a truthful failure when it cannot start
    // (never fake output); it may also squeeze in between the bomb's forks.
    const next = await bombed.exec({ argv: ['true'], timeoutMs: 3000 }).catch((e: Error) => e);
    if (next instanceof Error) expect((next as { code?: string }).code).toBe('sandbox_failed');
    // it ran; or the exec's own `timeout` wrapper could not fork at the pids limit (exit 125, saying so); or it timed out
    else if (next.exitCode === 125) expect(next.stderr).toMatch(/fork system call failed: Resource temporarily unavailable/);
    else expect(next.exitCode === 0 || next.timedOut).toBe(true);
  } finally {
    await bombed.dispose();
  }
});

test(gvisor
  ? 'memory bomb: gVisor ends the whole sandbox at its limit; the call ends at once as sandbox_failed with oomKilled (no waiting for the timeout)'
  : 'memory bomb: killed, reported as oomKilled with exit 137; the sandbox lives on', async () => {
  const bomb = ['python3', '-c', 'a=[]\nwhile True: a.append(b"x" * (32*1024*1024))'];
  const sb = await provider.acquire(request());
  try {
    if (gvisor) {
      // a rejection (not a timed-out result) is the fact that the call ended with the sandbox, not at its timeout
      await expect(sb.exec({ argv: bomb, timeoutMs: 50_000 })).rejects.toMatchObject({
        code: 'sandbox_failed', message: expect.stringMatching(/died: out of memory/), details: expect.objectContaining({ oomKilled: true, cause: 'died' }),
      });
      // and the sandbox says so from then on
      await expect(sb.exec({ argv: ['true'], timeoutMs: 5000 })).rejects.toMatchObject({ code: 'sandbox_failed', message: expect.stringMatching(/out of memory/) });
    } else {
      const r = await sb.exec({ argv: bomb, timeoutMs: 30_000 });
      expect(r.exitCode).toBe(137);
      expect(r.oomKilled).toBe(true);
      expect(r.timedOut).toBe(false);
      expect((await sb.exec({ argv: ['true'], timeoutMs: 5000 })).exitCode).toBe(0);
    }
  } finally {
    await sb.dispose();
  }
});

test('disk fill of /tmp and /workspace is bounded and reported', async () => {
  const r = await sh(peer, 'dd if=/dev/zero of=/tmp/fill bs=1M count=500 2>&1; echo "tmp rc=$?"; dd if=/dev/zero of=/workspace/fill bs=1M count=500 2>&1; echo "ws rc=$?"; du -sm /tmp/fill /workspace/fill', 30_000);
  expect(r.stdout).toMatch(/No space left on device[\s\S]*tmp rc=1/);
  expect(r.stdout).toMatch(/No space left on device[\s\S]*ws rc=1/);
  const sizes = [...r.stdout.matchAll(/^(\d+)\t/gm)].map((m) => Number(m[1]));
  expect(sizes[0]).toBeLessThanOrEqual(64);
  expect(sizes[1]).toBeLessThanOrEqual(32);
  await expect(peer.writeFile('more.txt', 'x'.repeat(1024 * 1024))).rejects.toMatchObject({ code: 'limit_exceeded' });
  await sh(peer, 'rm -f /tmp/fill /workspace/fill');
});

test('files: paths outside /workspace and symlinks on the path are refused', async () => {
  await main.writeFile('src/app.py', 'print("hi")\n');
  expect(await main.readFile('src/app.py')).toEqual({ content: 'print("hi")\n', size: 12, truncated: false, sha256: expect.stringMatching(/^[0-9a-f]{64}$/) });
  await sh(main, 'ln -sfn /etc /workspace/etc-link; ln -sfn /home/agent /workspace/home-link');
  for (const p of ['../etc/passwd', '/etc/passwd', 'etc-link/passwd', 'home-link/.bashrc']) {
    await expect(main.readFile(p)).rejects.toMatchObject({ code: 'path_refused' });
  }
  await expect(main.writeFile('etc-link/evil', 'x')).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/etc-link is a symbolic link \(to \/etc\)/) });
  await expect(main.writeFile('home-link/.bashrc', 'x')).rejects.toMatchObject({ code: 'path_refused' });
  const list = await main.listFiles('.');
  expect(list).toEqual(expect.arrayContaining([{ path: 'etc-link', type: 'symlink', size: expect.any(Number) }, { path: 'src/app.py', type: 'file', size: 12 }]));
  await expect(main.listFiles('etc-link')).rejects.toMatchObject({ code: 'path_refused' });
});

test('export: an uncompressed tar without the symlinks, and a patch against the seed that git applies', async () => {
  await main.writeFile('README.md', '# seed\nchanged\n');
  const dir = mkdtempSync(join(tmpdir(), 'corral-export-'));
  const exported = await main.exportWorkspace({ tarPath: join(dir, 'workspace.tar'), patchPath: join(dir, 'workspace.patch') });
  const buf = readFileSync(exported.tar.path);
  const patch = readFileSync(exported.patch.path, 'utf8');
  rmSync(dir, { recursive: true, force: true });
  expect(exported.notExported).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'etc-link', code: 'symlink' })]));
  expect(buf[0]).not.toBe(0x1f);
  const names: string[] = [];
  const ex = tar.extract();
  ex.on('entry', (h, s, next) => { names.push(`${h.type}:${h.name}`); s.resume(); s.on('end', next); });
  await new Promise((r) => { ex.on('finish', () => r(undefined)); ex.end(buf); });
  expect(names).toEqual(expect.arrayContaining(['file:README.md', 'file:src/app.py']));
  expect(names.some((n) => n.startsWith('symlink'))).toBe(false);
  expect(patch).toContain('diff --git a/README.md b/README.md');
  expect(patch).toContain('+changed');
  // the patch applies to the seed
  const applied = await peer.exec({
    argv: ['bash', '-c', 'd=$(mktemp -d) && cd $d && printf "# seed\\n" > README.md && git apply --whitespace=nowarn - && cat README.md src/app.py'],
    stdin: patch,
    timeoutMs: 10_000,
  });
  expect(applied.stdout).toBe('# seed\nchanged\nprint("hi")\n');
});

describe('seeding with an uploaded tar', () => {
  test.each([
    ['..', [{ name: '../../etc/cron.d/evil', body: 'x' }]],
    ['an absolute name', [{ name: '/etc/passwd', body: 'x' }]],
    ['symlink-then-write', [{ name: 'link', type: 'symlink' as const, linkname: '/home/agent' }, { name: 'link/.bashrc', body: 'evil' }]],
  ])('an entry with %s is rejected and nothing is created', async (_n, entries) => {
    const before = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    const seedTar = await makeTar(entries as Array<Partial<tar.Header> & { name: string; body?: string }>);
    await expect(provider.acquire(request({ seedTar }))).rejects.toMatchObject({ code: 'path_refused' });
    const after = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    expect(after.length).toBe(before.length);
  });

  test('a good tar seeds the workspace', async () => {
    const sb = await provider.acquire(request({ seedTar: await makeTar([{ name: 'pkg/', type: 'directory' }, { name: 'pkg/a.txt', body: 'A' }]), files: { 'b.txt': 'B' } }));
    try {
      // owned by the sandbox's agent uid (named agent in the image), so it can edit and export them
      expect((await sb.exec({ argv: ['bash', '-c', 'cat pkg/a.txt b.txt; find pkg/a.txt -printf "%u %U\\n"; id -u'], timeoutMs: 5000 })).stdout).toMatch(/^ABagent (\d+)\n\1\n$/);
    } finally {
      await sb.dispose();
    }
  });
});

test('dispose removes the container and the egress socket directory', async () => {
  const sb = await provider.acquire(request({ egressAllow: ['allowed.test'] }));
  const info = await docker.getContainer(sb.id).inspect();
  expect(info.Config.Labels).toMatchObject({ corral: '1', 'corral.worker-id': WORKER });
  const dir = info.Config.Labels['corral.egress-dir']!;
  await sb.dispose();
  await expect(docker.getContainer(sb.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
  const { existsSync } = await import('node:fs');
  expect(existsSync(dir)).toBe(false);
});
}
