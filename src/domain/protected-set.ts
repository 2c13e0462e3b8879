/**
 * The protected set: the workspace files that make other programs run code or follow instructions
 * once the workspace leaves the sandbox — git's own configuration and hooks, CI definitions, and the
 * configs that coding agents, editors, IDEs and dev environments read from a repository. It is the
 * one list behind three checks: the per-call effect check (run/effect-guard.ts: a change here that
 * the call's decision did not cover is undone and asked about), the artifacts' review flags
 * (domain/review-flags.ts: patch, tar and bundle) and the targeted probes of the snapshot
 * (sandbox/protected-snapshot.ts).
 *
 * Names are compared folded (domain/export-names.ts foldSegment): every case, Unicode normalisation,
 * ignorable code point, NTFS stream suffix (`.git::$INDEX_ALLOCATION`), trailing dot or space and
 * 8.3 short name (`GIT~1`, `GITHUB~1`) that some filesystem takes for the same name matches too.
 *
 * Inside a git directory (`.git`, at any depth: a nested repository's hooks run for whoever works in
 * it) everything is protected except what git itself writes in ordinary work — objects, refs, logs,
 * the index, HEAD and the other *_HEAD files, commit messages, packed-refs, rebase/merge/bisect
 * state (GIT_LEGIT below, following gitrepository-layout(5): https://git-scm.com/docs/gitrepository-layout).
 * The same holds inside `modules/<name>/` and `worktrees/<name>/`.
 *
 * The list is maintained here; operators add rules in their policy file (`protected.rules`, with
 * match/not_match examples checked at load — see policies/README.md).
 */
import type { EntryType, ProtectedClass, ProtectedMatch, ProtectedMatcher } from './effects';
import { foldSegment, isShortNameOf } from './export-names';

export { PROTECTED_CLASSES, type ProtectedClass, type ProtectedMatch } from './effects';

export interface ProtectedRule {
  name: string;
  class: ProtectedClass;
  /**
   * Globs over the workspace-relative path, compared folded: `**` is any number of directories
   * (none included), `*` any text within one segment; a glob not starting with `**` is anchored at
   * the workspace root. Write them in lower case.
   */
  globs: string[];
  reason: string;
  /** Where the tool documents that it reads this file. */
  docs?: string;
}

const AGENT = 'an agent, editor or dev-environment configuration: instructions, tools, tasks or commands that coding agents, editors and IDEs act on';
const CI = 'a CI or deployment pipeline: runs with the repository\'s CI secrets once pushed';

/** The built-in rules. Each cites where the tool documents the file (checked 2026-12). */
export const BUILTIN_RULES: readonly ProtectedRule[] = [
  // git, outside the git directory
  { name: 'gitattributes', class: 'git-attributes', globs: ['**/.gitattributes'], reason: 'git attributes: attach filter, diff and merge drivers that run commands', docs: 'https://git-scm.com/docs/gitattributes' },
  { name: 'gitmodules', class: 'git-attributes', globs: ['**/.gitmodules'], reason: 'git submodules: their URLs and update commands are fetched and run by `git submodule update`', docs: 'https://git-scm.com/docs/gitmodules' },
  { name: 'lfsconfig', class: 'git-config', globs: ['**/.lfsconfig'], reason: 'git-lfs configuration read from the repository (where LFS objects are sent and fetched)', docs: 'https://github.com/git-lfs/git-lfs/blob/main/docs/man/git-lfs-config.adoc' },
  { name: 'husky', class: 'git-hook', globs: ['.husky/**'], reason: 'a husky git hook: runs on git commands once husky is installed', docs: 'https://typicode.github.io/husky/' },
  { name: 'pre-commit', class: 'git-hook', globs: ['.pre-commit-config.yaml', '.pre-commit-config.yml'], reason: 'pre-commit configuration: the hooks it names are fetched and run on every commit', docs: 'https://pre-commit.com/#plugins' },
  { name: 'lefthook', class: 'git-hook', globs: ['lefthook.yml', 'lefthook.yaml', '.lefthook.yml', '.lefthook.yaml', 'lefthook-local.yml', 'lefthook-local.yaml', '.lefthook-local.yml', '.lefthook/**'], reason: 'lefthook configuration: the commands it names run on git hooks', docs: 'https://lefthook.dev/configuration/' },
  { name: 'overcommit', class: 'git-hook', globs: ['.overcommit.yml'], reason: 'overcommit configuration: the hooks it names run on git hooks', docs: 'https://github.com/sds/overcommit#configuration' },
  { name: 'githooks-dir', class: 'git-hook', globs: ['.githooks/**'], reason: 'a repository hooks directory (used with core.hooksPath): git runs these as hooks', docs: 'https://git-scm.com/docs/githooks' },

  // CI and deployment
  { name: 'github-actions', class: 'ci', globs: ['.github/workflows/**', '.github/actions/**', '**/action.yml', '**/action.yaml'], reason: CI, docs: 'https://docs.github.com/actions/reference/workflows-and-actions/workflow-syntax' },
  { name: 'gitea-forgejo-actions', class: 'ci', globs: ['.gitea/workflows/**', '.gitea/actions/**', '.forgejo/workflows/**'], reason: CI, docs: 'https://forgejo.org/docs/latest/user/actions/' },
  { name: 'gitlab-ci', class: 'ci', globs: ['.gitlab-ci.yml', '.gitlab-ci.yaml', '.gitlab/**'], reason: CI, docs: 'https://docs.gitlab.com/ci/yaml/' },
  { name: 'circleci', class: 'ci', globs: ['.circleci/**'], reason: CI, docs: 'https://circleci.com/docs/configuration-reference/' },
  { name: 'azure-pipelines', class: 'ci', globs: ['azure-pipelines.yml', 'azure-pipelines.yaml', '.azure-pipelines/**', '.azuredevops/**'], reason: CI, docs: 'https://learn.microsoft.com/azure/devops/pipelines/yaml-schema/' },
  { name: 'jenkins', class: 'ci', globs: ['**/jenkinsfile', '**/jenkinsfile.*', '**/*.jenkinsfile'], reason: CI, docs: 'https://www.jenkins.io/doc/book/pipeline/jenkinsfile/' },
  { name: 'buildkite', class: 'ci', globs: ['.buildkite/**', 'buildkite.yml', 'buildkite.yaml', 'buildkite.json'], reason: CI, docs: 'https://buildkite.com/docs/pipelines/configure/defining-steps' },
  { name: 'travis', class: 'ci', globs: ['.travis.yml'], reason: CI, docs: 'https://docs.travis-ci.com/user/customizing-the-build/' },
  { name: 'drone', class: 'ci', globs: ['.drone.yml', '.drone.yaml', '.drone.star', '.drone.jsonnet'], reason: CI, docs: 'https://docs.drone.io/pipeline/overview/' },
  { name: 'woodpecker', class: 'ci', globs: ['.woodpecker.yml', '.woodpecker.yaml', '.woodpecker/**'], reason: CI, docs: 'https://woodpecker-ci.org/docs/usage/workflow-syntax' },
  { name: 'bitbucket-pipelines', class: 'ci', globs: ['bitbucket-pipelines.yml'], reason: CI, docs: 'https://support.atlassian.com/bitbucket-cloud/docs/bitbucket-pipelines-configuration-reference/' },
  { name: 'appveyor', class: 'ci', globs: ['appveyor.yml', '.appveyor.yml'], reason: CI, docs: 'https://www.appveyor.com/docs/appveyor-yml/' },
  { name: 'cloud-build', class: 'ci', globs: ['cloudbuild.yaml', 'cloudbuild.yml', 'cloudbuild.json'], reason: CI, docs: 'https://cloud.google.com/build/docs/build-config-file-schema' },
  { name: 'aws-codebuild', class: 'ci', globs: ['buildspec.yml', 'buildspec.yaml'], reason: CI, docs: 'https://docs.aws.amazon.com/codebuild/latest/userguide/build-spec-ref.html' },
  { name: 'cirrus', class: 'ci', globs: ['.cirrus.yml', '.cirrus.star'], reason: CI, docs: 'https://cirrus-ci.org/guide/writing-tasks/' },
  { name: 'semaphore', class: 'ci', globs: ['.semaphore/**'], reason: CI, docs: 'https://docs.semaphoreci.com/reference/pipeline-yaml' },
  { name: 'tekton-pac', class: 'ci', globs: ['.tekton/**'], reason: CI, docs: 'https://pipelinesascode.com/docs/guide/authoringprs/' },
  { name: 'other-ci', class: 'ci', globs: ['codefresh.yml', 'bitrise.yml', 'codemagic.yaml', 'wercker.yml', '.harness/**', 'netlify.toml', 'vercel.json', 'render.yaml'], reason: `${CI} (hosted build and deploy commands)`, docs: 'https://docs.netlify.com/configure-builds/file-based-configuration/' },

  // coding agents
  { name: 'agents-md', class: 'agent-config', globs: ['**/agents.md', '**/agents.override.md', '.codex/**'], reason: AGENT, docs: 'https://developers.openai.com/codex/guides/agents-md' },
  { name: 'claude-code', class: 'agent-config', globs: ['**/claude.md', '**/claude.local.md', '.claude/**', '.mcp.json'], reason: `${AGENT} (Claude Code: hooks and MCP servers start commands)`, docs: 'https://code.claude.com/docs/en/settings' },
  { name: 'gemini-cli', class: 'agent-config', globs: ['**/gemini.md', '.gemini/**'], reason: AGENT, docs: 'https://geminicli.com/docs/get-started/configuration/' },
  { name: 'copilot', class: 'agent-config', globs: ['.github/copilot-instructions.md', '.github/instructions/**', '.github/prompts/**', '.github/chatmodes/**', '.github/agents/**', '.github/copilot/**'], reason: AGENT, docs: 'https://docs.github.com/copilot/customizing-copilot/adding-custom-instructions-for-github-copilot' },
  { name: 'cursor', class: 'agent-config', globs: ['.cursor/**', '**/.cursorrules'], reason: `${AGENT} (Cursor: rules and .cursor/mcp.json servers)`, docs: 'https://docs.cursor.com/context/rules' },
  { name: 'windsurf', class: 'agent-config', globs: ['**/.windsurf/**', '.windsurfrules'], reason: AGENT, docs: 'https://docs.windsurf.com/windsurf/cascade/memories' },
  { name: 'roo-code', class: 'agent-config', globs: ['.roo/**', '.roomodes', '.roorules', '.roorules-*'], reason: `${AGENT} (Roo: modes, rules and .roo/mcp.json servers)`, docs: 'https://docs.roocode.com/features/custom-instructions' },
  { name: 'cline', class: 'agent-config', globs: ['.clinerules', '.clinerules/**'], reason: AGENT, docs: 'https://docs.cline.bot/features/cline-rules' },
  { name: 'continue', class: 'agent-config', globs: ['.continue/**', '.continuerc.json'], reason: AGENT, docs: 'https://docs.continue.dev/reference' },
  { name: 'amazon-q', class: 'agent-config', globs: ['.amazonq/**'], reason: `${AGENT} (Amazon Q: rules and .amazonq/default.json MCP servers)`, docs: 'https://docs.aws.amazon.com/amazonq/latest/qdeveloper-ug/mcp-ide.html' },
  { name: 'aider', class: 'agent-config', globs: ['.aider.conf.yml', '.aider.conf.yaml', '.aider.model.settings.yml', '.aider.model.metadata.json'], reason: AGENT, docs: 'https://aider.chat/docs/config/aider_conf.html' },
  { name: 'jetbrains-ai', class: 'agent-config', globs: ['.aiassistant/**', '.junie/**'], reason: AGENT, docs: 'https://www.jetbrains.com/help/ai-assistant/configure-project-rules.html' },
  { name: 'other-agents', class: 'agent-config', globs: ['.kiro/**', 'opencode.json', 'opencode.jsonc', '.opencode/**', '**/.goosehints', '.augment/**', '.augment-guidelines', '.trae/**', '.qwen/**', '**/qwen.md', '**/crush.md', '.crush.json', 'crush.json', '.agent/**', '.agents/**'], reason: AGENT, docs: 'https://opencode.ai/docs/config/' },

  // editors and IDEs
  { name: 'vscode', class: 'agent-config', globs: ['.vscode/**', '**/*.code-workspace'], reason: `${AGENT} (VS Code: tasks.json runOn folderOpen, launch.json, settings.json, mcp.json)`, docs: 'https://code.visualstudio.com/docs/debugtest/tasks' },
  { name: 'jetbrains', class: 'agent-config', globs: ['.idea/**', '.run/**', '.fleet/**'], reason: `${AGENT} (JetBrains run configurations)`, docs: 'https://www.jetbrains.com/help/idea/run-debug-configuration.html' },
  { name: 'zed', class: 'agent-config', globs: ['.zed/**'], reason: `${AGENT} (Zed: tasks.json and context servers in settings.json)`, docs: 'https://zed.dev/docs/tasks' },
  { name: 'vim-emacs', class: 'agent-config', globs: ['**/.exrc', '**/.nvimrc', '**/.nvim.lua', '**/.dir-locals.el', '**/.dir-locals-2.el', '**/*.sublime-project'], reason: `${AGENT} (per-directory editor code: Neovim exrc, Emacs dir-locals)`, docs: 'https://neovim.io/doc/user/options.html#%27exrc%27' },

  // dev environments that run commands when a directory is entered or opened
  { name: 'direnv', class: 'agent-config', globs: ['**/.envrc'], reason: `${AGENT} (direnv runs .envrc when a shell enters the directory)`, docs: 'https://direnv.net/man/direnv-stdlib.1.html' },
  { name: 'devcontainer', class: 'agent-config', globs: ['.devcontainer/**', '.devcontainer.json'], reason: `${AGENT} (dev containers: initializeCommand runs on the host, postCreateCommand in the container)`, docs: 'https://containers.dev/implementors/json_reference/' },
  { name: 'mise', class: 'agent-config', globs: ['mise.toml', '.mise.toml', 'mise.local.toml', '.mise.local.toml', '.mise/**', '.config/mise.toml', '.config/mise/**'], reason: `${AGENT} (mise hooks, tasks and env scripts)`, docs: 'https://mise.jdx.dev/hooks.html' },
  { name: 'hosted-workspaces', class: 'agent-config', globs: ['.gitpod.yml', 'devbox.json', '.replit'], reason: `${AGENT} (tasks that run when a hosted workspace starts)`, docs: 'https://www.gitpod.io/docs/configure/workspaces/tasks' },
];

/**
 * What git writes in a git directory during ordinary work (relative, folded): never protected. From
 * gitrepository-layout(5); `objects/info/alternates` and `http-alternates` are not ordinary (they
 * point git at other object stores) and stay protected.
 */
const GIT_LEGIT_TOP = new Set([
  'index', 'index.lock', 'head', 'head.lock', 'orig_head', 'fetch_head', 'merge_head', 'merge_msg', 'merge_mode', 'merge_rr', 'auto_merge',
  'cherry_pick_head', 'revert_head', 'rebase_head', 'commit_editmsg', 'tag_editmsg', 'notes_editmsg', 'edit_description', 'squash_msg',
  'packed-refs', 'packed-refs.lock', 'packed-refs.new', 'shallow', 'shallow.lock', 'description', 'gc.log', 'gc.pid', 'config.lock', 'fsmonitor--daemon.ipc',
]);
const GIT_LEGIT_DIRS = new Set(['objects', 'refs', 'logs', 'rebase-merge', 'rebase-apply', 'sequencer', 'rr-cache', 'lfs', 'fsmonitor--daemon', 'reftable']);
/** Names that start a git directory's layout: inside modules/ and worktrees/, the module or worktree's own layout starts at the first of them. */
const GIT_LAYOUT = new Set([...GIT_LEGIT_TOP, ...GIT_LEGIT_DIRS, 'config', 'config.worktree', 'hooks', 'info', 'branches', 'remotes', 'modules', 'worktrees', 'commondir', 'gitdir']);

/** Git's directories where a link or file instead of a directory redirects what git reads as hooks, configuration or objects. */
const GIT_DIRS_KEPT = new Set(['hooks', 'info', 'modules', 'worktrees', 'branches', 'remotes', 'objects', 'refs', 'objects/info']);

/**
 * How a path inside a git directory (its segments after `.git`, folded) is classed, or null for what
 * git writes itself. `type`: a link or file where git keeps a directory (`.git/hooks` → ../src) is protected.
 */
export function gitInternal(rel: readonly string[], type?: EntryType): ProtectedMatch | null {
  if (rel.length === 0) return null;
  if (type !== undefined && type !== 'dir' && GIT_DIRS_KEPT.has(rel.join('/'))) {
    return { rule: 'git-dir-replaced', class: rel[0] === 'hooks' ? 'git-hook' : 'git-internal', reason: `a ${type} where git keeps its ${rel.join('/')} directory: git would read ${rel[0] === 'hooks' ? 'hooks' : 'its state'} from wherever it points` };
  }
  const [top, ...rest] = rel as [string, ...string[]];
  if (top === 'modules' || top === 'worktrees') {
    const start = rest.findIndex((s, i) => i > 0 && GIT_LAYOUT.has(s));
    // modules/<name>/… and worktrees/<name>/…: judged as that directory's own layout
    if (start > 0) return gitInternal(rest.slice(start), type);
    return rest.length === 0 ? null : { rule: `git-${top}`, class: 'git-internal', reason: `a git ${top === 'modules' ? 'submodule' : 'worktree'} directory entry: where git looks for that repository's configuration` };
  }
  if (GIT_LEGIT_DIRS.has(top)) {
    if (top === 'objects' && rest[0] === 'info' && (rest[1] === 'alternates' || rest[1] === 'http-alternates')) {
      return { rule: 'git-alternates', class: 'git-internal', reason: 'git alternates: point the repository at another object store' };
    }
    return null;
  }
  if (rest.length === 0 && (GIT_LEGIT_TOP.has(top) || /^sharedindex\.[0-9a-f]+$/.test(top) || /^bisect_/.test(top) || /^next-index-.*\.lock$/.test(top))) return null;
  if (top === 'hooks') {
    if (rest.length === 0 || rest[rest.length - 1]!.endsWith('.sample')) return null;
    return { rule: 'git-hooks', class: 'git-hook', reason: 'a git hook: git runs it on commit, checkout, merge or push' };
  }
  if ((top === 'config' || top === 'config.worktree') && rest.length === 0) {
    return { rule: 'git-config', class: 'git-config', reason: 'git configuration: can set core.hooksPath, core.fsmonitor, core.sshCommand, filters, aliases and pagers that run commands' };
  }
  if (top === 'info' && rest[0] === 'attributes' && rest.length === 1) return { rule: 'git-info-attributes', class: 'git-attributes', reason: 'git attributes: attach filter, diff and merge drivers that run commands' };
  if (top === 'info' && rest.length === 1 && ['refs', 'sparse-checkout'].includes(rest[0]!)) return null;
  return { rule: 'git-internal', class: 'git-internal', reason: 'a file in git\'s own directory that ordinary git commands do not write (git reads it as configuration)' };
}

type Seg = { kind: 'lit'; text: string } | { kind: 'glob'; re: RegExp } | { kind: 'dirs' };

function compileGlob(glob: string): Seg[] {
  return glob.split('/').filter((s) => s !== '').map((s): Seg => {
    if (s === '**') return { kind: 'dirs' };
    if (!/[*?[]/.test(s)) return { kind: 'lit', text: foldSegment(s) };
    const re = s.split('*').map((p) => p.replace(/[.+^${}()|[\]\\?]/g, '\\$&')).join('[^/]*');
    return { kind: 'glob', re: new RegExp(`^${re}$`) };
  });
}

function segMatches(seg: Seg, s: string): boolean {
  if (seg.kind === 'lit') return s === seg.text || (s.includes('~') && isShortNameOf(s, seg.text));
  if (seg.kind === 'glob') return seg.re.test(s);
  return false;
}

/** Whether folded segments `segs[i…]` match glob segments `g[j…]`; a glob that names a directory also matches everything under it. */
function globMatches(g: readonly Seg[], segs: readonly string[], i = 0, j = 0, memo = new Map<number, boolean>()): boolean {
  const key = i * 1024 + j;
  const hit = memo.get(key);
  if (hit !== undefined) return hit;
  let r: boolean;
  if (j === g.length) r = i === segs.length;
  else if (g[j]!.kind === 'dirs') {
    // `**` last: anything below, but not the directory itself (`.vscode/**` does not name `.vscode`)
    if (j === g.length - 1) r = i < segs.length;
    else {
      r = false;
      for (let k = i; k <= segs.length && !r; k++) r = globMatches(g, segs, k, j + 1, memo);
    }
  } else r = i < segs.length && segMatches(g[j]!, segs[i]!) && globMatches(g, segs, i + 1, j + 1, memo);
  memo.set(key, r);
  return r;
}

/** Segments longer than this many are matched by their first 512 (deeper paths do not exist on Linux's PATH_MAX anyway). */
const MAX_SEGMENTS = 512;

export class ProtectedSet implements ProtectedMatcher {
  private readonly compiled: Array<{ rule: ProtectedRule; globs: Seg[][]; prefixes: Seg[][] }>;
  /**
   * A cheap gate for the common case (a plain ASCII path with no `git`, `~` or `:` in it — most of a
   * workspace): it can only be protected when its first segment starts an anchored glob, one of its
   * segments is a literal that follows a `**`, or its last segment matches a `**` glob's wildcard
   * name. null when some glob defeats the gate (a wildcard first segment): then every path is matched.
   */
  private readonly gate: { firsts: Set<string>; anywhere: Set<string>; lastPatterns: RegExp[] } | null;

  constructor(readonly rules: readonly ProtectedRule[] = BUILTIN_RULES) {
    this.compiled = rules.map((rule) => {
      const globs = rule.globs.map(compileGlob);
      // the literal directories an anchored glob reaches through (`.github/workflows/**` → .github, .github/workflows)
      const prefixes: Seg[][] = [];
      for (const g of globs) {
        for (let n = 1; n < g.length && g[n - 1]!.kind === 'lit'; n++) prefixes.push(g.slice(0, n));
      }
      return { rule, globs, prefixes };
    });
    const firsts = new Set<string>();
    const anywhere = new Set<string>();
    const lastPatterns: RegExp[] = [];
    let open = false;
    for (const c of this.compiled) {
      for (const g of c.globs) {
        const first = g[0];
        if (!first) continue;
        if (first.kind === 'lit') firsts.add(first.text);
        else if (first.kind === 'glob') open = true;
        for (let i = 1; i < g.length; i++) {
          if (g[i - 1]!.kind !== 'dirs') continue;
          const seg = g[i]!;
          if (seg.kind === 'lit') anywhere.add(seg.text);
          else if (seg.kind === 'glob' && i === g.length - 1) lastPatterns.push(seg.re);
          else if (seg.kind === 'glob') open = true;
        }
      }
    }
    this.gate = open ? null : { firsts, anywhere, lastPatterns };
  }

  /** false when the gate shows that `path` cannot be protected (see `gate`). */
  private mayMatch(path: string): boolean {
    if (!this.gate || /git|~|:|[^\x20-\x7e]/i.test(path)) return true;
    const segs = path.split('/').filter((x) => x !== '' && x !== '.').map((x) => x.toLowerCase().replace(/[. ]+$/, ''));
    if (segs.length === 0) return false;
    if (this.gate.firsts.has(segs[0]!)) return true;
    if (segs.some((x) => this.gate!.anywhere.has(x))) return true;
    const last = segs[segs.length - 1]!;
    return this.gate.lastPatterns.some((re) => re.test(last));
  }

  /** A set with the operator's rules after the built-in ones. */
  static withExtra(extra: readonly ProtectedRule[]): ProtectedSet {
    return new ProtectedSet([...BUILTIN_RULES, ...extra]);
  }

  /**
   * The rule that protects `path` (workspace-relative, `/`-separated), or null. `type` is the
   * entry's type when known: a `.git` that is not a directory (a file naming another git directory,
   * or a link) is protected itself.
   */
  match(path: string, type?: EntryType): ProtectedMatch | null {
    if (!this.mayMatch(path)) return null;
    const segs = path.split('/').filter((s) => s !== '' && s !== '.').slice(0, MAX_SEGMENTS).map(fastFold);
    const g = segs.findIndex((s) => s === '.git' || (s.includes('~') && isShortNameOf(s, '.git')));
    if (g >= 0) {
      // the git directory itself is no change; a `.git` file or link (a file when the type is unknown: the diff model lists files only) is
      if (g === segs.length - 1) return type === 'dir' ? null : GIT_DIR_FILE;
      return gitInternal(segs.slice(g + 1), type);
    }
    for (const c of this.compiled) {
      if (c.globs.some((glob) => globMatches(glob, segs))) return { rule: c.rule.name, class: c.rule.class, reason: c.rule.reason };
    }
    // a link or file where a protected directory belongs (`.vscode` → src/x, `.github/workflows` → ../wf)
    if (type !== undefined && type !== 'dir') {
      for (const c of this.compiled) {
        if (c.prefixes.some((pre) => pre.length === segs.length && pre.every((seg, i) => segMatches(seg, segs[i]!)))) {
          return { rule: c.rule.name, class: c.rule.class, reason: `a ${type} where a protected directory belongs: ${c.rule.reason}` };
        }
      }
    }
    return null;
  }

  /**
   * The directories and files at the workspace root that the snapshot probes when it cannot read the
   * whole workspace (sandbox/protected-snapshot.ts): the first segment of every anchored glob, as
   * written (the exact spelling; other spellings are found by the whole-workspace read and the
   * artifacts' review).
   */
  rootProbes(): string[] {
    const out = new Set<string>(['.git']);
    for (const c of this.compiled) {
      for (const g of c.rule.globs) {
        const parts = g.split('/');
        // the literal prefix of an anchored glob (`.github/workflows/**` → `.github/workflows`)
        const lit: string[] = [];
        for (const p of parts) {
          if (p === '**' || /[*?[]/.test(p)) break;
          lit.push(p);
        }
        if (lit.length) out.add(lit.join('/'));
        // `**/name`: the name at the root too, as it is usually spelled
        if (parts[0] === '**' && parts.length === 2 && !/[*?[]/.test(parts[1]!)) out.add(ROOT_SPELLING[parts[1]!] ?? parts[1]!);
      }
    }
    return [...out].sort();
  }
}

/** How these names are usually spelled at a repository's root (the globs are written folded). */
const ROOT_SPELLING: Record<string, string> = {
  'agents.md': 'AGENTS.md', 'agents.override.md': 'AGENTS.override.md', 'claude.md': 'CLAUDE.md', 'claude.local.md': 'CLAUDE.local.md',
  'gemini.md': 'GEMINI.md', 'qwen.md': 'QWEN.md', 'crush.md': 'CRUSH.md', jenkinsfile: 'Jenkinsfile',
};

/** foldSegment, with its common case (printable ASCII without `:`) done without Unicode normalisation. */
function fastFold(seg: string): string {
  return /^[\x20-\x39\x3b-\x7e]*$/.test(seg) ? seg.toLowerCase().replace(/[. ]+$/, '') : foldSegment(seg);
}

const GIT_DIR_FILE: ProtectedMatch = { rule: 'git-dir', class: 'git-dir', reason: 'a .git file or link: points git at another repository directory' };

export const DEFAULT_PROTECTED_SET = new ProtectedSet();
