/** The sandbox container's create options, flag by flag (pure function, no Docker). */
import { agentUser, containerSpec, MASKED_PATHS, sandboxEnv, TMP_MB, HOME_MB, SHM_MB } from '../../src/sandbox/container-spec';
import { loadConfig } from '../../src/config';
import { seccompJson } from '../../src/sandbox/seccomp-profile';
import { uidSlot } from '../../src/sandbox/uid-slots';

const now = new Date('2026-01-01T00:00:00Z');
const slot = uidSlot({ base: 2_000_000, slots: 500 }, 7);
const base = {
  runId: 'run_abcdef',
  workerId: 'worker-1',
  deadline: new Date(now.getTime() + 600_000),
  now,
  limits: { memoryMb: 512, cpus: 1.5, pids: 256, workspaceMb: 128 },
  image: 'corral/sandbox:latest',
  isolation: 'runc' as const,
  gvisorRuntime: 'runsc',
  slot,
};
const spec = containerSpec(base);
const hc = spec.HostConfig!;

describe('containerSpec', () => {
  test('PID 1 runs as the slot\'s init uid, not the agent\'s; the container is named after its slot (the lease)', () => {
    expect(slot).toEqual({ slot: 7, initUid: 2_000_014, agentUid: 2_000_015, name: 'corral-u2000015' });
    expect(spec.User).toBe('2000014:2000014');
    expect(agentUser(slot)).toBe('2000015:2000015');
    expect(spec.User).not.toMatch(/^0|root/);
    expect(spec.name).toBe('corral-u2000015');
    expect(spec.WorkingDir).toBe('/workspace');
  });
  test('the agent owns /workspace and its home (tmpfs uid), not PID 1', () => {
    expect(hc.Mounts![0]!.VolumeOptions!.DriverConfig.Options.o).toMatch(/uid=2000015,gid=2000015,mode=0755/);
    expect(hc.Tmpfs!['/home/agent']).toMatch(/uid=2000015,gid=2000015,mode=0700/);
  });
  test('read-only root filesystem; only size-capped tmpfs for /workspace, /tmp and home', () => {
    expect(hc.ReadonlyRootfs).toBe(true);
    expect(Object.keys(hc.Tmpfs ?? {}).sort()).toEqual(['/home/agent', '/tmp']);
    // the workspace: a tmpfs too, as an anonymous local volume so that the archive API sees it
    expect(hc.Mounts![0]).toEqual({
      Type: 'volume', Target: '/workspace', Source: '', ReadOnly: false,
      VolumeOptions: { NoCopy: true, Labels: {}, DriverConfig: { Name: 'local', Options: { type: 'tmpfs', device: 'tmpfs', o: 'size=128m,uid=2000015,gid=2000015,mode=0755,nosuid,nodev,exec' } } },
    });
    expect(hc.Tmpfs!['/tmp']).toMatch(new RegExp(`size=${TMP_MB}m`));
    expect(hc.Tmpfs!['/home/agent']).toMatch(new RegExp(`size=${HOME_MB}m`));
    // exec allowed (./configure), never suid or devices
    for (const o of Object.values(hc.Tmpfs!) as string[]) expect(o).toMatch(/^rw,exec,nosuid,nodev,/);
    expect(hc.ShmSize).toBe(SHM_MB * 1024 * 1024);
  });
  test('no binds; under runc only the workspace\'s own volume and the slot\'s pty volume at /dev/pts; only the egress dir, read-only, with egress', () => {
    expect(hc.Binds).toEqual([]);
    expect(hc.Mounts!.map((m) => [m.Type, m.Target, m.Source])).toEqual([['volume', '/workspace', ''], ['volume', '/dev/pts', 'corral-pts-u2000015']]);
    expect(hc.Mounts![1]).toEqual({ Type: 'volume', Source: 'corral-pts-u2000015', Target: '/dev/pts', VolumeOptions: { NoCopy: true } });
    expect(containerSpec({ ...base, isolation: 'gvisor' }).HostConfig!.Mounts).toEqual([]);
    expect(spec.Volumes).toBeUndefined();
    const e = containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1' }).HostConfig!;
    expect(e.Binds).toEqual(['/tmp/corral-egress/r-1:/run/corral:ro']);
  });
  test('the operator CA: its directory and (once the image\'s bundle is known) the system store, read-only from the egress dir; the variables name them', () => {
    const t = containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1', trust: { system: true } });
    expect(t.HostConfig!.Binds).toEqual(['/tmp/corral-egress/r-1:/run/corral:ro', '/tmp/corral-egress/r-1/ca:/etc/corral/ca:ro', '/tmp/corral-egress/r-1/ca/bundle.crt:/etc/ssl/certs/ca-certificates.crt:ro']);
    expect(t.Env).toEqual(expect.arrayContaining(['NODE_EXTRA_CA_CERTS=/etc/corral/ca/operator.crt', 'SSL_CERT_FILE=/etc/corral/ca/bundle.crt', 'PIP_CERT=/etc/corral/ca/bundle.crt', 'GIT_SSL_CAINFO=/etc/corral/ca/bundle.crt', 'REQUESTS_CA_BUNDLE=/etc/corral/ca/bundle.crt']));
    const first = containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1', trust: { system: false } });
    expect(first.HostConfig!.Binds).toEqual(['/tmp/corral-egress/r-1:/run/corral:ro', '/tmp/corral-egress/r-1/ca:/etc/corral/ca:ro']);
    expect(containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1' }).Env!.some((v) => v.startsWith('SSL_CERT_FILE='))).toBe(false);
  });
  test('never the docker socket, devices, privileged mode or host namespaces', () => {
    const all = JSON.stringify(containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1' }));
    expect(all).not.toMatch(/docker\.sock/);
    expect(hc.Privileged).toBe(false);
    expect(hc.Devices).toEqual([]);
    for (const ns of [hc.NetworkMode, hc.PidMode, hc.IpcMode, hc.UTSMode, hc.UsernsMode]) expect(ns).not.toBe('host');
    expect(hc.IpcMode).toBe('private');
  });
  test('no network at all', () => {
    expect(hc.NetworkMode).toBe('none');
  });
  test('all capabilities dropped, none added; no-new-privileges; corral\'s seccomp profile by content', () => {
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd ?? []).toEqual([]);
    expect(hc.SecurityOpt).toEqual(['no-new-privileges:true', `seccomp=${seccompJson()}`]);
    const g = containerSpec({ ...base, isolation: 'gvisor' }).HostConfig!;
    // gVisor: the workspace stays a tmpfs of the sandbox's kernel (its gofer volumes break statx in the runsc targeted)
    expect(g.Mounts).toEqual([]);
    expect(g.Tmpfs!['/workspace']).toMatch(/^rw,exec,nosuid,nodev,size=128m,uid=2000015,gid=2000015,mode=0755$/);
    expect(g.SecurityOpt).toEqual(['no-new-privileges:true', `seccomp=${seccompJson({ gvisor: true })}`]);
    expect(JSON.parse(seccompJson()).defaultAction).toBe('SCMP_ACT_ERRNO');
  });
  test('masked paths: Docker\'s defaults and the host kernel\'s command line, config, symbols, BTF', () => {
    expect(hc.MaskedPaths).toEqual(MASKED_PATHS);
    for (const p of ['/proc/kcore', '/proc/keys', '/proc/timer_list', '/sys/firmware', '/proc/cmdline', '/proc/config.gz', '/proc/kallsyms', '/sys/kernel', '/sys/module']) {
      expect(hc.MaskedPaths).toContain(p);
    }
    // host-wide activity
    for (const p of ['/proc/pressure', '/proc/loadavg', '/sys/devices/virtual', '/sys/devices/system/node', '/sys/devices/system/memory']) expect(hc.MaskedPaths).toContain(p);
    // needed inside: the cgroup files (OOM accounting) and the CPU list (nproc, os.cpu_count)
    expect(hc.MaskedPaths!.some((p: string) => p.startsWith('/sys/fs') || p === '/sys/devices/system' || p === '/sys/devices/system/cpu' || p === '/sys/devices')).toBe(false);
  });
  test('pids, memory (= memory+swap, covering tmpfs), CPU limits', () => {
    expect(hc.PidsLimit).toBe(256);
    // under gVisor the cgroup also holds the Sentry's host threads (capped: a few percent of pid_max); the process limit is RLIMIT_NPROC
    const g = containerSpec({ ...base, isolation: 'gvisor' }).HostConfig!;
    expect(g.PidsLimit).toBe(4096);
    expect(containerSpec({ ...base, isolation: 'gvisor', limits: { ...base.limits, pids: 32 } }).HostConfig!.PidsLimit).toBe(32 * 24 + 256);
    // past what 4096 host pids hold at 18 per process, gVisor's process limit stops: EAGAIN before the cgroup ends the sandbox
    const big = containerSpec({ ...base, isolation: 'gvisor', limits: { ...base.limits, pids: 1024 } }).HostConfig!;
    expect(big.PidsLimit).toBe(4096);
    expect(big.Ulimits!.find((u) => u.Name === 'nproc')).toEqual({ Name: 'nproc', Soft: 213, Hard: 213 });
    expect(g.Ulimits!.find((u) => u.Name === 'nproc')).toEqual({ Name: 'nproc', Soft: 213, Hard: 213 });
    const mb = 1024 * 1024;
    expect(hc.Memory).toBe((512 + 128 + TMP_MB + HOME_MB + SHM_MB) * mb);
    expect(hc.MemorySwap).toBe(hc.Memory);
    expect(hc.NanoCpus).toBe(1.5e9);
  });
  test('sandbox processes are the first OOM victims on the host', () => {
    expect(hc.OomScoreAdj).toBe(500);
  });
  test('nofile and nproc ulimits: nofile × nproc ≤ 262,144 open files per sandbox', () => {
    const u = Object.fromEntries((hc.Ulimits ?? []).map((l) => [l.Name, l]));
    expect(u.nofile).toEqual({ Name: 'nofile', Soft: 1024, Hard: 1024 });
    for (const pids of [1, 16, 64, 256, 1000, 1024, 4096]) {
      const x = Object.fromEntries((containerSpec({ ...base, limits: { ...base.limits, pids } }).HostConfig!.Ulimits ?? []).map((l) => [l.Name, l.Hard]));
      expect(x.nofile! * x.nproc!).toBeLessThanOrEqual(262_144);
      expect(x.nofile).toBeLessThanOrEqual(4096);
    }
    // per uid, and the uid is this sandbox's own: the pids limit
    expect(u.nproc).toEqual({ Name: 'nproc', Soft: 256, Hard: 256 });
  });
  test('an init process, and PID 1 ends itself at the deadline', () => {
    expect(hc.Init).toBe(true);
    expect(spec.Cmd).toEqual(['sleep', '600']);
    const e = containerSpec({ ...base, egressDir: '/d' });
    expect(e.Cmd?.[0]).toBe('/bin/sh');
    expect(e.Cmd?.[3]).toBe('600');
    expect(containerSpec({ ...base, deadline: new Date(now.getTime() - 5000) }).Cmd).toEqual(['sleep', '1']);
  });
  test('labels: corral, run id, worker id, deadline, uid, isolation', () => {
    expect(spec.Labels).toEqual({
      corral: '1',
      'corral.run-id': 'run_abcdef',
      'corral.worker-id': 'worker-1',
      'corral.deadline': base.deadline.toISOString(),
      'corral.uid': '2000015',
      'corral.isolation': 'runc',
    });
  });
  test('the instance label (CORRAL_INSTANCE) when one is named: what a clean-up of that instance finds', () => {
    expect(containerSpec({ ...base, queue: 'runs', instance: 'ci-1234' }).Labels).toMatchObject({ 'corral.queue': 'runs', 'corral.instance': 'ci-1234' });
    expect(spec.Labels).not.toHaveProperty(['corral.instance']);
    expect(loadConfig({ CORRAL_INSTANCE: 'ci-1234' }).CORRAL_INSTANCE).toBe('ci-1234');
    expect(loadConfig({ CORRAL_INSTANCE: '' }).CORRAL_INSTANCE).toBeUndefined();
    expect(() => loadConfig({ CORRAL_INSTANCE: 'a b' })).toThrow(/CORRAL_INSTANCE/);
    expect(() => loadConfig({ CORRAL_INSTANCE: '-x' })).toThrow(/CORRAL_INSTANCE/);
  });
  test('Env is exactly what corral sets (no host environment)', () => {
    process.env.CORRAL_SPEC_TEST_SECRET = 'hunter2';
    const s = containerSpec(base);
    expect(s.Env).toEqual(sandboxEnv(false));
    expect(JSON.stringify(s)).not.toContain('hunter2');
    expect(s.Env!.map((e) => e.split('=')[0]).sort()).toEqual(['HOME', 'LANG', 'PATH', 'PYTEST_ADDOPTS', 'PYTHONDONTWRITEBYTECODE', 'USER']);
    expect(sandboxEnv(true)).toContain('HTTPS_PROXY=http://127.0.0.1:3128');
  });
  test('the runtime follows the isolation class, explicitly for both', () => {
    expect(hc.Runtime).toBe('runc');
    expect(containerSpec({ ...base, isolation: 'gvisor' }).HostConfig!.Runtime).toBe('runsc');
    expect(containerSpec({ ...base, isolation: 'gvisor', gvisorRuntime: 'gvisor-ptrace' }).HostConfig!.Runtime).toBe('gvisor-ptrace');
  });
  test('not auto-removed, never restarted', () => {
    expect(hc.AutoRemove).toBe(false);
    expect(hc.RestartPolicy?.Name).toBe('no');
  });
});
