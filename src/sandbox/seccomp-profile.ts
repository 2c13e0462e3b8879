/**
 * corral's own seccomp profile for sandbox containers: an allowlist of the system calls a
 * development sandbox needs, everything else refused with EPERM. It is passed by content in the
 * container's HostConfig.SecurityOpt (`seccomp=<json>`), so it does not depend on the engine's
 * built-in default (Docker 20.10's default allows AF_VSOCK sockets, io_uring and ptrace).
 *
 * Against Docker's default profile for 20.10 (the baseline; we never hold capabilities, so none of
 * its capability-gated rules apply) this one also refuses:
 * - socket families other than AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (an allowlist on the first
 *   argument, so high bits cannot smuggle a family past it), and netlink protocols other than
 *   NETLINK_ROUTE (getifaddrs, getaddrinfo, `ip`) and NETLINK_SOCK_DIAG (`ss`): NETLINK_KOBJECT_UEVENT
 *   would deliver the host's device events (the kernel broadcasts them to every network namespace
 *   owned by the initial user namespace, which a sandbox's is), the others reach audit, netfilter,
 *   xfrm, connector and crypto code. AF_VSOCK reaches the host VM's vsock
 *   port space, which `--network none` does not cover; the rest (TIPC, RDS, ALG, SMC, CAN, …) are
 *   kernel modules auto-loaded on first use with a record of local privilege escalations
 *   (CVE-2022-0435 TIPC, CVE-2010-3904 RDS, CVE-2021-26708 vsock);
 * - io_uring_setup/enter/register: a second syscall surface that bypasses seccomp per operation and
 *   the source of many recent kernel LPEs;
 * - ptrace, process_vm_readv/writev, kcmp, pidfd_getfd: no debugging of other processes, not even
 *   the agent's own (gdb/strace do not work in a sandbox);
 * - add_key, keyctl, request_key (the keyring is not namespaced), userfaultfd (exploit race
 *   widening), bpf, perf_event_open;
 * - every 32-bit ABI (only the host's native architecture is listed), so `int 0x80` and
 *   socketcall cannot bypass argument filters; modify_ldt (16-bit segments);
 * - unshare, setns, mount and friends, and clone with namespace flags (as Docker's default without
 *   CAP_SYS_ADMIN): no unprivileged user namespaces, the largest reachable kernel surface.
 * clone3 answers ENOSYS so that glibc falls back to clone, whose flags can be checked.
 *
 * Under gVisor the sandbox's system calls go to gVisor's Sentry, not the host kernel. runsc loads an
 * OCI seccomp profile only with `--oci-seccomp`, and then (release 20221219, measured) only for the
 * container's first process and its children, never for `docker exec` processes, which are what run the
 * agent's commands. The profile's gVisor variant is for that case: it allows syslog (the Sentry's own
 * log, so `dmesg` shows gVisor's boot, never the host's) and clone3 (runsc ignores errnoRet, so ENOSYS
 * cannot be answered and threads would fail; the call is the Sentry's, not the host kernel's).
 */

const EPERM = 1;
const ENOSYS = 38;

const AF_UNIX = 1;
const AF_INET = 2;
const AF_INET6 = 10;
const AF_NETLINK = 16;
/** Netlink protocols a sandbox may open: NETLINK_ROUTE, NETLINK_SOCK_DIAG. */
const NETLINK_PROTOCOLS = [0, 4];
/** clone flags that create namespaces (CLONE_NEWNS|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWCGROUP). */
const CLONE_NAMESPACE_FLAGS = 0x7e020000;
/** personality(2) values Docker's default allows: PER_LINUX, UNAME26, ADDR_NO_RANDOMIZE combinations, query. */
const PERSONALITIES = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

/** Allowed without argument checks, grouped by purpose. Names unknown on an architecture are ignored by the runtime. */
const ALLOW: Record<string, string[]> = {
  files: [
    'access', 'faccessat', 'faccessat2', 'chdir', 'fchdir', 'getcwd', 'chmod', 'fchmod', 'fchmodat', 'chown', 'fchown',
    'fchownat', 'lchown', 'close', 'close_range', 'creat', 'dup', 'dup2', 'dup3', 'fadvise64', 'fallocate', 'fcntl',
    'fdatasync', 'fsync', 'sync', 'syncfs', 'sync_file_range', 'flock', 'fstat', 'fstatfs', 'statfs', 'stat', 'lstat',
    'newfstatat', 'statx', 'ftruncate', 'truncate', 'getdents', 'getdents64', 'link', 'linkat', 'lseek', 'mkdir', 'mkdirat',
    'mknod', 'mknodat', 'open', 'openat', 'openat2', 'read', 'readv', 'pread64', 'preadv', 'preadv2', 'write', 'writev',
    'pwrite64', 'pwritev', 'pwritev2', 'readahead', 'readlink', 'readlinkat', 'rename', 'renameat', 'renameat2', 'rmdir',
    'symlink', 'symlinkat', 'unlink', 'unlinkat', 'umask', 'utime', 'utimes', 'utimensat', 'futimesat', 'copy_file_range',
    'sendfile', 'splice', 'tee', 'vmsplice', 'getxattr', 'lgetxattr', 'fgetxattr', 'listxattr', 'llistxattr', 'flistxattr',
    'setxattr', 'lsetxattr', 'fsetxattr', 'removexattr', 'lremovexattr', 'fremovexattr', 'inotify_init', 'inotify_init1',
    'inotify_add_watch', 'inotify_rm_watch', 'memfd_create',
    // Linux AIO without io_setup (below): nothing to submit to, harmless
    'io_submit', 'io_getevents', 'io_pgetevents', 'io_cancel', 'io_destroy',
  ],
  memory: [
    'brk', 'mmap', 'munmap', 'mremap', 'mprotect', 'madvise', 'mincore', 'mlock', 'mlock2', 'mlockall', 'munlock',
    'munlockall', 'msync', 'remap_file_pages', 'membarrier', 'pkey_alloc', 'pkey_free', 'pkey_mprotect',
  ],
  processes: [
    'arch_prctl', 'capget', 'capset', 'execve', 'execveat', 'exit', 'exit_group', 'fork', 'vfork', 'wait4', 'waitid',
    'getpid', 'getppid', 'gettid', 'getpgid', 'setpgid', 'getpgrp', 'getsid', 'setsid', 'getuid', 'geteuid', 'getgid',
    'getegid', 'getresuid', 'getresgid', 'getgroups', 'setuid', 'setgid', 'setreuid', 'setregid', 'setresuid', 'setresgid',
    'setfsuid', 'setfsgid', 'setgroups', 'getpriority', 'setpriority', 'getrlimit', 'setrlimit', 'prlimit64', 'getrusage',
    'prctl', 'seccomp', 'set_tid_address', 'set_robust_list', 'get_robust_list', 'rseq', 'sched_getaffinity',
    'sched_setaffinity', 'sched_getattr', 'sched_setattr', 'sched_getparam', 'sched_setparam', 'sched_getscheduler',
    'sched_setscheduler', 'sched_get_priority_max', 'sched_get_priority_min', 'sched_rr_get_interval', 'sched_yield',
    'getcpu', 'ioprio_get', 'ioprio_set', 'uname', 'sysinfo', 'times', 'kill', 'tkill', 'tgkill', 'pidfd_open',
    'pidfd_send_signal', 'restart_syscall', 'set_thread_area', 'get_thread_area',
  ],
  signalsAndTime: [
    'rt_sigaction', 'rt_sigprocmask', 'rt_sigreturn', 'rt_sigpending', 'rt_sigsuspend', 'rt_sigtimedwait', 'rt_sigqueueinfo',
    'rt_tgsigqueueinfo', 'sigaltstack', 'signalfd', 'signalfd4', 'pause', 'alarm', 'nanosleep', 'clock_nanosleep',
    'clock_gettime', 'clock_getres', 'clock_adjtime', 'adjtimex', 'gettimeofday', 'time', 'getitimer', 'setitimer',
    'timer_create', 'timer_delete', 'timer_gettime', 'timer_settime', 'timer_getoverrun', 'timerfd_create',
    'timerfd_gettime', 'timerfd_settime', 'eventfd', 'eventfd2', 'futex', 'epoll_create', 'epoll_create1', 'epoll_ctl',
    'epoll_wait', 'epoll_pwait', 'epoll_pwait2', 'poll', 'ppoll', 'select', 'pselect6', 'ioctl', 'getrandom',
  ],
  ipc: [
    'pipe', 'pipe2', 'shmget', 'shmat', 'shmdt', 'shmctl', 'semget', 'semop', 'semctl', 'semtimedop', 'msgget', 'msgsnd',
    'msgrcv', 'msgctl', 'mq_open', 'mq_unlink', 'mq_timedsend', 'mq_timedreceive', 'mq_notify', 'mq_getsetattr',
  ],
  sockets: [
    'bind', 'connect', 'listen', 'accept', 'accept4', 'getsockname', 'getpeername', 'getsockopt', 'setsockopt', 'sendto',
    'recvfrom', 'sendmsg', 'recvmsg', 'sendmmsg', 'recvmmsg', 'shutdown',
  ],
};

/** Refused although Docker's 20.10 default allows them; the unit test checks none slipped into ALLOW. */
export const REFUSED_BEYOND_DOCKER_DEFAULT = [
  'io_uring_setup', 'io_uring_enter', 'io_uring_register', 'ptrace', 'modify_ldt', 'socketcall', 'io_setup',
] as const;

/** Never allowed (capability-gated in Docker's default, and we hold no capabilities); listed for the test. */
export const ALWAYS_REFUSED = [
  'add_key', 'keyctl', 'request_key', 'userfaultfd', 'bpf', 'perf_event_open', 'process_vm_readv', 'process_vm_writev',
  'kcmp', 'pidfd_getfd', 'unshare', 'setns', 'mount', 'umount2', 'pivot_root', 'chroot', 'open_by_handle_at',
  'name_to_handle_at', 'fsopen', 'fsmount', 'fsconfig', 'fspick', 'open_tree', 'move_mount', 'mount_setattr', 'init_module',
  'finit_module', 'delete_module', 'kexec_load', 'kexec_file_load', 'reboot', 'swapon', 'swapoff', 'acct', 'quotactl',
  'sethostname', 'setdomainname', 'settimeofday', 'clock_settime', 'iopl', 'ioperm', 'lookup_dcookie', 'fanotify_init',
  'mbind', 'set_mempolicy', 'get_mempolicy', 'migrate_pages', 'move_pages', 'vhangup',
] as const;

export type SeccompArch = 'SCMP_ARCH_X86_64' | 'SCMP_ARCH_AARCH64';

interface SyscallRule {
  names: string[];
  action: 'SCMP_ACT_ALLOW' | 'SCMP_ACT_ERRNO';
  errnoRet?: number;
  args?: Array<{ index: number; value: number; valueTwo?: number; op: 'SCMP_CMP_EQ' | 'SCMP_CMP_MASKED_EQ' }>;
  comment?: string;
}

export interface SeccompProfile {
  defaultAction: 'SCMP_ACT_ERRNO';
  defaultErrnoRet: number;
  architectures: SeccompArch[];
  syscalls: SyscallRule[];
}

/** The host's seccomp architecture, from Node's (the worker runs on the engine's host architecture). */
export function hostSeccompArch(arch: string = process.arch): SeccompArch {
  if (arch === 'x64') return 'SCMP_ARCH_X86_64';
  if (arch === 'arm64') return 'SCMP_ARCH_AARCH64';
  throw new Error(`no seccomp profile for the ${arch} architecture (corral knows x64 and arm64)`);
}

/** Every name the profile allows (any arguments or some), for tests and documentation. */
export function allowedSyscalls(opts: { gvisor?: boolean } = {}): string[] {
  return [...Object.values(ALLOW).flat(), 'socket', 'socketpair', 'clone', 'personality', ...(opts.gvisor ? ['syslog'] : [])];
}

/**
 * The profile as Docker's JSON format. `gvisor: true` additionally allows syslog(2), which inside
 * gVisor reads the Sentry's own log, never the host's.
 */
export function seccompProfile(opts: { arch?: SeccompArch; gvisor?: boolean } = {}): SeccompProfile {
  const syscalls: SyscallRule[] = [
    { names: Object.values(ALLOW).flat(), action: 'SCMP_ACT_ALLOW' },
    ...[AF_UNIX, AF_INET, AF_INET6].map((family): SyscallRule => ({
      names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: family, op: 'SCMP_CMP_EQ' }],
    })),
    ...NETLINK_PROTOCOLS.map((protocol): SyscallRule => ({
      names: ['socket'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: AF_NETLINK, op: 'SCMP_CMP_EQ' }, { index: 2, value: protocol, op: 'SCMP_CMP_EQ' }],
    })),
    // Linux AIO contexts are counted host-wide (fs.aio-max-nr): one sandbox could take them all, for
    // every other sandbox and host root too. ENOSYS, so libaio users fall back to threads.
    { names: ['io_setup'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
    { names: ['socketpair'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: AF_UNIX, op: 'SCMP_CMP_EQ' }] },
    { names: ['clone'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: CLONE_NAMESPACE_FLAGS, valueTwo: 0, op: 'SCMP_CMP_MASKED_EQ' }] },
    // glibc falls back to clone on ENOSYS. gVisor's loader ignores errnoRet (clone3 would get EPERM and
    // no thread could start), and there clone3 is the Sentry's own, so it is allowed.
    opts.gvisor ? { names: ['clone3'], action: 'SCMP_ACT_ALLOW' } : { names: ['clone3'], action: 'SCMP_ACT_ERRNO', errnoRet: ENOSYS },
    ...PERSONALITIES.map((p): SyscallRule => ({ names: ['personality'], action: 'SCMP_ACT_ALLOW', args: [{ index: 0, value: p, op: 'SCMP_CMP_EQ' }] })),
  ];
  if (opts.gvisor) syscalls.push({ names: ['syslog'], action: 'SCMP_ACT_ALLOW' });
  return { defaultAction: 'SCMP_ACT_ERRNO', defaultErrnoRet: EPERM, architectures: [opts.arch ?? hostSeccompArch()], syscalls };
}

const cache = new Map<string, string>();

/** The profile serialised for `SecurityOpt: ["seccomp=<json>"]` (computed once per variant). */
export function seccompJson(opts: { gvisor?: boolean } = {}): string {
  const key = opts.gvisor ? 'gvisor' : 'runc';
  let s = cache.get(key);
  if (s === undefined) {
    s = JSON.stringify(seccompProfile(opts));
    cache.set(key, s);
  }
  return s;
}
