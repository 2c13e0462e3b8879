/**
 * The vocabulary of effects observed at the exits: the protected set's classes and matcher port
 * (domain/protected-set.ts implements it), the state of the protected files read from a sandbox,
 * and the effect decisions the run records (a protected file changed by a call, a connection a call
 * was not predicted to open).
 */

/** What a protected path is: the review flags and effect decisions name it. */
export const PROTECTED_CLASSES = ['git-hook', 'git-config', 'git-attributes', 'git-dir', 'git-internal', 'ci', 'agent-config'] as const;
export type ProtectedClass = (typeof PROTECTED_CLASSES)[number];

export interface ProtectedMatch {
  rule: string;
  class: ProtectedClass;
  reason: string;
}

export type EntryType = 'file' | 'dir' | 'symlink' | 'other';

/** Which workspace paths are protected (domain/protected-set.ts). */
export interface ProtectedMatcher {
  match(path: string, type?: EntryType): ProtectedMatch | null;
  /** Root-level names and directories to read when the whole workspace is too large to read each call. */
  rootProbes(): string[];
}

/** One protected entry as read from the sandbox (never through its processes). */
export interface ProtectedEntry {
  type: EntryType;
  /** Permission bits (mode & 0o7777). */
  mode: number;
  size: number;
  /** sha256 (hex) of a file's content. */
  sha256?: string;
  /** A symlink's target, or the name a hard link shares its content with. */
  link?: string;
  hardlink?: boolean;
  /** The content, for files up to the keep limit: what a restore writes back and a diff shows. */
  data?: Buffer;
}

/** The protected files of a workspace at one moment. */
export interface ProtectedState {
  entries: Map<string, ProtectedEntry>;
  /** Modes of directories seen (to recreate a protected file's parents as they were). */
  dirs: Map<string, number>;
  /** full: the whole workspace was read; targeted: only the protected set's root-level names and git's directory. */
  mode: 'full' | 'targeted';
  /** targeted: the paths the read covered (a path is covered when it is one of them or lies below one). */
  scope?: string[];
  /** What the read could not cover (sizes over the keep limit, a workspace too large to read whole…). */
  notes: string[];
  /** Bytes read from the engine, archive requests made, wall time. */
  bytes: number;
  requests: number;
  ms: number;
}

/** What the effect check needs of a sandbox: its protected files read and restored through the engine. */
export interface EffectFacet {
  /** Reads the protected files' state through the Engine API's archive endpoint (not through a process in the sandbox). */
  protectedState(set: ProtectedMatcher, opts: { mode: 'full' | 'targeted'; signal?: AbortSignal }): Promise<ProtectedState>;
  /**
   * Puts `before`'s entries for `paths` back (through the archive endpoint, as the agent's uid) and
   * removes those that did not exist before; paths are workspace-relative.
   */
  restoreProtected(before: ProtectedState, paths: string[], signal?: AbortSignal): Promise<void>;
  /** Kills every process of the agent's uid (what races a restore). */
  stopAgentProcesses(): Promise<boolean>;
}

/** How an observed effect was settled. */
export type EffectBy =
  /** The call's own decision named it (a file tool's path, approved or allowed). */
  | 'covered'
  /** Harmless by rule (domain/benign-effects.ts). */
  | 'benign'
  /** A human approved or denied it, or nobody answered in time. */
  | 'approval'
  /** The run is unattended: refused without asking. */
  | 'unattended';

export interface EffectDecision {
  callId: string | null;
  tool: string;
  effect: 'file' | 'network';
  decision: 'allow' | 'deny';
  by: EffectBy;
  /** One sentence: what happened and why it was decided so. */
  reason: string;
  /** file: the workspace path, how it changed, its class and rule, a bounded diff, whether it was put back. */
  path?: string;
  change?: 'added' | 'modified' | 'deleted';
  class?: ProtectedClass;
  rule?: string;
  diff?: string;
  restored?: boolean;
  /** network: where the call connected. */
  host?: string;
  port?: number;
  /** Who answered an approval. */
  approvedBy?: string;
}

/** One kind of secret found in a text: the rule (gitleaks' id), how often, and a print of the first (never the secret). */
export interface MaskedSecret {
  rule: string;
  count: number;
  fingerprint: string;
}

export interface MaskResult {
  text: string;
  found: MaskedSecret[];
  /** Set when the full scan could not finish: a coarser mask was applied instead (why). */
  coarse?: string;
}

/** Masks secrets in text bound for the transcript (policy/secret-scan-pool.ts). */
export interface SecretMasker {
  mask(text: string): Promise<MaskResult>;
}
