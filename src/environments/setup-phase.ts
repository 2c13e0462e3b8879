/**
 * The setup phase of a run whose environment has setup commands: after the sandbox is seeded and
 * before the first model call.
 *
 *   1. The cache key: the tenant, the environment's digest, the digests of the lockfiles it names and
 *      of the whole workspace (every file, mode and link, and the commit HEAD names), taken in the
 *      sandbox (only the seed is there yet, nothing of the tenant's has run).
 *   2. A hit: the stored capture is extracted over the workspace and added to the patch's baseline;
 *      the commands do not run.
 *      A miss: each command runs with `bash -c` in /workspace as the agent's user, with the setup
 *      phase's egress; its exit code and the tail of its output go to the log (setup.command). The
 *      first that fails, or the phase's timeout, ends the run `setup_failed` with that tail.
 *   3. Setup ends: every process of the agent's uid is killed (a server or a watcher setup left behind
 *      cannot act in the agent's phase), then the proxy's allowlist becomes the agent's and every
 *      connection open at that moment is closed (egress.narrowed) — before the first model call.
 *   4. What setup wrote (inode changed since it began, under /workspace and the agent's home) is
 *      captured to a tar: its workspace files join the patch's baseline (node_modules is not the
 *      agent's change), and with a cache the tar becomes the entry for this key — unless it changed
 *      any of the workspace's own files or git internals (a hook, the config): such a capture is
 *      never stored, so a restore only ever adds files setup made.
 *
 * The commands are the operator's (the environment file), not the model's: the gate does not see
 * them. What they run may still be the tenant's (npm runs a package.json's scripts), which is why the
 * phase has its own narrow egress and why nothing it started survives into the agent's phase.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Environment } from '../domain/environment';
import { CancelledError, SandboxError } from '../domain/errors';
import type { Emit } from '../domain/events';
import type { EgressAttempt, EgressCode, LeasedSandbox } from '../domain/sandbox';
import type { SecretMasker } from '../domain/effects';
import { SetupCache } from './setup-cache';

/** Output of one setup command kept in the log (its tail: the error is at the end). */
const OUTPUT_TAIL = 4000;
/** What the reason of a setup_failed run quotes. */
const REASON_TAIL = 1500;

export interface SetupDeps {
  sandbox: LeasedSandbox;
  emit: Emit;
  clock: () => number;
  tenant: string;
  /** Absent: nothing is cached (the capture still rebaselines the patch). */
  cache?: SetupCache;
  /** Where a capture is written when there is no cache (deleted afterwards). */
  scratchDir: string;
  /** Largest capture kept (bytes). */
  maxCaptureBytes: number;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  signal: AbortSignal;
  /** Masks secrets in the commands' output before the log sees it. */
  secrets?: SecretMasker;
  /** Subscribes to the run's egress attempts (returns the unsubscribe): a refusal that retrying cannot cure ends setup at once. */
  watchEgress?: (listener: (a: EgressAttempt) => void) => () => void;
}

/**
 * Refusals that end a setup command at once: retrying cannot cure them (the name is not allowed, it
 * resolves to a private address, the upstream proxy refused), and package managers retry for minutes.
 */
export const SETUP_FATAL_REFUSALS: ReadonlySet<EgressCode> = new Set<EgressCode>([
  'not_allowed', 'port_not_allowed', 'ip_literal', 'invalid_name', 'forbidden_address', 'upstream_refused',
]);

export type SetupResult = { ok: true } | { ok: false; reason: string };

/** Whether a run in this environment has a setup phase. */
export function hasSetup(env: Environment): boolean {
  return env.setup.commands.length > 0;
}

export async function runSetup(deps: SetupDeps, env: Environment, agentEgress: string[]): Promise<SetupResult> {
  const { sandbox, emit, clock } = deps;
  const facet = sandbox.setup;
  if (!facet) throw new SandboxError('sandbox_failed', `environment ${env.name}: this sandbox provider cannot run a setup phase`);
  const t0 = clock();
  const cache = env.cache !== false ? deps.cache : undefined;
  const key = cache && env.cache !== false
    ? SetupCache.key({
      tenant: deps.tenant, environment: env.name, digest: env.digest,
      lockfiles: await lockfileDigests(sandbox, env.cache.files, deps.signal), workspace: await facet.workspaceDigest(deps.signal),
    })
    : undefined;
  const hit = key ? cache!.get(key) : null;
  emit({ type: 'setup.started', environment: env.name, commands: env.setup.commands.length, egressAllow: env.setup.egress, cache: !key ? 'off' : hit ? 'hit' : 'miss', ...(key ? { key: key.slice(0, 16) } : {}) });

  const end = async () => {
    const r = await facet.endSetup(agentEgress);
    emit({ type: 'egress.narrowed', allow: agentEgress, connectionsClosed: r.connectionsClosed, proxyKilled: r.proxyKilled });
  };

  if (hit) {
    try {
      await facet.restore(hit, deps.signal);
      const { files } = await facet.rebaseline(hit);
      await end();
      emit({ type: 'setup.finished', ok: true, ms: clock() - t0, baselineFiles: files, cached: 'restored' });
      return { ok: true };
    } catch (err) {
      if (deps.signal.aborted || !(err instanceof SandboxError) || err.code !== 'sandbox_failed') throw err;
      // A broken entry is dropped and setup runs as if it were never there.
      cache!.delete(key!);
      deps.log('setup cache entry could not be restored; running setup', { key, error: err.message });
    }
  }

  const since = await facet.clock();
  const deadline = clock() + env.setup.timeoutS * 1000;
  for (const [i, command] of env.setup.commands.entries()) {
    const left = deadline - clock();
    const callId = `setup-${i + 1}`;
    sandbox.noteToolCall?.(callId);
    const t = clock();
    // A refusal that retrying cannot cure stops the command (its processes are killed) and the phase.
    const stop = new AbortController();
    const onOuter = () => stop.abort();
    deps.signal.addEventListener('abort', onOuter, { once: true });
    let refused: string | null = null;
    const unwatch = deps.watchEgress?.((a) => {
      if (refused !== null || a.decision !== 'deny' || a.callId !== callId || !a.code || !SETUP_FATAL_REFUSALS.has(a.code)) return;
      refused = `${a.method} ${a.host}:${a.port}: ${a.reason}`;
      stop.abort();
    });
    let r: Awaited<ReturnType<typeof sandbox.exec>> | null;
    try {
      r = left > 0
        ? await sandbox.exec({ argv: ['bash', '-c', `cd /workspace && ${command}`], timeoutMs: left, maxOutputBytes: 64 * 1024, signal: stop.signal })
        : null;
    } catch (err) {
      if (refused === null || deps.signal.aborted || !(err instanceof CancelledError)) {
        unwatch?.();
        throw err;
      }
      r = null;
    } finally {
      deps.signal.removeEventListener('abort', onOuter);
    }
    // A command that failed on its own may have failed because of a refusal still on its way from the proxy.
    if (refused === null && r && r.exitCode !== 0) await sandbox.egressSync?.();
    unwatch?.();
    sandbox.noteToolCall?.(null);
    if (refused !== null && (!r || r.exitCode !== 0)) {
      const how = r ? `exited ${r.exitCode ?? 'by a signal'} after` : 'was stopped:';
      const reason = `setup of environment ${env.name}: command ${i + 1} (${command.slice(0, 200)}) ${how} the egress proxy refused ${refused}`;
      emit({ type: 'setup.command', index: i + 1, command, exitCode: r?.exitCode ?? null, timedOut: false, ms: clock() - t, output: '', truncated: false });
      emit({ type: 'setup.finished', ok: false, ms: clock() - t0, reason });
      return { ok: false, reason };
    }
    let output = r ? tail(joinOutput(r.stdout, r.stderr), OUTPUT_TAIL) : '';
    if (deps.secrets && output) {
      const m = await deps.secrets.mask(output);
      output = m.text;
      if (m.found.length || m.coarse) emit({ type: 'secret.masked', callId, where: 'setup', found: m.found, ...(m.coarse ? { coarse: m.coarse } : {}) });
    }
    const timedOut = r ? r.timedOut : true;
    emit({ type: 'setup.command', index: i + 1, command, exitCode: r?.exitCode ?? null, timedOut, ms: clock() - t, output, truncated: r ? r.truncated || output.length >= OUTPUT_TAIL : false });
    if (!r || r.exitCode !== 0) {
      const why = timedOut ? `timed out (setup.timeoutS ${env.setup.timeoutS} s)` : r!.oomKilled ? 'was killed: out of memory' : `exited ${r!.exitCode ?? 'by a signal'}`;
      const reason = `setup of environment ${env.name}: command ${i + 1} (${command.slice(0, 200)}) ${why}${output ? `; its output ends:\n${tail(output, REASON_TAIL)}` : ''}`;
      emit({ type: 'setup.finished', ok: false, ms: clock() - t0, reason });
      return { ok: false, reason };
    }
  }
  await end();

  const capture = key ? cache!.scratch() : join(deps.scratchDir, `setup-capture-${process.pid}-${Date.now()}.tar`);
  try {
    const { bytes, ownPaths, ownCount } = await facet.capture(since, capture, deps.maxCaptureBytes, deps.signal);
    const { files } = await facet.rebaseline(capture);
    // A cache entry holds only what setup made: never the workspace's own files or git internals.
    const own = ownCount > 0 ? `setup changed ${ownCount} of the workspace's own files or git internals (${ownPaths.slice(0, 5).join(', ')}${ownCount > 5 ? ', …' : ''}), so it is not cached` : undefined;
    const stored = key && !own ? cache!.put(key, capture) : false;
    if (own) deps.log('setup capture not cached: it changed the workspace\'s own files', { paths: ownPaths, count: ownCount });
    emit({
      type: 'setup.finished', ok: true, ms: clock() - t0, baselineFiles: files, bytes,
      ...(key ? { cached: stored ? 'stored' : 'not stored', ...(stored ? {} : { note: own ?? 'larger than the setup cache (CORRAL_SETUP_CACHE_MB)' }) } : {}),
    });
  } catch (err) {
    if (!(err instanceof SandboxError) || err.code !== 'limit_exceeded') throw err;
    // Too large to keep: the run goes on, but what setup wrote will show in the patch.
    emit({ type: 'setup.finished', ok: true, ms: clock() - t0, note: `${err.message}: not cached, and what setup wrote counts as the agent's change in the patch` });
  } finally {
    rmSync(capture, { force: true });
  }
  return { ok: true };
}

/** `sha256sum` lines of each named workspace file, `absent  NAME` for one that is not a regular file. */
async function lockfileDigests(sandbox: LeasedSandbox, files: string[], signal: AbortSignal): Promise<string[]> {
  const script = 'cd /workspace || exit 1; for f in "$@"; do if [ -f "$f" ] && [ ! -L "$f" ]; then sha256sum -- "$f" || exit 1; else printf "absent  %s\\n" "$f"; fi; done';
  const r = await sandbox.exec({ argv: ['bash', '-c', script, 'corral-lockfiles', ...files], timeoutMs: 60_000, maxOutputBytes: 64 * 1024, signal });
  if (r.exitCode !== 0) throw new SandboxError('sandbox_failed', `digesting the environment's lockfiles failed (exit ${r.exitCode ?? 'none'}): ${r.stderr.slice(0, 300)}`);
  const lines = r.stdout.split('\n').filter(Boolean);
  if (lines.length !== files.length) throw new SandboxError('sandbox_failed', `digesting the environment's lockfiles: ${lines.length} lines for ${files.length} files`);
  return lines;
}

function joinOutput(stdout: string, stderr: string): string {
  return [stdout.trimEnd(), stderr.trimEnd()].filter(Boolean).join('\n');
}

function tail(s: string, n: number): string {
  return s.length <= n ? s : `…${s.slice(-n)}`;
}
