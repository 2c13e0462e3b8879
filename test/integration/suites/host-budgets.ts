/**
 * The host's shared kernel budgets (issue 35), once per isolation class, one after the other in one
 * test file (host-budgets.test.ts: the counters are the host's, so the two must not run at once), on
 * the real engine: one sandbox tries to take each budget —
 * Linux AIO contexts (io_setup), ptys (openpty), the file table (descriptors in every process it may
 * fork, and files mapped then closed), pids (a fork bomb) — and holds what it got, while a second
 * sandbox and the host (root, and an unprivileged user) keep working; host uevents
 * (NETLINK_KOBJECT_UEVENT) never reach a sandbox. The numbers each test logs are what one sandbox took
 * of the host's budget and what was left.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config';
import type { IsolationClass, LeasedSandbox, SandboxRequest } from '../../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../../src/sandbox';
import { FILES, GVISOR_HOST_PIDS_CAP, PTYS, sandboxBudget } from '../../../src/sandbox/sandbox-budgets';
import { eventually } from '../../support/eventually';
import { isolationEnv } from '../../support/sandbox-env';

const run = promisify(execFile);
const sys = (p: string) => Number(readFileSync(p, 'utf8').trim().split(/\s+/)[0]);
/** Allocated file objects on the host (fs.file-nr's first field). */
const fileNr = () => sys('/proc/sys/fs/file-nr');
const PY = 'import ctypes, errno, os, sys, time\nlibc = ctypes.CDLL(None, use_errno=True)\n';

/** python3 on the host, as root or (`user`) as nobody; its stdout. */
async function hostPy(code: string, user?: 'nobody'): Promise<string> {
  const argv = user ? ['setpriv', '--reuid', '65534', '--regid', '65534', '--clear-groups', '/usr/bin/python3', '-c', PY + code] : ['/usr/bin/python3', '-c', PY + code];
  const { stdout } = await run(argv[0]!, argv.slice(1), { timeout: 60_000 });
  return stdout.trim();
}

export function hostBudgets(isolation: IsolationClass): void {
  const gvisor = isolation === 'gvisor';
  const WORKER = `test-budgets-${isolation}-${randomBytes(3).toString('hex')}`;
  const docker = new Docker();
  const config = loadConfig(isolationEnv(isolation));
  const provider = new DockerSandboxProvider({ docker, config });
  const HOSTILE_PIDS = gvisor ? 256 : 128;
  // gVisor: a forked process costs its Sentry ≈3.5 MB, and at the memory limit the whole sandbox dies
  // (README), so the fork bomb gets the memory to meet its process limit.
  const HOSTILE_MEMORY_MB = gvisor ? 1536 : 256;
  let hostile: LeasedSandbox;
  let victim: LeasedSandbox;

  const request = (pids: number, memoryMb = 128): SandboxRequest => ({
    runId: `run_budget_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000), files: {},
    limits: { memoryMb, cpus: 1, pids, workspaceMb: 16, isolation }, egressAllow: [],
  });
  const py = async (s: LeasedSandbox, code: string, timeoutMs = 60_000) => {
    const r = await s.exec({ argv: ['python3', '-c', PY + code], timeoutMs, maxOutputBytes: 64 * 1024 });
    if (r.exitCode !== 0) throw new Error(`python failed (${r.exitCode}): ${r.stderr.slice(-2000)}`);
    return r.stdout.trim();
  };
  /** Starts `code` in the background in `s` (it outlives the call) and waits for its first line of output: what it holds. */
  const hold = async (s: LeasedSandbox, name: string, code: string): Promise<string> => {
    const file = `/tmp/${name}.out`;
    await s.exec({ argv: ['bash', '-c', `nohup python3 -c "$1" > ${file} 2>&1 &`, 'hold', PY + code], timeoutMs: 10_000 });
    return eventually(async () => (await s.exec({ argv: ['cat', file], timeoutMs: 10_000 })).stdout, {
      what: `${name} to report what it holds`, until: (o) => /^(held|refused)/m.test(o), timeoutMs: 180_000, intervalMs: 1000,
    });
  };
  /** Kills every process of the sandbox's agent (what the holders left), waiting until none is left. */
  const release = async (s: LeasedSandbox) => {
    await eventually(async () => (await s.exec({ argv: ['bash', '-c', 'kill -KILL -1 2>/dev/null; pgrep -c -u "$(id -u)" -x sleep || true'], timeoutMs: 30_000 })).stdout.trim(), {
      what: 'the holders to be gone', until: (n) => n === '0', timeoutMs: 60_000, intervalMs: 500,
    });
  };
  const pidsCgroup = (id: string) => {
    for (const p of [`/sys/fs/cgroup/pids/docker/${id}`, `/sys/fs/cgroup/system.slice/docker-${id}.scope`]) {
      try {
        return { current: sys(`${p}/pids.current`), max: sys(`${p}/pids.max`) };
      } catch { /* next */ }
    }
    throw new Error(`no pids cgroup for ${id}`);
  };

  beforeAll(async () => {
    [hostile, victim] = await Promise.all([provider.acquire(request(HOSTILE_PIDS, HOSTILE_MEMORY_MB)), provider.acquire(request(64))]);
  });
  afterAll(async () => {
    await Promise.allSettled([hostile?.dispose(), victim?.dispose()]);
    const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  });

  test('Linux AIO contexts: one sandbox takes none of fs.aio-max-nr; host root and an unprivileged user still get one', async () => {
    const before = sys('/proc/sys/fs/aio-nr');
    const out = await py(hostile, [
      'ctx = ctypes.c_ulong(0); ok = 0; first = None',
      'for i in range(20000):',
      '    ctx.value = 0',
      '    if libc.syscall(206, 128, ctypes.byref(ctx)) == 0: ok += 1',
      '    else:',
      '        first = errno.errorcode[ctypes.get_errno()]; break',
      'print(ok, first)',
    ].join('\n'));
    const [ok, first] = out.split(' ');
    const took = sys('/proc/sys/fs/aio-nr') - before;
    console.log(`[budget ${isolation}] aio: the sandbox got ${ok} contexts (then ${first}); fs.aio-nr grew by ${took} of ${sys('/proc/sys/fs/aio-max-nr')}`);
    if (!gvisor) expect(out).toBe('0 ENOSYS');
    // under gVisor the Sentry serves AIO itself: the host's count is not touched
    expect(took).toBe(0);
    const setup = 'ctx = ctypes.c_ulong(0)\nr = libc.syscall(206, 128, ctypes.byref(ctx))\nprint("ok" if r == 0 else errno.errorcode[ctypes.get_errno()])\nlibc.syscall(207, ctx)';
    expect(await py(victim, setup)).toBe(gvisor ? 'ok' : 'ENOSYS');
    expect(await hostPy(setup)).toBe('ok');
    expect(await hostPy(setup, 'nobody')).toBe('ok');
  });

  test('ptys: one sandbox holds at most its own devpts instance\'s; `docker run -t`, the other sandbox and the host still get ptys', async () => {
    const before = sys('/proc/sys/kernel/pty/nr');
    const got = await hold(hostile, 'ptys', [
      'import pty', 'fds = []',
      'try:',
      '    while len(fds) < 4000: fds.append(pty.openpty())',
      'except OSError as e: print("stopped", len(fds), e, flush=True)',
      'print("held", len(fds), flush=True)', 'time.sleep(600)',
    ].join('\n'));
    const held = Number(/held (\d+)/.exec(got)![1]);
    const took = sys('/proc/sys/kernel/pty/nr') - before;
    const pool = sys('/proc/sys/kernel/pty/max') - sys('/proc/sys/kernel/pty/reserve');
    console.log(`[budget ${isolation}] ptys: the sandbox holds ${held}; kernel.pty.nr grew by ${took}; containers' pool ${pool}, left ${pool - sys('/proc/sys/kernel/pty/nr')}`);
    if (gvisor) expect(took).toBe(0);
    else {
      expect(held).toBe(PTYS);
      expect(took).toBeLessThanOrEqual(PTYS);
    }
    try {
      expect(await py(victim, 'import pty\nfor i in range(4): m, s = pty.openpty()\nprint(os.ttyname(s))')).toMatch(/^\/dev\/pts\/\d+$/);
      expect((await victim.exec({ argv: ['script', '-qc', 'tty', '/dev/null'], timeoutMs: 20_000 })).stdout).toMatch(/\/dev\/pts\/\d+/);
      const t = await run('docker', ['run', '--rm', '-t', '--network', 'none', '--label', `corral.worker-id=${WORKER}`, config.CORRAL_SANDBOX_IMAGE, 'tty']);
      expect(t.stdout.trim()).toMatch(/^\/dev\/pts\/\d+$/);
      for (const u of [undefined, 'nobody'] as const) expect(await hostPy('import pty\nm, s = pty.openpty()\nprint(os.ttyname(s))', u)).toMatch(/^\/dev\/pts\/\d+$/);
    } finally {
      await release(hostile);
    }
  });

  test('the file table: descriptors in every process one sandbox may fork stay within nofile × nproc; the other sandbox and an unprivileged host user still open files', async () => {
    const budget = sandboxBudget(HOSTILE_PIDS, isolation);
    const before = fileNr();
    const got = await hold(hostile, 'fds', [
      // One child at a time opens descriptors up to its RLIMIT_NOFILE and becomes a `sleep` holding them
      // (inheritable, so exec keeps them; python's memory is gone), up to RLIMIT_NPROC less a few
      // processes left for the test's own commands.
      `NPROC = ${budget.nproc}`,
      'total = kids = 0',
      'while kids < NPROC - 8:',
      '    r, w = os.pipe()',
      '    try: pid = os.fork()',
      '    except OSError: break',
      '    if pid == 0:',
      '        os.close(r); n = 0',
      '        try:',
      '            while True:',
      '                fd = os.open("/dev/null", os.O_RDONLY); os.set_inheritable(fd, True); n += 1',
      '        except OSError: pass',
      '        os.write(w, str(n).encode()); os.close(w)',
      '        os.execv("/bin/sleep", ["sleep", "600"])',
      '    os.close(w); got = os.read(r, 64); os.close(r)',
      '    if not got: break',
      '    total += int(got); kids += 1',
      'print("held", total, "in", kids, "processes", flush=True)', 'time.sleep(600)',
    ].join('\n'));
    const total = Number(/held (\d+)/.exec(got)![1]);
    const took = fileNr() - before;
    const max = sys('/proc/sys/fs/file-max');
    console.log(`[budget ${isolation}] files: the sandbox holds ${total} descriptors (${got.trim()}; at most nofile ${budget.nofile} × nproc ${budget.nproc} = ${budget.nofile * budget.nproc}); fs.file-nr grew by ${took} of fs.file-max ${max} (${(100 * took / max).toFixed(1)} %), left ${max - fileNr()}`);
    expect(total).toBeLessThanOrEqual(FILES);
    // fs.file-nr is the whole host's: others' files come and go meanwhile
    expect(took).toBeLessThanOrEqual(FILES + 50_000);
    try {
      expect(await py(victim, 'fds = [os.open("/dev/null", os.O_RDONLY) for i in range(1000)]\nprint(len(fds))')).toBe('1000');
      expect(await hostPy('fds = [os.open("/dev/null", os.O_RDONLY) for i in range(1000)]\nprint(len(fds))', 'nobody')).toBe('1000');
    } finally {
      await release(hostile);
    }
  });

  test('the file table: files mapped then closed are charged to the sandbox\'s memory, so its memory limit bounds them', async () => {
    const memUsage = () => (gvisor ? 0 : sys(`/sys/fs/cgroup/memory/docker/${hostile.id}/memory.usage_in_bytes`));
    const [before, mem0] = [fileNr(), memUsage()];
    const got = await hold(hostile, 'maps', [
      'libc.mmap.restype = ctypes.c_void_p',
      'libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]',
      'n = 0',
      'while n < 60000:',
      '    try: fd = os.open("/etc/hostname", os.O_RDONLY)',
      '    except OSError: break',
      '    p = libc.mmap(None, 4096, 1, 2, fd, 0); os.close(fd)',
      '    if p in (None, ctypes.c_void_p(-1).value): break',
      '    n += 1',
      'print("held", n, flush=True)', 'time.sleep(600)',
    ].join('\n'));
    const held = Number(/held (\d+)/.exec(got)![1]);
    const took = fileNr() - before;
    const charged = memUsage() - mem0;
    const limit = (HOSTILE_MEMORY_MB + 16 + 96) * 1024 * 1024;
    console.log(gvisor
      ? `[budget ${isolation}] mapped files: one process holds ${held} files without descriptors; fs.file-nr grew by ${took} (the Sentry's files are its own)`
      : `[budget ${isolation}] mapped files: one process holds ${held} files without descriptors; fs.file-nr grew by ${took}; the sandbox's memory cgroup was charged ${charged} bytes (${Math.round(charged / held)} per file), so its ${Math.round(limit / 1048576)} MiB limit bounds it at ≈${Math.round(limit / (charged / held))} files`);
    if (gvisor) {
      // the Sentry's files are its own
      expect(took).toBeLessThan(1000);
    } else {
      // what the kernel charged the sandbox's own memory cgroup for them (fs.file-nr is the host's: noisy)
      expect(held).toBe(60000);
      expect(charged / held).toBeGreaterThanOrEqual(400);
    }
    try {
      expect(await py(victim, 'fds = [os.open("/dev/null", os.O_RDONLY) for i in range(1000)]\nprint(len(fds))')).toBe('1000');
      expect(await hostPy('fds = [os.open("/dev/null", os.O_RDONLY) for i in range(1000)]\nprint(len(fds))', 'nobody')).toBe('1000');
    } finally {
      await release(hostile);
    }
  });

  test('pids: a fork bomb in one sandbox stays within its cgroup; the other sandbox and the host still fork', async () => {
    const budget = sandboxBudget(HOSTILE_PIDS, isolation);
    const got = await hold(hostile, 'forks', [
      // Children become `sleep`s (python's memory gone); once forks fail, some are let go so that the
      // test can still exec into the sandbox to read this (under gVisor an exec needs host threads too).
      'kids = []',
      'try:',
      '    while len(kids) < 100000:',
      '        pid = os.fork()',
      '        if pid == 0: os.execv("/bin/sleep", ["sleep", "600"])',
      '        kids.append(pid)',
      'except OSError as e: print("stopped", len(kids), e, flush=True)',
      'n = len(kids)',
      'for p in kids[-32:]: os.kill(p, 9); os.waitpid(p, 0)',
      'print("held", n, flush=True)', 'time.sleep(600)',
    ].join('\n'));
    const held = Number(/held (\d+)/.exec(got)![1]);
    const cg = pidsCgroup(hostile.id);
    const pidMax = sys('/proc/sys/kernel/pid_max');
    console.log(`[budget ${isolation}] pids: the sandbox forked ${held} (nproc ${budget.nproc}); its pids cgroup holds ${cg.current} of ${cg.max} host pids = ${(100 * cg.max / pidMax).toFixed(1)} % of kernel.pid_max ${pidMax}`);
    expect(held).toBeLessThan(budget.nproc);
    expect(cg.max).toBe(budget.pidsCgroup);
    expect(cg.current).toBeLessThanOrEqual(gvisor ? GVISOR_HOST_PIDS_CAP : budget.nproc);
    try {
      expect(await py(victim, 'pids = []\nfor i in range(40):\n    p = os.fork()\n    if p == 0: os._exit(0)\n    pids.append(p)\nfor p in pids: os.waitpid(p, 0)\nprint(len(pids))')).toBe('40');
      for (const u of [undefined, 'nobody'] as const) {
        expect(await hostPy('pids = []\nfor i in range(100):\n    p = os.fork()\n    if p == 0: os._exit(0)\n    pids.append(p)\nfor p in pids: os.waitpid(p, 0)\nprint(len(pids))', u)).toBe('100');
      }
    } finally {
      await release(hostile);
    }
  });

  test('host uevents (NETLINK_KOBJECT_UEVENT) never reach a sandbox; a plain container with Docker\'s default profile gets them (positive control)', async () => {
    const listen = [
      'import socket, select',
      'try:',
      '    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 15)',
      '    s.bind((0, 1))',
      'except OSError as e:',
      '    print("refused", errno.errorcode[e.errno], flush=True); sys.exit(0)',
      'print("listening", flush=True)',
      'r, _, _ = select.select([s], [], [], float(sys.argv[1]) if len(sys.argv) > 1 else 60)',
      'print("event" if r else "none", flush=True)',
    ].join('\n');
    const plain = await run('docker', ['run', '-d', '--network', 'none', '--user', '10001', '--label', `corral.worker-id=${WORKER}`, config.CORRAL_SANDBOX_IMAGE, 'python3', '-c', PY + listen]);
    const id = plain.stdout.trim();
    const logs = async () => (await run('docker', ['logs', id])).stdout;
    await eventually(logs, { what: 'the plain container to listen for uevents', until: (l) => l.includes('listening'), timeoutMs: 30_000 });
    const inSandbox = await hold(victim, 'uevents', listen.replace('print("listening", flush=True)', 'print("held listening", flush=True)'));
    // A uevent from the host: re-announce a device that exists everywhere.
    await run('sh', ['-c', 'echo change > /sys/class/mem/null/uevent']);
    await eventually(logs, { what: 'the plain container to receive the host\'s uevent', until: (l) => l.includes('event'), timeoutMs: 30_000 });
    if (!gvisor) {
      expect(inSandbox).toContain('refused EPERM');
    } else {
      // gVisor's netlink uevent socket is its own and never carries the host's events
      const after = (await victim.exec({ argv: ['cat', '/tmp/uevents.out'], timeoutMs: 10_000 })).stdout;
      expect(after).not.toMatch(/^event$/m);
    }
    expect(await py(victim, 'import socket\ns = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\nprint("route ok")')).toBe('route ok');
    await run('docker', ['rm', '-f', id]);
    await release(victim);
  });
}
