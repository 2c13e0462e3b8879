/** The sandbox container's create options, flag by flag (pure function, no Docker). */
import { containerSpec, sandboxEnv, SANDBOX_UID, TMP_MB, HOME_MB, SHM_MB } from '../../src/sandbox/container-spec';

const now = new Date('2026-01-01T00:00:00Z');
const base = {
  name: 'corral-run_x-abc',
  runId: 'run_abcdef',
  workerId: 'worker-1',
  deadline: new Date(now.getTime() + 600_000),
  now,
  limits: { memoryMb: 512, cpus: 1.5, pids: 256, workspaceMb: 128 },
  image: 'corral/sandbox:latest',
  nproc: 4096,
};
const spec = containerSpec(base);
const hc = spec.HostConfig!;

describe('containerSpec', () => {
  test('runs as the non-root sandbox user, in /workspace', () => {
    expect(spec.User).toBe(`${SANDBOX_UID}:${SANDBOX_UID}`);
    expect(spec.User).not.toMatch(/^0|root/);
    expect(spec.WorkingDir).toBe('/workspace');
  });
  test('read-only root filesystem; only size-capped tmpfs for /workspace, /tmp and home', () => {
    expect(hc.ReadonlyRootfs).toBe(true);
    expect(Object.keys(hc.Tmpfs ?? {}).sort()).toEqual(['/home/agent', '/tmp', '/workspace']);
    expect(hc.Tmpfs!['/workspace']).toMatch(/size=128m/);
    expect(hc.Tmpfs!['/tmp']).toMatch(new RegExp(`size=${TMP_MB}m`));
    expect(hc.Tmpfs!['/home/agent']).toMatch(new RegExp(`size=${HOME_MB}m`));
    for (const o of Object.values(hc.Tmpfs!) as string[]) expect(o).toMatch(/nosuid,nodev/);
    expect(hc.ShmSize).toBe(SHM_MB * 1024 * 1024);
  });
  test('no binds and no volumes without egress; only the egress dir, read-only, with it', () => {
    expect(hc.Binds).toEqual([]);
    expect(hc.Mounts).toBeUndefined();
    expect(spec.Volumes).toBeUndefined();
    const e = containerSpec({ ...base, egressDir: '/tmp/corral-egress/r-1' }).HostConfig!;
    expect(e.Binds).toEqual(['/tmp/corral-egress/r-1:/run/corral:ro']);
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
  test('all capabilities dropped, none added; no-new-privileges; default seccomp', () => {
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd ?? []).toEqual([]);
    expect(hc.SecurityOpt).toContain('no-new-privileges:true');
    expect((hc.SecurityOpt ?? []).some((o: string) => /seccomp|apparmor|label/.test(o))).toBe(false);
  });
  test('pids, memory (= memory+swap, covering tmpfs), CPU limits', () => {
    expect(hc.PidsLimit).toBe(256);
    const mb = 1024 * 1024;
    expect(hc.Memory).toBe((512 + 128 + TMP_MB + HOME_MB + SHM_MB) * mb);
    expect(hc.MemorySwap).toBe(hc.Memory);
    expect(hc.NanoCpus).toBe(1.5e9);
  });
  test('sandbox processes are the first OOM victims on the host', () => {
    expect(hc.OomScoreAdj).toBe(500);
  });
  test('nofile and nproc ulimits', () => {
    const u = Object.fromEntries((hc.Ulimits ?? []).map((l) => [l.Name, l]));
    expect(u.nofile).toEqual({ Name: 'nofile', Soft: 4096, Hard: 4096 });
    expect(u.nproc).toEqual({ Name: 'nproc', Soft: 4096, Hard: 4096 });
  });
  test('an init process, and PID 1 ends itself at the deadline', () => {
    expect(hc.Init).toBe(true);
    expect(spec.Cmd).toEqual(['sleep', '600']);
    const e = containerSpec({ ...base, egressDir: '/d' });
    expect(e.Cmd?.[0]).toBe('/bin/sh');
    expect(e.Cmd?.[3]).toBe('600');
    expect(containerSpec({ ...base, deadline: new Date(now.getTime() - 5000) }).Cmd).toEqual(['sleep', '1']);
  });
  test('labels: corral, run id, worker id, deadline', () => {
    expect(spec.Labels).toEqual({
      corral: '1',
      'corral.run-id': 'run_abcdef',
      'corral.worker-id': 'worker-1',
      'corral.deadline': base.deadline.toISOString(),
    });
  });
  test('Env is exactly what corral sets (no host environment)', () => {
    process.env.CORRAL_SPEC_TEST_SECRET = 'hunter2';
    const s = containerSpec(base);
    expect(s.Env).toEqual(sandboxEnv(false));
    expect(JSON.stringify(s)).not.toContain('hunter2');
    expect(s.Env!.map((e) => e.split('=')[0]).sort()).toEqual(['HOME', 'LANG', 'PATH', 'PYTEST_ADDOPTS', 'PYTHONDONTWRITEBYTECODE', 'USER']);
    expect(sandboxEnv(true)).toContain('HTTPS_PROXY=http://127.0.0.1:3128');
  });
  test('runtime from config; none by default', () => {
    expect(hc.Runtime).toBeUndefined();
    expect(containerSpec({ ...base, runtime: 'runsc' }).HostConfig!.Runtime).toBe('runsc');
  });
  test('not auto-removed, never restarted', () => {
    expect(hc.AutoRemove).toBe(false);
    expect(hc.RestartPolicy?.Name).toBe('no');
  });
});
