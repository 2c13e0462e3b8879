/**
 * Changes a human should review before using a run's artifacts: files that make other programs run
 * code when someone works in the repository (git hooks and config, CI pipelines, agent and editor
 * configs, direnv), and new executable or setuid/setgid bits. Applied to every added or modified file
 * of the diff model (deletions are not flagged). Paths are compared per segment as a case-insensitive
 * filesystem would see them (export-names.ts foldSegment), so `.GitHub/Workflows/x.yml` counts too.
 */
import type { FileChange, ReviewFlag, ReviewRule } from '../domain/sandbox';
import { foldSegment } from '../domain/export-names';

interface PathRule {
  rule: ReviewRule;
  reason: string;
  /** Matches the folded segments of a path. */
  test: (s: readonly string[]) => boolean;
}

const last = (s: readonly string[]) => s[s.length - 1] ?? '';
const at = (s: readonly string[], i: number, name: string) => s[i] === name;
/** Index of the first `.git` segment, or -1. */
const gitAt = (s: readonly string[]) => s.findIndex((x) => x === '.git' || x === 'git~1');
const under = (s: readonly string[], ...dirs: string[]) => dirs.every((d, i) => at(s, i, d)) && s.length > dirs.length;
const named = (...names: string[]) => (s: readonly string[]) => names.includes(last(s));
const rootNamed = (...names: string[]) => (s: readonly string[]) => s.length === 1 && names.includes(s[0]!);

const PATH_RULES: PathRule[] = [
  {
    rule: 'git-hook', reason: 'a git hook: git runs it on commit, checkout, merge or push',
    test: (s) => { const g = gitAt(s); return g >= 0 && s[g + 1] === 'hooks' && s.length > g + 2 && !last(s).endsWith('.sample'); },
  },
  { rule: 'git-hook', reason: 'a husky git hook: runs on git commands once husky is installed', test: (s) => under(s, '.husky') },
  { rule: 'git-hook', reason: 'pre-commit configuration: the hooks it names run on every commit', test: rootNamed('.pre-commit-config.yaml', '.pre-commit-config.yml', 'lefthook.yml', '.lefthook.yml') },
  {
    rule: 'git-config', reason: 'git configuration: can set core.hooksPath, core.fsmonitor, core.sshCommand, filters and aliases that run commands',
    test: (s) => { const g = gitAt(s); return g >= 0 && (/^config(\.worktree)?$/.test(last(s)) && (s.length === g + 2 || at(s, g + 1, 'worktrees') || at(s, g + 1, 'modules'))); },
  },
  { rule: 'git-attributes', reason: 'git attributes: can attach filter and diff drivers that run commands', test: (s) => last(s) === '.gitattributes' || (gitAt(s) >= 0 && s[gitAt(s) + 1] === 'info' && last(s) === 'attributes') },
  { rule: 'git-attributes', reason: 'git submodules: their URLs and update commands are fetched and run by `git submodule update`', test: named('.gitmodules') },
  { rule: 'git-dir', reason: 'a .git file: points git at another repository directory', test: (s) => (last(s) === '.git' || last(s) === 'git~1') },
  {
    rule: 'ci', reason: 'a CI pipeline: runs with the repository\'s CI secrets once pushed',
    test: (s) => under(s, '.github', 'workflows') || under(s, '.github', 'actions') || rootNamed('action.yml', 'action.yaml')(s)
      || rootNamed('.gitlab-ci.yml', '.travis.yml', 'azure-pipelines.yml', 'bitbucket-pipelines.yml', '.drone.yml', '.woodpecker.yml', 'appveyor.yml', '.appveyor.yml', 'cloudbuild.yaml', 'cloudbuild.yml', '.cirrus.yml', 'codefresh.yml')(s)
      || under(s, '.gitlab') || under(s, '.circleci') || under(s, '.buildkite') || under(s, '.woodpecker') || under(s, '.azure-pipelines') || under(s, '.semaphore') || under(s, '.tekton')
      || last(s) === 'jenkinsfile',
  },
  {
    rule: 'agent-config', reason: 'an agent or editor configuration: instructions, tools or tasks that coding agents and editors act on',
    test: (s) => named('agents.md', 'claude.md', 'claude.local.md', 'gemini.md', '.cursorrules', '.windsurfrules', '.clinerules', '.mcp.json', '.aider.conf.yml', '.envrc')(s)
      || under(s, '.claude') || under(s, '.cursor') || under(s, '.windsurf') || under(s, '.gemini') || under(s, '.codex') || under(s, '.continue') || under(s, '.devcontainer') || under(s, '.zed')
      || under(s, '.github', 'instructions') || under(s, '.github', 'prompts') || (s.length === 2 && at(s, 0, '.github') && at(s, 1, 'copilot-instructions.md'))
      || (s.length === 2 && at(s, 0, '.vscode') && ['tasks.json', 'settings.json', 'launch.json'].includes(s[1]!)),
  },
];

const octal = (m: number) => (m & 0o7777).toString(8).padStart(4, '0');

/** The review flags of one change (none for a deletion). */
export function reviewFlags(c: FileChange): ReviewFlag[] {
  if (c.change === 'deleted') return [];
  const segs = c.path.split('/').map(foldSegment);
  const out: ReviewFlag[] = [];
  for (const r of PATH_RULES) {
    if (r.test(segs) && !out.some((f) => f.rule === r.rule)) out.push({ path: c.path, rule: r.rule, reason: `${c.change}: ${r.reason}` });
  }
  const before = c.change === 'added' ? 0 : (c.modeBefore ?? c.modeAfter ?? 0o644);
  const after = c.modeAfter ?? before;
  if (after & 0o111 && !(before & 0o111)) {
    out.push({ path: c.path, rule: 'executable', reason: `${c.change === 'added' ? 'a new executable file' : 'made executable'} (mode ${octal(after)})` });
  }
  const special = after & 0o6000 & ~before;
  if (special) {
    const bits = [special & 0o4000 ? 'setuid' : '', special & 0o2000 ? 'setgid' : ''].filter(Boolean).join(' and ');
    out.push({ path: c.path, rule: 'setuid', reason: `the ${bits} bit was set (mode ${octal(after)}); git does not carry it, the tar drops it` });
  }
  return out;
}
