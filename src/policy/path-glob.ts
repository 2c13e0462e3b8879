/**
 * Glob → RegExp for policy path and name globs: `**` matches across `/` (and `**\/` may match
 * nothing), `*` and `?` stay within one path segment, `[...]` is a character class.
 */
export function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*') {
      if (glob[i + 1] === '*') {
        i++;
        if (glob[i + 1] === '/') { i++; re += '(?:.*/)?'; } else re += '.*';
      } else re += '[^/]*';
    } else if (c === '?') re += '[^/]';
    else if (c === '[') {
      const end = glob.indexOf(']', i + 1);
      if (end < 0) re += '\\[';
      else { re += '[' + glob.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\') + ']'; i = end; }
    } else re += c.replace(/[.+^${}()|\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/** True when a shell glob segment (e.g. `.*`) could expand to `..`. */
export function segmentCouldBeDotDot(segment: string): boolean {
  return /[*?[]/.test(segment) && globToRegExp(segment).test('..');
}
