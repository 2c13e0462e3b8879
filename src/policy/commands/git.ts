/**
 * The spec of git, parsed by argv the way git's parse-options does (clusters, abbreviations,
 * options after operands, `--` before paths), so a commit message is data and `-c`, `--exec`,
 * `--output`, `--template` are found wherever they are. Per subcommand: what reads the repository,
 * what changes it locally (allowed), what discards work (`checkout -- .`, `restore`, `reset --hard`,
 * `rm`, `stash drop|clear`, `clean`, `branch -D`…), what talks to the network, and configuration:
 * `git config` may set only keys that cannot make git run code (user.name, user.email, …).
 */
import { grammar, parseArgs, type ParsedArgs } from './argv-parser';
import { UseBuilder, type CommandSpec, type CommandUse } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';

const GLOBAL = grammar('-C=dir -c=any --config-env=any --exec-path?exec --html-path --man-path --info-path -p|--paginate -P|--no-pager --no-replace-objects --no-lazy-fetch --no-optional-locks --no-advice --bare --git-dir=any --work-tree=any --namespace=any --super-prefix=any --literal-pathspecs --glob-pathspecs --noglob-pathspecs --icase-pathspecs --list-cmds=any --attr-source=any -v|--version -h|--help', { stopAtOperand: true, abbrev: false });

/** Configuration keys whose values cannot make git run a program or fetch from elsewhere. */
const SAFE_CONFIG = /^(user\.(name|email|signingkey)|author\.(name|email)|committer\.(name|email)|init\.defaultbranch|core\.(autocrlf|filemode|ignorecase|quotepath|safecrlf|eol|whitespace|precomposeunicode|longpaths|symlinks|abbrev|commentchar|commentstring)|pull\.(rebase|ff)|push\.(default|autosetupremote|followtags)|merge\.(conflictstyle|ff|log)|rebase\.(autosquash|autostash|updaterefs)|color\.[a-z.]+|advice\.[a-z]+|commit\.(gpgsign|verbose|status|cleanup)|tag\.(gpgsign|sort)|log\.[a-z]+|format\.(pretty|signoff)|diff\.(renames|algorithm|colormoved|mnemonicprefix|noprefix|statgraphwidth|context|indentheuristic|submodule)|status\.[a-z]+|rerere\.(enabled|autoupdate)|gc\.(auto|autodetach)|fetch\.(prune|prunetags|parallel)|branch\.autosetup(merge|rebase)|help\.autocorrect|column\.ui|blame\.[a-z]+|grep\.[a-z]+|safe\.directory|feature\.[a-z]+|index\.[a-z]+|pack\.[a-z]+)$/;
const SAFE_PAGERS = /^(cat|less|more|less -[A-Za-z]+|)$/;
/** Editors that leave the text as it is and return at once: with one set, git's editor steps do not wait for a person. */
const SAFE_EDITORS = /^(true|:|false|cat)$/;
const EDITOR_VARS = ['GIT_SEQUENCE_EDITOR', 'GIT_EDITOR', 'VISUAL', 'EDITOR'];
/** Interactive effects that only mean "git opens an editor" (not a terminal menu: add -i, -p, difftool). */
const EDITOR_STEP = /^git (rebase (-i|--edit-todo)|(commit|merge|cherry-pick|revert|tag|notes) (-e|-c)|commit without -m opens an editor|tag -a without -m opens an editor|notes \w+ opens an editor)/;

const LOG_OPTS = '-n|--max-count=any -L=any -S=any -G=any -p|-u|--patch -U|--unified=any -c -m -s|--no-patch -z --output=write --ext-diff!exec-hidden --no-ext-diff --textconv --no-textconv -g|--walk-reflogs -i|--regexp-ignore-case -E|--extended-regexp -F|--fixed-strings -P|--perl-regexp -M|--find-renames?any -C|--find-copies?any -B|--break-rewrites?any -l=any -O=read -R -a|--text -w|--ignore-all-space -b|--ignore-space-change -W|--function-context -e=any -1 -2 -3 -4 -5 -6 -7 -8 -9 -0 -D|--irreversible-delete -t -r -v -q --follow --stat?any --name-only --name-status --numstat --shortstat --oneline --graph --all --format|--pretty?any --decorate?any --no-walk?any --author=any --committer=any --grep=any --since|--after=any --until|--before=any --date=any --abbrev-commit --no-abbrev-commit --abbrev?any --reverse --first-parent --merges --no-merges --left-right --cherry-pick --cherry-mark --boundary --branches?any --tags?any --remotes?any --exclude=any --color?any --no-color --word-diff?any --word-diff-regex=any --color-words?any --diff-filter=any --relative?any --skip=any --cached --staged --check --quiet --exit-code --raw --patch-with-stat --summary --full-index --binary --src-prefix=any --dst-prefix=any --no-prefix --default-prefix --ita-invisible-in-index --submodule?any --ignore-submodules?any --dirstat?any --minimal --patience --histogram --anchored=any --diff-algorithm=any --compact-summary --full-diff --log-size --use-mailmap --mailmap --no-mailmap --encoding=any --notes?any --no-notes --show-signature --show-notes?any --show-linear-break?any --simplify-by-decoration --ancestry-path?any --topo-order --date-order --author-date-order --source --parents --children --name-rev --no-renames --no-index --merge-base --ignore-blank-lines --ignore-cr-at-eol --ignore-space-at-eol --ignore-matching-lines=any --inter-hunk-context=any --line-prefix=any --stdin --pickaxe-all --pickaxe-regex --find-object=any --rotate-to=any --skip-to=any --output-indicator-new=any --output-indicator-old=any --output-indicator-context=any --z --count --max-parents=any --min-parents=any --no-max-parents --no-min-parents --invert-grep --all-match --basic-regexp -h|--help';

/** Splits operands into revisions/pathspecs before `--` and paths after it; `REV:path` names a file read. */
function revsAndPaths(p: ParsedArgs, b: UseBuilder, pathsAre: 'read' | 'write' | 'delete' | 'discard', label: string, allArePaths = false): void {
  p.operands.forEach((o, i) => {
    const isPath = allArePaths || (p.afterDashDash >= 0 && i >= p.afterDashDash);
    if (!isPath) {
      if (!o.dynamic) { const m = /^[^:\s]*:(?!\/)(.+)$/.exec(o.value); if (m && !o.value.startsWith(':/')) b.read(literalWord(m[1]!)); }
      return;
    }
    if (pathsAre === 'discard') { b.effect('discard-work', `${label} overwrites uncommitted changes to ${o.value || 'computed paths'}`); b.path(o, 'write', label); }
    else b.path(o, pathsAre, label);
  });
}

type Sub = (args: ShellWord[], label: string) => CommandUse;

function sub(options: string, body: (p: ParsedArgs, b: UseBuilder, label: string) => void, o: { lenient?: boolean; numeric?: boolean } = {}): Sub {
  const g = grammar(/(^|\s)(-h|--help)(\||\s|$)/.test(options) ? options : `${options} -h|--help`, { lenient: o.lenient ?? false, numeric: o.numeric ?? false });
  return (args, label) => {
    const b = new UseBuilder(label);
    const p = parseArgs(g, args);
    b.options(p);
    body(p, b, label);
    return b.use;
  };
}

const readRevs = (options: string, o: { numeric?: boolean } = {}) => sub(options, (p, b, l) => revsAndPaths(p, b, 'read', l), { lenient: true, ...o });
const network = (why: string, extra: (p: ParsedArgs, b: UseBuilder) => void = () => undefined) => sub('--exec|--upload-pack|--receive-pack=exec --template=exec -c|--config=any', (p, b, l) => { b.effect('network', `${l} ${why}`); if (p.has('-c')) b.effect('config-code', `${l} -c sets configuration`); extra(p, b); }, { lenient: true });

/**
 * `git checkout X`: git switches to branch X if there is one, else restores the path X and discards
 * its uncommitted changes. The gate cannot list branches, so X is a branch only when it reads as a
 * revision: `-`, HEAD~2, a tag (v1.2.0), a hash, an upstream (origin/x), a usual branch name (main,
 * develop, release-1.2) or a `kind/topic` name (feature/login). Anything else may be a directory —
 * `tests/unit`, `docs/api`, `src/app/views` are directories far more often than branches, so a
 * `kind/` that names a usual directory (test, tests, docs, ci, build, dev, …) does not make a branch.
 */
const BRANCH_WORDS = /^(main|master|trunk|develop|development|dev|staging|stage|production|prod|next|stable|beta|alpha|canary|gh-pages|HEAD|FETCH_HEAD|ORIG_HEAD|MERGE_HEAD)$/;
function looksLikeRevision(v: string): boolean {
  return v === '-' || v === '@' || /^@\{-?\d+\}$/.test(v) || /[~^]\d*$|@\{/.test(v) || BRANCH_WORDS.test(v) || /^[0-9a-f]{7,40}$/.test(v)
    || /^v?\d+(\.\d+)+([-+.][\w.-]+)?$/.test(v) || /^(origin|upstream|remotes?|refs)\//.test(v)
    || /^(feature|feat|fix|bugfix|hotfix|release|chore|refactor|wip|dependabot|renovate|exp|experiment|topic|backport)[/-][\w./-]+$/.test(v)
    || /^(release|rel|hotfix|version|branch)[-_]?\d[\w.-]*$/.test(v);
}
function looksLikePath(w: ShellWord): boolean {
  return w.dynamic || w.glob || !looksLikeRevision(w.value);
}

const submoduleNet = network('fetches or runs commands in submodules', (p, b) => {
  if (p.operands[0]?.value === 'foreach') { b.effect('exec-inline', 'git submodule foreach runs a command string'); const cmd = p.operands[p.operands.length - 1]; if (cmd) b.inner([literalWord('sh'), literalWord('-c'), cmd]); }
});

const SUBS: Record<string, Sub> = {
  status: sub('-s|--short -b|--branch -v|--verbose -u|--untracked-files?any --porcelain?any --long --ignored?any -z --column?any --no-column --ahead-behind --no-ahead-behind --renames --no-renames --find-renames?any --ignore-submodules?any --show-stash', (p, b, l) => revsAndPaths(p, b, 'read', l, true)),
  diff: readRevs(LOG_OPTS),
  log: readRevs(LOG_OPTS, { numeric: true }),
  show: readRevs(LOG_OPTS, { numeric: true }),
  whatchanged: readRevs(LOG_OPTS, { numeric: true }),
  shortlog: readRevs('-n|--numbered -s|--summary -e|--email -c|--committer -w?any --group=any --format=any --all --branches?any --tags?any --since|--after=any --until|--before=any --author=any --no-merges --merges --first-parent -1 -2 -3 -4 -5 -6 -7 -8 -9 --max-count=any --date=any --grep=any -i|--regexp-ignore-case', { numeric: true }),
  'rev-list': readRevs(LOG_OPTS, { numeric: true }),
  'diff-tree': readRevs(LOG_OPTS),
  'diff-index': readRevs(LOG_OPTS),
  'diff-files': readRevs(LOG_OPTS),
  'range-diff': readRevs(LOG_OPTS),
  blame: sub('-L=any -l -t -S=read --contents=read -C?any -M?any -w -s -e|--show-email -p|--porcelain --line-porcelain --incremental --root --show-stats --progress -f|--show-name -n|--show-number -c -b --date=any --reverse=any --ignore-rev=any --ignore-revs-file=read --color-lines --color-by-age --abbrev?any --first-parent --encoding=any --minimal --score-debug', (p, b, l) => revsAndPaths(p, b, 'read', l), { lenient: true }),
  annotate: sub('-L=any -l -t -S=read --contents=read -C?any -M?any -w -s -e -p -f -n -c -b', (p, b, l) => revsAndPaths(p, b, 'read', l), { lenient: true }),
  'ls-files': sub('-c|--cached -d|--deleted -m|--modified -o|--others -i|--ignored -s|--stage -u|--unmerged -k|--killed -z -t -v -f --directory --no-empty-directory --eol --deduplicate -x|--exclude=any -X|--exclude-from=read --exclude-per-directory=any --exclude-standard --error-unmatch --with-tree=any --full-name --recurse-submodules --abbrev?any --debug --sparse --format=any', (p, b, l) => revsAndPaths(p, b, 'read', l, true)),
  'ls-tree': readRevs('-d -r -t -l|--long -z --name-only --name-status --object-only --full-name --full-tree --abbrev?any --format=any'),
  'rev-parse': readRevs('--git-dir --git-common-dir --show-toplevel --show-prefix --show-cdup --is-inside-work-tree --is-inside-git-dir --is-bare-repository --is-shallow-repository --abbrev-ref?any --short?any --verify -q|--quiet --symbolic --symbolic-full-name --all --branches?any --tags?any --remotes?any --glob=any --exclude=any --since=any --until=any --absolute-git-dir --path-format=any --show-object-format?any --show-ref-format --local-env-vars --resolve-git-dir=read --git-path=any --shared-index-path --default=any --prefix=any --sq --sq-quote --not --flags --no-flags --revs-only --no-revs --parseopt --keep-dashdash --stop-at-non-option --stuck-long --disambiguate=any --show-superproject-working-tree'),
  describe: readRevs('--all --tags --contains --abbrev=any --candidates=any --exact-match --debug --long --match=any --exclude=any --always --first-parent --dirty?any --broken?any'),
  'cat-file': readRevs('-t -s -e -p --textconv --filters --path=any --batch?any --batch-check?any --batch-command?any --batch-all-objects --buffer --follow-symlinks --unordered --allow-unknown-type -Z'),
  'show-ref': readRevs('--head --branches --tags -d|--dereference -s|--hash?any --verify --abbrev?any -q|--quiet --exclude-existing?any --exists'),
  'merge-base': readRevs('-a|--all --octopus --independent --is-ancestor --fork-point'),
  'name-rev': readRevs('--tags --refs=any --exclude=any --all --annotate-stdin --name-only --no-undefined --always'),
  'count-objects': readRevs('-v|--verbose -H|--human-readable'),
  'check-ignore': sub('-q|--quiet -v|--verbose --stdin -z -n|--non-matching --no-index', (p, b, l) => revsAndPaths(p, b, 'read', l, true)),
  'check-attr': sub('-a|--all --cached --stdin -z --source=any', (p, b, l) => void [p, b, l]),
  'for-each-ref': readRevs('--count=any --shell --perl --python --tcl --sort=any --format=any --color?any --points-at=any --merged?any --no-merged?any --contains?any --no-contains?any --ignore-case --omit-empty --exclude=any --include-root-refs'),
  grep: sub('-O|--open-files-in-pager?any!exec-hidden -e=any -f=read -A|--after-context=any -B|--before-context=any -C|--context=any -m|--max-count=any --max-depth=any --threads=any -n|--line-number -i|--ignore-case -I -w|--word-regexp -v|--invert-match -l|--files-with-matches|--name-only -L|--files-without-match -c|--count -h -H --full-name -E|--extended-regexp -G|--basic-regexp -F|--fixed-strings -P|--perl-regexp -z|--null -o|--only-matching -q|--quiet -a|--text --textconv --no-textconv --cached --no-index --untracked --no-exclude-standard --exclude-standard --recurse-submodules -r|--recursive --no-recursive --and --or --not --all-match --break --heading -p|--show-function -W|--function-context --column --color?any --no-color', (p, b, l) => {
    const ops = p.has('-e', '-f') ? p.operands : p.operands.slice(1);
    for (const o of ops) if (p.has('--no-index') || o.value.includes('/') || p.afterDashDash >= 0) b.read(o);
    void l;
  }, { numeric: true }),
  version: sub('--build-options', () => undefined),
  help: sub('-a|--all -g|--guides -c|--config -i|--info -m|--man -w|--web --verbose --no-external-commands --no-aliases --user-interfaces --developer-interfaces', (p, b) => { if (p.has('-w', '-i', '-m')) b.effect('interactive', 'git help opens a viewer'); }),
  var: sub('-l', () => undefined),
  fsck: sub('--unreachable --dangling --no-dangling --root --tags --cache --no-reflogs --full --no-full --connectivity-only --strict --verbose --lost-found --name-objects --progress --no-progress', (p, b) => { if (p.has('--lost-found')) b.write(literalWord('.git/lost-found')); }),
  cherry: readRevs('-v --abbrev?any'),
  'show-branch': readRevs('-a|--all -r|--remotes --topo-order --date-order --current --color?any --no-color --sparse --more=any --list --independent --merge-base --no-name --sha1-name --topics -g|--reflog?any'),
  'verify-commit': readRevs('-v|--verbose --raw'),
  'verify-tag': readRevs('-v|--verbose --raw --format=any'),
  'format-patch': sub('-o|--output-directory=write --stdout --cover-letter --no-cover-letter -n|--numbered -N|--no-numbered --start-number=any -k|--keep-subject -s|--signoff --subject-prefix=any --rfc?any -v|--reroll-count=any --to=any --cc=any --from?any --in-reply-to=any --attach?any --inline?any --thread?any --no-thread --suffix=any --quiet --no-binary --zero-commit --base=any --root -1 -2 -3 -4 -5 -6 -7 -8 -9 --output=write --numbered-files --range-diff=any --interdiff=any --creation-factor=any --progress', (p, b, l) => revsAndPaths(p, b, 'read', l), { lenient: true }),
  archive: sub('-o|--output=write --format=any --prefix=any --add-file=read --add-virtual-file=any --worktree-attributes --remote=any --exec=exec -l|--list -v|--verbose -0 -1 -2 -3 -4 -5 -6 -7 -8 -9', (p, b) => {
    if (p.has('--remote')) b.effect('network', 'git archive --remote fetches from another repository');
    for (const o of p.operands.slice(1)) b.read(o);
  }),
  bundle: sub('-q|--quiet --progress --all --version=any', (p, b) => {
    const verb = p.operands[0]?.value;
    if (verb === 'create') b.write(p.operands[1]);
    else if (verb === 'verify' || verb === 'list-heads') b.read(p.operands[1]);
    else b.problem(`git bundle ${verb ?? ''} is not modelled`);
  }, { lenient: true }),

  add: sub('-n|--dry-run -v|--verbose -f|--force -i|--interactive!interactive -p|--patch!interactive -e|--edit!interactive -u|--update -A|--all --no-all --no-ignore-removal --ignore-removal -N|--intent-to-add --refresh --ignore-errors --ignore-missing --renormalize --chmod=any --pathspec-from-file=read --pathspec-file-nul --sparse', (p, b, l) => {
    revsAndPaths(p, b, 'read', l, true);
    if (p.has('-f') && (p.has('-A', '-u', '--pathspec-from-file') || p.operands.length === 0 || p.operands.some((o) => o.dynamic || o.glob || /[*?[]/.test(o.value) || !/\.[A-Za-z0-9]{1,8}$/.test(o.value)))) b.problem(`${l} -f of a directory or pattern stages ignored files (such as .env), whose contents later commands print`);
    if (p.values('--chmod').some((m) => m.dynamic || m.value !== '+x' && m.value !== '-x')) b.problem('git add --chmod takes only +x or -x');
  }),
  commit: sub('-m|--message=any -F|--file=read -a|--all -p|--patch!interactive --interactive!interactive --amend --no-edit -e|--edit!interactive -s|--signoff --no-signoff -v|--verbose -q|--quiet -n|--no-verify --verify --allow-empty --allow-empty-message --author=any --date=any -C|--reuse-message=any -c|--reedit-message=any!interactive --fixup=any --squash=any --reset-author -t|--template=read --cleanup=any -u|--untracked-files?any -o|--only -i|--include --dry-run --short --branch --porcelain --long -z|--null --status --no-status -S|--gpg-sign?any --no-gpg-sign --trailer=any --pathspec-from-file=read --pathspec-file-nul --no-post-rewrite', (p, b, l) => {
    revsAndPaths(p, b, 'read', l, true);
    if (!p.has('-m', '-F', '-C', '--fixup', '--no-edit', '--dry-run')) b.effect('interactive', 'git commit without -m opens an editor');
  }),
  checkout: sub('-b=any -B=any --orphan=any -t|--track?any --no-track -f|--force!discard-work -m|--merge -q|--quiet --detach -p|--patch!interactive --ours --theirs --conflict=any --ignore-other-worktrees --overwrite-ignore --no-overwrite-ignore --recurse-submodules?any --no-recurse-submodules --pathspec-from-file=read --pathspec-file-nul -l --guess --no-guess --progress --no-progress --overlay --no-overlay', (p, b, l) => {
    if (p.afterDashDash >= 0) { revsAndPaths(p, b, 'discard', l); return; }
    const ops = p.operands;
    const creating = p.has('-b', '-B', '--orphan');
    ops.forEach((o, i) => { if ((i > 0 && !creating) || looksLikePath(o)) { b.effect('discard-work', `${l} ${o.value || '(computed)'} overwrites uncommitted changes`); b.path(o, 'write', l); } });
  }),
  switch: sub('-c|--create=any -C|--force-create=any --detach --guess --no-guess -f|--force|--discard-changes!discard-work -m|--merge --conflict=any -q|--quiet -t|--track?any --no-track --orphan=any --ignore-other-worktrees --recurse-submodules?any --no-recurse-submodules --progress --no-progress', () => undefined),
  restore: sub('-s|--source=any -p|--patch!interactive -W|--worktree -S|--staged --ours --theirs -m|--merge --conflict=any --ignore-unmerged --ignore-skip-worktree-bits --overlay --no-overlay -q|--quiet --progress --no-progress --pathspec-from-file=read --pathspec-file-nul --recurse-submodules?any --no-recurse-submodules', (p, b, l) => {
    if (p.has('-S') && !p.has('-W')) { revsAndPaths(p, b, 'read', l, true); return; }
    revsAndPaths(p, b, 'discard', l, true);
  }),
  reset: sub('--soft --mixed -N --hard!discard-work --merge!discard-work --keep -q|--quiet --no-quiet -p|--patch!interactive --pathspec-from-file=read --pathspec-file-nul --recurse-submodules?any --no-recurse-submodules --no-refresh --refresh', (p, b, l) => revsAndPaths(p, b, 'read', l)),
  stash: (args, label) => {
    const verb = args[0] && !args[0].dynamic && !args[0].value.startsWith('-') ? args[0].value : 'push';
    const rest = verb === 'push' && args[0]?.value !== 'push' ? args : args.slice(1);
    const b = new UseBuilder(`${label} ${verb}`);
    const p = parseArgs(grammar('-p|--patch!interactive -k|--keep-index --no-keep-index -u|--include-untracked -a|--all -q|--quiet -m|--message=any --staged -S --pathspec-from-file=read --pathspec-file-nul --index --only-untracked -h|--help'), rest);
    b.options(p);
    if (verb === 'drop' || verb === 'clear') b.effect('discard-work', `git stash ${verb} deletes stashed work`);
    else if (!['push', 'save', 'list', 'show', 'pop', 'apply', 'branch', 'create', 'store'].includes(verb)) b.problem(`git stash ${verb} is not modelled`);
    return b.use;
  },
  merge: sub('--no-ff --ff --ff-only --squash --no-squash --no-commit --commit -m=any -F|--file=read --abort --continue --quit -s|--strategy=any -X|--strategy-option=any --allow-unrelated-histories -e|--edit!interactive --no-edit --log?any --no-log --stat --no-stat -n -q|--quiet -v|--verbose --verify --no-verify -S|--gpg-sign?any --no-gpg-sign --signoff --no-signoff --autostash --no-autostash --rerere-autoupdate --no-rerere-autoupdate --progress --no-progress --cleanup=any --into-name=any --overwrite-ignore', () => undefined),
  rebase: sub('-i|--interactive!interactive -x|--exec=exec --onto=any --abort --continue --skip --quit --edit-todo!interactive --show-current-patch --autosquash --no-autosquash --autostash --no-autostash -r|--rebase-merges?any --no-rebase-merges -f|--force-rebase --no-ff --keep-base --root -q|--quiet -v|--verbose --stat -n|--no-stat --signoff -s|--strategy=any -X|--strategy-option=any --update-refs --no-update-refs --no-verify --verify --committer-date-is-author-date --ignore-date --reset-author-date --empty=any --keep-empty --no-keep-empty --reapply-cherry-picks --no-reapply-cherry-picks --fork-point --no-fork-point --ff -C=any --whitespace=any -m|--merge --apply -S|--gpg-sign?any --no-gpg-sign --rerere-autoupdate --no-rerere-autoupdate --allow-empty-message', () => undefined),
  'cherry-pick': sub('-n|--no-commit -e|--edit!interactive --no-edit -x -m|--mainline=any -s|--signoff --continue --abort --skip --quit --ff --allow-empty --allow-empty-message --keep-redundant-commits --empty=any --strategy=any -X|--strategy-option=any -S|--gpg-sign?any --no-gpg-sign --cleanup=any --rerere-autoupdate --no-rerere-autoupdate', () => undefined),
  revert: sub('-n|--no-commit -e|--edit!interactive --no-edit -m|--mainline=any -s|--signoff --continue --abort --skip --quit --strategy=any -X|--strategy-option=any -S|--gpg-sign?any --no-gpg-sign --cleanup=any --reference --rerere-autoupdate --no-rerere-autoupdate', () => undefined),
  mv: sub('-f|--force -k -n|--dry-run -v|--verbose --sparse', (p, b, l) => { for (const o of p.operands.slice(0, -1)) b.path(o, 'delete', l); b.path(p.operands[p.operands.length - 1], 'write', l); }),
  rm: sub('-f|--force -r -n|--dry-run -q|--quiet --cached --ignore-unmatch --sparse --pathspec-from-file=read --pathspec-file-nul', (p, b, l) => {
    if (p.has('--cached', '-n')) { revsAndPaths(p, b, 'read', l, true); return; }
    // without -f git refuses to remove a file whose content differs from HEAD, so what it removes stays in history
    if (p.has('-f')) b.effect('delete', `${l} -f deletes files from the working tree, uncommitted changes included`);
    revsAndPaths(p, b, 'delete', l, true);
  }),
  init: sub('-q|--quiet --bare --template=exec --separate-git-dir=write -b|--initial-branch=any --shared?any --object-format=any --ref-format=any', (p, b) => { for (const o of p.operands) b.write(o); }),
  branch: sub('-d|--delete -D!discard-work -f|--force -m|--move -M -c|--copy -C -l|--list -a|--all -r|--remotes -v|--verbose -vv -q|--quiet -t|--track?any --no-track -u|--set-upstream-to=any --unset-upstream --edit-description!interactive --create-reflog --contains?any --no-contains?any --merged?any --no-merged?any --sort=any --format=any --show-current --points-at=any --color?any --no-color --column?any --no-column --abbrev?any --no-abbrev -i|--ignore-case --omit-empty --recurse-submodules', (p, b, l) => { if (p.has('-d') && p.has('-f')) b.effect('discard-work', `${l} -d -f deletes a branch that may not be merged`); }),
  tag: sub('-a|--annotate -s|--sign -u|--local-user=any -f|--force -d|--delete!discard-work -v|--verify -n?any -l|--list --sort=any --contains?any --no-contains?any --points-at=any --merged?any --no-merged?any --column?any --no-column --create-reflog --format=any --color?any -i|--ignore-case --omit-empty -m|--message=any -F|--file=read -e|--edit!interactive --cleanup=any --trailer=any', (p, b) => { if ((p.has('-a', '-s') || p.operands.length) && !p.has('-m', '-F', '-l', '-d', '-v') && p.has('-a', '-s')) b.effect('interactive', 'git tag -a without -m opens an editor'); }),
  remote: sub('-v|--verbose', (p, b) => {
    const verb = p.operands[0]?.value;
    if (verb === undefined || verb === 'get-url') return;
    if (verb === 'show' || verb === 'prune' || verb === 'update') { b.effect('network', `git remote ${verb} contacts the remote`); return; }
    if (['add', 'set-url', 'rename', 'remove', 'rm', 'set-head', 'set-branches'].includes(verb)) { b.effect('network', `git remote ${verb} changes where the repository pushes and fetches`); return; }
    b.problem(`git remote ${verb} is not modelled`);
  }, { lenient: true }),
  worktree: sub('-f|--force -b=any -B=any --detach --checkout --no-checkout --lock --reason=any -q|--quiet --track --no-track --guess-remote --orphan -n|--dry-run -v|--verbose --expire=any --porcelain -z', (p, b) => {
    const verb = p.operands[0]?.value;
    if (verb === 'list') return;
    if (verb === 'add' || verb === 'move') { b.write(p.operands[verb === 'add' ? 1 : 2]); return; }
    if (verb === 'remove' || verb === 'prune') { b.effect('delete', `git worktree ${verb} deletes a working tree`); return; }
    if (verb === 'lock' || verb === 'unlock' || verb === 'repair') return;
    b.problem(`git worktree ${verb ?? ''} is not modelled`);
  }),
  apply: sub('--check --stat --numstat --summary --index --cached -3|--3way --ours --theirs --union -R|--reverse --reject -p=any -C=any --unidiff-zero --apply --no-add --allow-binary-replacement|--binary --exclude=any --include=any --ignore-space-change|--ignore-whitespace --whitespace=any --inaccurate-eof -v|--verbose -q|--quiet --recount --directory=any --unsafe-paths --allow-empty -z --build-fake-ancestor=write', (p, b, l) => {
    for (const o of p.operands) b.read(o);
    if (p.has('--unsafe-paths')) b.problem(`${l} --unsafe-paths may write outside the working tree`);
    if (!p.has('--check', '--stat', '--numstat', '--summary') || p.has('--apply')) b.problem(`${l} writes the files its patch names, which the gate cannot see`);
  }),
  am: sub('-s|--signoff -k|--keep -3|--3way -q|--quiet -u|--utf8 --abort --continue --skip --quit -i|--interactive!interactive', (p, b, l) => { for (const o of p.operands) b.read(o); if (!p.has('--abort', '--skip', '--quit')) b.problem(`${l} writes the files its patches name`); }, { lenient: true }),
  notes: sub('-m|--message=any -F|--file=read -f|--force --ref=any -C|--reuse-message=any -c|--reedit-message=any -v -n -q --allow-empty --stdin --ignore-missing --strategy=any --commit --abort', (p, b) => {
    const verb = p.operands[0]?.value ?? 'list';
    if (verb === 'edit' || ((verb === 'add' || verb === 'append') && !p.has('-m', '-F', '-C'))) b.effect('interactive', `git notes ${verb} opens an editor`);
    if (verb === 'prune' || verb === 'remove') b.effect('discard-work', `git notes ${verb} deletes notes`);
  }),
  bisect: (args, label) => {
    const b = new UseBuilder(label);
    const verb = args[0]?.value;
    if (verb === 'run') { const cmd = args.slice(1); if (!cmd.length) b.problem('git bisect run without a command'); else b.inner(cmd); return b.use; }
    if (verb === 'replay') return b.read(args[1]).use;
    if (verb === 'visualize' || verb === 'view') return b.effect('interactive', 'git bisect visualize opens a viewer').use;
    if (!['start', 'good', 'bad', 'new', 'old', 'skip', 'reset', 'log', 'terms', 'help'].includes(verb ?? '')) b.problem(`git bisect ${verb ?? ''} is not modelled`);
    return b.use;
  },
  clean: sub('-n|--dry-run -f|--force -i|--interactive!interactive -d -q|--quiet -x -X -e|--exclude=any', (p, b, l) => {
    if (!p.has('-n')) b.effect('discard-work', `${l} deletes untracked files`);
    revsAndPaths(p, b, 'delete', l, true);
  }),
  gc: sub('--aggressive --auto --prune?any --no-prune -q|--quiet --force --keep-largest-pack --cruft --no-cruft --detach', (p, b, l) => { if (p.values('--prune').some((v) => v.value === 'now' || v.value === 'all')) b.effect('destroy-history', `${l} --prune=now deletes unreachable commits at once`); else b.effect('discard-work', `${l} prunes unreachable commits`); }),
  prune: sub('-n|--dry-run -v|--verbose --progress --expire=any', (p, b, l) => { if (!p.has('-n')) b.effect('destroy-history', `${l} deletes unreachable objects`); }),
  'filter-branch': (_a, label) => new UseBuilder(label).effect('destroy-history', 'git filter-branch rewrites every commit').use,
  'filter-repo': (_a, label) => new UseBuilder(label).effect('destroy-history', 'git filter-repo rewrites every commit').use,
  'update-ref': (args, label) => { const b = new UseBuilder(label); if (args.some((a) => a.value === '-d' || a.value === '--delete' || a.value === '--stdin')) b.effect('destroy-history', 'git update-ref -d deletes a ref'); else b.effect('discard-work', 'git update-ref moves a ref directly'); return b.use; },
  credential: (_a, label) => new UseBuilder(label).effect('secrets', `${label} reads or stores credentials`).use,
  'credential-store': (_a, label) => new UseBuilder(label).effect('secrets', `${label} reads or stores credentials`).use,
  'credential-cache': (_a, label) => new UseBuilder(label).effect('secrets', `${label} reads or stores credentials`).use,
  repack: sub('-a -A -d -f -F -q -l -n -b -m --window=any --depth=any --threads=any --max-pack-size=any --geometric=any --write-midx --cruft', () => undefined),
  reflog: (args, label) => {
    const verb = args[0] && !args[0].value.startsWith('-') ? args[0].value : 'show';
    const b = new UseBuilder(`${label} ${verb}`);
    if (verb === 'expire' || verb === 'delete' || verb === 'drop') b.effect('destroy-history', `git reflog ${verb} deletes the record of earlier commits`);
    else if (verb !== 'show' && verb !== 'exists' && verb !== 'list' && !/[~^@]/.test(verb) && verb !== 'HEAD') b.problem(`git reflog ${verb} is not modelled`);
    return b.use;
  },
  config: (args, label) => {
    const b = new UseBuilder(label);
    const p = parseArgs(grammar('--global --system --local --worktree -f|--file=write --blob=any --get --get-all --get-regexp --get-urlmatch --replace-all --add --unset --unset-all --rename-section --remove-section -l|--list --fixed-value -t|--type=any --bool --int --bool-or-int --path --expiry-date --no-type -z|--null --name-only --show-origin --show-scope --get-color --get-colorbool -e|--edit!interactive --includes --no-includes --default=any --value=any --comment=any --all -h|--help'), args);
    b.options(p);
    const ops = p.operands.map((o) => o);
    let verb = 'set';
    if (ops[0] && !ops[0].dynamic && ['get', 'list', 'set', 'unset', 'rename-section', 'remove-section', 'edit'].includes(ops[0].value)) verb = ops.shift()!.value;
    if (p.has('--get', '--get-all', '--get-regexp', '--get-urlmatch', '-l', '--get-color', '--get-colorbool') || verb === 'get' || verb === 'list') {
      if (ops.some((o) => o.dynamic || /extraheader|credential|password|passwd|token|secret|insteadof|proxy/i.test(o.value)) || (p.has('-l') || verb === 'list') && p.has('--show-origin', '--includes')) b.problem('git config reads keys that may hold credentials (extra headers, credential helpers, tokens in URLs)');
      return b.use;
    }
    if (p.has('--unset', '--unset-all', '--remove-section') || verb === 'unset' || verb === 'remove-section') return b.use;
    if (verb === 'edit' || p.has('-e')) return b.use;
    const key = ops[0];
    if (!key) return b.use; // `git config` alone prints usage
    if (ops.length < 2) return b.use; // `git config KEY` reads it
    if (key.dynamic) return b.effect('config-code', 'git config sets a key computed at run time').use;
    const k = key.value.toLowerCase();
    if (k === 'core.pager' || /^pager\./.test(k)) { if (!ops[1]!.dynamic && SAFE_PAGERS.test(ops[1]!.value)) return b.use; }
    else if (SAFE_CONFIG.test(k)) return b.use;
    return b.effect('config-code', `git config ${key.value} can make git run programs or fetch from elsewhere`).use;
  },
  push: network('sends commits to another repository', (p, b) => {
    if (p.operands.some((o) => o.dynamic || /:\/\/|^[^/]*@[^/]*:|^\//.test(o.value)) || p.has('--mirror')) b.effect('upload', 'git push to a URL (or --mirror) sends the repository to a host that is not a configured remote');
  }),
  pull: network('fetches from another repository'),
  fetch: network('fetches from another repository'),
  clone: network('fetches another repository'),
  'ls-remote': network('contacts another repository'),
  // status and summary only read the submodules' checked-out state
  submodule: (args, label) => (args[0] && !args[0].dynamic && ['status', 'summary'].includes(args[0].value) && args.slice(1).every((a) => !a.dynamic && /^(--cached|--recursive|-q|--quiet|--files|--for-status|-n\d*)$|^[^-]/.test(a.value))
    ? new UseBuilder(label).use : submoduleNet(args, label)),
  'update-index': sub('--assume-unchanged --no-assume-unchanged --skip-worktree --no-skip-worktree --refresh --really-refresh -q --unmerged --ignore-missing --fsmonitor-valid --no-fsmonitor-valid', (p, b, l) => revsAndPaths(p, b, 'read', l, true)),
  'send-email': network('sends mail', (_p, b) => b.effect('upload', 'git send-email sends patches')),
  'request-pull': network('runs git ls-remote on the URL it is given'),
  daemon: network('serves repositories', (_p, b) => b.effect('server', 'git daemon listens for connections')),
  instaweb: network('serves a web view', (_p, b) => b.effect('server', 'git instaweb listens for connections')),
  'http-backend': network('serves repositories'),
  lfs: network('transfers large files'),
  difftool: sub('-x|--extcmd=exec -t|--tool=any -y|--no-prompt --prompt -d|--dir-diff --tool-help --trust-exit-code -g|--gui', (p, b, l) => { revsAndPaths(p, b, 'read', l); if (!p.has('-x')) b.effect('interactive', `${l} opens a diff tool`); }, { lenient: true }),
  mergetool: sub('-t|--tool=any -y|--no-prompt --prompt -g|--gui --tool-help -O=read', (_p, b, l) => { b.effect('interactive', `${l} opens a merge tool`); }),
  svn: network('talks to a Subversion server'),
  p4: network('talks to a Perforce server'),
};
for (const k of ['replace', 'read-tree', 'symbolic-ref', 'hook', 'difftool', 'mergetool', 'gui', 'citool', 'hash-object', 'commit-tree', 'write-tree', 'mktree', 'unpack-objects', 'sparse-checkout', 'maintenance', 'rerere', 'fast-import', 'fast-export', 'web--browse', 'bugreport', 'pack-refs', 'multi-pack-index', 'commit-graph', 'interpret-trailers', 'mailinfo', 'mailsplit', 'stripspace', 'column', 'check-ref-format', 'get-tar-commit-id', 'upload-pack', 'receive-pack', 'shell', 'remote-ext', 'remote-fd']) {
  if (!SUBS[k]) SUBS[k] = (_args, label) => new UseBuilder(label).problem(`${label} is not modelled`).use;
}

function gitUse(args: ShellWord[], name: string, env?: ReadonlyMap<string, ShellWord | null>): CommandUse {
  const b = new UseBuilder(name);
  const p = parseArgs(GLOBAL, args);
  b.options(p);
  b.use.paths = b.use.paths.filter((x) => !p.values('-C').includes(x.word)); // -C is judged below, as the repository used
  let quietEditor = EDITOR_VARS.some((v) => { const w = env?.get(v); return !!w && !w.dynamic && SAFE_EDITORS.test(w.value); });
  for (const c of p.values('-c')) {
    const [k, ...v] = c.value.split('=');
    const key = (k ?? '').toLowerCase();
    const value = v.join('=');
    if (c.dynamic) { b.effect('config-code', 'git -c sets configuration computed at run time'); continue; }
    if ((key === 'core.pager' || key.startsWith('pager.')) && SAFE_PAGERS.test(value)) continue;
    if ((key === 'core.editor' || key === 'sequence.editor') && SAFE_EDITORS.test(value)) { quietEditor = true; continue; }
    if (SAFE_CONFIG.test(key)) continue;
    b.effect('config-code', `git -c ${k} can make git run programs`);
  }
  if (p.has('--config-env')) b.effect('config-code', 'git --config-env sets configuration from the environment');
  if (p.has('--git-dir', '--work-tree')) b.problem('git --git-dir/--work-tree uses another repository');
  const dirs = p.values('-C');
  const [s, ...rest] = p.operands;
  // git reads the config and runs the hooks of the repository it finds from its directory: that is code from there
  const repo = (u: CommandUse): CommandUse => {
    const ub = new UseBuilder(u.label);
    Object.assign(ub.use, u);
    if (dirs.length > 1) ub.problem('git: more than one -C');
    if (dirs[0]) ub.within(dirs[0], `${name} -C uses the repository (its config and hooks) in`);
    else ub.path(literalWord('.'), 'exec', `${name} uses the repository (its config and hooks) in`);
    return ub.use;
  };
  if (!s) return repo(b.use);
  if (s.dynamic) return b.problem('git: the subcommand is computed at run time').use;
  const spec = SUBS[s.value];
  if (!spec) return b.problem(`git ${s.value} is not modelled (an alias or an extension)`).use;
  const inner = spec(rest, `git ${s.value}`);
  const effects = [...b.use.effects, ...inner.effects].filter((e) => !(quietEditor && e.effect === 'interactive' && EDITOR_STEP.test(e.why)));
  return repo({ ...inner, problems: [...b.use.problems, ...inner.problems], paths: [...b.use.paths, ...inner.paths], effects, readOnly: b.use.readOnly && inner.readOnly });
}

export const GIT_SPECS: CommandSpec[] = [{ names: ['git'], use: gitUse }];
