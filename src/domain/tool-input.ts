/**
 * Rules every tool input obeys before anything analyses or runs it. A string that is not well-formed
 * UTF-16 (a lone surrogate) is refused: the gate's parser and bash would read different commands
 * once Docker turns it into U+FFFD. NUL cannot reach a process's argv at all. The bash tool's input
 * limit and the gate's are the same number, so no command is runnable that the gate refused to read.
 */
export const MAX_COMMAND_CHARS = 20_000;

/** Why `s` cannot be given to a tool, or null when it can. */
export function illFormedReason(s: string): string | null {
  if (!s.isWellFormed()) {
    const i = [...s].findIndex((ch) => ch.length === 1 && ch.charCodeAt(0) >= 0xd800 && ch.charCodeAt(0) <= 0xdfff);
    return `contains a lone UTF-16 surrogate${i >= 0 ? ` at character ${i}` : ''} (not valid Unicode text)`;
  }
  if (s.includes('\u0000')) return 'contains a NUL character';
  return null;
}

/**
 * Characters that make a command or path read differently on a screen than to bash: C0 controls
 * other than tab and newline, DEL, C1 controls (U+0085 NEL included), the Unicode line and paragraph
 * separators, and bidirectional-text controls (Trojan Source).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const DECEPTIVE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

/** Why `s` cannot be a command or a path, or null. */
export function deceptiveReason(s: string): string | null {
  const m = DECEPTIVE.exec(s);
  return m ? `contains the invisible or control character U+${m[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')} at position ${m.index}` : null;
}

/** The first ill-formed string anywhere in a JSON value, with its path (`args.command`). */
export function findIllFormed(value: unknown, path = 'args', depth = 0): { path: string; reason: string } | null {
  if (depth > 32) return { path, reason: 'is nested too deeply' };
  if (typeof value === 'string') {
    const r = illFormedReason(value);
    return r ? { path, reason: r } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) { const r = findIllFormed(value[i], `${path}[${i}]`, depth + 1); if (r) return r; }
    return null;
  }
  if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      const kr = illFormedReason(k);
      if (kr) return { path: `${path} key`, reason: kr };
      const r = findIllFormed(v, `${path}.${k}`, depth + 1);
      if (r) return r;
    }
  }
  return null;
}
