/** Bad policy files stop start-up with a PolicyError naming the file, the rule and its line. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadPolicies, loadPolicy, parsePolicy } from '../../src/policy/load-policy';
import { PolicyError } from '../../src/policy/policy-error';

const HEAD = `version: 1
tools:
  bash: { decision: allow, risk: medium, shell: command }
paths:
  rules: []
bash:
  commands:
`;
const rule = (extra: string) => `    - name: listing
      commands: [ls]
      decision: allow
      reason: lists
${extra}`;

function error(text: string): PolicyError {
  try {
    parsePolicy(text, 'policies/bad.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(PolicyError);
    return e as PolicyError;
  }
  throw new Error('expected a PolicyError');
}

describe('policy load errors', () => {
  it('a failing match example names file, line and rule', () => {
    const e = error(HEAD + rule('      match: ["cat x"]\n      not_match: ["rm x"]\n'));
    expect(e.code).toBe('policy_invalid');
    expect(e.message).toMatch(/^policies\/bad\.yaml:8 rule "listing": match example "cat x" does not match/);
    expect([e.file, e.rule, e.line]).toEqual(['policies/bad.yaml', 'listing', 8]);
  });

  it('a failing not_match example', () => {
    const e = error(HEAD + rule('      match: ["ls"]\n      not_match: ["ls -la"]\n'));
    expect(e.message).toMatch(/:8 rule "listing": not_match example "ls -la" matches/);
  });

  it('schema errors name the rule and the offending field line', () => {
    const e = error(HEAD + rule('      match: ["ls"]\n      not_match: ["rm"]\n      decision_typo: allow\n'));
    expect(e.message).toMatch(/policies\/bad\.yaml:\d+ rule "listing": bash\.commands\.0/);
    const e2 = error(HEAD + rule('      match: []\n      not_match: ["rm"]\n'));
    expect(e2.rule).toBe('listing');
    expect(e2.line).toBe(12);
  });

  it('missing examples, bad regex, duplicate names, YAML syntax', () => {
    expect(error(HEAD + rule('      not_match: ["rm"]\n')).message).toMatch(/match/);
    const re = error(HEAD + rule('      match: ["ls"]\n      not_match: ["rm"]\n') + '  patterns:\n    - name: broken\n      regex: "("\n      decision: deny\n      reason: x\n      match: ["x"]\n      not_match: ["y"]\n');
    expect(re.message).toMatch(/rule "broken": invalid regex/);
    const unknownField = error(HEAD + rule('      match: ["ls"]\n      not_match: ["rm"]\n      args_regex: "x"\n'));
    expect(unknownField.message).toMatch(/rule "listing": bash\.commands\.0/);
    const dup = error(HEAD + rule('      match: ["ls"]\n      not_match: ["rm"]\n') + rule('      match: ["ls"]\n      not_match: ["rm"]\n'));
    expect(dup.message).toMatch(/:14 rule "listing": duplicate rule name/);
    expect(error('version: 1\ntools: {\n').message).toMatch(/^policies\/bad\.yaml:\d+: YAML/);
  });

  it('a path rule example failing', () => {
    const text = `version: 1
tools: {}
paths:
  rules:
    - name: hooks
      globs: ["**/.git/hooks/**"]
      access: write
      decision: deny
      reason: hooks
      match: [.git/hooks/x, src/x]
      not_match: [.git/HEAD]
bash: {}
`;
    expect(error(text).message).toMatch(/:5 rule "hooks": match example "src\/x" does not match/);
  });

  it('loadPolicies stops on the first bad file; loadPolicy reports unreadable files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-policy-'));
    writeFileSync(join(dir, 'good.yaml'), HEAD + rule('      match: ["ls"]\n      not_match: ["rm"]\n'));
    expect([...loadPolicies(dir).keys()]).toEqual(['good']);
    writeFileSync(join(dir, 'worse.yaml'), HEAD + rule('      match: ["rm"]\n      not_match: ["cat"]\n'));
    expect(() => loadPolicies(dir)).toThrow(/worse\.yaml:8 rule "listing"/);
    expect(() => loadPolicy(join(dir, 'missing.yaml'))).toThrow(PolicyError);
  });
});
