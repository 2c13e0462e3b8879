/**
 * The vocabulary of effects observed at the exits: the protected set's classes and matcher port
 * (policy/protected-set.ts implements it), the state of the protected files read from a sandbox,
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

/** Which workspace paths are protected (policy/protected-set.ts). */
export interface ProtectedMatcher {
  match(path: string, type?: EntryType): ProtectedMatch | null;
  /** Root-level names and directories to read when the whole workspace is too large to read each call. */
  rootProbes(): string[];
}
