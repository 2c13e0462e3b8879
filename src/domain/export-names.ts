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

/** A UTF-16 surrogate without its partner: a string no UTF-8 file name can hold. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const LONE_SURROGATE_ALL = new RegExp(LONE_SURROGATE.source, 'g');

/** Why `path` cannot be exported, or null. U+FFFD stands for bytes that were not valid UTF-8. */
export function nameProblem(path: string): string | null {
  const m = BAD.exec(path);
  if (m) return `its name contains the control or bidi character U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
  if (path.includes('\ufffd')) return 'its name is not valid UTF-8';
  const s = LONE_SURROGATE.exec(path);
  if (s) return `its name contains a lone surrogate (U+${s[0].charCodeAt(0).toString(16).toUpperCase()}), which no UTF-8 name can hold`;
  return null;
}

/** A name safe to print on one line: every refused character (and a lone surrogate) as a \\uXXXX escape. */
export function showName(path: string): string {
  const esc = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
  return path.replace(BAD_ALL, (c) => `\\u${c.codePointAt(0)!.toString(16).padStart(4, '0')}`).replace(LONE_SURROGATE_ALL, esc);
}

/** Byte order of the UTF-8 encodings (the order the sandbox helper sorts the export in). */
export function comparePaths(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

/**
 * Code points some filesystem drops when it compares names: HFS+ ignores the zero-width and bidi
 * format characters git lists in is_hfs_dotgit (U+200C–U+200F, U+202A–U+202E, U+206A–U+206F,
 * U+FEFF), and every Default_Ignorable_Code_Point (soft hyphen, variation selectors, U+2060 word
 * joiner, tags, …) renders as nothing, so a name holding one looks like the name without it.
 */
const IGNORABLE = /[\p{Default_Ignorable_Code_Point}\u200b-\u200f\u202a-\u202e\u206a-\u206f\ufeff]/gu;

/**
 * A path segment as a case-insensitive, normalising filesystem would see it, so that every spelling
 * another filesystem folds to one name compares equal to it:
 * - Unicode normalisation: NFKC (APFS and HFS+ do not tell NFC from NFD; compatibility forms such as
 *   fullwidth `．ｇｉｔ` are folded too — over-inclusive on purpose, this only ever adds matches);
 * - ignorable code points dropped (`.g\u200cit`);
 * - an NTFS stream suffix cut: everything from the first `:` (`.git::$INDEX_ALLOCATION`, `x:$DATA`);
 * - case: upper- then lower-cased, so the letters NTFS's upcase table merges (`ı`, `ſ`, `K`) merge too;
 * - the trailing dots and spaces Win32 drops (`.git.`, `.git `).
 * NTFS 8.3 short names (`GIT~1`, `GITHUB~1`) are matched by shortNameOf / isShortNameOf.
 */
export function foldSegment(segment: string): string {
  let s = segment.normalize('NFKC').replace(IGNORABLE, '');
  const colon = s.indexOf(':');
  if (colon >= 0) s = s.slice(0, colon);
  return s.toUpperCase().toLowerCase().normalize('NFKC').replace(/[. ]+$/, '');
}

/** A folded segment in the form of an NTFS 8.3 short name (`github~1`, `pre-co~1.yam`, `gi7eba~1`). */
const SHORT = /^([^~.]{1,6})~([1-9][0-9]{0,5})(?:\.([^.]{0,3}))?$/;

/**
 * Whether folded segment `seg` may be NTFS's 8.3 short name of the folded long name `long`: the first
 * up-to-six characters of the name without its leading dots, spaces and extension, `~N`, and the first
 * three characters of its extension. When many names share a prefix NTFS switches to two characters
 * and four hex digits of a hash (`gi7eba~1` for .gitmodules in git's list); any such segment is taken as
 * possibly naming `long` when its first two characters agree (over-inclusive on purpose).
 */
export function isShortNameOf(seg: string, long: string): boolean {
  const m = SHORT.exec(seg);
  if (!m) return false;
  const bare = long.replace(/^\.+/, '').replace(/ /g, '');
  const dot = bare.lastIndexOf('.');
  const base = (dot > 0 ? bare.slice(0, dot) : bare).replace(/\./g, '');
  const ext = dot > 0 ? bare.slice(dot + 1, dot + 4) : '';
  if ((m[3] ?? '') !== ext && !(m[3] === undefined && ext === '')) return false;
  if (base.startsWith(m[1]!) && (m[1]!.length === 6 || m[1] === base)) return true;
  return /^[^~]{2}[0-9a-f]{4}$/.test(m[1]!) && base.slice(0, 2) === m[1]!.slice(0, 2);
}

/** True when any segment of `path` is a git directory (`.git`, or NTFS's short name `git~1`) in any spelling. */
export function isGitPath(path: string): boolean {
  return path.split('/').some((s) => {
    const f = foldSegment(s);
    return f === '.git' || isShortNameOf(f, '.git');
  });
}
