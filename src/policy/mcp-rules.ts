/**
 * The gate's static decision on an MCP tool call (`mcp__{server}__{tool}`): the policy's `mcp.rules`
 * that fire on it, and the environment's default for the server's tool (McpCallContext.defaults),
 * strictest wins (deny > ask > allow); a call that neither names asks. What the server says about its
 * tool (its description, its schema) plays no part: a rule names servers and tools, and conditions on
 * the arguments select values with a JSON path and match them with globs.
 *
 * The JSON-path dialect is a small closed subset, parsed here (the JSONPath libraries evaluate filter
 * expressions, which a policy does not need and an attacker-influenced value should never reach):
 *   `$` the arguments; `.name` or `['name']` a member; `[N]` an element; `.*` or `[*]` every member or
 *   element; `..name` / `..*` the same at any depth below.
 * Globs are the policy's dialect (path-glob.ts) run on RE2 (re2js), so a value the model wrote is
 * matched in linear time whatever the glob; with `paths` they compare case-blind, and server and tool
 * names always do.
 */
import { posix } from 'node:path';
import { RE2JS } from 're2js';
import type { Decision, RiskLevel } from '../domain/gate';
import { findIllFormed } from '../domain/tool-input';
import { parseMcpToolName, type McpCallContext } from '../domain/mcp';
import { globToRegExp } from './path-glob';
import { absRuleGlob } from './path-check';
import type { McpRule, Policy } from './policy-schema';
import type { StaticResult } from './evaluate-static';

type Segment = { deep: boolean; key: string | number | '*' };

export interface CompiledMcpRule {
  servers: RE2JS[];
  tools: RE2JS[];
  args: Array<{ path: Segment[]; globs: RE2JS[] }>;
  anyArg: Array<{ path: Segment[]; globs: RE2JS[] }>;
}

/** At most this many values are visited per JSON path and call (arguments are bounded anyway). */
const MAX_VISITS = 10_000;
const ORDER: Record<Decision, number> = { allow: 0, ask: 1, deny: 2 };
const RISK: Record<RiskLevel, number> = { low: 0, medium: 1, high: 2, critical: 3 };

/** Parses a JSON path of the subset above; throws an Error saying what is wrong. */
export function parseJsonPath(text: string): Segment[] {
  if (!text.startsWith('$')) throw new Error(`JSON path ${JSON.stringify(text)} must start with $`);
  const out: Segment[] = [];
  let i = 1;
  const name = /^[A-Za-z_][A-Za-z0-9_-]*/;
  while (i < text.length) {
    let deep = false;
    if (text.startsWith('..', i)) { deep = true; i += 2; } else if (text[i] === '.') i += 1;
    else if (text[i] !== '[') throw new Error(`JSON path ${JSON.stringify(text)}: unexpected ${JSON.stringify(text[i])} at ${i}`);
    if (text[i] === '*') { out.push({ deep, key: '*' }); i += 1; continue; }
    if (text[i] === '[') {
      const end = text.indexOf(']', i);
      if (end < 0) throw new Error(`JSON path ${JSON.stringify(text)}: "[" without "]"`);
      const inner = text.slice(i + 1, end);
      i = end + 1;
      if (inner === '*') out.push({ deep, key: '*' });
      else if (/^[0-9]{1,6}$/.test(inner)) out.push({ deep, key: Number(inner) });
      else if (/^'[^'\\]*'$|^"[^"\\]*"$/.test(inner)) out.push({ deep, key: inner.slice(1, -1) });
      else throw new Error(`JSON path ${JSON.stringify(text)}: [${inner}] is not an index, * or a quoted name (filters are not supported)`);
      continue;
    }
    const m = name.exec(text.slice(i));
    if (!m) throw new Error(`JSON path ${JSON.stringify(text)}: a name, * or [...] must follow "." at ${i}`);
    out.push({ deep, key: m[0] });
    i += m[0].length;
  }
  return out;
}

/** The values a path selects (objects and arrays included); bounded by MAX_VISITS. */
export function selectValues(root: unknown, path: readonly Segment[]): unknown[] {
  let current: unknown[] = [root];
  let visits = 0;
  const children = (v: unknown): unknown[] => (Array.isArray(v) ? v : v !== null && typeof v === 'object' ? Object.values(v) : []);
  for (const seg of path) {
    const next: unknown[] = [];
    const take = (v: unknown) => {
      if (seg.key === '*') next.push(...children(v));
      else if (typeof seg.key === 'number') { if (Array.isArray(v) && seg.key < v.length) next.push(v[seg.key]); }
      else if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.hasOwn(v, seg.key)) next.push((v as Record<string, unknown>)[seg.key]);
    };
    for (const v of current) {
      if (!seg.deep) { take(v); continue; }
      // every node at or below v (depth-first, bounded)
      const stack = [v];
      while (stack.length) {
        if (++visits > MAX_VISITS) break;
        const n = stack.pop();
        take(n);
        stack.push(...children(n));
      }
    }
    visits += next.length;
    if (visits > MAX_VISITS) return next.slice(0, MAX_VISITS);
    current = next;
  }
  return current;
}

function re2(glob: string, caseless = false): RE2JS {
  return RE2JS.compile(`(?s)${globToRegExp(glob).source}`, caseless ? RE2JS.CASE_INSENSITIVE : 0);
}

/** Compiles a rule's name globs, paths and value globs; throws an Error naming what is wrong. */
export function compileMcpRule(policy: Pick<Policy, 'workspace' | 'home'>, rule: McpRule): CompiledMcpRule {
  // paths compare case-blind, as the protected set does (`.GIT/hooks` is git's on a case-insensitive checkout)
  const valueGlob = (g: string) => (rule.paths ? re2(absRuleGlob(policy as Policy, g), true) : re2(g));
  const conds = (c: Record<string, string | string[]>) => Object.entries(c).map(([path, globs]) => ({ path: parseJsonPath(path), globs: (Array.isArray(globs) ? globs : [globs]).map(valueGlob) }));
  // tool names compare case-blind: a server's `WriteFile` is the `*write*` a rule names
  return { servers: rule.servers.map((g) => re2(g, true)), tools: rule.tools.map((g) => re2(g, true)), args: conds(rule.args), anyArg: conds(rule.any_arg) };
}

/** A selected value as the globs see it: a string (as a path with `paths`), a scalar's JSON text; objects and arrays match nothing. */
function valueText(policy: Pick<Policy, 'workspace' | 'home'>, v: unknown, paths: boolean): string | null {
  if (typeof v === 'string') return paths ? asPath(policy, v) : v;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return JSON.stringify(v);
  return null;
}

/** A string read as a path: `file://` URLs unwrapped, `~` the home, relative to the workspace, `.`/`..`/`//` folded. */
export function asPath(policy: Pick<Policy, 'workspace' | 'home'>, s: string): string {
  let p = s;
  if (/^file:\/\//i.test(p)) {
    try { p = decodeURIComponent(new URL(p).pathname); } catch { /* kept as written */ }
  }
  if (p === '~' || p.startsWith('~/')) p = policy.home + p.slice(1);
  if (!p.startsWith('/')) p = `${policy.workspace}/${p}`;
  const n = posix.normalize(p);
  return n.length > 1 ? n.replace(/\/+$/, '') : n;
}

/** Whether a rule fires on a call of `tool` of `server` with `args`. */
export function mcpRuleFires(policy: Pick<Policy, 'workspace' | 'home'>, rule: McpRule, c: CompiledMcpRule, server: string, tool: string, args: Record<string, unknown>): boolean {
  if (!c.servers.some((r) => r.matches(server)) || !c.tools.some((r) => r.matches(tool))) return false;
  for (const cond of c.args) {
    const values = selectValues(args, cond.path);
    if (values.length === 0) return false;
    for (const v of values) {
      const t = valueText(policy, v, rule.paths);
      if (t === null || !cond.globs.some((g) => g.matches(t))) return false;
    }
  }
  if (c.anyArg.length) {
    return c.anyArg.some((cond) => selectValues(args, cond.path).some((v) => {
      const t = valueText(policy, v, rule.paths);
      return t !== null && cond.globs.some((g) => g.matches(t));
    }));
  }
  return true;
}

/** The environment's default for a tool: an exact name first, else the first glob that matches. */
export function envDefault(defaults: McpCallContext['defaults'], tool: string): { tools: string; decision: Decision } | undefined {
  return defaults.find((d) => d.tools === tool) ?? defaults.find((d) => /[*?]/.test(d.tools) && re2(d.tools).matches(tool));
}

interface Found { decision: Decision; rule: string; reason: string; risk?: RiskLevel; network?: boolean }

/** The static decision on an MCP call; `mcp` carries the environment's defaults (absent: the policy's rules only). */
export function evaluateMcp(policy: Policy, call: { tool: string; args: Record<string, unknown> }, mcp?: McpCallContext): StaticResult {
  const name = parseMcpToolName(call.tool);
  if (!name) return { decision: 'deny', rule: 'mcp:name', risk: 'high', reason: `"${call.tool}" is not an MCP tool name (mcp__SERVER__TOOL)` };
  const { server, tool } = name;
  const bad = findIllFormed(call.args);
  if (bad) return { decision: 'deny', rule: 'input:ill-formed', risk: 'high', reason: `${call.tool}: ${bad.path} ${bad.reason}` };
  const found: Found[] = [];
  for (const rule of policy.mcp.rules) {
    const c = policy.compiled.mcp.get(rule.name);
    if (c && mcpRuleFires(policy, rule, c, server, tool, call.args)) {
      found.push({ decision: rule.decision, rule: rule.name, risk: rule.risk, reason: `MCP ${server} › ${tool}: ${rule.reason}`, ...(rule.network ? { network: true } : {}) });
    }
  }
  const d = mcp ? envDefault(mcp.defaults, tool) : undefined;
  if (d) found.push({ decision: d.decision, rule: `env:${server}:${d.tools}`, reason: `MCP ${server} › ${tool}: the environment's default for ${d.tools === tool ? 'this tool' : `the server's tools matching "${d.tools}"`} is ${d.decision}` });
  const network = mcp?.network === true || found.some((f) => f.network);
  if (found.length === 0) {
    return { decision: 'ask', rule: null, risk: 'medium', reason: `no rule of the policy and no default of the environment names the MCP tool ${tool} of the server ${server}`, ...(network ? { network } : {}) };
  }
  let best = found[0]!;
  for (const f of found) {
    if (ORDER[f.decision] > ORDER[best.decision] || (f.decision === best.decision && RISK[f.risk ?? 'low'] > RISK[best.risk ?? 'low'])) best = f;
  }
  return { decision: best.decision, rule: best.rule, reason: best.reason, ...(best.risk ? { risk: best.risk } : {}), ...(network ? { network } : {}) };
}
