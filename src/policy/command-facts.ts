/**
 * Facts about commands whose danger hides in an argument language: sed scripts (`e`, `w`, `s///e`,
 * `s///w`, `r`) and awk programs (`system()`, pipes, `print > file`, `@load`). Policy rules test
 * them with `facts`/`unless_facts`. A script that cannot be scanned yields `<cmd>.unparsed`.
 */
import type { ShellWord } from './shell-words';

const SED_VALUED = ['-e', '--expression', '-f', '--file', '-l', '--line-length'];

export function sedFacts(args: ShellWord[]): Set<string> {
  const facts = new Set<string>();
  const scripts: string[] = [];
  let positional = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.dynamic) { facts.add('sed.unparsed'); continue; }
    const v = a.value;
    if (v === '-e' || v === '--expression') { const s = args[++i]; if (!s || s.dynamic) facts.add('sed.unparsed'); else scripts.push(s.value); positional = true; continue; }
    if (v.startsWith('--expression=')) { scripts.push(v.slice(13)); positional = true; continue; }
    if (v === '-f' || v === '--file' || v.startsWith('--file=') || /^-[a-zA-Z]*f/.test(v) && !v.startsWith('--')) { facts.add('sed.unparsed'); continue; }
    if (/^-[a-zA-Z]*e./.test(v) && !v.startsWith('--')) { scripts.push(v.slice(v.indexOf('e') + 1)); positional = true; continue; }
    if (v === '-i' || v.startsWith('--in-place') || (/^-[a-zA-Z]*i/.test(v) && !v.startsWith('--'))) facts.add('sed.in_place');
    if (v.startsWith('-') && v !== '-') { if (SED_VALUED.includes(v)) i++; continue; }
    if (!positional) { scripts.push(v); positional = true; }
  }
  for (const s of scripts) scanSed(s, facts);
  return facts;
}

function readDelimited(s: string, i: number, delim: string): number {
  while (i < s.length && s[i] !== delim) i += s[i] === '\\' ? 2 : 1;
  return i + 1;
}

function scanSed(s: string, facts: Set<string>): void {
  let i = 0;
  const toEol = () => { while (i < s.length && s[i] !== '\n') i++; };
  while (i < s.length) {
    const c = s[i]!;
    if (/[\s;{}!]/.test(c)) { i++; continue; }
    if (/[0-9$,~+]/.test(c)) { i++; continue; }
    if (c === '/') { i = readDelimited(s, i + 1, '/'); continue; }
    if (c === '\\') { const d = s[i + 1] ?? ''; i = readDelimited(s, i + 2, d); continue; }
    if (c === '#') { toEol(); continue; }
    i++;
    if (c === 's' || c === 'y') {
      const d = s[i];
      if (!d || d === '\n' || d === '\\') { facts.add('sed.unparsed'); return; }
      i = readDelimited(s, i + 1, d);
      i = readDelimited(s, i, d);
      if (c === 'y') continue;
      const flagStart = i;
      while (i < s.length && /[0-9gpiImMe]/.test(s[i]!)) i++;
      if (s.slice(flagStart, i).includes('e')) facts.add('sed.exec');
      if (s[i] === 'w') { facts.add('sed.write'); toEol(); }
      continue;
    }
    if (c === 'e') { facts.add('sed.exec'); toEol(); continue; }
    if (c === 'w' || c === 'W') { facts.add('sed.write'); toEol(); continue; }
    if (c === 'r' || c === 'R') { facts.add('sed.read'); toEol(); continue; }
    if ('aic'.includes(c)) { while (i < s.length && s[i] !== '\n') i += s[i] === '\\' ? 2 : 1; continue; }
    if ('btT:v'.includes(c)) { while (i < s.length && !/[;\n}]/.test(s[i]!)) i++; continue; }
    if ('qQlL'.includes(c)) { while (i < s.length && /[0-9 ]/.test(s[i]!)) i++; continue; }
    if ('=dDgGhHnNpPxzF'.includes(c)) continue;
    facts.add('sed.unparsed');
    return;
  }
}

const AWK_VALUED = ['-F', '-v', '--assign', '--field-separator'];

export function awkFacts(args: ShellWord[]): Set<string> {
  const facts = new Set<string>();
  let program: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.dynamic) { facts.add('awk.unparsed'); continue; }
    const v = a.value;
    if (['-f', '--file', '-i', '--include', '-l', '--load', '-E', '--exec'].includes(v) || /^--(file|include|load|exec)=/.test(v)) { facts.add('awk.unparsed'); i++; continue; }
    if (v === '-e' || v === '--source') { const p = args[++i]; if (!p || p.dynamic) facts.add('awk.unparsed'); else program = (program ?? '') + '\n' + p.value; continue; }
    if (AWK_VALUED.includes(v)) { i++; continue; }
    if (v.startsWith('-') && v !== '-') continue;
    if (program === undefined) program = v;
    else break;
  }
  if (program === undefined) { facts.add('awk.unparsed'); return facts; }
  const code = program
    .replace(/"(\\.|[^"\\])*"/g, '""')
    .replace(/(^|[(,~!{};&|\n]\s*)\/(\\.|[^/\\\n])*\//g, '$1//')
    .replace(/#[^\n]*/g, '');
  if (/\bsystem\s*\(/.test(code) || /(^|[^|])\|(?!\|)/.test(code.replace(/\|\|/g, ' ')) || /@load|@include/.test(code)) facts.add('awk.exec');
  if (/\b(print|printf)\b[^;}\n]*>/.test(code)) facts.add('awk.write');
  if (/\bgetline\b/.test(code) && /"\s*\|\s*getline|\|&/.test(program)) facts.add('awk.exec');
  return facts;
}
