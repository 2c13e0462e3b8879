/**
 * A second Docker engine on this machine, as a stand-in for "another host" in integration tests: a
 * dockerd of its own beside the main one, with everything it owns under one short directory
 * /tmp/corral-engine-NAME-XXXXXX (its API socket docker.sock, data root, exec root, pid file, log,
 * config file and trust key) and nothing shared with the main engine that a test could observe:
 *  - its own containerd: dockerd starts (and on shutdown stops) a containerd of its own under the exec
 *    root, because no system containerd answers at /run/containerd/containerd.sock (if one did, both
 *    engines would use it; the containerd namespaces below keep their containers apart then);
 *  - its own containerd namespaces, and containers under a cgroup parent of its own (/<dir name>);
 *  - `--config-file` of its own, so the main /etc/docker/daemon.json (runsc) is not read: runtimes are
 *    runc only; on dockerd < 23 the file names a trust key of its own (`deprecated-key-path`), or the
 *    engine would report the main engine's ID from /etc/docker/key.json. The engine's Name is the host
 *    name either way;
 *  - no networks beyond none and host (`--bridge none`), no iptables/ip6tables/masquerading rules;
 *    containers run with NetworkMode none (or host). Seccomp's default profile applies as on the main
 *    engine; AppArmor is not in this kernel.
 * Images are copied in from the main engine (docker save | docker load, two piped child processes).
 *
 * Contract: startSecondEngine() resolves once /_ping answers, images loaded; stop() is SIGTERM and the
 * wait for dockerd's exit (it stops its containers first: each gets its StopTimeout, 10 s by default,
 * so give long-lived test containers Init: true or a short StopTimeout); start() starts it again on the
 * same data root. dispose() (idempotent) stops it, kills whatever of it is left, unmounts what is
 * mounted under its directory, removes its cgroups and the directory. A test that starts one disposes
 * it in afterAll; if the test process dies first, a watchdog gives dockerd SIGTERM (it then stops its
 * containers and unmounts; the directory and the cgroup directories stay).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, readdirSync, rmSync, rmdirSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { promisify } from 'node:util';

export interface SecondEngine {
  /** e.g. unix:///tmp/corral-engine-b-XXXXXX/docker.sock */
  dockerHost: string;
  socketPath: string;
  /** Everything of this engine is under it (dockerd.log among it). */
  dir: string;
  /** Stops dockerd (SIGTERM, wait for exit; its containers die with it). No-op when stopped. */
  stop(): Promise<void>;
  /** Starts it again with the same data root (containers that existed are still listed, exited). */
  start(): Promise<void>;
  /** Stops it and removes its directories (unmounting anything left under them). Idempotent. */
  dispose(): Promise<void>;
}

const READY_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 60_000;
const run = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The last lines of the log that say something (not grpc's connectivity chatter). */
function logTail(file: string, lines = 25): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return '(no log)';
  }
  return text.split('\n').filter((l) => l && !l.includes('module=grpc')).slice(-lines).join('\n');
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path: '/_ping', timeout: 1000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** Pids of processes whose command line mentions `needle` (dockerd, its containerd, their shims). */
function pidsMentioning(needle: string): number[] {
  const pids: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(needle)) pids.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return pids;
}

/** Mount points of this mount namespace at or under `dir`, deepest first. */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((l) => l.split(' ')[4]?.replace(/\\(\d{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))))
    .filter((m): m is string => !!m && (m === dir || m.startsWith(`${dir}/`)))
    .sort((a, b) => b.length - a.length);
}

/** This engine's cgroup directory in every mounted hierarchy (v1: one per controller; v2: one). */
function cgroupDirs(parent: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((l) => l.split(' '))
    .filter((f) => ['cgroup', 'cgroup2'].includes(f[f.indexOf('-') + 1] ?? ''))
    .map((f) => join(f[4]!, parent))
    .filter((d) => existsSync(d));
}

/** rmdir of a cgroup tree, children first (its files are the kernel's, rmdir takes them along). */
function removeCgroup(d: string): void {
  for (const e of readdirSync(d)) {
    const p = join(d, e);
    if (statSync(p).isDirectory()) removeCgroup(p);
  }
  rmdirSync(d);
}

function killAll(pids: number[]): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** `docker save IMAGES` on the main engine piped into `docker load` on `dockerHost`. */
async function copyImages(images: string[], dockerHost: string): Promise<void> {
  const finished = (c: ChildProcess, what: string) => {
    let err = '';
    c.stderr!.on('data', (d: Buffer) => { err = (err + d.toString()).slice(-2000); });
    return new Promise<void>((resolve, reject) => {
      c.once('error', reject);
      c.once('close', (code, signal) => code === 0 ? resolve() : reject(new Error(`${what} failed (${code ?? signal}): ${err.trim()}`)));
    });
  };
  const save = spawn('docker', ['save', ...images], { stdio: ['ignore', 'pipe', 'pipe'] });
  const load = spawn('docker', ['load', '--quiet'], { stdio: [save.stdout, 'ignore', 'pipe'], env: { ...process.env, DOCKER_HOST: dockerHost } });
  save.stdout!.destroy(); // load has the pipe now; ours would keep save's 'close' from coming
  const results = await Promise.allSettled([finished(save, `docker save ${images.join(' ')}`), finished(load, `docker load into ${dockerHost}`)]);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}

export async function startSecondEngine(o: { images: string[]; name?: string; log?: (line: string) => void }): Promise<SecondEngine> {
  const name = o.name ?? 'b';
  // Short: sockets under the exec root (containerd's) must fit a unix socket path (108 bytes).
  if (!/^[a-z0-9][a-z0-9-]{0,15}$/.test(name)) throw new Error(`engine name ${JSON.stringify(name)}: 1-16 of [a-z0-9-]`);
  const log = o.log ?? (() => undefined);
  const dir = mkdtempSync(`/tmp/corral-engine-${name}-`);
  const id = dir.slice('/tmp/'.length);
  const socketPath = join(dir, 'docker.sock');
  const dockerHost = `unix://${socketPath}`;
  const logFile = join(dir, 'dockerd.log');
  const configFile = join(dir, 'daemon.json');
  const containerdPidFile = join(dir, 'run', 'containerd', 'containerd.pid');

  const { stdout: version } = await run('dockerd', ['--version']);
  const major = Number(/version (\d+)\./.exec(version)?.[1] ?? 0);
  writeFileSync(configFile, `${JSON.stringify(major > 0 && major < 23 ? { 'deprecated-key-path': join(dir, 'key.json') } : {})}\n`);
  const args = [
    '--host', dockerHost, '--data-root', join(dir, 'data'), '--exec-root', join(dir, 'run'),
    '--pidfile', join(dir, 'docker.pid'), '--config-file', configFile,
    '--containerd-namespace', id, '--containerd-plugins-namespace', `${id}-plugins`, '--cgroup-parent', `/${id}`,
    '--bridge', 'none', '--iptables=false', '--ip6tables=false', '--ip-masq=false',
  ];

  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  let disposed: Promise<void> | undefined;
  const start = async (): Promise<void> => {
    if (disposed) throw new Error(`engine ${name} was disposed`);
    if (child) return;
    // A containerd pid file left by a containerd that is gone (its pid maybe reused) would make dockerd
    // wait for that process instead of starting its own.
    if (existsSync(containerdPidFile)) {
      const pid = readFileSync(containerdPidFile, 'utf8').trim();
      let ours = false;
      try {
        ours = readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(dir);
      } catch {
        /* gone */
      }
      if (!ours) unlinkSync(containerdPidFile);
    }
    const t0 = Date.now();
    const fd = openSync(logFile, 'a');
    // A minimal environment: dockerd reads DOCKER_TLS_VERIFY / DOCKER_CERT_PATH, and DOCKER_TMPDIR.
    // In network and UTS namespaces of its own (exec keeps the pid dockerd's): `--bridge none` makes
    // dockerd delete the interface docker0 — in the host's namespace that is the main engine's bridge.
    const c = spawn('unshare', ['--net', '--uts', '--', 'sh', '-c', 'ip link set lo up && hostname "$0" && exec dockerd "$@"', id, ...args], {
      stdio: ['ignore', fd, fd], env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin' },
    });
    closeSync(fd);
    c.unref();
    child = c;
    // If this process goes first (jest killed, or a test that never disposes), dockerd gets SIGTERM: a
    // watchdog reads its stdin, which ends when we are gone. (An 'exit' listener would not do: a test
    // file's `process` is jest's copy, its events never come.)
    const watchdog = spawn('sh', ['-c', 'read _; kill -TERM "$0" 2>/dev/null', String(c.pid)], { stdio: ['pipe', 'ignore', 'ignore'] });
    watchdog.unref();
    (watchdog.stdin as unknown as { unref(): void }).unref();
    let gone: string | undefined;
    exited = new Promise<void>((resolve) => {
      c.once('exit', (code, signal) => {
        watchdog.kill('SIGKILL'); // before the pid can be someone else's
        gone = `dockerd exited (${code ?? signal})`;
        if (child === c) child = undefined;
        resolve();
      });
      c.once('error', (e) => {
        watchdog.kill('SIGKILL');
        gone = `dockerd did not start: ${e.message}`;
        if (child === c) child = undefined;
        resolve();
      });
    });
    const end = t0 + READY_TIMEOUT_MS;
    while (!gone && !(await ping(socketPath))) {
      if (Date.now() > end) {
        c.kill('SIGKILL');
        await exited;
        gone = `dockerd did not answer on ${socketPath} within ${READY_TIMEOUT_MS} ms`;
        break;
      }
      await sleep(50);
    }
    if (gone) throw new Error(`engine ${name}: ${gone}; the end of ${logFile}:\n${logTail(logFile)}`);
    log(`engine ${name}: dockerd (pid ${c.pid}) answers on ${socketPath} after ${Date.now() - t0} ms`);
  };

  const stop = async (): Promise<void> => {
    const c = child;
    if (!c) return;
    const t0 = Date.now();
    c.kill('SIGTERM');
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((r) => { timer = setTimeout(() => r('late'), STOP_TIMEOUT_MS); });
    const how = await Promise.race([exited, late]);
    clearTimeout(timer);
    if (how === 'late') throw new Error(`engine ${name}: dockerd (pid ${c.pid}) did not exit within ${STOP_TIMEOUT_MS} ms of SIGTERM; the end of ${logFile}:\n${logTail(logFile)}`);
    log(`engine ${name}: dockerd stopped in ${Date.now() - t0} ms`);
  };

  const dispose = (): Promise<void> => disposed ??= (async () => {
    const problems: string[] = [];
    await stop().catch((e: Error) => problems.push(e.message));
    // Whatever survived: dockerd, its containerd and shims by their command lines, then container
    // processes by their cgroups.
    killAll(pidsMentioning(dir));
    const cgroups = cgroupDirs(id);
    for (const d of cgroups) {
      const procs = (p: string): number[] => readdirSync(p, { withFileTypes: true }).flatMap((e) => e.isDirectory() ? procs(join(p, e.name)) : []).concat(
        existsSync(join(p, 'cgroup.procs')) ? readFileSync(join(p, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean).map(Number) : []);
      killAll(procs(d));
    }
    if (child) await exited;
    for (const m of mountsUnder(dir)) {
      await run('umount', [m]).catch(() => run('umount', ['-l', m])).catch((e: Error) => problems.push(`umount ${m}: ${e.message}`));
    }
    for (const d of cgroups) {
      for (let i = 0; existsSync(d); i++) {
        try {
          removeCgroup(d);
        } catch (e) {
          // a killed process leaves its cgroup a moment later
          if (i >= 50) { problems.push(`rmdir ${d}: ${(e as Error).message}`); break; }
          await sleep(100);
        }
      }
    }
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch (e) {
      problems.push(`rm -r ${dir}: ${(e as Error).message}`);
    }
    if (problems.length) throw new Error(`engine ${name}: dispose left something behind: ${problems.join('; ')}`);
  })();

  try {
    await start();
    const t0 = Date.now();
    if (o.images.length) {
      await copyImages(o.images, dockerHost);
      log(`engine ${name}: loaded ${o.images.join(', ')} in ${Date.now() - t0} ms`);
    }
  } catch (e) {
    await dispose().catch(() => undefined);
    throw e;
  }
  return { dockerHost, socketPath, dir, stop, start, dispose };
}
