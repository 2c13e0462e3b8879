/**
 * Which workspace names may leave the sandbox in artifacts, and how they are shown. A name that
 * contains a control character (C0, DEL, C1), a line or paragraph separator, or a bidi mark,
 * embedding, override or isolate could forge lines in a patch or make a report show another name
 * than the real one, so it is never exported: the export lists it as unexportable instead. The
 * same set is refused inside the sandbox by images/sandbox/corral-fs (BAD_CHARS); the host checks
 * again because it trusts nothing it reads from a sandbox.
 */

// eslint-disable-next-line no-control-regex -- control characters are exactly what this matches
const BAD = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]/u;
const BAD_ALL = new RegExp(BAD.source, 'gu');

/** Why `path` cannot be exported, or null. U+FFFD stands for bytes that were not valid UTF-8. */
export function nameProblem(path: string): string | null {
  const m = BAD.exec(path);
  if (m) return `its name contains the control or bidi character U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  if (path.includes('\ufffd')) return 'its name is not valid UTF-8';
  return null;
}

/** A name safe to print on one line: every refused character as a \\uXXXX escape. */
export function showName(path: string): string {
  return path.replace(BAD_ALL, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`);
}

/** Byte order of the UTF-8 encodings (the order the sandbox helper sorts the export in). */
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/** Code points HFS+ ignores in names (git's is_hfs_dotgit), dropped before names are compared. */
const HFS_IGNORABLE = /[\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/gu;

/**
 * A path segment as a case-insensitive filesystem would see it: lowercase, without HFS+ ignorable
 * code points, without the trailing dots and spaces NTFS drops. `.GIT`, `.git.` and `.g\u200cit`
 * all fold to `.git`.
 */
export function foldSegment(segment: string): string {
  return segment.replace(HFS_IGNORABLE, '').toLowerCase().replace(/[. ]+$/, '');
}

/** True when any segment of `path` is a git directory (`.git`, or NTFS's short name `git~1`) in any spelling. */
export function isGitPath(path: string): boolean {
  return path.split('/').some((s) => {
    const f = foldSegment(s);
    return f === '.git' || f === 'git~1';
  });
}
