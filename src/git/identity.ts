/**
 * The agent's git identity for one run: GIT_AUTHOR_* and GIT_COMMITTER_* in every command of its
 * sandbox, so `git commit` works without `git config` (which would touch .git/config and be flagged
 * for review). From CORRAL_GIT_AUTHOR_NAME and CORRAL_GIT_AUTHOR_EMAIL, where `{run}` and `{tenant}`
 * become the run's id and tenant: `corral-agent <run_…@corral.invalid>` by default, so each commit
 * names the run that made it.
 */
export interface GitIdentityConfig {
  CORRAL_GIT_AUTHOR_NAME: string;
  CORRAL_GIT_AUTHOR_EMAIL: string;
}

export function gitIdentity(config: GitIdentityConfig, runId: string, tenant: string): Record<string, string> {
  const fill = (s: string) => s.replaceAll('{run}', runId).replaceAll('{tenant}', tenant);
  const name = fill(config.CORRAL_GIT_AUTHOR_NAME);
  const email = fill(config.CORRAL_GIT_AUTHOR_EMAIL);
  return { GIT_AUTHOR_NAME: name, GIT_AUTHOR_EMAIL: email, GIT_COMMITTER_NAME: name, GIT_COMMITTER_EMAIL: email };
}
