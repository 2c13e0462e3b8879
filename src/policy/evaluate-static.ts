/**
 * The static layer: `evaluateStatic(policy, {tool, args})` → decision, deciding rule, reason, risk.
 * Every simple command, redirection, environment assignment and path is judged on its own and the
 * strictest verdict wins (deny > ask > allow). A command no rule covers is "ask", never "allow".
 * A patch argument's file names are write paths (see policy-schema `patch`).
 */
import type { Decision, RiskLevel } from '../domain/gate';
import { patchPaths } from '../tools/unified-diff';
import { commandFacts, nameMatches, pathArguments, ruleFires } from './command-rules';
import { globToRegExp } from './path-glob';
import { checkPath, resolvePath, scanArgument, type Verdict } from './path-check';
import type { CommandRule, EnvRule, Policy } from './policy-schema';
import { analyzeShell, type ShellAnalysis, type SimpleCommand } from './shell-analysis';
import { commandName } from './unwrap-command';

export interface StaticCall { tool: string; args: Record<string, unknown> }
export interface StaticResult {
  decision: Decision;
  /** The rule that decided; null when nothing matched. */
  rule: string | null;
  reason: string;
  risk?: RiskLevel;
  /** True when every part of the call only reads. */
  readOnly: boolean;
}

const ORDER: Record<Decision, number> = { allow: 0, ask: 1, deny: 2 };
const RISK: Record<RiskLevel, number> = { low: 0, medium: 1, high: 2, critical: 3 };

export function combine(verdicts: Verdict[], fallback: Verdict): StaticResult {
  if (verdicts.length === 0) verdicts = [fallback];
  let best = verdicts[0]!;
  for (const v of verdicts) {
    if (ORDER[v.decision] > ORDER[best.decision]) best = v;
    else if (v.decision === best.decision && RISK[v.risk ?? 'low'] > RISK[best.risk ?? 'low']) best = v;
  }
  const readOnly = verdicts.every((v) => v.readOnly === true || (v.readOnly === undefined && v.decision === 'allow' && v.rule.startsWith('path:')));
  const risk = verdicts.reduce<RiskLevel | undefined>((r, v) => (v.risk && (!r || RISK[v.risk] > RISK[r]) ? v.risk : r), undefined);
  const rule = best.rule.startsWith('none:') ? null : best.rule;
  return { decision: best.decision, rule, reason: best.reason, ...(risk ? { risk } : {}), readOnly: readOnly && best.decision === 'allow' };
}

export function evaluateStatic(policy: Policy, call: StaticCall): StaticResult {
  const entry = policy.tools[call.tool];
  if (!entry) return combine([], { decision: 'ask', rule: 'none:tool', reason: `no policy entry for the tool "${call.tool}"` });
  const verdicts: Verdict[] = [];
  if (entry.decision !== 'allow' || !entry.shell) {
    verdicts.push({ decision: entry.decision, rule: `tool:${call.tool}`, reason: `${call.tool} is ${entry.decision === 'allow' ? 'allowed' : entry.decision === 'ask' ? 'to be confirmed' : 'denied'} by the policy`, risk: entry.risk, readOnly: entry.read_only });
  }
  for (const [arg, access] of Object.entries(entry.paths)) {
    const v = call.args[arg] ?? (arg === 'path' && call.tool === 'list_files' ? '.' : undefined);
    if (v === undefined) continue;
    if (typeof v !== 'string') { verdicts.push({ decision: 'ask', rule: 'path:invalid', reason: `${call.tool}: the ${arg} argument is not a string` }); continue; }
    const raw = v.startsWith('~') ? policy.home + v.slice(1) : v;
    verdicts.push(...checkPath(policy, { value: raw, dynamic: false, glob: false }, access, [policy.workspace], call.tool));
  }
  if (entry.patch) verdicts.push(...evaluatePatch(policy, call.tool, call.args[entry.patch], entry.patch));
  if (entry.shell) {
    const command = call.args[entry.shell];
    if (typeof command !== 'string' || command.trim() === '') {
      verdicts.push({ decision: 'deny', rule: 'shell:empty', reason: `${call.tool}: the ${entry.shell} argument must be a non-empty string` });
    } else verdicts.push(...evaluateShell(policy, command));
  }
  return combine(verdicts, { decision: 'ask', rule: 'none:nothing', reason: 'no rule matched' });
}

/** A unified diff's files are write paths: each name its headers could mean is checked like write_file's path. */
function evaluatePatch(policy: Policy, tool: string, patch: unknown, arg: string): Verdict[] {
  if (typeof patch !== 'string' || patch.trim() === '') {
    return [{ decision: 'deny', rule: 'patch:empty', reason: `${tool}: the ${arg} argument must be a non-empty unified diff` }];
  }
  const paths = patchPaths(patch);
  if (paths.length === 0) return [{ decision: 'deny', rule: 'patch:no-files', reason: `${tool}: the patch names no files (no "--- old" / "+++ new" headers)` }];
  return paths.flatMap((p) => checkPath(policy, { value: p.startsWith('~') ? policy.home + p.slice(1) : p, dynamic: false, glob: false }, 'write', [policy.workspace], tool));
}

export function evaluateShell(policy: Policy, command: string): Verdict[] {
  const a = analyzeShell(command, { home: policy.home, maxCommands: policy.limits.max_commands, maxLength: policy.limits.max_length });
  const verdicts: Verdict[] = a.findings.map((f) => ({ ...f, risk: f.decision === 'deny' ? 'high' : 'medium' }));
  for (const p of policy.bash.patterns) {
    if (policy.compiled.patterns.get(p.name)?.test(command)) verdicts.push({ decision: p.decision, rule: p.name, reason: p.reason });
  }
  const cwds = candidateDirs(policy, a);
  for (const r of a.redirects) {
    if (r.access === 'none') continue;
    verdicts.push(...checkPath(policy, r.target, r.access, cwds, `redirection ${r.op}`));
    if (r.access === 'write' && (r.target.dynamic || !/^\/dev\/(null|stdout|stderr)$/.test(r.target.value))) {
      verdicts.push({ decision: 'allow', rule: 'shell:redirect-write', reason: `redirection ${r.op} writes a file`, risk: 'low', readOnly: false });
    }
  }
  for (const c of a.commands) verdicts.push(...evaluateCommand(policy, c, cwds));
  if (a.commands.length === 0 && verdicts.length === 0) verdicts.push({ decision: 'ask', rule: 'none:empty', reason: 'the command runs nothing the analyser can see' });
  return verdicts;
}

function candidateDirs(policy: Policy, a: ShellAnalysis): string[] | null {
  const dirs = [policy.workspace];
  for (const t of a.cdTargets) {
    if (!t) return null;
    dirs.push(resolvePath(policy, t.value, policy.workspace).abs);
  }
  return [...new Set(dirs)];
}

function envMatches(rule: EnvRule, name: string): boolean {
  return !rule.except.includes(name) && rule.names.some((g) => globToRegExp(g).test(name));
}

export function evaluateCommand(policy: Policy, c: SimpleCommand, cwds: string[] | null): Verdict[] {
  const out: Verdict[] = [];
  const label = c.argv.length ? commandName(c.argv[0]!) : 'assignment';
  for (const as of [...c.assigns, ...variablesSetBy(label, c)]) {
    for (const r of policy.bash.env) if (envMatches(r, as.name)) out.push({ decision: r.decision, rule: r.name, reason: `${label}: setting ${as.name} — ${r.reason}` });
  }
  if (c.argv.length === 0) {
    out.push({ decision: 'allow', rule: 'shell:assignment', reason: 'a shell variable assignment', risk: 'low', readOnly: true });
    return out;
  }
  const gitDir = label === 'git' ? c.argv.findIndex((a, i) => i > 0 && a.value === '-C') : -1;
  const gitElsewhere = gitDir > 0 && (c.argv[gitDir + 1]?.dynamic !== false || resolvePath(policy, c.argv[gitDir + 1]!.value, policy.workspace).abs !== policy.workspace);
  if (label === 'git' && (cwds === null || cwds.length > 1 || gitElsewhere)) {
    out.push({ decision: 'ask', rule: 'shell:git-after-cd', risk: 'medium', reason: 'git runs in another directory (cd or -C), where a planted repository config could run code' });
  }
  const facts = commandFacts(c);
  const fired = policy.bash.commands.filter((r) => ruleFires(policy, r, c, facts));
  if (fired.length === 0) {
    out.push({ decision: 'ask', rule: 'none:command', reason: `no rule allows "${label}"${c.wrappers.length ? ` (inside ${c.wrappers.join(', ')})` : ''}` });
  }
  for (const r of fired) {
    out.push({ decision: r.decision, rule: r.name, reason: `${label}: ${r.reason}`, risk: r.risk, readOnly: r.read_only });
    if (r.decision === 'deny') continue;
    if (r.commands.some((n) => n.includes('/'))) out.push(...checkPath(policy, c.argv[0]!, 'read', cwds, label));
    for (const i of pathArguments(r, c)) out.push(...checkPath(policy, c.argv[i]!, r.path_access, cwds, label));
    if (c.dynamicTail && r.paths !== 'none') out.push({ decision: policy.paths.unknown, rule: 'path:unknown', reason: `${label}: receives paths at run time that cannot be checked` });
  }
  for (const a of c.argv.slice(1)) if (!a.dynamic) out.push(...scanArgument(policy, a.value, cwds, label));
  return out;
}

/** Used by the rule examples: does `rule` fire on some simple command of `example`? */
export function commandRuleFiresOn(policy: Policy, rule: CommandRule, example: string): { fires: boolean; error?: string } {
  const a = analyzeShell(example, { home: policy.home, maxCommands: policy.limits.max_commands, maxLength: policy.limits.max_length });
  const bad = a.findings.find((f) => f.rule === 'shell:parse-error');
  if (bad) return { fires: false, error: bad.reason };
  return { fires: a.commands.some((c) => nameMatches(rule, c) && ruleFires(policy, rule, c, commandFacts(c))) };
}

export function envRuleFiresOn(policy: Policy, rule: EnvRule, example: string): boolean {
  const a = analyzeShell(example, { home: policy.home, maxCommands: policy.limits.max_commands, maxLength: policy.limits.max_length });
  return a.commands.some((c) => c.assigns.some((as) => envMatches(rule, as.name)));
}

const VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** Variables a builtin sets from its input (`read PATH`, `printf -v PATH`, `mapfile`), checked like assignments. */
function variablesSetBy(label: string, c: SimpleCommand): Array<{ name: string }> {
  const args = c.argv.slice(1);
  if (['read', 'mapfile', 'readarray', 'getopts'].includes(label)) return args.filter((a) => !a.dynamic && VAR_NAME.test(a.value)).map((a) => ({ name: a.value }));
  if (label === 'printf') {
    const i = args.findIndex((a) => a.value === '-v');
    const v = i >= 0 ? args[i + 1] : undefined;
    if (v) return [{ name: v.dynamic ? 'BASH_ENV' : v.value }];
  }
  return [];
}
