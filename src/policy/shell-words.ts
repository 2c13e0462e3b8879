/**
 * Resolves mvdan-sh Word nodes to the string bash would pass, when that is knowable without running
 * anything. Quotes and escapes are removed; `$HOME`, `${HOME}` and a leading `~` become the policy's
 * home. Any other expansion (parameters, command or arithmetic substitution, brace expansion,
 * extglobs, ANSI-C escapes) makes the word `dynamic`: its value is then only a hint, never trusted.
 */
import { syntax, type ShNode } from 'mvdan-sh';

export interface ShellWord {
  value: string;
  /** The value depends on runtime expansion. */
  dynamic: boolean;
  /** Contains an unquoted glob character (* ? [). */
  glob: boolean;
}

function unescapeUnquoted(raw: string, out: { glob: boolean; dynamic: boolean }): string {
  let s = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === '\\') {
      i++;
      if (i < raw.length && raw[i] !== '\n') s += raw[i];
      continue;
    }
    if (c === '*' || c === '?' || c === '[') out.glob = true;
    if (c === '{' && /\{[^{}]*(,|\.\.)[^{}]*\}/.test(raw.slice(i))) out.dynamic = true;
    s += c;
  }
  return s;
}

function unescapeDouble(raw: string): string {
  return raw.replace(/\\([$`"\\\n])/g, (_m, c: string) => (c === '\n' ? '' : c));
}

function isPlainHome(n: ShNode): boolean {
  return n.Param?.Value === 'HOME' && !n.Excl && !n.Length && !n.Width && !n.Index && !n.Slice && !n.Repl && !n.Exp && !n.Names;
}

export function resolveWord(word: ShNode, home: string): ShellWord {
  const out = { glob: false, dynamic: false };
  let value = '';
  const parts: ShNode[] = word?.Parts ?? [];
  parts.forEach((p, idx) => {
    const t = syntax.NodeType(p);
    if (t === 'Lit') {
      let raw: string = p.Value;
      if (idx === 0 && raw.startsWith('~')) {
        const slash = raw.indexOf('/');
        const user = slash < 0 ? raw.slice(1) : raw.slice(1, slash);
        if (user === '') raw = home + (slash < 0 ? '' : raw.slice(slash));
        else out.dynamic = true;
      }
      value += unescapeUnquoted(raw, out);
    } else if (t === 'SglQuoted') {
      if (p.Dollar && String(p.Value).includes('\\')) out.dynamic = true;
      value += p.Value;
    } else if (t === 'DblQuoted') {
      for (const q of p.Parts ?? []) {
        const qt = syntax.NodeType(q);
        if (qt === 'Lit') value += unescapeDouble(q.Value);
        else if (qt === 'ParamExp' && isPlainHome(q)) value += home;
        else out.dynamic = true;
      }
    } else if (t === 'ParamExp' && isPlainHome(p)) {
      value += home;
    } else {
      out.dynamic = true;
    }
  });
  return { value, dynamic: out.dynamic, glob: out.glob };
}
