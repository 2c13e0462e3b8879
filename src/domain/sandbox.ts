/**
 * The Sandbox port: everything the run loop and the tools may do to a run's container. Only
 * src/sandbox/ implements it (with dockerode); tests of the loop use a fake.
 */
import type { EffectFacet, ProtectedMatcher } from './effects';
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
  /** sha256 (hex) of the whole file, when it was read whole: pass it as writeFile's expectSha256. */
  sha256?: string;
}

export interface Sandbox {
  /** Docker container id. */
  readonly id: string;
  /** The isolation class it runs under (absent in fakes). */
  readonly isolation?: IsolationClass;
  exec(req: ExecRequest): Promise<ExecResult>;
  /** Paths are relative to /workspace; escapes (`..`, absolute, symlinks leading out) throw SandboxError('path_refused'). */
  readFile(path: string, opts?: { maxBytes?: number; signal?: AbortSignal }): Promise<FileContent>;
  /**
   * Creates or replaces a regular file (parent directories are created). `expectSha256` (of the whole
   * content, from readFile) or `'absent'`: refused with SandboxError('conflict') when the file is no
   * longer as the caller saw it. Never follows a symlink; a symlink, fifo, device or directory at the
   * path is refused with path_refused.
   */
  writeFile(path: string, content: string, opts?: WriteOptions): Promise<void>;
  /** Removes a regular file (never a directory or through a symlink); `expectSha256` as for writeFile. */
  removeFile(path: string, opts?: Omit<WriteOptions, 'expectSha256'> & { expectSha256?: string }): Promise<void>;
  listFiles(path: string, opts?: { maxEntries?: number; signal?: AbortSignal }): Promise<FileEntry[]>;
  /**
   * Streams the workspace to `tarPath` (an uncompressed tar of its regular files and directories)
   * and writes its diff against the seed to `patchPath`; returns what changed, what could not be
   * exported and why, and what needs a human's review. Memory stays bounded whatever the workspace holds.
   */
  exportWorkspace(opts: ExportTarget): Promise<WorkspaceExport>;
}

export interface WriteOptions {
  signal?: AbortSignal;
  expectSha256?: string | 'absent';
}

export interface ExportTarget {
  tarPath: string;
  patchPath: string;
  /** What stays out of the patch: the seed's .gitignore files (unless `gitignore` is false) and these patterns. */
  patchIgnore?: { gitignore: boolean; exclude: string[] };
  signal?: AbortSignal;
  /** The run's protected set (its policy's), for the review flags; absent: the built-in one. */
  protectedSet?: ProtectedMatcher;
}

/** One changed file, as the report shows it and as its section of workspace.patch says. */
export interface FileChange {
  path: string;
  change: 'added' | 'modified' | 'deleted';
  added: number;
  removed: number;
  /** Not diffed line by line (binary, over 1 MiB, or too costly): the patch carries it as a git binary patch. */
  binary?: boolean;
  /** Why workspace.patch does not carry this change (its new content is too large): the file is in workspace.tar. */
  notInPatch?: string;
  /** Permission bits (mode & 0o7777) before and after when they differ; for an added file, its bits when not 0644. */
  modeBefore?: number;
  modeAfter?: number;
  /** A symbolic link (only in a git bundle's review: the workspace export carries regular files only). */
  symlink?: boolean;
}

export const NOT_EXPORTED_CODES = ['bad-name', 'symlink', 'special', 'too-large', 'total-cap', 'entry-cap', 'changed', 'unreadable'] as const;
export type NotExportedCode = (typeof NOT_EXPORTED_CODES)[number];

/** A workspace entry that is not in the artifacts, and why. `path` may hold refused characters: show it with showName(). */
export interface NotExported {
  path: string;
  code: NotExportedCode;
  reason: string;
  /** Apparent size in bytes, for files left out by a size cap. */
  size?: number;
}

/**
 * Why a change needs review: a class of the protected set (domain/protected-set.ts), a new
 * executable or setuid bit, a name that shows as another name, raw control bytes in added lines.
 */
export const REVIEW_RULES = ['git-hook', 'git-config', 'git-dir', 'git-attributes', 'git-internal', 'ci', 'agent-config', 'executable', 'setuid', 'confusable-name', 'control-bytes'] as const;
export type ReviewRule = (typeof REVIEW_RULES)[number];

/** A change a human should look at before using the artifacts (a hook, CI or agent config, a new executable…). */
export interface ReviewFlag {
  path: string;
  rule: ReviewRule;
  reason: string;
  /** Which artifact carries the change: the workspace (patch and tar; the default) or the git bundle. */
  where?: 'workspace' | 'bundle';
  /** For a bundle flag: the commit (12 hex digits) that makes the change. */
  commit?: string;
}

export interface WorkspaceExport {
  tar: { path: string; bytes: number };
  patch: { path: string; bytes: number };
  /** Changes outside .git, sorted by path: exactly the sections of the patch. */
  files: FileChange[];
  /** Changes under a .git directory: in the tar, never in the patch. */
  gitFiles: FileChange[];
  /** Changes the ignore rules (the seed's .gitignore files, the run's patch.exclude) keep out of the patch: in the tar only. */
  ignored: { count: number; paths: string[] };
  notExported: NotExported[];
  /** Entries left out beyond those listed in notExported, by code. */
  notExportedOmitted: Partial<Record<NotExportedCode, number>>;
  needsReview: ReviewFlag[];
  /** Things worth knowing that are no error (a file that shrank while it was read). */
  notes: string[];
  stats: { files: number; dirs: number; bytes: number; ms: number };
}

/** One run's sandbox, owned by whoever acquired it; dispose() removes the container and its resources. */
export interface LeasedSandbox extends Sandbox {
  dispose(): Promise<void>;
  /**
   * Tells the egress proxy which tool call runs now (null: none), so connections are attributed to
   * it, and what to do with the connections it opens (default `open`).
   */
  noteToolCall?(callId: string | null, net?: NetExpectation): void;
  /** Lets a held connection go on (allow) or refuses it. */
  releaseEgress?(id: number, allow: boolean): void;
  /** Resolves once the proxy has reported every attempt so far (bounded wait). */
  egressSync?(): Promise<void>;
  /** What an environment's setup phase needs (environments/setup-phase.ts); absent in fakes without one. */
  setup?: SetupFacet;
  /** The effect check's access to the protected files (through the engine, not the sandbox's processes); absent in fakes without one. */
  effects?: EffectFacet;
  /**
   * Starts a long-lived process in the sandbox (an MCP server): as the agent's user, in /workspace,
   * with the sandbox's environment and `env`; its stdin stays open. Stopped by kill() or with the sandbox.
   */
  spawn?(req: SpawnRequest): Promise<SandboxProcess>;
}

export interface SpawnRequest {
  /** argv, never a host shell string. */
  argv: string[];
  /** Variables of this process on top of the sandbox's. */
  env?: Record<string, string>;
  /** Receives its stdout as it comes (no buffering in between); the caller bounds what it keeps. */
  onStdout: (chunk: Buffer) => void;
  /** Told how many bytes of stderr it has written in all, as they come (a caller bounds a flood of it). */
  onStderr?: (totalBytes: number) => void;
  /** Bytes of its stderr kept (head and tail). */
  maxStderrBytes: number;
  signal?: AbortSignal;
}

/** A running process of the sandbox, started by spawn(). */
export interface SandboxProcess {
  /** Writes to its stdin; false when the engine's pipe is full (see pendingBytes). */
  write(data: string | Buffer): boolean;
  /** Bytes written to stdin that the engine has not taken yet: a writer bounds what it queues for a process that does not read. */
  readonly pendingBytes: number;
  /** Its stderr so far, head and tail, the cut marked. */
  stderrText(): string;
  /** Bytes of stdout and stderr it wrote in all. */
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
  /** Settles once, when its output ends: its exit code (null when unknown), and why when corral ended it. */
  readonly exited: Promise<{ exitCode: number | null; reason?: string }>;
  /** Stops reading its output, then kills it and every process it started (still in its tree) in the sandbox. Idempotent. */
  kill(reason: string): Promise<void>;
}

/** What a setup capture holds beside new files: the workspace's own files or git internals it changed (a capture with any is never cached). */
export interface CaptureResult {
  bytes: number;
  /** Paths (`workspace/…`) of seed files and git internals among the capture's entries, the first few. */
  ownPaths: string[];
  ownCount: number;
}

/** The steps of a setup phase that only the sandbox adapter can take. */
export interface SetupFacet {
  /**
   * Ends the setup phase: every process of the agent's uid is killed (nothing setup started outlives
   * it), then the egress proxy's allowlist becomes `allow` and every connection open now is closed.
   */
  endSetup(allow: string[]): Promise<{ connectionsClosed: number; proxyKilled: boolean }>;
  /** The sandbox's clock (seconds since the epoch, as `date +%s.%N` prints it): what capture() compares ctimes with. */
  clock(): Promise<string>;
  /**
   * Streams to `dest` an uncompressed tar (names relative to /: `workspace/…`, `home/agent/…`) of
   * every entry under /workspace and the agent's home whose inode changed after `since` — what setup
   * wrote. SandboxError(limit_exceeded) past `maxBytes`.
   */
  capture(since: string, dest: string, maxBytes: number, signal?: AbortSignal): Promise<CaptureResult>;
  /**
   * A digest of everything setup can read in the workspace before it runs: every entry's name, type,
   * mode, content and link target (git internals left out), and the commit HEAD names. A setup cache
   * key holds it, so one repository's setup is never reused for another's.
   */
  workspaceDigest(signal?: AbortSignal): Promise<string>;
  /** Extracts a capture (from this tenant's cache) into the sandbox, as the agent's user. */
  restore(path: string, signal?: AbortSignal): Promise<void>;
  /** Adds a capture's workspace files to the patch's baseline: what setup wrote is not the agent's change. */
  rebaseline(path: string): Promise<{ files: number }>;
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
  /**
   * Optional large seed: a clean uncompressed tar on the worker's disk (an upload), streamed into the
   * sandbox (checked entry by entry first) before `seedTar` and `files`; never held in memory.
   */
  seedFile?: string;
  /**
   * What exportWorkspace()'s patch compares against, when it is not the seed: a run re-created from
   * a checkpoint of its own workspace (after waiting for sub-runs) still diffs against its first seed.
   */
  baseline?: { files: Record<string, string>; seedTar?: Buffer; seedFile?: string };
  limits: { memoryMb: number; cpus: number; pids: number; workspaceMb: number; isolation?: IsolationClass };
  /** The sandbox image (an environment's); absent: the server's CORRAL_SANDBOX_IMAGE. */
  image?: string;
  /** Extra variables in every process of the sandbox (an environment's `env`). */
  env?: Record<string, string>;
  /** Directories put before PATH in every process (an environment's `path`). */
  pathPrepend?: string[];
  /**
   * Variables of this run only (its git identity), in every command run in the sandbox; not part of
   * the container's own environment, so a pooled sandbox can serve the run.
   */
  runEnv?: Record<string, string>;
  /** Allowed egress names; empty = no network at all (unless egressProxy). */
  egressAllow: string[];
  /**
   * Start the egress proxy even with an empty allowlist: a setup phase's allowlist is replaced by the
   * agent's when it ends (SetupFacet.endSetup), and the agent's may be the wider one.
   */
  egressProxy?: boolean;
  /** Receives egress attempts one by one (the first few of each kind; repeats arrive as aggregates). */
  onEgress?: (attempt: EgressAttempt) => void;
  /** Receives aggregated repeats, the proxy's start, failure and stop, and the run's egress totals. */
  onEgressSummary?: (summary: EgressSummary) => void;
  /** Receives each connection the proxy holds for a decision (releaseEgress answers it). */
  onEgressHold?: (hold: EgressHold) => void;
  signal?: AbortSignal;
}

/** Why the proxy decided as it did, as a stable code (the reason says it in words). */
export type EgressCode =
  | 'allowed' | 'invalid_target' | 'invalid_name' | 'ip_literal' | 'not_allowed' | 'port_not_allowed'
  | 'forbidden_address' | 'resolve_failed' | 'wildcard_rate' | 'wildcard_names' | 'host_mismatch' | 'framing'
  | 'upgrade_refused' | 'cap_connections' | 'cap_rate' | 'cap_requests' | 'cap_bytes_out' | 'cap_bytes_in' | 'unreachable'
  /** The gate predicted no network use for the call that opened it (run/effect-guard.ts). */
  | 'unpredicted'
  /** The operator's upstream proxy (CORRAL_EGRESS_UPSTREAM_PROXY) refused the connection, or could not be reached. */
  | 'upstream_refused' | 'upstream_unreachable';

/**
 * What the egress proxy does with a connection the current call opens: `open` (the gate predicted
 * network use, or no call's prediction applies: setup), `hold` (ask a human first: the proxy parks it
 * until the worker releases it) or `refuse` (unattended, or no call is running).
 */
export type NetExpectation = 'open' | 'hold' | 'refuse';

/** A connection the proxy holds until the worker decides (NetExpectation `hold`). */
export interface EgressHold {
  id: number;
  callId: string | null;
  host: string;
  port: number;
  method: string;
}

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
