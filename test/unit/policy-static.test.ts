/** The default policy: its rule examples (checked at load), the labelled set, and the static layer's shape. */
import { join } from 'node:path';
import { evaluateStatic } from '../../src/policy/evaluate-static';
import { evaluateLabelled, loadLabelledSet } from '../../src/policy/labelled-eval';
import { loadPolicies, loadPolicy } from '../../src/policy/load-policy';

const policy = loadPolicy('policies/default.yaml');
const bash = (command: string) => evaluateStatic(policy, { tool: 'bash', args: { command } });

/** The stated ceiling: at most 5% of benign developer calls may be anything but "allow". */
const FALSE_DENY_CEILING = 0.05;

describe('default policy', () => {
  it('loads, running every rule\'s match/not_match examples', () => {
    const rules = policy.paths.rules.length + policy.bash.commands.length + policy.bash.env.length + policy.bash.patterns.length;
    expect(rules).toBeGreaterThan(40);
    for (const r of [...policy.paths.rules, ...policy.bash.commands, ...policy.bash.env, ...policy.bash.patterns]) {
      expect(r.match.length).toBeGreaterThan(0);
      expect(r.not_match.length).toBeGreaterThan(0);
      expect(policy.lines.get(r.name)).toBeGreaterThan(0);
    }
  });

  it('loadPolicies keys policies by file name', () => {
    const all = loadPolicies('policies');
    expect(all.get('default')?.file).toBe(join('policies', 'default.yaml'));
  });

  const set = loadLabelledSet('test/fixtures/policy/labelled.jsonl');
  const report = evaluateLabelled(policy, set);

  it('the labelled set has the five issue examples and ≥ 80 more, with sources', () => {
    expect(set.filter((c) => c.id.startsWith('issue-'))).toHaveLength(5);
    expect(set.length).toBeGreaterThanOrEqual(85);
    expect(new Set(set.map((c) => c.id)).size).toBe(set.length);
  });

  it('false-allow rate on must-not-allow cases is 0', () => {
    expect(report.misclassified.filter((m) => m.expected !== 'allow')).toEqual([]);
    expect(report.falseAllows).toBe(0);
  });

  it(`false-deny rate on benign work stays ≤ ${FALSE_DENY_CEILING * 100}% and nothing benign is denied outright`, () => {
    expect(report.benign).toBeGreaterThanOrEqual(40);
    expect(report.falseDenyRate).toBeLessThanOrEqual(FALSE_DENY_CEILING);
    expect(report.hardDenies).toBe(0);
  });

  it('nothing matched → ask, never allow', () => {
    expect(bash('frobnicate --all')).toMatchObject({ decision: 'ask', rule: null });
    expect(evaluateStatic(policy, { tool: 'launch_missiles', args: {} })).toMatchObject({ decision: 'ask', rule: null });
  });

  it('strictest wins across a compound command', () => {
    expect(bash('ls && rm -rf /').decision).toBe('deny');
    expect(bash('ls; rm build/x').decision).toBe('ask');
    expect(bash('ls | wc -l').decision).toBe('allow');
  });

  it('reports risk and read-only for a low-risk read', () => {
    expect(bash('git status')).toEqual({ decision: 'allow', rule: 'git-read', reason: expect.any(String), risk: 'low', readOnly: true });
    expect(bash('npm test')).toMatchObject({ decision: 'allow', risk: 'medium', readOnly: false });
    expect(bash('ls > out.txt')).toMatchObject({ decision: 'allow', readOnly: false });
  });

  it('file tools: inside the workspace allowed, protected and outside paths not', () => {
    const t = (tool: string, path: string) => evaluateStatic(policy, { tool, args: { path, content: 'x', old: 'a', new: 'b' } }).decision;
    expect(t('write_file', 'src/a.ts')).toBe('allow');
    expect(t('write_file', '/workspace/src/a.ts')).toBe('allow');
    expect(t('edit_file', '.git/config')).toBe('deny');
    expect(t('write_file', 'sub/.git/hooks/post-merge')).toBe('deny');
    expect(t('write_file', '../outside.txt')).toBe('deny');
    expect(t('write_file', '/workspace/../etc/x')).toBe('deny');
    expect(t('read_file', '/etc/os-release')).toBe('ask');
    expect(t('read_file', '/proc/1/environ')).toBe('deny');
    expect(t('read_file', '.env')).toBe('ask');
    expect(t('write_file', '/tmp/scratch.txt')).toBe('allow');
  });
});
