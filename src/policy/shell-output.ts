/**
 * What bash's `printf` and `echo` print, for the analyser's known outputs (`$(printf %.4s .gitignore)`
 * is `.git`). Follows bash 5.2: printf's format escapes (\NNN octal, \xHH, \uHHHH), conversions with
 * flags, width and precision (%s %b %c %d %i %u %o %x %X and %%), the format reused while arguments
 * remain; %b and `echo -e` escapes (\0NNN octal, \c stops the output). Anything it does not follow
 * (%q, %e/%f/%g, `*` widths, a number that is not an integer) gives undefined: not known.
 * NUL bytes stay in the result; a command substitution drops them (`withoutNul`).
 */

const SIMPLE: Record<string, string> = { a: '\x07', b: '\b', e: '\x1b', E: '\x1b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };

/** Backslash escapes; `echoStyle` is %b / echo -e (octal needs a leading 0, \c ends everything). */
function unescape(raw: string, echoStyle: boolean): { text: string; stop: boolean } {
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c !== '\\' || i + 1 >= raw.length) { out += c; continue; }
    const n = raw[++i]!;
    if (echoStyle && n === 'c') return { text: out, stop: true };
    if (n in SIMPLE && !(echoStyle && (n === "'" || n === '"' || n === '?'))) { out += SIMPLE[n]; continue; }
    const hexRun = (max: number) => /^[0-9a-fA-F]+/.exec(raw.slice(i + 1, i + 1 + max))?.[0];
    if (n === 'x') { const h = hexRun(2); if (!h) { out += '\\x'; continue; } i += h.length; out += String.fromCharCode(parseInt(h, 16)); continue; }
    if (n === 'u' || n === 'U') {
      const h = hexRun(n === 'u' ? 4 : 8);
      if (!h || parseInt(h, 16) > 0x10ffff) { out += `\\${n}`; continue; }
      i += h.length;
      out += String.fromCodePoint(parseInt(h, 16));
      continue;
    }
    if (echoStyle ? n === '0' : /[0-7]/.test(n)) {
      const digits = /^[0-7]{0,3}/.exec(raw.slice(echoStyle ? i + 1 : i))![0];
      i += echoStyle ? digits.length : digits.length - 1;
      out += String.fromCharCode(parseInt(digits || '0', 8) & 0xff);
      continue;
    }
    out += '\\' + n;
  }
  return { text: out, stop: false };
}

/** The output of `printf FORMAT ARGS…`, or undefined when it is not followed. */
export function printfOutput(format: string, args: string[]): string | undefined {
  const f = unescape(format, false).text;
  let out = '';
  let k = 0;
  const conv = /%([-+ #0]*)(\d*)(?:\.(\d*))?([a-zA-Z%])/g;
  for (let round = 0; round < 1000; round++) {
    let used = false;
    let last = 0;
    let bad = false;
    let stop = false;
    conv.lastIndex = 0;
    for (let m = conv.exec(f); m; m = conv.exec(f)) {
      out += f.slice(last, m.index);
      last = conv.lastIndex;
      const [, flags = '', width = '', prec, c] = m;
      if (c === '%') { out += '%'; continue; }
      used = true;
      const a = args[k++] ?? '';
      let s: string;
      if (c === 's') s = prec !== undefined ? a.slice(0, Number(prec || 0)) : a;
      else if (c === 'b') { const r = unescape(a, true); s = prec !== undefined ? r.text.slice(0, Number(prec || 0)) : r.text; stop = r.stop; }
      else if (c === 'c') s = a.slice(0, 1);
      else if ('diuoxX'.includes(c!)) {
        const t = a.trim();
        if (!/^[-+]?\d+$/.test(t) && t !== '') { bad = true; break; }
        const v = BigInt(t || '0');
        s = c === 'o' ? v.toString(8) : c === 'x' ? v.toString(16) : c === 'X' ? v.toString(16).toUpperCase() : v.toString();
        if (prec !== undefined && prec !== '') s = s.padStart(Number(prec), '0');
      } else { bad = true; break; }
      const w = Number(width || 0);
      if (s.length < w) s = flags.includes('-') ? s.padEnd(w) : flags.includes('0') && 'diuoxX'.includes(c!) ? s.padStart(w, '0') : s.padStart(w);
      out += s;
      if (stop) return out;
    }
    if (bad) return undefined;
    out += f.slice(last);
    if (!used || k >= args.length) break;
  }
  return out;
}

/** The output of `echo ARGS…` (bash's builtin: leading -n/-e/-E option words, -e escapes off by default). */
export function echoOutput(args: string[]): string {
  let i = 0;
  let newline = true;
  let escapes = false;
  for (; i < args.length && /^-[neE]+$/.test(args[i]!); i++) {
    for (const ch of args[i]!.slice(1)) { if (ch === 'n') newline = false; else escapes = ch === 'e'; }
  }
  const text = args.slice(i).join(' ');
  if (!escapes) return newline ? `${text}\n` : text;
  const r = unescape(text, true);
  return r.stop || !newline ? r.text : `${r.text}\n`;
}

/**
 * The output of dash's `echo ARGS…` (what `sh -c` runs on Debian, and ash, zsh and ksh behave alike):
 * only `-n` is an option (`-e` is printed), and backslash escapes are always on — `\0NNN` and `\NNN`
 * octal (`echo "\056env"` prints `.env`), \a \b \f \n \r \t \v \\, `\c` ends the output; no `\x`.
 */
export function dashEchoOutput(args: string[]): string {
  let newline = true;
  let i = 0;
  if (args[0] === '-n') { newline = false; i = 1; }
  const raw = args.slice(i).join(' ');
  let out = '';
  for (let k = 0; k < raw.length; k++) {
    const c = raw[k]!;
    if (c !== '\\' || k + 1 >= raw.length) { out += c; continue; }
    const n = raw[++k]!;
    if (n === 'c') return out;
    if ('abfnrtv\\'.includes(n)) { out += SIMPLE[n]; continue; }
    if (/[0-7]/.test(n)) {
      const digits = /^[0-7]{0,3}/.exec(raw.slice(n === '0' ? k + 1 : k))![0];
      k += n === '0' ? digits.length : digits.length - 1;
      out += String.fromCharCode(parseInt(digits || '0', 8) & 0xff);
      continue;
    }
    out += '\\' + n;
  }
  return newline ? `${out}\n` : out;
}

/** What a command substitution makes of a program's output: NUL bytes dropped, trailing newlines cut. */
export function substituted(output: string): string {
  return output.replace(/\0/g, '').replace(/\n+$/, '');
}
