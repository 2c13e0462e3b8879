/**
 * Path rules. A path is resolved lexically from each directory the command may run in; leaving the
 * workspace, even in passing (`../x`), or a glob segment that could expand to `..`, counts as outside.
 * `allow` path rules exempt paths from the outside default (/tmp, /dev/null, system directories for
 * reading); `ask`/`deny` rules always apply.
 *
 * Words that are not plain literals are checked by pattern (shell-words.ts): a glob or an expansion
 * that COULD name a protected path asks, and one that names it as specifically as the rule's own
 * examples (`~/.ss?/id_rsa`, `.gi[t]/config`, `~/.ssh/$k`) but none of a set of ordinary workspace
 * paths takes the rule's decision. An expansion whose location is not known is `paths.unknown`.
 * Deleting the workspace itself, or everything at its top (`rm -rf *`), is always denied.
 */
import type { Decision, RiskLevel } from '../domain/gate';
import type { Access } from './commands/command-spec';
import { globsOverlap, globToRegExp, segmentCouldBeDotDot } from './path-glob';
import { isInside, resolveIn } from './path-resolve';
import type { PathRule, Policy } from './policy-schema';
import { escapeGlob, type ShellWord } from './shell-words';

/** File names whose deletion loses no work (build and interpreter by-products, editor and patch leftovers). */
const REGENERABLE_NAME = /^\*?\.(o|obj|a|so|dylib|pyc|pyo|class|bak|orig|rej|tmp|swp|log|out|d|gcda|gcno)$|^(__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|node_modules|target|dist|build|_build|coverage|htmlcov|\.tox|\.nox|\.venv|venv|\.eggs|\*?[\w.-]*\.egg-info|\.coverage|\.next|\.nuxt|\.turbo|\.parcel-cache|\.DS_Store|\*~|pytest-\*)$/;

export interface Verdict {
  decision: Decision; rule: string; reason: string; risk?: RiskLevel;
  /** The analysed effect this verdict is about (evaluate-static.ts effectVerdicts), for StaticResult.network. */
  effect?: string;
}

/** Ordinary workspace paths: a pattern matching one of them is not specific to a protected path. */
function benignProbes(ws: string): string[] {
  return [`${ws}/src/app.py`, `${ws}/README.md`, `${ws}/a`, `${ws}/tests/test_app.py`, `${ws}/build/x.o`, `${ws}/src/a/b/c.ts`, `${ws}/x.txt`, `${ws}/docs/index.md`, `/tmp/x`];
}

type RuleAccess = 'read' | 'write';
const ruleAccessFor = (a: Access): RuleAccess[] => (a === 'read' || a === 'exec' ? ['read'] : a === 'link' ? ['read', 'write'] : ['write']);
/** A directory name that is scratch space by its name: clearing it loses no work. */
const SCRATCH_DIR = /(^|\/)(\.?te?mp[\w.-]*|[\w.-]*[-_.]te?mp|\.?cache|[\w.-]*[-_]cache|\.pytest[\w-]*|pytest[\w-]*|build|dist|out|target|coverage|htmlcov|node_modules|__pycache__)\/?$/i;

function applies(rule: PathRule, access: RuleAccess): boolean {
  return rule.access === 'any' || rule.access === access;
}

/** The absolute form of a rule glob (`~/`, relative and `**\/` forms expanded). */
export function absRuleGlob(policy: Policy, g: string): string {
  if (g.startsWith('/')) return g;
  if (g === '~' || g.startsWith('~/')) return policy.home + g.slice(1);
  if (g.startsWith('**/')) return `/${g}`;
  return `${policy.workspace}/${g}`;
}

function exampleAbs(policy: Policy, e: string): string {
  return resolveIn(policy.workspace, e.startsWith('~') ? policy.home + e.slice(1) : e, policy.workspace).abs;
}

/** True when `rule` matches `raw` (resolved from the workspace); used by the rule examples. */
export function pathRuleMatches(policy: Policy, rule: PathRule, raw: string): boolean {
  return matchesRule(policy, rule, exampleAbs(policy, raw));
}

function matchesRule(policy: Policy, rule: PathRule, abs: string): boolean {
  return (policy.compiled.pathGlobs.get(rule.name) ?? []).some((g) => g.test(abs)) && !(policy.compiled.pathExcepts.get(rule.name) ?? []).some((g) => g.test(abs));
}

const reasonOf = (what: string, access: Access, raw: string) => `${what}: ${access === 'read' ? 'reads' : access === 'exec' ? 'runs' : access === 'delete' ? 'deletes' : access === 'link' ? 'links to' : 'writes'} "${raw}"`;

export function checkPath(policy: Policy, word: ShellWord, access: Access, cwds: string[] | null, what: string, base?: ShellWord): Verdict[] {
  const raw = word.dynamic ? (word.value || '(computed)') : word.value;
  if (base && !word.value.startsWith('/') && !word.prefix.startsWith('/')) {
    if (base.dynamic) return [{ decision: policy.paths.unknown, rule: 'path:unknown', reason: `${what}: "${raw}" is relative to a directory computed at run time` }];
    const dirs = (cwds ?? [policy.workspace]).map((c) => resolveIn(policy.workspace, base.value, c).abs);
    return checkPath(policy, word, access, dirs, what);
  }
  if (word.alternatives) return word.alternatives.flatMap((alt) => checkPath(policy, alt, access, cwds, what));
  // a process substitution's /dev/fd/N: its commands are analysed on their own, but code read from it is not seen
  if (word.pipe) return access === 'exec' ? [{ decision: 'ask', rule: 'path:pipe-program', risk: 'medium', reason: `${what}: runs a program read from a process substitution, which the gate cannot see` }] : [];
  const dirs = cwds ?? [policy.workspace];
  if (cwds === null && !word.value.startsWith('/') && !word.prefix.startsWith('/')) {
    return [{ decision: policy.paths.unknown, rule: 'path:unknown-cwd', reason: `${what}: "${raw}" is relative to a directory changed at run time` }];
  }
  const out: Verdict[] = [];
  for (const cwd of dirs) {
    if (!word.dynamic && !word.glob && /[*?[]/.test(word.value)) {
      // a quoted glob the program expands itself (prettier 'src/**/*.ts'): its own glob rules, no `..` from wildcards
      out.push(...checkPattern(policy, { ...word, pattern: word.value, confined: true }, cwd, raw, access, what));
    } else if (!word.dynamic && !word.glob) out.push(...checkLiteral(policy, resolveIn(policy.workspace, word.value, cwd), raw, access, what));
    else out.push(...checkPattern(policy, word, cwd, raw, access, what));
  }
  return out;
}

/** An absolute path whose part before its first `..` lies outside the workspace. */
function throughOutside(ws: string, raw: string): boolean {
  if (!raw.startsWith('/')) return false;
  const segs = raw.split('/');
  const k = segs.indexOf('..');
  if (k < 0) return false;
  const before = resolveIn(ws, segs.slice(0, k).join('/') || '/', ws).abs;
  return !isInside(ws, before);
}

function checkLiteral(policy: Policy, r: { abs: string; escapes: boolean }, raw: string, access: Access, what: string): Verdict[] {
  const out: Verdict[] = [];
  const ws = policy.workspace;
  if ((access === 'delete' || access === 'clear') && (r.abs === ws || isInside(r.abs, ws) || r.abs === '/' || r.abs === policy.home)) {
    return [{ decision: 'deny', rule: 'path:workspace-root', risk: 'critical', reason: `${what}: deletes the workspace itself ("${raw}")` }];
  }
  if (access === 'clear' && isInside(ws, r.abs) && !SCRATCH_DIR.test(r.abs.slice(ws.length))) {
    return [{ decision: 'deny', rule: 'path:clears-work', risk: 'critical', reason: `${what}: removes everything in "${raw}", a directory of the workspace` }];
  }
  if (access !== 'read' && access !== 'exec' && isInside(ws, r.abs) && throughOutside(ws, raw)) {
    // `/tmp/../workspace/src`: a change to the workspace dressed as a path elsewhere
    return [{ decision: 'deny', rule: 'path:traversal', risk: 'high', reason: `${what}: "${raw}" climbs with .. from outside the workspace back into it` }];
  }
  // an allow rule lifts the outside default only when it covers every access (a link is read and written through)
  const exemptFor = new Set<RuleAccess>();
  for (const ra of ruleAccessFor(access)) {
    for (const rule of policy.paths.rules) {
      if (!applies(rule, ra) || !matchesRule(policy, rule, r.abs)) continue;
      if (rule.decision === 'allow') { if ((access !== 'exec' || !rule.no_exec) && !r.escapes) exemptFor.add(ra); continue; }
      if (rule.instead_of_outside && rule.decision === 'ask' && !r.escapes) exemptFor.add(ra);
      out.push({ decision: rule.decision, rule: rule.name, risk: rule.decision === 'deny' ? 'high' : 'medium', reason: `${reasonOf(what, access, raw)} — ${rule.reason}` });
    }
  }
  const outside = r.escapes || !isInside(ws, r.abs);
  const exempt = ruleAccessFor(access).every((ra) => exemptFor.has(ra));
  if (outside && !exempt) out.push(outsideVerdict(policy, access, raw, what));
  return out;
}

function outsideVerdict(policy: Policy, access: Access, raw: string, what: string): Verdict {
  if (access === 'exec') return { decision: 'ask', rule: 'path:exec-outside', risk: 'high', reason: `${what}: runs "${raw}" from outside the workspace (code the gate has not seen)` };
  const writes = access !== 'read' && access !== 'link';
  const d = writes ? policy.paths.outside_write : policy.paths.outside_read;
  return { decision: d, rule: 'path:outside-workspace', risk: d === 'deny' ? 'high' : 'medium', reason: `${reasonOf(what, access, raw)} outside ${policy.workspace}` };
}

/** The pattern made absolute from `cwd`, or null when it could start anywhere (a leading expansion). */
function absPattern(word: ShellWord, cwd: string): string | null {
  const p = word.pattern;
  if (p.startsWith('/')) return p;
  if (p.startsWith('**')) return null;
  const rel = p.replace(/^(\.\/)+/, '').replace(/^\.$/, '');
  const dir = cwd === '/' ? '' : escapeGlob(cwd);
  return rel ? `${dir}/${rel}` : dir || '/';
}

/** A few concrete paths the pattern matches (each wildcard filled in simply), to test containment. */
function instances(pattern: string, max = 24): string[] {
  let out = [''];
  for (let i = 0; i < pattern.length && out.length <= max; i++) {
    const c = pattern[i]!;
    if (c === '\\' && i + 1 < pattern.length) { out = out.map((o) => o + pattern[++i]); continue; }
    if (c === '*') {
      const dbl = pattern[i + 1] === '*';
      while (pattern[i + 1] === '*') i++;
      const slash = dbl && pattern[i + 1] === '/';
      if (slash) i++;
      out = out.flatMap((o) => (slash ? [o, `${o}x/`] : [o + 'x', `${o}ab`]));
      continue;
    }
    if (c === '?') { out = out.map((o) => o + 'x'); continue; }
    if (c === '[') {
      const end = pattern.indexOf(']', i + 2);
      if (end > i) {
        const body = pattern.slice(i + 1, end).replace(/^[!^]/, '');
        const pick = pattern[i + 1] === '!' || pattern[i + 1] === '^' ? 'x' : body.replace(/\[:[a-z]+:\]/, 'a')[0] ?? 'x';
        out = out.map((o) => o + pick);
        i = end;
        continue;
      }
    }
    out = out.map((o) => o + c);
  }
  return out.slice(0, max);
}

/** The literal directory a pattern stays under; `escapes` when a later segment may climb out with `..`. */
function literalDir(policy: Policy, word: ShellWord, cwd: string): { abs: string; escapes: boolean } | null {
  const segs = word.pattern.split('/');
  const lit: string[] = [];
  for (const seg of segs) {
    if (/(^|[^\\])[*?[]/.test(seg)) break;
    lit.push(seg.replace(/\\(.)/g, '$1'));
  }
  if (lit.length === 0 && !word.pattern.startsWith('/') && word.pattern.startsWith('**')) return null;
  const r = resolveIn(policy.workspace, lit.join('/') || (word.pattern.startsWith('/') ? '/' : '.'), cwd);
  const rest = segs.slice(lit.length);
  const climbs = rest.some((seg) => seg === '..' || (word.confined ? false : segmentCouldBeDotDot(seg, word.glob && !word.dynamic))) || (word.dynamic && !word.confined);
  return { abs: r.abs, escapes: r.escapes || climbs };
}

function checkPattern(policy: Policy, word: ShellWord, cwd: string, raw: string, access: Access, what: string): Verdict[] {
  const out: Verdict[] = [];
  const ws = policy.workspace;
  const abs = absPattern(word, cwd);
  const dir = literalDir(policy, word, cwd);
  const anywhere = abs === null;
  const shell = !word.confined; // find's -name and a program's own globs match dot files; bash's do not
  const re = globToRegExp(abs ?? `**/${word.pattern.replace(/^\*\*\/?/, '')}`, { shell });
  const inst = abs ? instances(abs) : [];
  const contained = (rule: PathRule) => inst.length > 0 && inst.every((p) => matchesRule(policy, rule, p));
  const specific = (rule: PathRule) => contained(rule) || (rule.match.some((e) => re.test(exampleAbs(policy, e))) && !benignProbes(ws).some((b) => re.test(b)));
  const notExcepted = (rule: PathRule) => !abs || !(policy.compiled.pathExcepts.get(rule.name) ?? []).some((g) => g.test(abs.replace(/\\(.)/g, '$1')));

  if ((access === 'delete' || access === 'clear') && abs) {
    const ancestors = ws.split('/').map((_, i, all) => all.slice(0, i + 1).join('/') || '/');
    if ((re.test(`${ws}/a`) && re.test(`${ws}/zz9`)) || ancestors.some((a) => re.test(a)) || re.test(`${ws}/`) || re.test(policy.home)) {
      return [{ decision: 'deny', rule: 'path:workspace-root', risk: 'critical', reason: `${what}: deletes the workspace or everything at its top ("${raw}")` }];
    }
    const plain = abs.replace(/\\(.)/g, '$1');
    const wide = /^(.*?)\/(\*\*\/)?(\*\*|[^/]*[*?[][^/]*)$/.exec(plain);
    if (wide && (wide[1] === ws || isInside(ws, wide[1]!)) && !SCRATCH_DIR.test(wide[1]!.slice(ws.length)) && !REGENERABLE_NAME.test(wide[3]!) && !SCRATCH_DIR.test(`/${wide[3]}`) && !/\/(\.git|build|dist|target|node_modules|__pycache__|\.[\w-]*cache)(\/|$)/.test(wide[1]!)) {
      return [{ decision: 'deny', rule: 'path:workspace-wide-delete', risk: 'critical', reason: `${what}: deletes ${wide[3] === '**' ? 'everything' : `every "${wide[3]}"`} in ${wide[1] === ws ? 'the workspace' : `"${wide[1]!.slice(ws.length + 1)}"`}` }];
    }
  }
  const exemptFor = new Set<RuleAccess>();
  // a directory the pattern stays in that an allow rule covers whole (/tmp/**, the read-only system dirs)
  const coveredDir = (ra: RuleAccess) => !!dir && !dir.escapes && policy.paths.rules.some((rule) => rule.decision === 'allow' && applies(rule, ra) && rule.globs.some((g) => g.endsWith('/**') && globToRegExp(absRuleGlob(policy, g)).test(`${dir.abs}/x`)));
  for (const ra of ruleAccessFor(access)) {
    const inOpenDir = !!dir && !dir.escapes && (isInside(ws, dir.abs) || coveredDir(ra));
    for (const rule of policy.paths.rules) {
      if (!applies(rule, ra)) continue;
      if (rule.decision === 'allow' || (rule.instead_of_outside && rule.decision === 'ask')) {
        // the pattern stays under a directory a `DIR/**` glob of the rule covers whole
        const contains = dir && !dir.escapes && rule.globs.some((g) => g.endsWith('/**') && globToRegExp(absRuleGlob(policy, g)).test(`${dir.abs}/x`));
        if (contains && (access !== 'exec' || !rule.no_exec)) {
          exemptFor.add(ra);
          if (rule.decision === 'ask') out.push({ decision: 'ask', rule: rule.name, risk: 'medium', reason: `${reasonOf(what, access, raw)} — ${rule.reason}` });
        }
        if (rule.decision === 'allow' || contains) continue;
      }
      const globs = rule.globs.map((g) => absRuleGlob(policy, g));
      const overlap = anywhere ? word.pattern !== '**' && globs.some((g) => globsOverlap(`**/${word.pattern.replace(/^\*\*\/?/, '')}`, g, shell)) : globs.some((g) => globsOverlap(abs, g, shell));
      if (!overlap || !notExcepted(rule)) continue;
      const exact = specific(rule);
      // deleting by-products by name (`find . -name '*.pyc' -delete`) cannot create a hook or a config it merely could reach
      if (!exact && access === 'delete' && REGENERABLE_NAME.test(word.pattern.split('/').pop() ?? '')) continue;
      // enumerating files under a directory of the workspace (find, grep -l) reads what `grep -r DIR` reads
      if (!exact && access === 'read' && word.confined && dir && !dir.escapes && isInside(ws, dir.abs)) continue;
      // a glob in the workspace that is not aimed at a secret's name (`cat *`, `chmod +x src/*`) reads or writes
      // the project's files, as `grep -r .` does; rules that guard writes (CI, hooks) still ask when it could hit them
      if (!exact && (word.glob && !word.dynamic || word.confined) && inOpenDir && (rule.access !== 'write' || !isInside(ws, dir!.abs))) continue;
      out.push({
        decision: exact ? rule.decision : 'ask', rule: exact ? rule.name : 'path:may-match', risk: exact && rule.decision === 'deny' ? 'high' : 'medium',
        reason: `${reasonOf(what, access, raw)}, which ${exact ? 'names' : 'could name'} a protected path — ${rule.reason}`,
      });
    }
  }
  if (!dir || dir.escapes) {
    if (!word.dynamic) out.push(outsideVerdict(policy, access, raw, what));
    else out.push({ decision: policy.paths.unknown, rule: 'path:unknown', risk: 'medium', reason: `${what}: "${raw}" is a path computed at run time; it cannot be checked` });
    return out;
  }
  if (!isInside(ws, dir.abs) && !ruleAccessFor(access).every((ra) => exemptFor.has(ra))) out.push(outsideVerdict(policy, access, raw, what));
  return out;
}

/** Applies `anywhere` path rules to an argument that looks like a path (`@file`, `--x=/path`). */
export function scanArgument(policy: Policy, arg: string, cwds: string[] | null, what: string): Verdict[] {
  const candidates = new Set<string>([arg]);
  const eq = arg.indexOf('=');
  if (eq >= 0) candidates.add(arg.slice(eq + 1));
  for (const c of [...candidates]) if (c.startsWith('@') || c.startsWith('<')) candidates.add(c.slice(1));
  const out: Verdict[] = [];
  for (const c of candidates) {
    if (!c.includes('/') && !c.startsWith('.')) continue;
    for (const cwd of cwds ?? [policy.workspace]) {
      const { abs } = resolveIn(policy.workspace, c.startsWith('~') ? policy.home + c.slice(1) : c, cwd);
      for (const r of policy.paths.rules) {
        if (r.anywhere && r.decision !== 'allow' && matchesRule(policy, r, abs)) {
          out.push({ decision: r.decision, rule: r.name, risk: 'high', reason: `${what}: "${c}" — ${r.reason}` });
        }
      }
    }
  }
  return out;
}
