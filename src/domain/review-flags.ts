/**
 * Changes a human should review before using a run's artifacts (patch, tar, bundle): files of the
 * protected set (domain/protected-set.ts: git hooks and config, CI pipelines, agent, editor and dev
 * environment configs — compared in every spelling another filesystem folds to the same name), new
 * executable or setuid/setgid bits, names that show as another name (zero-width, compatibility or
 * mixed-script characters), and added lines holding raw terminal control bytes (ESC, a CR that is not
 * a line ending, backspace) or bidi controls, which make a patch print other text than it applies.
 * Applied to every added or modified file (deletions are not flagged: they show in the patch).
 */
import type { ProtectedMatcher } from './effects';
import type { FileChange, ReviewFlag } from './sandbox';
import { DEFAULT_PROTECTED_SET } from './protected-set';
import { isGitPath } from './export-names';

const octal = (m: number) => (m & 0o7777).toString(8).padStart(4, '0');

/** Characters that render as nothing (zero-width, joiners, variation selectors, tags…). */
const INVISIBLE = /[\p{Default_Ignorable_Code_Point}]/u;
/** Letters of the scripts whose shapes pass for Latin ones (Cyrillic а, Greek ο, Armenian օ, Cherokee Ꭺ…). */
const SCRIPTS = [/\p{Script=Latin}/u, /\p{Script=Cyrillic}/u, /\p{Script=Greek}/u, /\p{Script=Armenian}/u, /\p{Script=Cherokee}/u];

/** Why a name may show as another name, or null: invisible characters, compatibility forms, or Latin mixed with look-alike scripts in one segment. */
export function confusableName(path: string): string | null {
  for (const seg of path.split('/')) {
    const inv = INVISIBLE.exec(seg);
    if (inv) return `the name "${seg.replace(INVISIBLE, '')}" holds the invisible character U+${inv[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    if (seg.normalize('NFKC') !== seg.normalize('NFC')) return `the name segment shows as "${seg.normalize('NFKC')}" but is spelled with compatibility characters (fullwidth, ligatures…)`;
    // per word (a run of letters and marks): `Ελληνικά.txt` is two words of one script each, `pаckage` one word of two
    for (const word of seg.match(/[\p{L}\p{M}]+/gu) ?? []) {
      if (SCRIPTS.filter((re) => re.test(word)).length > 1) return `the name word "${word}" mixes Latin letters with look-alike letters of another script (Cyrillic, Greek, Armenian or Cherokee)`;
    }
  }
  return null;
}

/**
 * The first raw control byte in the added lines of a patch section, described, or null. Tabs and
 * line endings (LF, CRLF) are text; ESC starts terminal sequences (colours, cursor moves, clearing a
 * line), a lone CR returns the cursor so the rest of the line overprints what came before, BS erases,
 * and bidi controls reorder what is shown (Trojan Source). Any of them lets `cat x.patch` show other
 * text than `git apply` applies.
 */
export function controlBytesIn(sectionText: string): string | null {
  for (const line of sectionText.split('\n')) {
    if (!line.startsWith('+') || line.startsWith('+++ ')) continue;
    const body = line.endsWith('\r') ? line.slice(1, -1) : line.slice(1);
    // eslint-disable-next-line no-control-regex -- control characters are exactly what this finds
    const m = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]/u.exec(body);
    if (m) {
      const cp = m[0].codePointAt(0)!;
      const what = cp === 0x1b ? 'ESC (terminal escape sequence)' : cp === 0x0d ? 'a carriage return inside a line' : cp === 0x08 ? 'a backspace' : cp >= 0x2000 || cp === 0x61c ? 'a bidi control' : 'a control character';
      return `an added line holds ${what} U+${cp.toString(16).toUpperCase().padStart(4, '0')}: shown in a terminal, the patch reads as other text than it applies`;
    }
  }
  return null;
}

/** The review flags of one change (none for a deletion); `sectionText` is its patch section when it has one. */
export function reviewFlags(c: FileChange, set: ProtectedMatcher = DEFAULT_PROTECTED_SET, sectionText?: string): ReviewFlag[] {
  if (c.change === 'deleted') return [];
  const out: ReviewFlag[] = [];
  const m = set.match(c.path, c.symlink ? 'symlink' : 'file');
  if (m) out.push({ path: c.path, rule: m.class, reason: `${c.change}: ${m.reason}` });
  const conf = confusableName(c.path);
  if (conf) out.push({ path: c.path, rule: 'confusable-name', reason: `${c.change}: ${conf}` });
  const before = c.change === 'added' ? 0 : (c.modeBefore ?? c.modeAfter ?? 0o644);
  const after = c.modeAfter ?? before;
  // git's own files (objects, the hook samples git init writes) are not run by anything; a hook is flagged by its class above
  if (after & 0o111 && !(before & 0o111) && !(isGitPath(c.path) && !m)) {
    out.push({ path: c.path, rule: 'executable', reason: `${c.change === 'added' ? 'a new executable file' : 'made executable'} (mode ${octal(after)})` });
  }
  const special = after & 0o6000 & ~before;
  if (special) {
    const bits = [special & 0o4000 ? 'setuid' : '', special & 0o2000 ? 'setgid' : ''].filter(Boolean).join(' and ');
    out.push({ path: c.path, rule: 'setuid', reason: `the ${bits} bit was set (mode ${octal(after)}); git does not carry it, the tar drops it` });
  }
  if (sectionText) {
    const ctl = controlBytesIn(sectionText);
    if (ctl) out.push({ path: c.path, rule: 'control-bytes', reason: ctl });
  }
  return out;
}
