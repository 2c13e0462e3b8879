/**
 * The agent's git bundle reviewed as an effect, like the patch and the tar: every commit it carries
 * (not only the final tree — a workflow added in one commit and removed in the next is still in the
 * history someone fetches and CI may run) is diffed against its first parent, and each added or
 * modified file goes through the same review as the workspace (domain/review-flags.ts): the
 * protected set, new executable and setuid bits, confusable names, raw control bytes in added lines.
 *
 * The bundle is the sandbox's output, so git runs here hardened (as in bundle.ts): no system or
 * global config, no hooks, no fsmonitor, no external diff or textconv drivers (a .gitattributes in the
 * bundle cannot name a program), objects fsck'd on fetch (a tree entry named `.git` in any spelling is
 * refused by git's own fsck), every output capped, a time limit per command. The objects go into the
 * worker's own clone, which is removed with the run.
 */
import { spawn } from 'node:child_process';
import type { ProtectedMatcher } from '../domain/effects';
import { isGitPath } from '../domain/export-names';
import type { FileChange, ReviewFlag } from '../domain/sandbox';
import { controlBytesIn, reviewFlags } from '../domain/review-flags';

/** Commits reviewed one by one at most; beyond, the rest is reviewed as one diff and the result says so. */
export const MAX_REVIEWED_COMMITS = 500;
/** Bytes of `git log -p` read at most (control bytes in added lines); beyond, the result says what was not read. */
const MAX_PATCH_BYTES = 32 * 1024 * 1024;
const GIT_TIMEOUT_MS = 60_000;

export interface BundleReview {
  /** Flags of the bundle's commits, each naming its commit (ReviewFlag.commit). */
  flags: ReviewFlag[];
  commits: number;
  /** Set when the bundle could not be reviewed (it is then dropped): why. */
  refused?: string;
  notes: string[];
}

interface GitOut { code: number | null; out: Buffer; cut: boolean; err: string }

function git(repo: string, args: string[], maxBytes = 4 * 1024 * 1024): Promise<GitOut> {
  return new Promise((resolve) => {
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', LANG: 'C', LC_ALL: 'C', GIT_TERMINAL_PROMPT: '0' };
    const hardened = ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', '-c', 'diff.external=', '-c', 'core.attributesFile=/dev/null', '-c', 'fetch.fsckObjects=true', '-c', 'transfer.fsckObjects=true'];
    const child = spawn('git', [...hardened, '-C', repo, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const chunks: Buffer[] = [];
    let n = 0;
    let cut = false;
    let err = '';
    child.stdout.on('data', (c: Buffer) => {
      if (cut) return;
      if (n + c.length > maxBytes) {
        chunks.push(c.subarray(0, maxBytes - n));
        n = maxBytes;
        cut = true;
        child.kill('SIGKILL');
        return;
      }
      chunks.push(c);
      n += c.length;
    });
    child.stderr.on('data', (c: Buffer) => { if (err.length < 2000) err += c.toString('utf8'); });
    const t = setTimeout(() => child.kill('SIGKILL'), GIT_TIMEOUT_MS);
    child.on('error', (e) => resolve({ code: -1, out: Buffer.alloc(0), cut: false, err: e.message }));
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code: cut ? 0 : code, out: Buffer.concat(chunks), cut, err: err.trim() });
    });
  });
}

/** `git diff-tree -r -z --raw` records: `:oldmode newmode oldsha newsha status\0path\0`. */
export function parseRawDiff(out: Buffer): FileChange[] {
  const parts = out.toString('utf8').split('\0');
  const changes: FileChange[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) {
    const m = /^:(\d{6}) (\d{6}) [0-9a-f]+ [0-9a-f]+ ([AMDTCRU])/.exec(parts[i]!.trim());
    if (!m) { i -= 1; continue; }
    const path = parts[i + 1]!;
    const before = parseInt(m[1]!, 8);
    const after = parseInt(m[2]!, 8);
    const status = m[3]!;
    const change: FileChange['change'] = status === 'A' ? 'added' : status === 'D' ? 'deleted' : 'modified';
    const c: FileChange = { path, change, added: 0, removed: 0 };
    // git's modes: 100644, 100755, 120000 (link), 160000 (submodule); the permission bits are what the review reads
    if ((after & 0o170000) === 0o120000) c.symlink = true;
    if (after) c.modeAfter = after & 0o7777;
    if (before && change !== 'added') c.modeBefore = before & 0o7777;
    changes.push(c);
    if ((after & 0o170000) === 0o160000 && change !== 'deleted') {
      // a gitlink: the commit of another repository that `git submodule update` checks out and runs hooks in
      changes.push({ path: `${path}/.git`, change, added: 0, removed: 0 });
    }
  }
  return changes;
}

/** Splits `git log -p` output (commits introduced by a NUL-prefixed `commit SHA` line) into per-file added-line texts. */
function sectionsOf(patch: string): Array<{ commit: string; path: string; text: string }> {
  const out: Array<{ commit: string; path: string; text: string }> = [];
  let commit = '';
  let path = '';
  let lines: string[] = [];
  const flush = () => { if (path) out.push({ commit, path, text: lines.join('\n') }); lines = []; };
  for (const line of patch.split('\n')) {
    if (line.startsWith('\0commit ')) { flush(); path = ''; commit = line.slice(8, 48); continue; }
    if (line.startsWith('diff --git ')) { flush(); path = ''; continue; }
    if (line.startsWith('+++ b/')) { path = line.slice(6); continue; }
    if (path && line.startsWith('+')) lines.push(line);
  }
  flush();
  return out;
}

/**
 * Reviews a verified bundle of `branch` against the run's base commit in the worker's clone `repo`.
 * Returns the flags, or `refused` when git would not take its objects (fsck) or could not list them.
 */
export async function reviewBundle(o: { repo: string; bundle: string; branch: string; base: string; set?: ProtectedMatcher }): Promise<BundleReview> {
  const notes: string[] = [];
  const ref = 'refs/corral/review';
  const fetched = await git(o.repo, ['fetch', '-q', '--no-tags', '--no-write-fetch-head', o.bundle, `+refs/heads/${o.branch}:${ref}`]);
  if (fetched.code !== 0) return { flags: [], commits: 0, refused: `git refused the bundle's objects: ${fetched.err.split('\n').find((l) => /error|fatal/.test(l))?.slice(0, 300) ?? `exit ${fetched.code}`}`, notes };
  const list = await git(o.repo, ['rev-list', '--reverse', '--topo-order', `${o.base}..${ref}`]);
  if (list.code !== 0) return { flags: [], commits: 0, refused: `the bundle's commits could not be listed: ${list.err.slice(0, 300)}`, notes };
  const commits = list.out.toString('utf8').split('\n').filter((l) => /^[0-9a-f]{40,64}$/.test(l));
  const flags: ReviewFlag[] = [];
  const seen = new Set<string>();
  const add = (commit: string, list: ReviewFlag[]) => {
    for (const f of list) {
      const key = `${commit}\0${f.path}\0${f.rule}`;
      if (seen.has(key)) continue;
      seen.add(key);
      flags.push({ ...f, where: 'bundle', commit: commit.slice(0, 12) });
    }
  };
  const reviewed = commits.slice(0, MAX_REVIEWED_COMMITS);
  for (const commit of reviewed) {
    const d = await git(o.repo, ['diff-tree', '-r', '-z', '--raw', '--no-renames', '--root', '-m', '--first-parent', '--no-commit-id', commit]);
    if (d.code !== 0) return { flags, commits: commits.length, refused: `commit ${commit.slice(0, 12)} could not be read: ${d.err.slice(0, 300)}`, notes };
    if (d.cut) notes.push(`commit ${commit.slice(0, 12)} changes more files than were listed`);
    const changes = parseRawDiff(d.out);
    // a tree entry that some filesystem takes for `.git` (`.GIT/config`, `git~1/hooks/x`): checked out there, it
    // overwrites the repository's own configuration (CVE-2014-9390); git's fsck refuses such trees, and so does this
    const dotgit = changes.find((c) => c.change !== 'deleted' && !c.path.endsWith('/.git') && isGitPath(c.path));
    if (dotgit) return { flags, commits: commits.length, refused: `commit ${commit.slice(0, 12)} writes ${JSON.stringify(dotgit.path)}, a path inside a git directory in some filesystem's spelling`, notes };
    for (const c of changes) add(commit, reviewFlags(c, o.set));
  }
  if (commits.length > reviewed.length) {
    // the rest at once: what they leave changed at the tip, against the last commit reviewed one by one
    const from = reviewed.at(-1) ?? o.base;
    const d = await git(o.repo, ['diff-tree', '-r', '-z', '--raw', '--no-renames', from, ref]);
    for (const c of parseRawDiff(d.out)) add(`${from.slice(0, 12)}..tip`, reviewFlags(c, o.set));
    notes.push(`${commits.length - reviewed.length} commits after the first ${reviewed.length} were reviewed as one diff (files a later commit adds and removes again are not seen there)`);
  }
  // raw control bytes in added lines, commit by commit
  const log = await git(o.repo, ['log', '--reverse', '-p', '-m', '--first-parent', '--no-color', '--no-ext-diff', '--no-textconv', '--format=%x00commit %H', `${o.base}..${ref}`], MAX_PATCH_BYTES);
  if (log.cut) notes.push(`the bundle's history is larger than ${MAX_PATCH_BYTES / 1048576} MiB as a patch; added lines past that were not checked for control bytes`);
  for (const s of sectionsOf(log.out.toString('utf8'))) {
    const ctl = controlBytesIn(s.text);
    if (ctl) add(s.commit, [{ path: s.path, rule: 'control-bytes', reason: ctl }]);
  }
  await git(o.repo, ['update-ref', '-d', ref]);
  return { flags, commits: commits.length, notes };
}
