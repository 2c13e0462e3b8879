/**
 * The kernel surface of a sandbox, attacked from inside, once per isolation class
 * (sandbox-kernel.test.ts: runc, sandbox-kernel-gvisor.test.ts: gVisor), on the real engine:
 * - system calls and socket families corral's seccomp profile refuses (positive controls: the same call
 *   in a plain container with Docker's default profile, and the host's own /proc);
 * - what /proc and /sys show of the host;
 * - PID 1, which runs as another uid than the agent: not stoppable, killable or traceable;
 * - a call's processes die at its timeout and at a cancel whatever they did to their environment or
 *   session, while an earlier call's server lives on;
 * - per-uid kernel limits: one sandbox exhausting inotify instances, processes or pipe buffers leaves
 *   another one whole;
 * - the deadline holds from outside when PID 1 is stopped through the engine;
 * - /workspace allows exec, and that gives nothing (setuid binaries stay unprivileged).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { loadConfig } from '../../../src/config';
import type { IsolationClass, LeasedSandbox, SandboxRequest } from '../../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../../src/sandbox';
import { uidSlot } from '../../../src/sandbox/uid-slots';
import { eventually } from '../../support/eventually';
import { instanceLabelArgs, isolationEnv } from '../../support/sandbox-env';

const run = promisify(execFile);

/** A python3 one-off inside the sandbox: `py(sb, code)` → stdout lines. */
const PY_ERRNO = 'import ctypes, errno, os, socket, sys\nlibc = ctypes.CDLL(None, use_errno=True)\n' +
  'def sc(nr, *a):\n    r = libc.syscall(nr, *[ctypes.c_long(x) for x in a])\n    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))\n';

export function sandboxKernel(isolation: IsolationClass): void {
  jest.setTimeout(90_000);
  const WORKER = `test-kernel-${isolation}-${randomBytes(3).toString('hex')}`;
  const docker = new Docker();
  const config = loadConfig(isolationEnv(isolation));
  const gvisor = isolation === 'gvisor';
  const provider = new DockerSandboxProvider({ docker, config });
  let sb: LeasedSandbox;
  let other: LeasedSandbox;

  const request = (over: Partial<SandboxRequest> = {}): SandboxRequest => ({
    runId: `run_kernel_${randomBytes(4).toString('hex')}`,
    workerId: WORKER,
    deadline: new Date(Date.now() + 5 * 60_000),
    files: {},
    limits: { memoryMb: 256, cpus: 1, pids: 128, workspaceMb: 32 },
    egressAllow: [],
    ...over,
  });
  const sh = (s: LeasedSandbox, script: string, timeoutMs = 20_000) => s.exec({ argv: ['bash', '-c', script], timeoutMs });
  const py = async (s: LeasedSandbox, code: string) => {
    const r = await s.exec({ argv: ['python3', '-c', PY_ERRNO + code], timeoutMs: 20_000 });
    if (r.exitCode !== 0) throw new Error(`python failed (${r.exitCode}): ${r.stderr}`);
    return r.stdout.trim().split('\n');
  };
  /** The same python in a plain container with Docker's default seccomp profile (positive control). */
  const pyPlain = async (code: string) => {
    const { stdout } = await run('docker', ['run', '--rm', '--network', 'none', '--user', '10001', '--label', `corral.worker-id=${WORKER}`, ...instanceLabelArgs(), config.CORRAL_SANDBOX_IMAGE, 'python3', '-c', PY_ERRNO + code]);
    return stdout.trim().split('\n');
  };
  const psArgs = async (s: LeasedSandbox) => (await s.exec({ argv: ['ps', '-eo', 'user:12,stat,args'], timeoutMs: 10_000 })).stdout;
  /**
   * A command from outside the call, as the sandbox's init uid (docker exec): it needs no process slot of
   * the agent's uid, so it works while a hog holds them all (under runc the pids cgroup too: then use top).
   */
  const outside = (s: LeasedSandbox, ...argv: string[]) => run('docker', ['exec', s.id, ...argv]).then(() => true, () => false);
  /** The processes of a sandbox whose arguments contain `text`, seen from outside (runc: docker top on the host; gVisor: ps by docker exec). */
  const seen = async (s: LeasedSandbox, text: string): Promise<string[]> => {
    const lines = gvisor
      ? (await run('docker', ['exec', s.id, 'ps', '-eo', 'args']).catch(() => ({ stdout: '' }))).stdout.split('\n')
      : ((await docker.getContainer(s.id).top({ ps_args: '-eo pid,args' }).catch(() => ({ Processes: [] as string[][] }))).Processes ?? []).map((p: string[]) => p.join(' '));
    return lines.filter((l: string) => l.includes(text));
  };
  /** Python for a hog: after taking everything, it says so (/tmp/hogged) and holds on until the test lets it go (/tmp/release). */
  const HOLD = 'import os, time\nopen("/tmp/hogged", "w").close()\nwhile not os.path.exists("/tmp/release"): time.sleep(0.05)\n';

  beforeAll(async () => {
    [sb, other] = await Promise.all([provider.acquire(request()), provider.acquire(request())]);
  });
  afterAll(async () => {
    await Promise.allSettled([sb?.dispose(), other?.dispose()]);
    const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
    await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  });

  describe('system calls and socket families', () => {
    const VSOCK = [
      'for t in (socket.SOCK_STREAM, socket.SOCK_DGRAM):\n    try:\n        socket.socket(40, t); print("vsock open")\n    except OSError as e: print("vsock", errno.errorcode[e.errno])',
      'print("vsock-highbits", sc(41, (1 << 32) | 40, 1, 0))', // the family with high bits set: seccomp compares all 64
      'print("socketpair-vsock", sc(53, 40, 1, 0, 0))',
    ].join('\n');

    test('AF_VSOCK is refused in every spelling (Docker\'s default profile allows it)', async () => {
      const out = await py(sb, VSOCK);
      expect(out.some((l) => /open|ok/.test(l))).toBe(false);
      for (const l of out) expect(l).toMatch(gvisor ? /EPERM|EAFNOSUPPORT|EINVAL|EOPNOTSUPP/ : /EPERM/);
      if (!gvisor) expect(await pyPlain(VSOCK)).toContain('vsock open');
    });

    test('socket families a sandbox has no use for are refused; unix, inet, inet6 and netlink work', async () => {
      const out = await py(sb, [
        'for fam, t in ((38, 5), (30, 2), (21, 5), (15, 3), (31, 1), (29, 3), (44, 3), (43, 1), (17, 3)):',
        '    try:\n        socket.socket(fam, t); print(fam, "open")\n    except OSError as e: print(fam, errno.errorcode[e.errno])',
        'for fam, t, p in ((1, 1, 0), (2, 1, 0), (10, 2, 0), (16, 3, 0)):',
        '    socket.socket(fam, t, p); print(fam, "works")',
      ].join('\n'));
      expect(out.filter((l) => l.endsWith('open'))).toEqual([]);
      expect(out.filter((l) => l.endsWith('works'))).toEqual(['1 works', '2 works', '10 works', '16 works']);
    });

    test(gvisor ? 'io_uring is the Sentry\'s, never the host kernel\'s' : 'io_uring_setup, _enter and _register are refused (Docker\'s default profile allows them)', async () => {
      const code = 'print("setup", sc(425, 8, ctypes.addressof(ctypes.create_string_buffer(120))))\nprint("enter", sc(426, 0, 0, 0, 0, 0, 0))\nprint("register", sc(427, 0, 0, 0, 0))';
      const out = await py(sb, code);
      if (gvisor) {
        // runsc does not load OCI seccomp profiles into `docker exec` processes; gVisor implements
        // io_uring_setup itself, and the host kernel sees only the Sentry's own (filtered) system calls
        expect((await sh(sb, 'uname -r; dmesg | head -1')).stdout).toMatch(/^4\.4\.0\n.*Starting gVisor/);
        expect(out[2]).not.toBe('register ok');
      } else {
        expect(out).toEqual(['setup EPERM', 'enter EPERM', 'register EPERM']);
        expect((await pyPlain(code))[0]).toBe('setup ok');
      }
    });

    test('keyrings, userfaultfd, bpf, perf_event_open, user namespaces and mounts are refused', async () => {
      const out = await py(sb, [
        'print("add_key", sc(248, ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"k")), 0, 0, -4))',
        'print("keyctl", sc(250, 0, -4, 0, 0, 0))',
        'print("request_key", sc(249, ctypes.addressof(ctypes.create_string_buffer(b"user")), ctypes.addressof(ctypes.create_string_buffer(b"k")), 0, 0))',
        'print("userfaultfd", sc(323, 0))',
        'print("bpf", sc(321, 0, ctypes.addressof(ctypes.create_string_buffer(128)), 128))',
        'print("perf_event_open", sc(298, ctypes.addressof(ctypes.create_string_buffer(128)), 0, -1, -1, 0))',
        'print("mount", sc(165, ctypes.addressof(ctypes.create_string_buffer(b"none")), ctypes.addressof(ctypes.create_string_buffer(b"/tmp")), ctypes.addressof(ctypes.create_string_buffer(b"tmpfs")), 0, 0))',
        'print("setns", sc(308, 0, 0))',
      ].join('\n'));
      for (const l of out) expect(l).not.toMatch(/ ok$/);
      if (!gvisor) for (const l of out) expect(l).toMatch(/ EPERM$/);
      // user namespaces: the largest kernel surface an unprivileged process could reach
      const ns = await py(sb, 'print("unshare-user", sc(272, 0x10000000))\nprint("clone-newuser", sc(56, 0x10000000 | 17, 0, 0, 0, 0))');
      if (gvisor) expect(ns.join('\n')).not.toMatch(/clone-newuser ok/);
      else expect(ns).toEqual(['unshare-user EPERM', 'clone-newuser EPERM']);
    });

    test(gvisor ? 'ptrace is the Sentry\'s: a process may trace only its own children there, never another\'s' : 'ptrace and process_vm_readv of the agent\'s own child are refused', async () => {
      const out = await py(sb, [
        'import subprocess, time',
        'p = subprocess.Popen(["sleep", "30"])',
        'print("attach", sc(101, 16, p.pid, 0, 0))',
        'print("seize", sc(101, 0x4206, p.pid, 0, 0))',
        'iov = (ctypes.c_ulong * 2)(ctypes.addressof(ctypes.create_string_buffer(8)), 8)',
        'print("vm_readv", sc(310, p.pid, ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0))',
        'p.kill()',
      ].join('\n'));
      if (gvisor) {
        // gVisor's ptrace (Yama-like scope: descendants only) acts in the Sentry, not on host processes
        const sib = await py(sb, 'import subprocess, time\np = subprocess.Popen(["sleep", "30"])\nq = subprocess.Popen(["python3", "-c", "import ctypes,errno,sys; l=ctypes.CDLL(None,use_errno=True); r=l.ptrace(16,int(sys.argv[1]),0,0); print(\'sibling\', errno.errorcode.get(ctypes.get_errno()) if r else \'ok\')", str(p.pid)], stdout=subprocess.PIPE)\nprint(q.communicate()[0].decode().strip()); p.kill()');
        expect(sib).toEqual(['sibling EPERM']);
      } else {
        expect(out.slice(0, 2)).toEqual(['attach EPERM', 'seize EPERM']);
        expect(out[2]).not.toBe('vm_readv ok');
      }
      if (!gvisor) expect(await pyPlain('import subprocess, time\np = subprocess.Popen(["sleep", "30"])\nprint("attach", sc(101, 16, p.pid, 0, 0))')).toEqual(['attach ok']);
    });

    test('ordinary work still runs: threads, processes, git, python\'s test runner, a pipeline', async () => {
      const r = await sh(sb, [
        'python3 -c "import multiprocessing as m, threading; t = threading.Thread(target=print, args=(\'thread-ok\',)); t.start(); t.join(); print(sum(m.Pool(2).map(abs, [-1, -2])))"',
        'cd /tmp && git init -q r && cd r && echo x > f && git add f && git -c user.email=a@b -c user.name=a commit -qm x && git log --format=%s',
        'python3 -m pytest --version 2>&1 | head -1',
        'seq 1000 | sort -n | tail -1',
      ].join(' && '));
      expect(r.stderr).toBe('');
      expect(r.stdout).toMatch(/^thread-ok\n3\nx\npytest \S+\n1000\n$/);
    });
  });

  describe('what the sandbox sees of the host', () => {
    test('/proc/cmdline and the kernel\'s config, symbols, modules and devices show nothing of the host', async () => {
      const host = readFileSync('/proc/cmdline', 'utf8').trim();
      expect(host.length).toBeGreaterThan(0); // positive control: the host has one
      const r = await sh(sb, 'for f in /proc/cmdline /proc/config.gz /proc/kallsyms /proc/modules /proc/iomem /proc/sys/kernel/random/boot_id; do printf "%s %s\\n" "$f" "$(head -c 4096 "$f" 2>/dev/null | wc -c)"; done; echo ---; cat /proc/cmdline; echo ---; echo $(ls -A /sys/kernel 2>/dev/null | wc -l) $(ls -A /sys/module 2>/dev/null | wc -l)');
      const [sizes, cmdline, sysCount] = r.stdout.split('---\n');
      expect(cmdline).not.toContain(host);
      for (const token of host.split(/\s+/).filter((t) => t.length > 6)) expect(cmdline).not.toContain(token);
      if (!gvisor) {
        for (const line of sizes!.trim().split('\n')) expect(line).toMatch(/ 0$/);
        expect(sysCount!.trim()).toBe('0 0');
        // positive control: Docker's defaults show it
        expect((await run('docker', ['run', '--rm', '--label', `corral.worker-id=${WORKER}`, ...instanceLabelArgs(), config.CORRAL_SANDBOX_IMAGE, 'cat', '/proc/cmdline'])).stdout.trim()).toBe(host);
      } else {
        expect(cmdline!.trim()).toMatch(/gvisor/);
      }
    });
  });

  describe('PID 1', () => {
    test('runs as the slot\'s init uid; the agent can neither stop, kill nor trace it (nor the deadline sleep)', async () => {
      const r = await sh(sb, [
        'for s in STOP KILL TERM INT HUP; do kill -$s 1 2>/dev/null; echo "kill -$s 1 rc=$?"; done',
        'for p in $(pgrep -x -u $(( $(id -u) - 1 )) sleep); do kill -STOP $p 2>/dev/null; echo "stop $p rc=$?"; done',
        'kill -STOP -1; echo "stop-all rc=$?"; kill -CONT -1',
        'python3 -c "import ctypes,errno; l=ctypes.CDLL(None,use_errno=True); r=l.ptrace(16,1,0,0); print(\'ptrace1\', errno.errorcode.get(ctypes.get_errno()) if r else \'ok\')"',
        'head -c 1 /proc/1/mem >/dev/null 2>&1; echo "mem rc=$?"',
      ].join('\n'));
      for (const s of ['STOP', 'KILL', 'TERM', 'INT', 'HUP']) expect(r.stdout).toContain(`kill -${s} 1 rc=1`);
      expect(r.stdout).toMatch(/stop \d+ rc=1/);
      expect(r.stdout).not.toMatch(/stop \d+ rc=0/);
      expect(r.stdout).toMatch(/ptrace1 EPERM/);
      expect(r.stdout).toContain('mem rc=1');
      // from outside: PID 1 and its sleep are running (not stopped) and not the agent's uid
      const info = await docker.getContainer(sb.id).inspect();
      expect(info.State.Running).toBe(true);
      const agentUid = Number((await sh(sb, 'id -u')).stdout.trim());
      expect(info.Config.User).toBe(`${agentUid - 1}:${agentUid - 1}`);
      if (!gvisor) {
        const top = await docker.getContainer(sb.id).top({ ps_args: '-eo pid,uid,stat,args' });
        const init = top.Processes.filter((p: string[]) => /docker-init|sleep \d+/.test(p[3] ?? ''));
        expect(init.length).toBe(2);
        for (const p of init) {
          expect(Number(p[1])).toBe(agentUid - 1);
          expect(p[2]).not.toMatch(/T/);
        }
      }
    });
  });

  describe('a call\'s processes die at its timeout and at a cancel, however they hide', () => {
    const ESCAPES = [
      '(env -i setsid sleep 4101 &)',
      'setsid -f env -i sleep 4102',
      'nohup env -i sleep 4103 >/dev/null 2>&1 & disown',
      '(set -m; sleep 4104 & disown)',
      'bash -c \'trap "" TERM HUP INT; exec -a innocent sleep 4105\' & disown',
      'python3 -c "import os,time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp(\'sleep\', [\'sleep\', \'4106\'])\n    os._exit(0)"',
      '(while :; do sleep 0.2; done) & disown',
    ].join('\n');
    const left = async (s: LeasedSandbox) => {
      const ps = await psArgs(s);
      return ps.split('\n').filter((l) => /410[1-6]|innocent|while|sleep 0\.2/.test(l));
    };

    test('at the timeout: nothing the call started is left, an earlier call\'s server lives on', async () => {
      // the server answers once it is up (curl retries a refused connection once a second)
      const server = await sh(sb, 'nohup python3 -m http.server 8711 --bind 127.0.0.1 >/dev/null 2>&1 & disown; curl -s --retry 60 --retry-connrefused --retry-delay 1 -o /dev/null -w "%{http_code}" http://127.0.0.1:8711/');
      expect(server.stdout).toBe('200');
      // Makes time pass for the rule under test: the kill takes what started since the call began, less a
      // 250 ms margin for clock ticks (call-kill.ts), so the server must be older than that.
      await new Promise((r) => setTimeout(r, 600));
      // Waits until all six are up, says so, then hangs until the timeout (which only has to outlast that start).
      const r = await sh(sb, `${ESCAPES}\nuntil [ "$(ps -eo args | grep -c '[4]10[1-6]\\|innocent')" -ge 6 ]; do sleep 0.1; done; echo up; sleep 999`, 15_000);
      expect(r.timedOut).toBe(true);
      expect(r.stdout.trim()).toBe('up'); // they were all running
      // SIGKILLed processes can stay listed for a moment (gVisor reaps them late): wait for the list to empty; a survivor never leaves it
      await eventually(() => left(sb), { what: 'the processes of the timed-out call to be gone', until: (l) => l.length === 0 });
      expect((await sh(sb, 'curl -s -o /dev/null -w "%{http_code}" http://127.0.0.1:8711/')).stdout).toBe('200');
    });

    test('at a cancel: the same', async () => {
      const ac = new AbortController();
      const p = sb.exec({ argv: ['bash', '-c', `${ESCAPES}\nsleep 999`], timeoutMs: 60_000, signal: ac.signal });
      await eventually(() => left(sb), { what: 'the six hidden processes to run', until: (l) => l.length >= 6 });
      ac.abort();
      await expect(p).rejects.toMatchObject({ code: 'cancelled' });
      await eventually(() => left(sb), { what: 'the processes of the cancelled call to be gone', until: (l) => l.length === 0 });
    });
  });

  describe('per-uid kernel limits are each sandbox\'s own', () => {
    test('two sandboxes run as different uids (their slots)', async () => {
      const [a, b] = await Promise.all([sh(sb, 'id -u'), sh(other, 'id -u')]);
      expect(a.stdout).not.toBe(b.stdout);
      const range = { base: config.CORRAL_SANDBOX_UID_BASE, slots: config.CORRAL_SANDBOX_SLOTS };
      for (const u of [a.stdout, b.stdout]) expect(Number(u) - uidSlot(range, 0).agentUid).toBeGreaterThanOrEqual(0);
    });

    test('one sandbox takes every inotify instance its uid may have; the other still gets its own', async () => {
      await outside(sb, 'rm', '-f', '/tmp/hogged', '/tmp/release');
      const hog = sb.exec({ argv: ['python3', '-c', PY_ERRNO + 'fds = []\nwhile True:\n    r = libc.inotify_init()\n    if r < 0: break\n    fds.append(r)\nprint(len(fds), errno.errorcode[ctypes.get_errno()], flush=True)\n' + HOLD], timeoutMs: 60_000 });
      await eventually(() => outside(sb, 'test', '-e', '/tmp/hogged'), { what: 'the hog to hold every inotify instance' });
      const other10 = await py(other, 'n = 0\nfor i in range(10):\n    if libc.inotify_init() >= 0: n += 1\nprint(n)');
      await outside(sb, 'touch', '/tmp/release');
      const hogged = await hog;
      expect(hogged.stdout).toMatch(/^\d+ EMFILE\n$/);
      expect(Number(hogged.stdout.split(' ')[0])).toBeGreaterThanOrEqual(gvisor ? 1 : Number(readFileSync('/proc/sys/fs/inotify/max_user_instances', 'utf8')) - 1);
      expect(other10).toEqual(['10']);
    });

    test('one sandbox holds its uid\'s whole pipe-buffer allowance; the other\'s new pipes keep full size', async () => {
      // pipe-user-pages-soft is per uid, host-wide: past it, every new pipe of that uid gets one page
      await outside(sb, 'rm', '-f', '/tmp/hogged', '/tmp/release');
      const hog = sb.exec({ argv: ['python3', '-c', PY_ERRNO + 'import fcntl, time\nps = []\nfor i in range(200):\n    r, w = os.pipe(); ps.append((r, w))\n    try: fcntl.fcntl(w, 1031, 1 << 20)\n    except OSError: pass\nr, w = os.pipe()\nprint(fcntl.fcntl(w, 1032), flush=True)\n' + HOLD], timeoutMs: 60_000 });
      await eventually(() => outside(sb, 'test', '-e', '/tmp/hogged'), { what: 'the hog to hold its uid\'s pipe allowance' });
      const mine = await py(other, 'import fcntl\nr, w = os.pipe()\nprint(fcntl.fcntl(w, 1032))');
      await outside(sb, 'touch', '/tmp/release');
      const hogged = await hog;
      if (!gvisor) expect(Number(hogged.stdout.trim())).toBeLessThan(65536); // the hog itself is squeezed: the allowance is gone
      expect(mine).toEqual(['65536']);
    });

    test('one sandbox forks up to its RLIMIT_NPROC; the other still starts commands and forks', async () => {
      const limits = { memoryMb: 512, cpus: 1, pids: 96, workspaceMb: 8 };
      const [a, b] = await Promise.all([provider.acquire(request({ limits })), provider.acquire(request({ limits }))]);
      try {
        // Forks until refused; the children wait on a pipe; then the parent becomes `sleep 4747` (exec, no new
        // process), holding the pipe: that name is the sign, seen from outside, that every slot is taken.
        const hog = a.exec({ argv: ['python3', '-c', 'import os\nr, w = os.pipe()\nn = 0\nwhile True:\n    try: pid = os.fork()\n    except OSError: break\n    if pid == 0:\n        os.close(w); os.read(r, 1); os._exit(0)\n    n += 1\nprint(n, flush=True)\nos.set_inheritable(w, True)\nos.execvp("sleep", ["sleep", "4747"])'], timeoutMs: 60_000 });
        hog.catch(() => undefined); // it ends with the sandbox, below
        await eventually(() => seen(a, 'sleep 4747'), { what: 'the fork hog to have taken every slot', until: (l) => l.length === 1 });
        const forks = await b.exec({ argv: ['python3', '-c', 'import os\nn = 0\nfor i in range(40):\n    pid = os.fork()\n    if pid == 0: os._exit(0)\n    os.waitpid(pid, 0); n += 1\nprint(n)'], timeoutMs: 10_000 });
        expect(forks).toMatchObject({ exitCode: 0, stdout: '40\n' });
        expect((await seen(a, 'import os')).length).toBeGreaterThan(60); // the hog's children, still holding their slots
      } finally {
        await Promise.all([a.dispose(), b.dispose()]);
      }
    });
  });

  describe('the deadline holds from outside', () => {
    test('PID 1 stopped through the engine (the in-container deadline disarmed): the container is killed at the deadline and the call says so', async () => {
      const s = await provider.acquire(request({ deadline: new Date(Date.now() + 6000) }));
      try {
        const c = docker.getContainer(s.id);
        await c.kill({ signal: 'SIGSTOP' }); // docker-init stopped: the sleep's end could not end the container
        // Only the kill from outside at the deadline (6 s) ends this call as sandbox_failed: the sleep would outlast the call's timeout.
        await expect(s.exec({ argv: ['sleep', '600'], timeoutMs: 60_000 })).rejects.toMatchObject({
          code: 'sandbox_failed', message: expect.stringMatching(/reached its deadline and was killed from outside/), details: expect.objectContaining({ cause: 'deadline' }),
        });
        expect((await c.inspect()).State.Running).toBe(false);
      } finally {
        await s.dispose();
      }
    });
  });

  describe('/workspace allows exec; that grants nothing', () => {
    test('./x.sh, ./configure and a copied binary run from /workspace and /tmp', async () => {
      const r = await sh(sb, [
        'cd /workspace && printf "#!/bin/sh\\necho script-ran\\n" > x.sh && chmod +x x.sh && ./x.sh',
        'printf "#!/bin/sh\\necho configured > config.status\\n" > configure && chmod +x configure && ./configure && cat config.status',
        'cp /bin/echo ./e && ./e binary-ran && cp /bin/echo /tmp/e && /tmp/e tmp-ran',
      ].join(' && '));
      expect(r).toMatchObject({ exitCode: 0, stdout: 'script-ran\nconfigured\nbinary-ran\ntmp-ran\n' });
    });

    test('setuid binaries of the image, and a setuid copy in /workspace, stay the agent\'s uid', async () => {
      const r = await sh(sb, [
        'uid=$(id -u)',
        'for b in /usr/bin/su /usr/bin/newgrp /usr/bin/passwd; do test -u $b && echo "suid $b"; done',
        'su -c "id -u" root </dev/null 2>&1 | tail -1',
        'newgrp root </dev/null 2>&1 | tail -1',
        'cp /usr/bin/id /workspace/id && chmod u+s /workspace/id && /workspace/id -u',
        'grep -E "^[^ ]+ /workspace " /proc/self/mounts',
      ].join('\n'));
      expect(r.stdout).toMatch(/suid \/usr\/bin\/su/);
      expect(r.stdout).not.toMatch(/^0$/m);
      const uid = (await sh(sb, 'id -u')).stdout.trim();
      expect(r.stdout).toContain(`\n${uid}\n`);
      // gVisor's /proc/self/mounts does not list these flags; there no-new-privileges and the Sentry's own setuid handling hold
      if (!gvisor) expect(r.stdout).toMatch(/\/workspace \S+ rw,nosuid,nodev/);
    });
  });
}
