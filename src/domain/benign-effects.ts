/**
 * Changes to protected files that cannot make anything run code, so the effect check accepts them
 * without asking (recorded all the same): a git config change that only touches settings that name
 * no program, path, URL or hook — `git config user.email …`, `git init`'s core settings, a branch's
 * upstream — and `.git/info/exclude`, which only hides paths from `git status`. Everything else in
 * the protected set asks. The keys are git-config(1)'s (https://git-scm.com/docs/git-config).
 */

/** Keys (lower-case `section.key`, or `section.*.key` for any subsection) whose values cannot run or fetch anything. */
const SAFE_KEYS: RegExp[] = [
  /^user\.(name|email|useconfigonly)$/,
  /^core\.(repositoryformatversion|filemode|bare|logallrefupdates|ignorecase|precomposeunicode|symlinks|autocrlf|safecrlf|eol|quotepath|abbrev|checkstat|trustctime|preloadindex|untrackedcache|splitindex|commitgraph|multipackindex|compression|looseCompression|packedgitlimit|deltabasecachelimit)$/i,
  /^init\.defaultbranch$/,
  /^(color|advice|column|i18n|status|log|blame|grep|help)\.[a-z0-9.-]+$/,
  /^(commit|tag)\.gpgsign$/,
  /^pull\.(rebase|ff|twohead)$/,
  /^merge\.(ff|conflictstyle|log|renamelimit|stat)$/,
  /^rebase\.(autostash|autosquash|stat|missingcommitscheck|abbreviatecommands)$/,
  /^rerere\.(enabled|autoupdate)$/,
  /^(gc|pack|index|feature|fetch)\.(auto|autopacklimit|autodetach|prune|prunetags|writecommitgraph|threads|window|depth|version|manyfiles|experimental)$/,
  /^branch\.autosetup(merge|rebase)$/,
  /^branch\..+\.(remote|merge|rebase|pushremote|description)$/s,
  /^extensions\.(objectformat|worktreeconfig|preciousobjects)$/,
  /^diff\.(renames|renamelimit|algorithm|mnemonicprefix|noprefix|statgraphwidth|colormoved|indentheuristic|context|interhunkcontext)$/,
];
/** Values that turn a safe key unsafe: `commit.gpgsign=true` runs gpg (gpg.program). */
const UNSAFE_VALUE: Record<string, RegExp> = { 'commit.gpgsign': /^(true|yes|on|1)$/i, 'tag.gpgsign': /^(true|yes|on|1)$/i };

const MAX_CONFIG = 64 * 1024;

/** A git config file as a multiset of `section[.sub].key=value` lines, or null when it holds anything this cannot read for sure. */
export function gitConfigEntries(text: string): string[] | null {
  if (text.length > MAX_CONFIG) return null;
  const out: string[] = [];
  let section: string | null = null;
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '').trim();
    if (line === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const sec = /^\[([A-Za-z0-9.-]+)(?:\s+"((?:[^"\\\n]|\\[\\"])*)")?\]\s*(?:[#;].*)?$/.exec(line);
    if (sec) {
      const name = sec[1]!.toLowerCase();
      // [section "Sub"] keeps the subsection's case; [section.sub] is the old lower-case form
      section = sec[2] !== undefined ? `${name}.${sec[2].replace(/\\(.)/g, '$1')}` : name;
      continue;
    }
    if (section === null) return null;
    // a continued line, or a value with quoting this does not model: not read for sure
    if (line.endsWith('\\')) return null;
    const kv = /^([A-Za-z][A-Za-z0-9-]*)\s*(?:=\s*(.*))?$/.exec(line);
    if (!kv) return null;
    const value = (kv[2] ?? 'true').replace(/\s+[#;].*$/, '').replace(/^"(.*)"$/, '$1');
    const dot = section.indexOf('.');
    const key = dot < 0 ? `${section}.${kv[1]!.toLowerCase()}` : `${section.slice(0, dot)}.${section.slice(dot + 1)}.${kv[1]!.toLowerCase()}`;
    out.push(`${key}=${value}`);
  }
  return out;
}

function safeKey(entry: string): boolean {
  const eq = entry.indexOf('=');
  const key = entry.slice(0, eq);
  const value = entry.slice(eq + 1);
  const lower = key.replace(/^([^.]+)\.(.*)\.([^.]+)$/s, (_, a: string, sub: string, b: string) => `${a.toLowerCase()}.${sub}.${b.toLowerCase()}`);
  const bad = UNSAFE_VALUE[lower];
  if (bad?.test(value)) return false;
  return SAFE_KEYS.some((re) => re.test(lower));
}

/**
 * Why a change to a protected file is harmless, or null when it needs a look. `before` is null for
 * a new file, `after` null for a deleted one; `rel` is the path inside its git directory for git's
 * own files (`config`, `info/exclude`), else null.
 */
export function benignChange(rel: string | null, before: Buffer | null, after: Buffer | null): string | null {
  if (rel === null || after === null) return null;
  if (rel === 'info/exclude') return 'git\'s exclude list only hides paths from `git status`';
  if (rel === 'config' || rel === 'config.worktree') {
    const b = before === null ? [] : gitConfigEntries(before.toString('utf8'));
    const a = gitConfigEntries(after.toString('utf8'));
    if (!a || !b) return null;
    const count = (xs: string[]) => xs.reduce((m, x) => m.set(x, (m.get(x) ?? 0) + 1), new Map<string, number>());
    const cb = count(b);
    const ca = count(a);
    const changed = [...new Set([...cb.keys(), ...ca.keys()])].filter((k) => cb.get(k) !== ca.get(k));
    if (changed.length === 0) return 'the git configuration\'s settings did not change (only layout or comments)';
    if (!changed.every(safeKey)) return null;
    const keys = [...new Set(changed.map((c) => c.slice(0, c.indexOf('='))))].slice(0, 6);
    return `git settings that name no program, path or URL changed (${keys.join(', ')})`;
  }
  return null;
}
