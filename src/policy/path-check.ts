/**
 * Path rules. Paths are resolved lexically against the workspace (or every directory a `cd` in the
 * same command may have moved to); anything that leaves the workspace, even in passing (`../x`), or
 * a glob segment that could expand to `..`, counts as outside. `allow` path rules exempt a path
 * from the outside default (e.g. /dev/null, /tmp); `ask`/`deny` rules always apply.
 */
import type { Decision, RiskLevel } from '../domain/gate';
import { segmentCouldBeDotDot } from './path-glob';
import type { PathRule, Policy } from './policy-schema';
import type { ShellWord } from './shell-words';

export interface Verdict { decision: Decision; rule: string; reason: string; risk?: RiskLevel; readOnly?: boolean }

export interface ResolvedPath { abs: string; outside: boolean }

export function resolvePath(policy: Policy, raw: string, cwd: string): ResolvedPath {
  const ws = policy.workspace;
  const start = raw.startsWith('/') ? '/' : cwd;
  const stack = start.split('/').filter(Boolean);
  let escaped = false;
  const wsDepth = ws.split('/').filter(Boolean).length;
  for (const seg of raw.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..' || segmentCouldBeDotDot(seg)) {
      stack.pop();
      if (!raw.startsWith('/') && stack.length < wsDepth) escaped = true;
      if (seg !== '..') escaped = true;
      continue;
    }
    stack.push(seg);
  }
  const abs = '/' + stack.join('/');
  const inside = abs === ws || abs.startsWith(ws + '/');
  return { abs, outside: escaped || !inside };
}

function ruleApplies(policy: Policy, rule: PathRule, abs: string, access: 'read' | 'write'): boolean {
  if (rule.access !== 'any' && rule.access !== access) return false;
  const globs = policy.compiled.pathGlobs.get(rule.name) ?? [];
  return globs.some((g) => g.test(abs));
}

/** True when `rule` matches `raw` (resolved from the workspace); used by the rule examples. */
export function pathRuleMatches(policy: Policy, rule: PathRule, raw: string): boolean {
  const abs = resolvePath(policy, raw, policy.workspace).abs;
  return (policy.compiled.pathGlobs.get(rule.name) ?? []).some((g) => g.test(abs));
}

/**
 * Checks one path use. `cwds` are the directories the command may run in (null = not known).
 * Returns the verdicts that apply (none = nothing to object to).
 */
export function checkPath(policy: Policy, word: ShellWord, access: 'read' | 'write', cwds: string[] | null, what: string): Verdict[] {
  if (word.dynamic) {
    return [{ decision: policy.paths.unknown, rule: 'path:unknown', reason: `${what}: a path computed at run time cannot be checked` }];
  }
  const raw = word.value;
  if (!raw.startsWith('/') && cwds === null) {
    return [{ decision: policy.paths.unknown, rule: 'path:unknown-cwd', reason: `${what}: "${raw}" is relative to a directory changed at run time` }];
  }
  const out: Verdict[] = [];
  for (const cwd of cwds ?? [policy.workspace]) {
    const { abs, outside } = resolvePath(policy, raw, cwd);
    const rules = policy.paths.rules.filter((r) => ruleApplies(policy, r, abs, access));
    const exempt = rules.some((r) => r.decision === 'allow');
    if (outside && !exempt) {
      const d = access === 'write' ? policy.paths.outside_write : policy.paths.outside_read;
      out.push({ decision: d, rule: `path:outside-workspace`, risk: d === 'deny' ? 'high' : 'medium', reason: `${what}: ${access === 'write' ? 'writes' : 'reads'} "${raw}" outside ${policy.workspace}` });
    }
    for (const r of rules) if (r.decision !== 'allow') out.push({ decision: r.decision, rule: r.name, risk: r.decision === 'deny' ? 'high' : 'medium', reason: `${what}: "${raw}" — ${r.reason}` });
  }
  return out;
}

/** Applies `anywhere` path rules to every argument that looks like a path (`@file`, `--x=/path`). */
export function scanArgument(policy: Policy, arg: string, cwds: string[] | null, what: string): Verdict[] {
  const candidates = new Set<string>([arg]);
  const eq = arg.indexOf('=');
  if (eq >= 0) candidates.add(arg.slice(eq + 1));
  for (const c of [...candidates]) if (c.startsWith('@') || c.startsWith('<')) candidates.add(c.slice(1));
  const out: Verdict[] = [];
  for (const c of candidates) {
    if (!c.includes('/') && !c.startsWith('.')) continue;
    for (const cwd of cwds ?? [policy.workspace]) {
      const { abs } = resolvePath(policy, c, cwd);
      for (const r of policy.paths.rules) {
        if (r.anywhere && r.decision !== 'allow' && ruleApplies(policy, r, abs, 'read')) {
          out.push({ decision: r.decision, rule: r.name, risk: 'high', reason: `${what}: "${c}" — ${r.reason}` });
        }
      }
    }
  }
  return out;
}
