/**
 * Loads policy files: YAML (with line numbers kept through the yaml Document/LineCounter API) →
 * zod validation → compiled matchers → every rule's `match`/`not_match` examples and every tool's
 * example calls checked. Any failure throws PolicyError naming `file:LINE rule "name"`, so a wrong
 * policy stops start-up.
 * `loadPolicies(dir)` loads every *.yaml in a directory, keyed by basename.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { LineCounter, parseDocument, type Document } from 'yaml';
import { lineOf } from '../domain/yaml-lines';
import { globToRegExp } from './path-glob';
import { pathRuleMatches } from './path-check';
import { PolicyError } from './policy-error';
import { PolicyFileSchema, type Policy } from './policy-schema';
import { commandRuleFiresOn, effectFiresOn, envRuleFiresOn, evaluateStatic } from './evaluate-static';
import { absRuleGlob } from './path-check';
import { ProtectedSet } from '../domain/protected-set';
import { compileMcpRule, mcpRuleFires } from './mcp-rules';


function where(file: string, line: number | undefined, rule?: string): string {
  return `${file}${line ? `:${line}` : ''}${rule ? ` rule "${rule}"` : ''}`;
}

export function loadPolicy(file: string): Policy {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new PolicyError(`${file}: cannot read (${(e as Error).message})`, file, undefined, undefined, { cause: e });
  }
  return parsePolicy(text, file);
}

export function parsePolicy(text: string, file: string): Policy {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const line = e.linePos?.[0]?.line ?? lc.linePos(e.pos[0]).line;
    throw new PolicyError(`${where(file, line)}: YAML: ${e.message.split('\n')[0]}`, file, undefined, line);
  }
  const parsed = PolicyFileSchema.safeParse(doc.toJS());
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const line = lineOf(doc, lc, issue.path);
    const ruleName = ruleAt(doc, issue.path);
    throw new PolicyError(`${where(file, line, ruleName)}: ${issue.path.map(String).join('.')}: ${issue.message}`, file, ruleName, line);
  }
  const data = parsed.data;
  const policy: Policy = {
    ...data,
    name: basename(file).replace(/\.ya?ml$/, ''),
    file,
    compiled: { pathGlobs: new Map(), pathExcepts: new Map(), patterns: new Map(), envValues: new Map(), protectedSet: ProtectedSet.withExtra(data.protected.rules), mcp: new Map() },
    lines: new Map(),
  };
  const fail = (section: string, idx: number, name: string, msg: string): never => {
    const line = lineOf(doc, lc, [...section.split('.'), idx]);
    throw new PolicyError(`${where(file, line, name)}: ${msg}`, file, name, line);
  };
  const seen = new Set<string>();
  const register = (section: string, idx: number, name: string) => {
    if (seen.has(name)) fail(section, idx, name, 'duplicate rule name');
    seen.add(name);
    const line = lineOf(doc, lc, [...section.split('.'), idx]);
    if (line) policy.lines.set(name, line);
  };
  const regex = (section: string, idx: number, name: string, src: string, flags = ''): RegExp => {
    try {
      return new RegExp(src, flags);
    } catch (e) {
      return fail(section, idx, name, `invalid regex: ${(e as Error).message}`);
    }
  };

  data.paths.rules.forEach((r, i) => {
    register('paths.rules', i, r.name);
    policy.compiled.pathGlobs.set(r.name, r.globs.map((g) => globToRegExp(absRuleGlob(policy, g))));
    policy.compiled.pathExcepts.set(r.name, r.except.map((g) => globToRegExp(absRuleGlob(policy, g))));
  });
  data.bash.commands.forEach((r, i) => register('bash.commands', i, r.name));
  data.bash.effects.forEach((r, i) => register('bash.effects', i, r.name));
  data.bash.env.forEach((r, i) => {
    register('bash.env', i, r.name);
    if (r.unless_value) policy.compiled.envValues.set(r.name, regex('bash.env', i, r.name, `^(?:${r.unless_value})$`));
  });
  data.bash.patterns.forEach((r, i) => {
    register('bash.patterns', i, r.name);
    policy.compiled.patterns.set(r.name, regex('bash.patterns', i, r.name, r.regex, r.ignore_case ? 'i' : ''));
  });

  // Examples: `match` must fire the rule, `not_match` must not.
  const check = (section: string, idx: number, name: string, ex: { match: string[]; not_match: string[] }, fires: (e: string) => boolean | string) => {
    for (const [list, want] of [[ex.match, true], [ex.not_match, false]] as const) {
      for (const e of list) {
        const got = fires(e);
        if (typeof got === 'string') fail(section, idx, name, `example ${JSON.stringify(e)}: ${got}`);
        if (got !== want) fail(section, idx, name, `${want ? 'match' : 'not_match'} example ${JSON.stringify(e)} ${want ? 'does not match' : 'matches'}`);
      }
    }
  };
  data.paths.rules.forEach((r, i) => check('paths.rules', i, r.name, r, (e) => pathRuleMatches(policy, r, e.startsWith('~/') ? data.home + e.slice(1) : e)));
  data.bash.commands.forEach((r, i) => check('bash.commands', i, r.name, r, (e) => {
    const res = commandRuleFiresOn(policy, r.commands, e);
    return res.error ?? res.fires;
  }));
  data.bash.effects.forEach((r, i) => check('bash.effects', i, r.name, r, (e) => {
    const res = effectFiresOn(policy, r.effects, e);
    return res.error ?? res.fires;
  }));
  data.bash.env.forEach((r, i) => check('bash.env', i, r.name, r, (e) => envRuleFiresOn(policy, r, e)));
  data.bash.patterns.forEach((r, i) => check('bash.patterns', i, r.name, r, (e) => policy.compiled.patterns.get(r.name)!.test(e)));
  data.protected.rules.forEach((r, i) => {
    register('protected.rules', i, r.name);
    const alone = new ProtectedSet([r]);
    check('protected.rules', i, r.name, r, (e) => alone.match(e)?.rule === r.name);
  });
  data.mcp.rules.forEach((r, i) => {
    register('mcp.rules', i, r.name);
    let c;
    try {
      c = compileMcpRule(data, r);
    } catch (e) {
      return fail('mcp.rules', i, r.name, (e as Error).message);
    }
    policy.compiled.mcp.set(r.name, c);
    for (const [list, want] of [[r.match, true], [r.not_match, false]] as const) {
      for (const ex of list) {
        if (mcpRuleFires(data, r, c, ex.server, ex.tool, ex.args) !== want) {
          fail('mcp.rules', i, r.name, `${want ? 'match' : 'not_match'} example ${JSON.stringify(ex)} ${want ? 'does not fire the rule' : 'fires the rule'}`);
        }
      }
    }
  });
  for (const [tool, entry] of Object.entries(data.tools)) {
    entry.examples.forEach((ex, i) => {
      const got = evaluateStatic(policy, { tool, args: ex.args });
      const ok = ex.expect === 'not_allow' ? got.decision !== 'allow' : got.decision === ex.expect;
      if (!ok) fail(`tools.${tool}.examples`, i, tool, `example ${i + 1} (${JSON.stringify(ex.args)}) expects ${ex.expect} but the policy says ${got.decision} (${got.reason})`);
    });
  }
  return policy;
}

function ruleAt(doc: Document, path: ReadonlyArray<PropertyKey>): string | undefined {
  for (let n = path.length; n >= 1; n--) {
    const v = doc.getIn([...path.slice(0, n), 'name'] as unknown[]);
    if (typeof v === 'string') return v;
  }
  return undefined;
}

/** Every `*.yaml` in `dir`, keyed by file name without the extension. */
export function loadPolicies(dir: string): Map<string, Policy> {
  let names: string[];
  try {
    names = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  } catch (e) {
    throw new PolicyError(`${dir}: cannot read the policy directory (${(e as Error).message})`, dir, undefined, undefined, { cause: e });
  }
  const out = new Map<string, Policy>();
  for (const f of names) {
    const p = loadPolicy(join(dir, f));
    out.set(p.name, p);
  }
  if (out.size === 0) throw new PolicyError(`${dir}: no policy files (*.yaml)`, dir);
  return out;
}
