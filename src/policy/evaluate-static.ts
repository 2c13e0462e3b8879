/**
 * The static layer: `evaluateStatic(policy, {tool, args})` → decision, deciding rule, reason, risk.
 * Every simple command (shell-analysis.ts) is judged through its spec (commands/): the policy's rule
 * for its name, each effect it has, each path it reads, writes, deletes, links or runs, each variable
 * it sets; redirections are writes and reads; the strictest verdict wins (deny > ask > allow).
 *
 * An "allow" is final — the gate skips the classifier — so it is given only when everything in the
 * call is understood: a command with no spec, an option a spec does not model, a construct outside
 * the analyser's closed list, a path computed at run time, or code written earlier in the same call
 * and then run is at least "ask". Tool arguments that are not well-formed text are denied.
 */
import { posix } from 'node:path';
import type { CallHistory, Decision, MadeLink, RiskLevel } from '../domain/gate';
import { deceptiveReason, findIllFormed } from '../domain/tool-input';
import { patchPaths } from '../tools/unified-diff';
import { findSpec } from './commands';
import { cheapDelete } from './commands/file-tools';
import { codeEffects, hiddenDenials } from './carried-code';
import { linksMadeBy, throughLinks } from './made-links';
import type { CommandUse, PathUse } from './commands/command-spec';
import { globToRegExp } from './path-glob';
import { resolveIn } from './path-resolve';
import { checkPath, scanArgument, type Verdict } from './path-check';
import type { EnvRule, Policy } from './policy-schema';
import { analyzeShell, type ShellAnalysis, type SimpleCommand } from './shell-analysis';
import { DYNAMIC_WORD, literalWord, type ShellWord } from './shell-words';
import { commandName, unwrapCommand } from './unwrap-command';
import { parseMcpToolName } from '../domain/mcp';
import { evaluateMcp } from './mcp-rules';

export interface StaticCall { tool: string; args: Record<string, unknown> }
export interface StaticResult {
  decision: Decision;
  /** The rule that decided; null when nothing matched. */
  rule: string | null;
  reason: string;
  risk?: RiskLevel;
  /** What the call adds to the run's history if it runs: literal files it writes, links it makes. */
  adds?: CallHistory;
  /**
   * The analysis predicts network use: a command with a network, install, publish or upload effect,
   * or a tool whose policy entry says `network: true`. A call without it that opens a connection
   * anyway is held by the egress proxy and asks (run/effect-guard.ts).
   */
  network?: boolean;
}

/** At most this many paths and links recorded per call. */
const MAX_ADDS = 64;

/** Effects that go through the network. */
const NETWORK_EFFECTS = new Set(['network', 'install', 'publish', 'upload']);

const ORDER: Record<Decision, number> = { allow: 0, ask: 1, deny: 2 };
const RISK: Record<RiskLevel, number> = { low: 0, medium: 1, high: 2, critical: 3 };

export function combine(verdicts: Verdict[], fallback: Verdict): StaticResult {
  if (verdicts.length === 0) verdicts = [fallback];
  let best = verdicts[0]!;
  for (const v of verdicts) {
    if (ORDER[v.decision] > ORDER[best.decision]) best = v;
    else if (v.decision === best.decision && RISK[v.risk ?? 'low'] > RISK[best.risk ?? 'low']) best = v;
  }
  const risk = verdicts.reduce<RiskLevel | undefined>((r, v) => (v.risk && (!r || RISK[v.risk] > RISK[r]) ? v.risk : r), undefined);
  const rule = best.rule.startsWith('none:') ? null : best.rule;
  return { decision: best.decision, rule, reason: best.reason, ...(risk ? { risk } : {}) };
}

/**
 * The static decision on one call. `history` is what this run's earlier calls wrote and linked: a
 * later path through one of those links is judged where it leads, and deleting files the run itself
 * wrote loses no work the run did not make.
 */
export function evaluateStatic(policy: Policy, call: StaticCall, history?: CallHistory): StaticResult {
  try {
    return evaluateStaticUnguarded(policy, call, history);
  } catch (err) {
    // A defect of the analyser must not crash the gate or let the call through: it is refused, and says so.
    const msg = err instanceof Error ? err.message : String(err);
    return { decision: 'deny', rule: 'gate:internal-error', risk: 'high', reason: `the gate could not analyse this call (internal error: ${msg.slice(0, 200)}), so it is refused` };
  }
}

function evaluateStaticUnguarded(policy: Policy, call: StaticCall, history?: CallHistory): StaticResult {
  if (parseMcpToolName(call.tool)) return evaluateMcp(policy, call);
  const bad = findIllFormed(call.args);
  if (bad) return combine([{ decision: 'deny', rule: 'input:ill-formed', risk: 'high', reason: `${call.tool}: ${bad.path} ${bad.reason}` }], { decision: 'deny', rule: 'input:ill-formed', reason: '' });
  const entry = policy.tools[call.tool];
  if (!entry) return combine([], { decision: 'ask', rule: 'none:tool', reason: `no policy entry for the tool "${call.tool}"` });
  const verdicts: Verdict[] = [];
  const adds: CallHistory = { written: [], links: [] };
  if (entry.decision !== 'allow' || !entry.shell) {
    verdicts.push({ decision: entry.decision, rule: `tool:${call.tool}`, reason: `${call.tool} is ${entry.decision === 'allow' ? 'allowed' : entry.decision === 'ask' ? 'to be confirmed' : 'denied'} by the policy`, risk: entry.risk });
  }
  for (const [arg, access] of Object.entries(entry.paths)) {
    const v = call.args[arg] ?? (arg === 'path' && call.tool === 'list_files' ? '.' : undefined);
    if (v === undefined) continue;
    if (typeof v !== 'string') { verdicts.push({ decision: 'ask', rule: 'path:invalid', reason: `${call.tool}: the ${arg} argument is not a string` }); continue; }
    const dec = deceptiveReason(v);
    if (dec) { verdicts.push({ decision: 'deny', rule: 'input:deceptive', risk: 'high', reason: `${call.tool}: the ${arg} argument ${dec}` }); continue; }
    verdicts.push(...checkPath(policy, literalWord(v.startsWith('~') ? policy.home + v.slice(1) : v), access, [policy.workspace], call.tool));
    // write_file replaces the whole file: it is the run's own writing from then on (edit_file changes part of it: not)
    if (access === 'write') (call.tool === 'write_file' ? adds.written : (adds.clobbered ??= [])).push(resolveIn(policy.workspace, v.startsWith('~') ? policy.home + v.slice(1) : v, policy.workspace).abs);
  }
  if (entry.patch) verdicts.push(...evaluatePatch(policy, call.tool, call.args[entry.patch], entry.patch));
  if (entry.shell_list) verdicts.push(...evaluateShellList(policy, call.tool, call.args[entry.shell_list], entry.shell_list));
  if (entry.shell) {
    const command = call.args[entry.shell];
    if (typeof command !== 'string' || command.trim() === '') {
      verdicts.push({ decision: 'deny', rule: 'shell:empty', reason: `${call.tool}: the ${entry.shell} argument must be a non-empty string` });
    } else {
      const dec = deceptiveReason(command.replace(/\r(?=\n)/g, ''));
      if (dec) verdicts.push({ decision: 'deny', rule: 'input:deceptive', risk: 'high', reason: `${call.tool}: the command ${dec}` });
      else verdicts.push(...evaluateShell(policy, command, { history, adds }));
    }
  }
  const combined = combine(verdicts, { decision: 'ask', rule: 'none:nothing', reason: 'no rule matched' });
  const r = entry.network || verdicts.some((v) => v.effect !== undefined && NETWORK_EFFECTS.has(v.effect)) ? { ...combined, network: true } : combined;
  const clobbered = [...new Set(adds.clobbered ?? [])].slice(0, MAX_ADDS);
  const bounded = { written: [...new Set(adds.written)].filter((p) => !clobbered.includes(p)).slice(0, MAX_ADDS), links: adds.links.slice(0, MAX_ADDS), ...(clobbered.length ? { clobbered } : {}) };
  return bounded.written.length || bounded.links.length || clobbered.length ? { ...r, adds: bounded } : r;
}

/** Commands run later for the model (delegate's done checks): each judged like a bash call; none is no command. */
function evaluateShellList(policy: Policy, tool: string, list: unknown, arg: string): Verdict[] {
  if (list === undefined) return [];
  if (!Array.isArray(list) || list.some((c) => typeof c !== 'string')) return [{ decision: 'deny', rule: 'shell:invalid-list', reason: `${tool}: the ${arg} argument must be a list of commands` }];
  const out: Verdict[] = [];
  for (const [i, command] of (list as string[]).entries()) {
    if (command.trim() === '') { out.push({ decision: 'deny', rule: 'shell:empty', reason: `${tool}: ${arg}[${i}] is empty` }); continue; }
    const dec = deceptiveReason(command.replace(/\r(?=\n)/g, ''));
    if (dec) { out.push({ decision: 'deny', rule: 'input:deceptive', risk: 'high', reason: `${tool}: ${arg}[${i}] ${dec}` }); continue; }
    out.push(...evaluateShell(policy, command).map((v) => (v.decision === 'allow' ? v : { ...v, reason: `${arg}[${i}] (run later in the sub-run's sandbox): ${v.reason}` })));
  }
  return out;
}

/** A unified diff's files are write paths: each name its headers could mean is checked like write_file's path. */
function evaluatePatch(policy: Policy, tool: string, patch: unknown, arg: string): Verdict[] {
  if (typeof patch !== 'string' || patch.trim() === '') {
    return [{ decision: 'deny', rule: 'patch:empty', reason: `${tool}: the ${arg} argument must be a non-empty unified diff` }];
  }
  const paths = patchPaths(patch);
  if (paths.length === 0) return [{ decision: 'deny', rule: 'patch:no-files', reason: `${tool}: the patch names no files (no "--- old" / "+++ new" headers)` }];
  return paths.flatMap((p) => checkPath(policy, literalWord(p.startsWith('~') ? policy.home + p.slice(1) : p), 'write', [policy.workspace], tool));
}

export function analyze(policy: Policy, command: string): ShellAnalysis {
  return analyzeShell(command, { home: policy.home, workspace: policy.workspace, maxCommands: policy.limits.max_commands, maxLength: policy.limits.max_length });
}

/** Commands that put content the agent chose into files (compilers and build tools write derived files, which do not count). */
const CONTENT_WRITERS = new Set(['npm', 'split', 'csplit', 'tee', 'cp', 'mv', 'ln', 'install', 'sed', 'gsed', 'awk', 'gawk', 'mawk', 'nawk', 'dd', 'patch', 'curl', 'wget', 'tar', 'unzip', 'git', 'printf', 'echo', 'xxd', 'base64', 'uniq', 'sort', 'iconv']);

/** Files that cannot carry code a later command runs (writing them first is not "write then run"). */
const DATA_FILE = /\.(txt|md|log|csv|tsv|out|err|rst|html?|xml|svg|png|jpe?g|gif|diff|patch|orig|bak)$/i;

export interface ShellOptions {
  /** false: the literal re-read on an ask (hiddenDenials) is off — used by that re-read itself. */
  amplify?: boolean;
  /** What the run's earlier calls wrote and linked. */
  history?: CallHistory;
  /** Filled with what this command writes (literal paths) and links. */
  adds?: CallHistory;
}

export function evaluateShell(policy: Policy, command: string, o: ShellOptions = {}): Verdict[] {
  const amplify = o.amplify ?? true;
  const a = analyze(policy, command);
  const verdicts: Verdict[] = a.findings.map((f) => ({ ...f, risk: f.decision === 'deny' ? 'high' : 'medium' }));
  for (const p of policy.bash.patterns) {
    if (policy.compiled.patterns.get(p.name)?.test(command)) verdicts.push({ decision: p.decision, rule: p.name, reason: p.reason });
  }
  for (const name of a.functions) {
    if (findSpec(name) || policy.bash.commands.some((r) => r.commands.includes(name)) || name.includes('/') || name === '[') {
      verdicts.push({ decision: 'deny', rule: 'shell:function-shadows-command', risk: 'high', reason: `defines a function named "${name}", which hides the command of that name` });
    }
  }
  const written: Array<{ seq: number; word: ShellWord }> = [];
  const links: MadeLink[] = [...(o.history?.links ?? [])];
  const madeHere: MadeLink[] = [];
  // files this run replaced as a whole (earlier calls, then this one as it goes): deleting one loses nothing the run did not write
  const scratch = new Set(o.history?.written ?? []);
  const marks = { scratch: [] as string[], clobbered: [] as string[] };
  const flags = { code: false };
  for (const c of a.commands) {
    const ctx: CommandContext = { written, seq: c.seq, scratch, marks, flags };
    if (c.speculative) { verdicts.push(...evaluateCommand(policy, c, { written: [], seq: c.seq, scratch: new Set() }, 0).filter((v) => v.decision === 'deny').map((v) => ({ ...v, reason: `if the computed command is ${c.argv[0]!.value}: ${v.reason}` }))); continue; }
    const head = c.argv[0];
    // a call of a function this command defined: its body was judged at the call, with these arguments
    if (head && !head.dynamic && a.functions.has(head.value) && !findSpec(head.value)) verdicts.push({ decision: 'allow', rule: 'shell:function-call', risk: 'low', reason: `calls the function ${head.value} defined here` });
    else verdicts.push(...evaluateCommand(policy, c, ctx, 0));
    for (const r of c.redirects) {
      const truncatesMany = r.op === '>' && r.target.dynamic && (r.target.confined || r.target.alternatives || r.target.candidates);
      verdicts.push(...checkPath(policy, r.target, truncatesMany ? 'delete' : r.access, c.cwds, `redirection ${r.op}`));
      if (r.access === 'write' && (r.target.dynamic || !/^\/dev\/(null|stdout|stderr|fd\/[0-2])$/.test(r.target.value))) written.push({ seq: c.seq, word: r.target });
      const abs = r.access === 'write' ? knownPath(policy, r.target, c.cwds) : undefined;
      if (abs && !abs.startsWith('/dev/')) (['>', '>|', '&>'].includes(r.op) ? marks.scratch : marks.clobbered).push(abs);
    }
    for (const p of marks.clobbered) scratch.delete(p);
    for (const p of marks.scratch) scratch.add(p);
    // paths through a link this call made earlier are judged again where the link points
    const through = throughLinks(policy, c, links);
    if (through.problem) verdicts.push({ decision: 'ask', rule: 'path:through-link', risk: 'medium', reason: through.problem });
    if (through.command) {
      const tc = through.command;
      const again = [...evaluateCommand(policy, tc, { written: [], seq: c.seq, scratch: new Set() }, 0), ...tc.redirects.flatMap((r) => checkPath(policy, r.target, r.access, tc.cwds, `redirection ${r.op}`))];
      verdicts.push(...again.filter((v) => v.decision !== 'allow').map((v) => ({ ...v, reason: `${v.reason} (through a link made earlier in this call)` })));
    }
    const made = linksMadeBy(policy, c);
    links.push(...made);
    madeHere.push(...made);
  }
  if (o.adds) {
    // a link whose name is computed cannot be followed later: it is not kept (within this call it asks)
    o.adds.links.push(...madeHere.filter((l) => l.name !== ''));
    // written as a whole and not replaced by something else later in the call
    for (const p of marks.scratch) if (!marks.clobbered.includes(p) && !o.adds.written.includes(p)) o.adds.written.push(p);
    (o.adds.clobbered ??= []).push(...marks.clobbered);
  }
  if (a.commands.length === 0 && verdicts.length === 0) verdicts.push({ decision: 'ask', rule: 'none:empty', reason: 'the command runs nothing the analyser can see' });
  // literals are read for what they may become when something asks, and always when the call runs code it carries
  if (amplify && (flags.code || verdicts.some((v) => v.decision === 'ask')) && !verdicts.some((v) => v.decision === 'deny')) {
    verdicts.push(...hiddenDenials(policy, a.literals, (frag) => evaluateShell(policy, frag, { amplify: false })));
  }
  if (flags.code) verdicts.push(...codeEffects(policy, a.literals, (effect, why) => effectVerdicts(policy, effect, why)));
  return verdicts;
}

interface CommandContext {
  written: Array<{ seq: number; word: ShellWord }>;
  seq: number;
  /** Files the run wrote as a whole (earlier calls and this one so far), absolute. */
  scratch: ReadonlySet<string>;
  /** Collects files this command writes as a whole (scratch) and files it changes otherwise (clobbered: moved, copied or linked onto). */
  marks?: { scratch: string[]; clobbered: string[] };
  /** Set when the command runs code the call itself carries (inline code, a file written earlier in it): its literals are scanned. */
  flags?: { code: boolean };
}

/** The absolute path a literal word names, when the directory it is resolved from is known. */
function knownPath(policy: Policy, w: ShellWord, cwds: string[] | null): string | undefined {
  if (w.dynamic || w.glob || !w.value) return undefined;
  const v = w.value.startsWith('~') ? policy.home + w.value.slice(1) : w.value;
  if (!v.startsWith('/') && (!cwds || cwds.length !== 1)) return undefined;
  return resolveIn(policy.workspace, v, cwds?.[0] ?? policy.workspace).abs;
}

function envMatches(policy: Policy, rule: EnvRule, name: string, value: ShellWord | null): boolean {
  if (rule.except.includes(name) || !rule.names.some((g) => globToRegExp(g).test(name))) return false;
  const unless = policy.compiled.envValues.get(rule.name);
  if (unless && value && !value.dynamic && unless.test(value.value)) return false;
  return true;
}

function envVerdicts(policy: Policy, label: string, assigns: Array<{ name: string; value: ShellWord | null }>): Verdict[] {
  const out: Verdict[] = [];
  for (const as of assigns) {
    for (const r of policy.bash.env) if (envMatches(policy, r, as.name, as.value)) out.push({ decision: r.decision, rule: r.name, risk: r.decision === 'deny' ? 'high' : 'medium', reason: `${label}: setting ${as.name} — ${r.reason}` });
  }
  return out;
}

const MAX_INNER_DEPTH = 4;
const LINE_READERS = new Set(['read', 'mapfile', 'readarray']);
const HELP = /^(-h|--help|-help|help|-V|--version|-version|version|-v)$/;

export function evaluateCommand(policy: Policy, c: SimpleCommand, ctx: CommandContext, depth: number): Verdict[] {
  const out: Verdict[] = [];
  const label = c.argv.length ? commandName(c.argv[0]!) : 'assignment';
  // `IFS=… read` / `mapfile`: the separator only changes how that builtin splits its input line.
  const scopedIfs = c.argv.length > 0 && !c.argv[0]!.dynamic && LINE_READERS.has(c.argv[0]!.value);
  out.push(...envVerdicts(policy, label, scopedIfs ? c.assigns.filter((a) => a.name !== 'IFS') : c.assigns));
  if (c.argv.length === 0) {
    // variables set for this shell only (x=1, i=$((i+1)), export NAME=…): judged by the env rules above
    if (!out.some((v) => v.decision !== 'allow')) out.push({ decision: 'allow', rule: 'shell:variables', risk: 'low', reason: 'sets shell variables' });
    return out;
  }
  for (const w of c.wrapperEffects) out.push(...effectVerdicts(policy, w.effect, w.why));
  const head = c.argv[0]!;
  if (head.dynamic || head.glob) {
    // already a finding (the name is computed); what it is handed is still checked
    for (const a of c.argv.slice(1)) if (!a.dynamic) out.push(...scanArgument(policy, a.value, c.cwds, 'a computed command'));
    return out;
  }
  const args = c.dynamicTail ? [...c.argv.slice(1), c.tail ?? DYNAMIC_WORD] : c.argv.slice(1);
  const rules = policy.bash.commands.filter((r) => r.commands.some((n) => (n.includes('/') || n.includes('*') ? globToRegExp(n).test(head.value) : n === label)));
  for (const r of rules) out.push({ decision: r.decision, rule: r.name, risk: r.risk, reason: `${label}: ${r.reason}` });
  out.push(...envVerdicts(policy, label, variablesSetBy(c).map((name) => ({ name, value: null }))));
  const sub = evaluatedSubscript(c);
  if (sub) out.push({ decision: 'ask', rule: 'shell:subscript', risk: 'medium', reason: `${label}: the subscript in "${sub.slice(0, 80)}" is evaluated by bash, and an expansion in it runs` });
  const spec = findSpec(label);
  if (spec && args.length > 0 && args.every((a) => !a.dynamic && HELP.test(a.value)) && !label.includes('/')) return out; // --help / --version only
  const use: CommandUse | undefined = spec
    ? spec.use(args, label, new Map(c.assigns.map((a) => [a.name, a.value])))
    : label.includes('/') ? { label, problems: [], paths: [{ word: head, access: 'exec', what: `${label} runs a program` }], effects: [], runsProjectCode: true, inner: [], readOnly: false } : undefined;
  if (rules.length === 0) out.push({ decision: 'ask', rule: 'none:command', reason: `no rule allows "${label}"${c.wrappers.length ? ` (inside ${c.wrappers.join(', ')})` : ''}` });
  if (!use) {
    if (rules.some((r) => r.decision === 'allow')) out.push({ decision: 'ask', rule: 'shell:not-modelled', risk: 'medium', reason: `${label}: its arguments are not modelled, so it cannot be allowed without review` });
    for (const a of args) if (!a.dynamic) out.push(...scanArgument(policy, a.value, c.cwds, label));
    return out;
  }
  // `find … | xargs rm`: a file named `x src y.pyc` makes xargs pass `src`; reading a piece is reading some file, changing one is not what was meant
  if (c.splitsNames && !use.readOnly) out.push({ decision: 'ask', rule: 'shell:xargs-splits-names', risk: 'high', reason: `${label}: xargs without -0 splits the names it is given on blanks and newlines, so a name with a blank becomes other paths (use find -print0 | xargs -0, or find -exec … {} +)` });
  for (const p of use.problems) out.push({ decision: 'ask', rule: 'shell:not-understood', risk: 'medium', reason: p.startsWith(`${use.label}`) || p.startsWith(`${use.label.split(' ')[0]}`) ? p : `${use.label}: ${p}` });
  const ownScratch = deletesOnlyOwnScratch(policy, label, args, use, c, ctx.scratch);
  if (ctx.flags && use.effects.some((e) => e.effect === 'exec-code-arg')) ctx.flags.code = true;
  for (const e of use.effects) {
    if (e.effect === 'delete' && ownScratch) { out.push({ decision: 'allow', rule: 'shell:own-scratch', risk: 'low', reason: `${label} deletes only files this run wrote (${ownScratch})` }); continue; }
    out.push(...effectVerdicts(policy, e.effect, e.why));
  }
  if (ctx.marks) {
    for (const p of use.paths) {
      if (p.access !== 'write' && p.access !== 'link') continue;
      const abs = knownPath(policy, p.word, c.cwds);
      if (abs) (label === 'tee' && !args.some((a) => !a.dynamic && /^(-[a-zA-Z]*a[a-zA-Z]*|--append)$/.test(a.value)) ? ctx.marks.scratch : ctx.marks.clobbered).push(abs);
    }
  }
  if (use.env) out.push(...envVerdicts(policy, use.label, use.env));
  for (const p of use.paths) out.push(...pathVerdicts(policy, p, c));
  if (use.runsProjectCode) {
    const wtr = writeThenRun(policy, use, ctx, label);
    if (wtr.length && ctx.flags) ctx.flags.code = true;
    out.push(...wtr);
    out.push(...passedPaths(policy, use, args, c));
  }
  if (CONTENT_WRITERS.has(label)) for (const p of use.paths) if (p.access === 'write' || p.access === 'link') ctx.written.push({ seq: ctx.seq, word: p.word });
  // a word the spec models as a path it writes or deletes was checked above with that access (`cp .env.example .env`
  // writes .env, it does not read it); every other word is scanned for paths that are off limits wherever they appear
  const checkedAsWrite = new Set(use.paths.filter((p) => ['write', 'delete', 'clear'].includes(p.access) && !p.base).map((p) => p.word));
  for (const a of args) if (!a.dynamic && !checkedAsWrite.has(a)) out.push(...scanArgument(policy, a.value, c.cwds, label));
  for (const inner of use.inner) {
    if (depth >= MAX_INNER_DEPTH) { out.push({ decision: 'ask', rule: 'shell:nesting', reason: `${label}: runs commands nested too deeply to follow` }); continue; }
    // the command it runs may itself be a wrapper or a shell with a script (git bisect run sh -c '…')
    const un = unwrapCommand(inner);
    for (const f of un.findings) out.push({ ...f, risk: f.decision === 'deny' ? 'high' : 'medium' });
    for (const s of un.scripts) {
      if (s.word.dynamic) out.push({ decision: 'ask', rule: 'shell:dynamic-script', reason: `${label}: ${s.via} runs a string computed at run time` });
      else out.push(...evaluateShell(policy, s.word.value, { amplify: false }));
    }
    if (un.stdinScript) out.push({ decision: 'ask', rule: 'shell:stdin-shell', reason: `${label}: runs a shell that reads commands from standard input` });
    for (const u of un.commands) out.push(...evaluateCommand(policy, { ...c, argv: u.argv, assigns: [...c.assigns, ...u.assigns], wrappers: [...c.wrappers, label, ...u.wrappers], wrapperEffects: u.effects }, ctx, depth + 1));
  }
  return out;
}

/**
 * `rm FILE…` / `unlink FILE` whose every operand is a file this run wrote as a whole earlier (its
 * history, or this call before it), or scratch anyway: the deletion loses nothing the run's own
 * earlier, allowed write had not already replaced. Not recursive (a directory may hold the project's
 * files), literal names only, no `..`. Returns the names, or undefined.
 */
function deletesOnlyOwnScratch(policy: Policy, label: string, args: ShellWord[], use: CommandUse, c: SimpleCommand, scratch: ReadonlySet<string>): string | undefined {
  if ((label !== 'rm' && label !== 'unlink') || scratch.size === 0) return undefined;
  if (args.some((a) => a.dynamic || (a.value.startsWith('-') && a.value !== '--' && !/^(-[fv]+|--force|--verbose)$/.test(a.value)))) return undefined;
  const ops = use.paths.filter((p) => p.access === 'delete');
  if (ops.length === 0) return undefined;
  const own: string[] = [];
  for (const p of ops) {
    if (p.word.dynamic || p.word.glob || p.word.value.split('/').includes('..') || p.word.value.endsWith('/')) return undefined;
    const abs = knownPath(policy, p.word, c.cwds);
    if (abs && scratch.has(abs)) { own.push(p.word.value); continue; }
    if (!cheapDelete(p.word, false)) return undefined;
  }
  return own.length ? own.slice(0, 5).join(', ') + (own.length > 5 ? ', …' : '') : undefined;
}

function effectVerdicts(policy: Policy, effect: string, why: string): Verdict[] {
  const rules = policy.bash.effects.filter((r) => (r.effects as string[]).includes(effect));
  if (rules.length === 0) return [{ decision: 'ask', rule: 'none:effect', risk: 'medium', reason: `${why} (no rule decides "${effect}")`, effect }];
  return rules.map((r) => ({ decision: r.decision, rule: r.name, risk: r.risk, reason: `${why}; ${r.reason}`, effect }));
}

function pathVerdicts(policy: Policy, p: PathUse, c: SimpleCommand): Verdict[] {
  const word = p.word === c.placeholder || (c.placeholder && p.word.pattern === c.placeholder.pattern && p.word.dynamic) ? c.placeholder! : p.word;
  const out = checkPath(policy, word, p.access, c.cwds, p.what, p.base);
  for (const cand of word.candidates ?? []) {
    for (const v of checkPath(policy, cand, p.access, c.cwds, p.what, p.base)) if (v.decision === 'deny') out.push({ ...v, reason: `${v.reason} (a value it may take)` });
  }
  return out;
}

/** Options by which test runners, bundlers and linters load code or configuration that names code. */
const LOADS_CODE = /^--?(r|c|p|require|import|loader|experimental-loader|preload|config|config-file|configfile|rcfile|setup-?files?|setup-?files-after-env|global-?setup|global-?teardown|test-?environment|transform|resolver|reporters?|watch-?plugins|plugins?|load-plugins|rootdir|root-?dir|confcutdir|conftest|env-file|init-file|pre|post|hooks?|pythonpath|settings|conf-?dir)$/i;

/**
 * Project code receives its arguments as data the gate cannot interpret; one that names a path
 * outside the workspace or a protected one may be where the program writes, so it asks. A value of an
 * option by which such tools load code (`--require /tmp/x.js`, `--setupFiles`, `-c /tmp/pytest.ini`)
 * is judged as a program run from there.
 */
function passedPaths(policy: Policy, use: CommandUse, args: ShellWord[], c: SimpleCommand): Verdict[] {
  const seen = new Set(use.paths.filter((p) => p.access === 'exec').map((p) => p.word));
  const out: Verdict[] = [];
  args.forEach((a, i) => {
    if (a.dynamic || !a.value.startsWith('-')) return;
    const eq = a.value.indexOf('=');
    const name = eq > 0 ? a.value.slice(0, eq) : a.value;
    if (!LOADS_CODE.test(name)) return;
    const value = eq > 0 ? literalWord(a.value.slice(eq + 1)) : args[i + 1];
    if (!value || value.dynamic || seen.has(value) || !/^[/~]|(^|\/)\.\.(\/|$)/.test(value.value)) return;
    for (const v of checkPath(policy, literalWord(value.value.startsWith('~') ? policy.home + value.value.slice(1) : value.value), 'exec', c.cwds, `${use.label} ${name} loads`)) {
      if (v.decision !== 'allow') out.push({ ...v, reason: `${v.reason} (code or configuration the program loads)` });
    }
  });
  return [...out, ...writtenPaths(policy, use, args, c)];
}

function writtenPaths(policy: Policy, use: CommandUse, args: ShellWord[], c: SimpleCommand): Verdict[] {
  const seen = new Set(use.paths.map((p) => p.word));
  const out: Verdict[] = [];
  for (const a of args) {
    if (seen.has(a) || a.dynamic) continue;
    for (const v of [a.value, a.value.slice(a.value.indexOf('=') + 1)]) {
      if (!/^[/~]|(^|\/)\.\.(\/|$)|^\.[a-z]/i.test(v) || /^\/dev\/(null|std(in|out|err))$/.test(v)) continue;
      for (const x of checkPath(policy, literalWord(v.startsWith('~') ? policy.home + v.slice(1) : v), 'write', c.cwds, `${use.label} is given`)) {
        out.push({ ...x, decision: 'ask', rule: 'path:passed-to-program', reason: `${x.reason} (as an argument it may write)` });
      }
      break;
    }
  }
  return out;
}

/** Running project code after writing a file in the same call: allowed, and marks the call's literals for the scan. */
function writeThenRun(policy: Policy, use: CommandUse, ctx: CommandContext, label: string): Verdict[] {
  const earlier = ctx.written.filter((w) => w.seq < ctx.seq || w.seq === ctx.seq);
  if (earlier.length === 0) return [];
  const exec = use.paths.filter((p) => p.access === 'exec').map((p) => p.word);
  // `./notes.md`, `notes.md` and `/workspace/notes.md` are one file (a cd between them is not followed here: both spellings count)
  const same = (a: string, b: string) => a === b || posix.resolve(policy.workspace, a) === posix.resolve(policy.workspace, b);
  const hit = earlier.find((w) => w.word.dynamic || !DATA_FILE.test(w.word.value) || exec.some((e) => e.dynamic || same(e.value, w.word.value)));
  if (!hit) return [];
  // Code written in this call is no less seen than code written in the call before (which runs as
  // project code): it runs, and what the call carries (a here-doc, echoed text) is scanned for what the
  // policy denies; its effects at the exits are checked after the call.
  return [{ decision: 'allow', rule: 'shell:write-then-run', risk: 'medium', reason: `${label} runs project code this call wrote (${hit.word.dynamic ? 'a computed path' : `"${hit.word.value}"`}); what the call carries was scanned and its effects are checked at the exits` }];
}

/** Used by the rule examples: does a command rule fire on some simple command of `example`? */
export function commandRuleFiresOn(policy: Policy, names: string[], example: string): { fires: boolean; error?: string } {
  const a = analyze(policy, example);
  const bad = a.findings.find((f) => f.rule === 'shell:parse-error');
  if (bad) return { fires: false, error: bad.reason };
  return { fires: allCommands(a).some((c) => c.argv[0] && names.some((n) => (n.includes('/') || n.includes('*') ? globToRegExp(n).test(c.argv[0]!.value) : n === commandName(c.argv[0]!)))) };
}

/** Used by the rule examples: does `example` have `effect`? */
export function effectFiresOn(policy: Policy, effects: string[], example: string): { fires: boolean; error?: string } {
  const a = analyze(policy, example);
  const bad = a.findings.find((f) => f.rule === 'shell:parse-error');
  if (bad) return { fires: false, error: bad.reason };
  return { fires: a.commands.some((c) => c.wrapperEffects.some((w) => effects.includes(w.effect)) || usesOf(c).some((u) => u.effects.some((e) => effects.includes(e.effect)))) };
}

function usesOf(c: SimpleCommand, depth = 0): CommandUse[] {
  if (!c.argv.length || c.argv[0]!.dynamic) return [];
  const spec = findSpec(commandName(c.argv[0]!));
  if (!spec) return [];
  const u = spec.use(c.argv.slice(1), commandName(c.argv[0]!));
  return [u, ...(depth < MAX_INNER_DEPTH ? u.inner.flatMap((argv) => usesOf({ ...c, argv }, depth + 1)) : [])];
}

function allCommands(a: ShellAnalysis): SimpleCommand[] {
  return a.commands.flatMap((c) => [c, ...usesOf(c).flatMap((u) => u.inner.map((argv) => ({ ...c, argv })))]);
}

export function envRuleFiresOn(policy: Policy, rule: EnvRule, example: string): boolean {
  const a = analyze(policy, example);
  return a.commands.some((c) => c.assigns.some((as) => envMatches(policy, rule, as.name, as.value)) || variablesSetBy(c).some((n) => envMatches(policy, rule, n, null)));
}

/** Variables a builtin sets from its input (`read PATH`, `printf -v PATH`, `mapfile`, `getopts`), checked like assignments. */
export function variablesSetBy(c: SimpleCommand): string[] {
  const head = c.argv[0] ? commandName(c.argv[0]) : '';
  const args = c.argv.slice(1).filter((a) => !a.dynamic).map((a) => a.value);
  const base = (a: string) => a.replace(/\[.*$/s, '');
  if (head === 'read' || head === 'mapfile' || head === 'readarray') {
    const valued = head === 'read' ? /^-[a-zA-Z]*[adinNpt]$/ : /^-[a-zA-Z]*[dnOsuCc]$/;
    const names: string[] = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (head === 'read' && /^-[a-zA-Z]*a./.test(a)) { names.push(base(a.slice(a.indexOf('a') + 1))); continue; } // read -aNAME
      if (valued.test(a)) { if (head === 'read' && a.endsWith('a') && args[i + 1]) names.push(base(args[i + 1]!)); i++; continue; }
      if (a.startsWith('-')) continue;
      names.push(base(a));
    }
    return names.filter((a) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(a));
  }
  if (head === 'getopts') return args.slice(1, 2).map(base);
  if (head === 'printf') {
    const i = args.findIndex((a) => a.startsWith('-v'));
    if (i < 0) return [];
    return [base(args[i] === '-v' ? (args[i + 1] ?? '') : args[i]!.slice(2))].filter(Boolean);
  }
  return [];
}

/** Builtins that take variable names: a subscript with an expansion in it (`a[$(cmd)]`) is evaluated by bash. */
export function evaluatedSubscript(c: SimpleCommand): string | undefined {
  const head = c.argv[0] ? commandName(c.argv[0]) : '';
  if (!NAME_TAKING.has(head)) return undefined;
  for (const a of c.argv.slice(1)) {
    if (a.dynamic) continue;
    const k = a.value.indexOf('[');
    if (k >= 0 && /[$`]/.test(a.value.slice(k))) return a.value;
  }
  return undefined;
}
const NAME_TAKING = new Set(['unset', 'printf', 'read', 'getopts', 'mapfile', 'readarray', 'declare', 'typeset', 'local', 'export', 'readonly', 'let', 'test', '[', 'wait', 'eval']);
