/** corral's seccomp profile: an allowlist, stricter than Docker's 20.10 default where the issue found holes. */
import { ALWAYS_REFUSED, allowedSyscalls, hostSeccompArch, REFUSED_BEYOND_DOCKER_DEFAULT, seccompJson, seccompProfile } from '../../src/sandbox/seccomp-profile';

const p = seccompProfile({ arch: 'SCMP_ARCH_X86_64' });

test('default deny with EPERM, the native architecture only (no 32-bit ABI to bypass argument filters)', () => {
  expect(p.defaultAction).toBe('SCMP_ACT_ERRNO');
  expect(p.defaultErrnoRet).toBe(1);
  expect(p.architectures).toEqual(['SCMP_ARCH_X86_64']);
  expect(hostSeccompArch('x64')).toBe('SCMP_ARCH_X86_64');
  expect(hostSeccompArch('arm64')).toBe('SCMP_ARCH_AARCH64');
  expect(() => hostSeccompArch('ia32')).toThrow(/no seccomp profile for the ia32/);
});

test('io_uring, ptrace, keyrings, userfaultfd, bpf, perf, namespaces and mounts are never allowed', () => {
  const allowed = new Set(p.syscalls.filter((r) => r.action === 'SCMP_ACT_ALLOW').flatMap((r) => r.names));
  for (const name of [...REFUSED_BEYOND_DOCKER_DEFAULT, ...ALWAYS_REFUSED]) expect(allowed.has(name)).toBe(false);
  expect(allowedSyscalls()).not.toContain('syslog');
  expect(allowedSyscalls({ gvisor: true })).toContain('syslog');
});

test('socket only for AF_UNIX, AF_INET, AF_INET6, and AF_NETLINK with NETLINK_ROUTE or NETLINK_SOCK_DIAG (exact values, so high bits cannot pass AF_VSOCK or NETLINK_KOBJECT_UEVENT); socketpair only AF_UNIX', () => {
  const socket = p.syscalls.filter((r) => r.names.includes('socket'));
  expect(socket.map((r) => r.args)).toEqual([
    ...[1, 2, 10].map((v) => [{ index: 0, value: v, op: 'SCMP_CMP_EQ' }]),
    ...[0, 4].map((proto) => [{ index: 0, value: 16, op: 'SCMP_CMP_EQ' }, { index: 2, value: proto, op: 'SCMP_CMP_EQ' }]),
  ]);
  expect(socket.every((r) => r.action === 'SCMP_ACT_ALLOW')).toBe(true);
  expect(p.syscalls.filter((r) => r.names.includes('socketpair')).map((r) => r.args)).toEqual([[{ index: 0, value: 1, op: 'SCMP_CMP_EQ' }]]);
  // no unconditional rule for either
  expect(p.syscalls.some((r) => (r.names.includes('socket') || r.names.includes('socketpair')) && !r.args)).toBe(false);
});

test('clone only without namespace flags; clone3 answers ENOSYS under runc (glibc falls back) and is the Sentry\'s under gVisor', () => {
  expect(p.syscalls.find((r) => r.names.includes('clone'))?.args).toEqual([{ index: 0, value: 0x7e020000, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }]);
  expect(p.syscalls.find((r) => r.names.includes('clone3'))).toEqual({ names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 });
  expect(seccompProfile({ arch: 'SCMP_ARCH_X86_64', gvisor: true }).syscalls.find((r) => r.names.includes('clone3'))?.action).toBe('SCMP_ACT_ALLOW');
});

test('io_setup (Linux AIO contexts, a host-wide budget) answers ENOSYS; the rest of the AIO calls have nothing to work on', () => {
  expect(p.syscalls.filter((r) => r.names.includes('io_setup'))).toEqual([{ names: ['io_setup'], action: 'SCMP_ACT_ERRNO', errnoRet: 38 }]);
  expect(allowedSyscalls()).not.toContain('io_setup');
});

test('no name is listed twice; the JSON is cached per variant', () => {
  const names = p.syscalls.filter((r) => !r.args).flatMap((r) => r.names);
  expect(new Set(names).size).toBe(names.length);
  expect(seccompJson()).toBe(seccompJson());
  expect(seccompJson({ gvisor: true })).not.toBe(seccompJson());
});
