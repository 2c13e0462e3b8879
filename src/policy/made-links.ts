/**
 * Links a call makes (`ln -s`, `cp -s|-l`) and the paths that pass through them: a later command of the
 * same call, or a later call of the same run (its history), is judged where a link points, so
 * `ln -s . build` then `rm -rf build/` is a delete of the workspace.
 */
import type { MadeLink } from '../domain/gate';
import { resolveIn } from './path-resolve';
import type { Policy } from './policy-schema';
import type { SimpleCommand } from './shell-analysis';
import { literalWord, type ShellWord } from './shell-words';
import { commandName } from './unwrap-command';


const parentOf = (p: string) => p.replace(/\/[^/]*$/, '') || '/';
const joinPath = (dir: string, seg: string) => (dir === '/' ? `/${seg}` : `${dir}/${seg}`);

export function linksMadeBy(policy: Policy, c: SimpleCommand): MadeLink[] {
  const head = c.argv[0] && !c.argv[0].dynamic ? commandName(c.argv[0]) : '';
  if (head !== 'ln' && head !== 'cp') return [];
  const opts = c.argv.slice(1).filter((a) => !a.dynamic && a.value.startsWith('-') && a.value !== '-');
  const has = (short: string, long: string) => opts.some((o) => o.value === long || (/^-[A-Za-z]+$/.test(o.value) && o.value.includes(short)));
  if (head === 'cp' && !has('s', '--symbolic-link') && !has('l', '--link')) return [];
  const symbolic = head === 'ln' ? has('s', '--symbolic') : has('s', '--symbolic-link');
  const ops = c.argv.slice(1).filter((a) => a.dynamic || !a.value.startsWith('-') || a.value === '-');
  if (ops.length === 0) return [];
  const cwd = c.cwds && c.cwds.length === 1 ? c.cwds[0]! : policy.workspace;
  const abs = (v: string, from: string) => resolveIn(policy.workspace, v, from).abs;
  const last = ops[ops.length - 1]!;
  const targets = ops.length === 1 ? ops : ops.slice(0, -1);
  const out: MadeLink[] = [];
  for (const t of targets) {
    const base = t.dynamic ? null : t.value.replace(/\/+$/, '').split('/').pop() ?? null;
    const names = ops.length === 1 ? (base ? [joinPath(cwd, base)] : []) : last.dynamic ? [] : [abs(last.value, cwd), ...(base ? [joinPath(abs(last.value, cwd), base)] : [])];
    for (const name of names) {
      const target = t.dynamic ? null : t.value.startsWith('/') ? abs(t.value, '/') : abs(t.value, symbolic ? parentOf(name) : cwd);
      out.push({ name, target });
    }
    if (names.length === 0 && last.dynamic) out.push({ name: '', target: null });
  }
  return out;
}

/** Follows `raw` from `cwd` segment by segment, replacing a made link by its target as it is reached. */
function followLinks(raw: string, cwd: string, links: MadeLink[]): { path: string; through: boolean; unknown: boolean } {
  let cur = raw.startsWith('/') ? '/' : cwd;
  let through = false;
  for (const seg of raw.split('/')) {
    if (seg === '' || seg === '.') continue;
    cur = seg === '..' ? parentOf(cur) : joinPath(cur, seg);
    const l = links.find((x) => x.name === cur);
    if (l) { through = true; if (l.target === null) return { path: cur, through, unknown: true }; cur = l.target; }
  }
  return { path: cur, through, unknown: false };
}

/** The command with each path that passes through a link made earlier replaced by where it leads. */
export function throughLinks(policy: Policy, c: SimpleCommand, links: MadeLink[]): { command?: SimpleCommand; problem?: string } {
  if (links.length === 0) return {};
  if (links.some((l) => l.name === '')) return { problem: 'a link with a computed name was made earlier in this call; paths after it cannot be followed' };
  const cwd = c.cwds && c.cwds.length === 1 ? c.cwds[0]! : policy.workspace;
  let changed = false;
  let problem: string | undefined;
  const map = (w: ShellWord): ShellWord => {
    if (w.dynamic || w.glob) {
      if (w.prefix && followLinks(w.prefix, cwd, links).through) problem = `"${w.prefix}…" passes through a link made earlier (in this call or an earlier one)`;
      return w;
    }
    const eq = w.value.startsWith('-') ? w.value.indexOf('=') : -1;
    const raw = eq >= 0 ? w.value.slice(eq + 1) : w.value;
    if (!raw.includes('/') && !links.some((l) => l.name === joinPath(cwd, raw))) return w;
    const f = followLinks(raw, cwd, links);
    if (!f.through) return w;
    if (f.unknown) { problem = `"${raw}" passes through a link to a computed place made earlier (in this call or an earlier one)`; return w; }
    changed = true;
    return literalWord(eq >= 0 ? `${w.value.slice(0, eq + 1)}${f.path}` : f.path);
  };
  const argv = c.argv.map((w, i) => (i === 0 ? w : map(w)));
  const redirects = c.redirects.map((r) => ({ ...r, target: map(r.target) }));
  return { ...(changed ? { command: { ...c, argv, redirects } } : {}), ...(problem ? { problem } : {}) };
}
