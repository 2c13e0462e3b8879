/**
 * The Sandbox port: everything the run loop and the tools may do to a run's container. Only
 * src/sandbox/ implements it (with dockerode); tests of the loop use a fake.
 */
/**
 * How a sandbox is isolated from the host kernel: `runc` (namespaces, no capabilities, corral's seccomp
 * profile) or `gvisor` (gVisor's runsc: the sandbox's system calls go to a user-space kernel).
 */
export type IsolationClass = 'runc' | 'gvisor';

export interface ExecRequest {
  /** argv, never a host shell string; `bash -c` is just argv[0..1]. */
  argv: string[];
  /** Killed inside the container when this elapses. */
  timeoutMs: number;
  /** Bytes kept per stream (head + tail); the rest is counted and marked as cut. */
  maxOutputBytes?: number;
  stdin?: string | Buffer;
  /** Aborting kills the in-container process. */
  signal?: AbortSignal;
}

export interface ExecResult {
  /** null when the process was killed before it could report one. */
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** true when some output was cut; the cut is marked in the text. */
  truncated: boolean;
  timedOut: boolean;
  oomKilled: boolean;
  durationMs: number;
  /** Total bytes the process wrote, before truncation. */
  stdoutBytes: number;
  stderrBytes: number;
}

export interface FileEntry {
  path: string;
  type: 'file' | 'dir' | 'symlink' | 'other';
  size: number;
}

export interface FileContent {
  content: string;
  /** Size of the whole file; content may be a slice of it. */
  size: number;
  truncated: boolean;
}

export interface Sandbox {
  /** Docker container id. */
  readonly id: string;
  /** The isolation class it runs under (absent in fakes). */
  readonly isolation?: IsolationClass;
  exec(req: ExecRequest): Promise<ExecResult>;
  /** Paths are relative to /workspace; escapes (`..`, absolute, symlinks leading out) throw SandboxError('path_refused'). */
  readFile(path: string, opts?: { maxBytes?: number; signal?: AbortSignal }): Promise<FileContent>;
  writeFile(path: string, content: string, opts?: { signal?: AbortSignal }): Promise<void>;
  listFiles(path: string, opts?: { maxEntries?: number; signal?: AbortSignal }): Promise<FileEntry[]>;
  /** The workspace as an uncompressed tar, and a unified diff of it against the seed. */
  exportWorkspace(opts?: { signal?: AbortSignal }): Promise<{ tar: Buffer; patch: string }>;
}

/** One run's sandbox, owned by whoever acquired it; dispose() removes the container and its resources. */
export interface LeasedSandbox extends Sandbox {
  dispose(): Promise<void>;
}

export interface SandboxRequest {
  runId: string;
  workerId: string;
  /** The run's deadline: PID 1 ends itself then, and the reaper removes the container after it. */
  deadline: Date;
  /** Inline seed files (workspace-relative path → content). */
  files: Record<string, string>;
  /** Optional uploaded seed: an uncompressed tar, checked entry by entry (files and dirs only), extracted before `files`. */
  seedTar?: Buffer;
  limits: { memoryMb: number; cpus: number; pids: number; workspaceMb: number; isolation?: IsolationClass };
  /** Allowed egress names; empty = no network at all. */
  egressAllow: string[];
  /** Receives one record per egress attempt. */
  onEgress?: (attempt: EgressAttempt) => void;
  signal?: AbortSignal;
}

export interface EgressAttempt {
  host: string;
  port: number;
  method: string;
  decision: 'allow' | 'deny';
  reason: string;
}

export interface SandboxProvider {
  acquire(req: SandboxRequest): Promise<LeasedSandbox>;
}
