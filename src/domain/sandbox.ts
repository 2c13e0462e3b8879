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
  /** Tells the egress proxy which tool call runs now (null: none), so connections are attributed to it. */
  noteToolCall?(callId: string | null): void;
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
  /** Receives egress attempts one by one (the first few of each kind; repeats arrive as aggregates). */
  onEgress?: (attempt: EgressAttempt) => void;
  /** Receives aggregated repeats, the proxy's start, failure and stop, and the run's egress totals. */
  onEgressSummary?: (summary: EgressSummary) => void;
  signal?: AbortSignal;
}

/** Why the proxy decided as it did, as a stable code (the reason says it in words). */
export type EgressCode =
  | 'allowed' | 'invalid_target' | 'invalid_name' | 'ip_literal' | 'not_allowed' | 'port_not_allowed'
  | 'forbidden_address' | 'resolve_failed' | 'wildcard_rate' | 'wildcard_names' | 'host_mismatch' | 'framing'
  | 'upgrade_refused' | 'cap_connections' | 'cap_rate' | 'cap_requests' | 'cap_bytes_out' | 'cap_bytes_in' | 'unreachable';

export interface EgressAttempt {
  host: string;
  port: number;
  method: string;
  decision: 'allow' | 'deny';
  reason: string;
  code?: EgressCode;
  /** The tool call that was running when the connection came in (null: none); set by the proxy. */
  callId?: string | null;
}

/** Totals of one run's egress, kept by its proxy. */
export interface EgressStats {
  connections: number;
  requests: number;
  allowed: number;
  denied: number;
  bytesOut: number;
  bytesIn: number;
  peakConnections: number;
  /** Attempts per code (allowed ones under `allowed`). */
  byCode: Partial<Record<EgressCode, number>>;
  /** Distinct names resolved under each wildcard entry (an exfiltration signal), and how many were refused. */
  wildcardNames: Record<string, number>;
  wildcardRefused: number;
  resolutions: number;
}

/** What a run's egress path reports besides single attempts: repeats counted, the proxy's life, totals. */
export type EgressSummary =
  | { kind: 'aggregate'; callId: string | null; method: string; decision: 'allow' | 'deny'; code: EgressCode; count: number; sample: string; reason: string }
  | { kind: 'proxy'; state: 'started' | 'failed' | 'stopped'; detail: string; pid?: number; user?: string; limits?: Record<string, number> }
  | { kind: 'stats'; stats: EgressStats };

export interface SandboxProvider {
  acquire(req: SandboxRequest): Promise<LeasedSandbox>;
}
