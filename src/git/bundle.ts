/**
 * workspace.git.bundle: the agent's commits since the clone, as a git bundle of one branch
 * (`corral/RUN_ID`), beside the patch. The bundle is made in the sandbox (its git, its repository)
 * and is the sandbox's output, so the worker trusts nothing in it: it must be at most
 * MAX_BUNDLE_BYTES, `git bundle verify` must accept it against the worker's own clone (it needs only
 * the commit the run started from), and it must carry exactly that one branch — else it is dropped and
 * the event says why. Apply it with `git fetch agent.bundle corral/RUN_ID`.
 *
 * A bundle that verifies is then reviewed commit by commit like the patch (bundle-review.ts): its
 * flags join the run's needs-review list; one whose objects git's fsck refuses is dropped.
 */
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import type { ProtectedMatcher } from '../domain/effects';
import type { LeasedSandbox, ReviewFlag } from '../domain/sandbox';
import { reviewBundle } from './bundle-review';

const MAX_BUNDLE_BYTES = 16 * 1024 * 1024;

export interface BundleResult {
  branch: string;
  commits: number;
  path: string | null;
  bytes: number;
  note?: string;
  /** What the review of its commits flagged (absent when there was no bundle to review). */
  needsReview?: ReviewFlag[];
  /** Things the review could not do in full. */
  reviewNotes?: string[];
}

export async function exportBundle(o: { sandbox: LeasedSandbox; base: string; runId: string; repo: string; dest: string; signal?: AbortSignal; protectedSet?: ProtectedMatcher }): Promise<BundleResult> {
  const branch = `corral/${o.runId}`;
  const none = (note: string, commits = 0): BundleResult => ({ branch, commits, path: null, bytes: 0, note });
  // git here runs corral's commands in the agent's repository: no hooks (git branch -f runs the
  // reference-transaction hook) and no fsmonitor program, whatever the repository's config says
  const script = `cd /workspace || exit 3
git() { command git -c core.hooksPath=/dev/null -c core.fsmonitor=false "$@"; }
git rev-parse -q --verify HEAD >/dev/null 2>&1 || { echo "no-head"; exit 0; }
n=$(git rev-list --count "$1..HEAD" 2>/dev/null) || { echo "no-base"; exit 0; }
[ "$n" = 0 ] && { echo 0; exit 0; }
git branch -f "$2" HEAD >/dev/null 2>&1 || exit 4
git bundle create -q /tmp/.corral-agent.bundle "$2" "^$1" >/dev/null 2>&1 || exit 5
[ "$(stat -c %s /tmp/.corral-agent.bundle)" -le ${MAX_BUNDLE_BYTES} ] || { echo "too-big"; exit 0; }
echo "$n"
base64 -w0 /tmp/.corral-agent.bundle
rm -f /tmp/.corral-agent.bundle`;
  const r = await o.sandbox.exec({
    argv: ['bash', '-c', script, 'corral-bundle', o.base, branch], timeoutMs: 120_000,
    maxOutputBytes: Math.ceil((MAX_BUNDLE_BYTES * 4) / 3) + 1024, ...(o.signal ? { signal: o.signal } : {}),
  });
  if (r.exitCode !== 0) return none(`the bundle could not be made in the sandbox (exit ${r.exitCode ?? 'none'})`);
  if (r.truncated) return none('the bundle was cut on its way out of the sandbox');
  const [first = '', data = ''] = r.stdout.split('\n');
  if (first === 'no-head') return none('the workspace has no git HEAD any more');
  if (first === 'no-base') return none(`the commit the run started from (${o.base.slice(0, 12)}) is not in the workspace's history any more`);
  if (first === 'too-big') return none(`the bundle is larger than ${MAX_BUNDLE_BYTES / 1048576} MiB`);
  const commits = Number(first);
  if (!Number.isInteger(commits) || commits < 0) return none('the sandbox answered something other than a commit count');
  if (commits === 0) return none('the agent made no commits', 0);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data)) return none('the bundle came out of the sandbox malformed', commits);
  const buf = Buffer.from(data, 'base64');
  writeFileSync(o.dest, buf, { mode: 0o600 });
  const verify = await git(['-C', o.repo, 'bundle', 'verify', '-q', o.dest]);
  const heads = verify.code === 0 ? await git(['-C', o.repo, 'bundle', 'list-heads', o.dest]) : verify;
  const refs = heads.code === 0 ? heads.out.trim().split('\n').map((l) => l.split(' ')[1]) : [];
  if (verify.code !== 0 || heads.code !== 0 || refs.length !== 1 || refs[0] !== `refs/heads/${branch}`) {
    rmSync(o.dest, { force: true });
    return none(verify.code !== 0 ? 'the bundle does not verify against the clone the run started from' : `the bundle carries other refs than ${branch}`, commits);
  }
  const review = await reviewBundle({ repo: o.repo, bundle: o.dest, branch, base: o.base, ...(o.protectedSet ? { set: o.protectedSet } : {}) });
  if (review.refused) {
    rmSync(o.dest, { force: true });
    return none(`the bundle was dropped: ${review.refused}`, commits);
  }
  return { branch, commits, path: o.dest, bytes: buf.length, needsReview: review.flags, ...(review.notes.length ? { reviewNotes: review.notes } : {}) };
}

function git(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const env = { PATH: '/usr/local/bin:/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', LANG: 'C' };
    const child = spawn('git', ['-c', 'core.hooksPath=/dev/null', '-c', 'core.fsmonitor=false', ...args], { env, stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => { if (out.length < 65536) out += c.toString('utf8'); });
    const t = setTimeout(() => child.kill('SIGKILL'), 60_000);
    child.on('error', () => resolve({ code: -1, out: '' }));
    child.on('close', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}
