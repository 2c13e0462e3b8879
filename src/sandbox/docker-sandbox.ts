/**
 * DockerSandboxProvider: the Sandbox port on the Docker Engine API. acquire() resolves the run's
 * isolation class against the engine (isolation.ts), creates one hardened container per run in a
 * uid slot of its own (container-spec.ts, uid-slots.ts), starts the run's egress proxy when it has an
 * allowlist, seeds /workspace through a checked tar, and returns a LeasedSandbox that watches its
 * container from outside (container-watch.ts: death during a call, the deadline). dispose()
 * force-removes the container (with `sleep` as PID 1 a plain stop would wait the grace period), stops
 * the proxy and deletes the socket directory. Every failure on the way out of acquire() cleans up what
 * it made.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { Config } from '../config';
import { CancelledError, SandboxError } from '../domain/errors';
import type {
  CaptureResult, ExecRequest, ExecResult, ExportTarget, FileContent, FileEntry, LeasedSandbox, NetExpectation, SandboxProcess, SandboxProvider, SandboxRequest, SetupFacet, SpawnRequest, WorkspaceExport, WriteOptions,
} from '../domain/sandbox';
import { killCall } from './call-kill';
import { entriesFromFiles, packTar, readCheckedTar, type ArchiveEntry } from './archive';
import { agentUser, containerSpec, HOME_DIR, sandboxEnv, WORKSPACE_DIR } from './container-spec';
import { ContainerWatch, describeDeath } from './container-watch';
import { toSandboxError } from './docker-error';
import { startEgressProxy, type EgressProxyHandle } from './egress-proxy-host';
import { CA_DIR, SandboxTrust } from './egress-ca';
import { egressSiteOf, type EgressSiteConfig } from '../config';
import type { EgressTestHooks } from './egress-test-hooks';
import { EXIT_SIGKILL, runExec, type ExecOutcome } from './exec';
import { spawnProcess } from './sandbox-process';
import { CORRAL_FS, listWorkspace, readWorkspaceFile, removeWorkspaceFile, writeWorkspaceFile, type InternalExec } from './files';
import { IsolationResolver } from './isolation';
import { resolveLimits } from './limits';
import { createInFreeSlot, type UidSlot } from './uid-slots';
import { AutoEgressDirs, LocalEgressDirs, type EgressDirs } from './egress-dirs';
import { defaultLeaseDir } from './host-leases';
import { SandboxEngine, socketPathOf } from './sandbox-engine';
import { WarmPool } from './warm-pool';
import { indexSeedFile, type SeedFileIndex } from './seed-file';
import { sideOf, type FileSide } from './workspace-diff';
import type { EffectFacet, ProtectedState } from '../domain/effects';
import { DEFAULT_SNAPSHOT_LIMITS, readProtectedState, type ArchiveReader, type PathStat, type SnapshotLimits } from './protected-snapshot';
import { restorePlan } from './protected-restore';
import { scanCapture } from './capture-scan';
import { ExportWriter, type ExportCaps } from './workspace-export';
import { loadIgnoreRules } from './patch-ignore';

export type SandboxLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface DockerSandboxProviderOptions {
  docker: Docker;
  config: Config;
  log?: SandboxLog;
  now?: () => Date;
  /** Parent of the per-run egress socket directories (bind-mounted into sandboxes; must be a path the Docker daemon sees). */
  egressRoot?: string;
  /** Test-only egress overrides (DNS servers, exempt loopback addresses); never set from config. */
  egressTestHooks?: EgressTestHooks;
  /** Where egress socket directories come from (default: the gate's when the engine socket is one, else made under egressRoot). */
  egressDirs?: EgressDirs;
  /** The host's uid-slot lease directory (default: CORRAL_HOST_LEASE_DIR or $TMPDIR/corral-leases). */
  leaseDir?: string;
}

/** Default parent of egress socket dirs; short, because a unix socket path must stay under 108 bytes. */
export function defaultEgressRoot(): string {
  return join(tmpdir(), 'corral-egress');
}

/**
 * The engine a worker's sandboxes live on, as the egress directories record it: workers of two
 * engines may share one host's egress root, and each engine's reaper sees only its own containers.
 */
export function engineKeyOf(config: Pick<Config, 'DOCKER_HOST'>): string {
  return config.DOCKER_HOST ?? 'unix:///var/run/docker.sock';
}

export { engineMarkerOf } from './egress-dirs';

const INTERNAL_TIMEOUT_MS = 60_000;
const MAX_SEED_BYTES = 256 * 1024 * 1024;

export class DockerSandboxProvider implements SandboxProvider {
  private readonly docker: Docker;
  private readonly config: Config;
  private readonly log: SandboxLog;
  private readonly now: () => Date;
  readonly egressRoot: string;
  /** Creates and removes sandbox containers (host uid leases and pty volumes when there is no gate). */
  readonly engine: SandboxEngine;
  private readonly egressDirs: EgressDirs;

  /** Resolves when the Docker engine answers; throws SandboxError('sandbox_unavailable') otherwise. */
  async ping(): Promise<void> {
    try {
      await this.docker.ping();
    } catch (err) {
      throw new SandboxError('sandbox_unavailable', `the Docker engine does not answer: ${(err as Error).message}`, { cause: err });
    }
  }

  private pool: WarmPool | undefined;
  /** Which isolation classes the engine offers, and the default (shared with the warm pool). */
  readonly isolation: IsolationResolver;

  /**
   * Keeps `size` started sandboxes of the default class (configured default limits, no network) for
   * this worker; runs of that class take one instead of creating a container. Resolves when full once.
   */
  async startPool(workerId: string, size = this.config.CORRAL_WARM_POOL, ttlMs = this.config.CORRAL_WARM_POOL_TTL_S * 1000): Promise<void> {
    if (size <= 0 || this.pool) return;
    const { execTimeoutS: _t, ...limits } = resolveLimits(undefined, this.config);
    const isolation = await this.isolation.defaultClass();
    this.pool = new WarmPool({ engine: this.engine, config: this.config, workerId, size, ttlMs, limits: { ...limits, isolation }, log: this.log, now: this.now });
    await this.pool.start();
  }

  /** Whether a `pool_…` container of this worker is still held by the pool or by a run. */
  poolOwns(poolId: string): boolean {
    return this.pool?.owns(poolId) ?? false;
  }

  poolStats(): { idle: number; claimed: number; filling: number } | null {
    return this.pool?.stats() ?? null;
  }

  async stopPool(): Promise<void> {
    await this.pool?.stop();
  }

  constructor(private readonly opts: DockerSandboxProviderOptions) {
    this.docker = opts.docker;
    this.config = opts.config;
    this.log = opts.log ?? (() => {});
    this.now = opts.now ?? (() => new Date());
    this.egressRoot = opts.egressRoot ?? defaultEgressRoot();
    this.isolation = new IsolationResolver(this.docker, this.config, this.log);
    this.engine = new SandboxEngine(this.docker, { leaseDir: opts.leaseDir ?? this.config.CORRAL_HOST_LEASE_DIR ?? defaultLeaseDir() });
    this.egressDirs = opts.egressDirs ?? new AutoEgressDirs(socketPathOf(this.docker), new LocalEgressDirs(this.egressRoot, engineKeyOf(this.config)));
    this.site = egressSiteOf(this.config);
    this.trust = this.site.caPem ? new SandboxTrust(this.docker, this.site.caPem, this.log) : null;
  }

  /** The operator's upstream proxy, NO_PROXY, internal hosts and CA bundle (read once). */
  private readonly site: EgressSiteConfig;
  private readonly trust: SandboxTrust | null;

  async acquire(req: SandboxRequest): Promise<LeasedSandbox> {
    if (req.signal?.aborted) throw new CancelledError();
    const isolation = await this.isolation.resolve(req.limits.isolation);
    const limits = { ...req.limits, isolation };
    // Check the seed before creating anything.
    const seedEntries: ArchiveEntry[] = entriesFromFiles(req.files);
    const seedCaps = { maxBytes: Math.min(MAX_SEED_BYTES, req.limits.workspaceMb * 1024 * 1024), maxEntries: 50_000 };
    if (req.seedTar) {
      const { entries } = await readCheckedTar(req.seedTar, seedCaps);
      seedEntries.unshift(...entries);
    }
    const cleanup: Array<() => Promise<void>> = [];
    // Best effort, in reverse order; what fails here (daemon down) is left to the reaper, and logged.
    const runCleanup = async () => {
      for (const fn of cleanup.reverse()) {
        await fn().catch((err: { statusCode?: number; message?: string }) => {
          if (err.statusCode !== 404) this.log('sandbox cleanup failed; the reaper will retry', { runId: req.runId, error: err.message });
        });
      }
    };
    // A large seed on disk: checked and indexed while streamed (its files' digests are the patch's
    // baseline; their content waits in a spill file until a diff needs it).
    const fileCaps = { maxBytes: req.limits.workspaceMb * 1024 * 1024, maxEntries: this.config.CORRAL_WORKSPACE_MAX_ENTRIES };
    const indexed = new Map<string, Promise<SeedFileIndex>>();
    const indexOf = (path: string) => {
      let p = indexed.get(path);
      if (!p) {
        p = indexSeedFile(path, fileCaps);
        indexed.set(path, p);
        cleanup.push(async () => (await p!.catch(() => undefined))?.close());
      }
      return p;
    };
    const sidesOf = async (seedFile: string | undefined, entries: ArchiveEntry[]) => {
      const sides = new Map(seedFile ? (await indexOf(seedFile)).sides : []);
      // Later entries win, as they do when the seed is extracted (inline files after the tar).
      for (const e of entries) {
        if (e.type === 'file') sides.set(e.path, sideOf(e.data ?? Buffer.alloc(0), e.mode));
        else if (e.type === 'symlink') sides.delete(e.path);
      }
      return sides;
    };
    let seedSides: Map<string, FileSide>;
    try {
      seedSides = req.baseline
        ? await sidesOf(req.baseline.seedFile, [
          ...(req.baseline.seedTar ? (await readCheckedTar(req.baseline.seedTar, seedCaps)).entries : []),
          ...entriesFromFiles(req.baseline.files),
        ])
        : await sidesOf(req.seedFile, seedEntries);
      if (req.seedFile) await indexOf(req.seedFile);
    } catch (err) {
      await runCleanup();
      throw err;
    }

    try {
      let egressDir: string | undefined;
      let trust: { system: boolean } | undefined;
      /** The image's system bundle is read from this run's created container (the first of its image on this worker). */
      let trustPending = false;
      let trustImage = '';
      let proxyStarting: Promise<EgressProxyHandle> | undefined;
      if (req.egressAllow.length > 0 || req.egressProxy) {
        egressDir = await this.egressDirs.create();
        const dir = egressDir;
        cleanup.push(() => this.egressDirs.remove(dir));
        if (this.trust) {
          // The operator's CA files, root-owned and read-only, before the proxy (which owns the directory) starts.
          await mkdir(join(dir, CA_DIR), { recursive: true, mode: 0o755 }); // the gate made it already (egress-root.ts)
          const known = await this.trust.lookup(req.image ?? this.config.CORRAL_SANDBOX_IMAGE);
          trustImage = known.id;
          if (known.bundle !== undefined) await this.trust.write(join(dir, 'ca'), known.bundle);
          trust = { system: known.bundle !== undefined && known.bundle !== null };
          trustPending = known.bundle === undefined;
        }
        // The proxy process starts while the container is created; acquire() waits for both.
        const starting = startEgressProxy({
          runId: req.runId, dir, allow: req.egressAllow, config: this.config, site: this.site,
          ...(this.opts.egressTestHooks ? { hooks: this.opts.egressTestHooks } : {}),
          log: this.log,
          onAttempt: (a) => {
            this.log('egress attempt', { runId: req.runId, ...a });
            req.onEgress?.(a);
          },
          onSummary: (s) => {
            if (s.kind === 'proxy') this.log(`egress proxy ${s.state}`, { runId: req.runId, detail: s.detail });
            req.onEgressSummary?.(s);
          },
          ...(req.onEgressHold ? { onHold: req.onEgressHold } : {}),
        });
        proxyStarting = starting;
        starting.catch(() => undefined);
        cleanup.push(async () => (await starting.catch(() => undefined))?.stop());
      }

      const image = req.image ?? this.config.CORRAL_SANDBOX_IMAGE;
      const specFor = (slot: UidSlot) => containerSpec({
        runId: req.runId,
        workerId: req.workerId,
        queue: this.config.CORRAL_QUEUE,
        instance: this.config.CORRAL_INSTANCE,
        deadline: req.deadline,
        now: this.now(),
        limits,
        egressDir,
        ...(trust ? { trust } : {}),
        image,
        extraEnv: req.env,
        pathPrepend: req.pathPrepend,
        isolation,
        gvisorRuntime: this.config.CORRAL_GVISOR_RUNTIME,
        slot,
      });
      let container: Docker.Container;
      let slot: UidSlot;
      // The pool holds the default image only, with no extra variables.
      const poolable = egressDir === undefined && image === this.config.CORRAL_SANDBOX_IMAGE && Object.keys(req.env ?? {}).length === 0 && !req.pathPrepend?.length;
      const pooled = poolable ? (this.pool?.take(limits, false, req.deadline) ?? null) : null;
      if (pooled) {
        // A started sandbox of the default class, used by this run only and removed after it. It keeps
        // its name: the name is its uid slot's lease.
        ({ container, slot } = pooled);
        const c = container;
        const s = slot;
        const pool = this.pool!;
        cleanup.push(() => this.engine.remove(c, s).finally(() => pool.release(pooled.poolId)));
      } else {
        try {
          ({ container, slot } = await createInFreeSlot(this.docker, this.uidRange(), (s) => this.engine.create(specFor(s))));
        } catch (err) {
          throw toSandboxError(err, 'create sandbox container');
        }
        const c = container;
        const s = slot;
        cleanup.push(() => this.engine.remove(c, s));
        if (trustPending && egressDir !== undefined) await this.trust!.write(join(egressDir, CA_DIR), await this.trust!.learn(trustImage, container));
        try {
          await container.start();
        } catch (err) {
          throw toSandboxError(err, 'start sandbox container');
        }
      }
      const proxy = proxyStarting ? await proxyStarting : undefined;
      if (req.signal?.aborted) throw new CancelledError();

      const mb = 1024 * 1024;
      const watch = new ContainerWatch(container, { deadline: pooled ? new Date(Math.min(pooled.deadline, req.deadline.getTime())) : req.deadline, now: this.now, log: this.log });
      cleanup.push(async () => watch.stop());
      const sandbox = new DockerSandbox(container, {
        isolation,
        user: agentUser(slot),
        watch,
        env: sandboxEnv(egressDir !== undefined, { ...req.env, ...req.runEnv }, req.pathPrepend, trust !== undefined),
        seedCaps: fileCaps,
        ...(proxy ? { proxy } : {}),
        maxOutputBytes: this.config.CORRAL_MAX_OUTPUT_BYTES,
        exportCaps: {
          maxFileBytes: this.config.CORRAL_EXPORT_MAX_FILE_MB * mb,
          maxTotalBytes: Math.min(this.config.CORRAL_EXPORT_MAX_TOTAL_MB, req.limits.workspaceMb) * mb,
          maxEntries: this.config.CORRAL_EXPORT_MAX_ENTRIES,
        },
        exportTimeoutMs: this.config.CORRAL_EXPORT_TIMEOUT_S * 1000,
        snapshotLimits: { ...DEFAULT_SNAPSHOT_LIMITS, fullMaxBytes: this.config.CORRAL_EFFECT_FULL_MB * mb, fullMaxEntries: this.config.CORRAL_EFFECT_FULL_ENTRIES },
        seed: seedSides,
        dispose: runCleanup,
        ...(proxy ? { noteToolCall: (id: string | null, net?: NetExpectation) => proxy.noteCall(id, net) } : {}),
      });
      if (req.seedFile) await sandbox.extractFile(req.seedFile, req.signal);
      if (seedEntries.length > 0) await sandbox.extract(await packTar(seedEntries), req.signal);
      this.log('sandbox acquired', { runId: req.runId, container: container.id, name: slot.name, isolation, uid: slot.agentUid, ...(pooled ? { pooled: pooled.poolId } : {}) });
      return sandbox;
    } catch (err) {
      await runCleanup();
      throw err;
    }
  }

  uidRange(): { base: number; slots: number } {
    return { base: this.config.CORRAL_SANDBOX_UID_BASE, slots: this.config.CORRAL_SANDBOX_SLOTS };
  }
}

interface DockerSandboxOptions {
  isolation: 'runc' | 'gvisor';
  /** `uid:gid` of the agent in this sandbox's slot. */
  user: string;
  watch: ContainerWatch;
  env: string[];
  maxOutputBytes: number;
  exportCaps: ExportCaps;
  exportTimeoutMs: number;
  /** Bounds of the protected files' reads (protected-snapshot.ts). */
  snapshotLimits: SnapshotLimits;
  /** The seed's files, the baseline of exportWorkspace()'s patch; held by the worker, never in the sandbox. */
  seed: Map<string, FileSide>;
  dispose: () => Promise<void>;
  noteToolCall?: (callId: string | null, net?: NetExpectation) => void;
  /** The run's egress proxy (setup narrows it). */
  proxy?: EgressProxyHandle;
  /** Caps of a capture's index (rebaseline): the workspace's own. */
  seedCaps: { maxBytes: number; maxEntries: number };
}

class DockerSandbox implements LeasedSandbox {
  readonly id: string;
  readonly isolation: 'runc' | 'gvisor';
  private disposed: Promise<void> | undefined;
  private oomKills = 0;
  private readonly internal: InternalExec;
  /** Indexes of setup captures added to the baseline; closed at dispose. */
  private readonly captures: SeedFileIndex[] = [];
  readonly setup: SetupFacet;
  /** Absent under gVisor: its workspace is a tmpfs inside the sandbox's kernel, which the engine's archive endpoint cannot read. */
  readonly effects?: EffectFacet;

  constructor(
    private readonly container: Docker.Container,
    private readonly o: DockerSandboxOptions,
  ) {
    this.id = container.id;
    this.isolation = o.isolation;
    this.internal = (argv, opts) =>
      runExec(this.container, { argv, env: this.o.env, user: this.o.user, died: this.o.watch, timeoutMs: INTERNAL_TIMEOUT_MS, headOnly: true, ...opts });
    this.setup = {
      endSetup: (allow) => this.endSetup(allow),
      clock: () => this.clock(),
      capture: (since, dest, maxBytes, signal) => this.capture(since, dest, maxBytes, signal),
      workspaceDigest: (signal) => this.workspaceDigest(signal),
      restore: (path, signal) => this.extractFile(path, signal, '/'),
      rebaseline: (path) => this.rebaseline(path),
    };
    if (o.isolation === 'runc') this.effects = {
      protectedState: (set, o) => {
        this.assertLive();
        return readProtectedState(this.archive, set, o.mode, this.o.snapshotLimits, o.signal);
      },
      restoreProtected: (before, paths, signal) => this.restoreProtected(before, paths, signal),
      stopAgentProcesses: () => killCall(this.container, this.o.user, 10 * 365 * 86_400_000),
    };
  }

  /** The engine's archive endpoint for the snapshot (HEAD for a stat, GET for a tar); a missing path is null. */
  private readonly archive: ArchiveReader = {
    stat: async (path, signal) => {
      try {
        const res = (await this.container.infoArchive({ path, ...(signal ? { abortSignal: signal } : {}) })) as unknown as Readable & { headers?: Record<string, string> };
        const raw = res.headers?.['x-docker-container-path-stat'];
        res.resume?.();
        if (!raw) throw new SandboxError('sandbox_failed', `the engine's stat of ${path} had no X-Docker-Container-Path-Stat header`);
        const st = JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) as PathStat;
        if (typeof st.mode !== 'number' || typeof st.size !== 'number') throw new SandboxError('sandbox_failed', `the engine's stat of ${path} is malformed`);
        return st;
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return null;
        throw err instanceof SandboxError ? err : toSandboxError(err, 'stat a protected path');
      }
    },
    get: async (path, signal) => {
      try {
        return (await this.container.getArchive({ path, ...(signal ? { abortSignal: signal } : {}) })) as unknown as Readable;
      } catch (err) {
        if ((err as { statusCode?: number }).statusCode === 404) return null;
        throw toSandboxError(err, 'read protected files');
      }
    },
  };

  /** Removes what did not exist before (rm as the agent), then puts the rest back through the archive endpoint. */
  private async restoreProtected(before: ProtectedState, paths: string[], signal?: AbortSignal): Promise<void> {
    this.assertLive();
    const [uid, gid] = this.o.user.split(':').map(Number) as [number, number];
    const plan = await restorePlan(before, paths, uid, gid);
    for (let i = 0; i < plan.remove.length; i += 100) {
      const batch = plan.remove.slice(i, i + 100).map((p) => `${WORKSPACE_DIR}/${p}`);
      const o = await this.internal(['rm', '-rf', '--', ...batch], { maxOutputBytes: 4096, ...(signal ? { signal } : {}) });
      if (o.exitCode !== 0) throw new SandboxError('sandbox_failed', `removing protected files failed (exit ${o.exitCode ?? 'none'}): ${o.stderr.text().trim().slice(0, 300)}`);
    }
    if (plan.tar) {
      try {
        await this.container.putArchive(plan.tar, { path: WORKSPACE_DIR, ...(signal ? { abortSignal: signal } : {}) });
      } catch (err) {
        throw toSandboxError(err, 'put protected files back');
      }
    }
  }

  /** Kills every process of the agent's uid (what setup left running), then narrows the proxy. */
  private async endSetup(allow: string[]): Promise<{ connectionsClosed: number; proxyKilled: boolean }> {
    this.assertLive();
    // Age: ten years — every process the agent's uid has is younger.
    if (!(await killCall(this.container, this.o.user, 10 * 365 * 86_400_000))) {
      throw new SandboxError('sandbox_failed', 'ending the setup phase: the processes it started could not be stopped');
    }
    if (!this.o.proxy) return { connectionsClosed: 0, proxyKilled: false };
    const r = await this.o.proxy.narrow(allow);
    return { connectionsClosed: r.closed, proxyKilled: r.killed };
  }

  private async clock(): Promise<string> {
    const o = await this.internal(['date', '+%s.%N'], { maxOutputBytes: 256 });
    const t = o.stdout.headBuffer().toString('utf8').trim();
    if (o.exitCode !== 0 || !/^\d+\.\d+$/.test(t)) throw new SandboxError('sandbox_failed', `the sandbox's clock: ${JSON.stringify(t.slice(0, 100))}`);
    return t;
  }

  /**
   * A tar of what changed under /workspace and the agent's home since `since` (inode change time, so
   * a file setup rewrote counts, and one it merely read does not), streamed to `dest`.
   */
  private async capture(since: string, dest: string, maxBytes: number, signal?: AbortSignal): Promise<CaptureResult> {
    this.assertLive();
    if (!/^\d+\.\d+$/.test(since)) throw new SandboxError('sandbox_failed', `capture: bad time ${JSON.stringify(since)}`);
    const out = createWriteStream(dest, { flags: 'wx', mode: 0o600 });
    const finished = new Promise<void>((res, rej) => { out.once('finish', res); out.once('error', rej); });
    const stop = new AbortController();
    const all = signal ? AbortSignal.any([signal, stop.signal]) : stop.signal;
    let bytes = 0;
    let over = false;
    const sink = {
      write: (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > maxBytes) {
          if (!over) stop.abort();
          over = true;
          return true;
        }
        return out.write(chunk);
      },
      end: () => out.end(),
      once: (event: 'drain', fn: () => void) => out.once(event, fn),
    };
    const dirs = [WORKSPACE_DIR, HOME_DIR].map((d) => d.replace(/^\//, ''));
    const script = 'cd / && find "$@" -newerct "@$T" -print0 | tar --null --no-recursion -T - -cf - --format=pax';
    const o = await runExec(this.container, {
      argv: ['bash', '-c', `T=${since}; ${script}`, 'corral-capture', ...dirs],
      env: this.o.env, user: this.o.user, died: this.o.watch, timeoutMs: 10 * INTERNAL_TIMEOUT_MS, headOnly: true, maxOutputBytes: 8192,
      stdoutSink: sink, signal: all,
    }).catch((err: unknown) => {
      out.destroy();
      throw err;
    });
    await finished.catch(() => undefined);
    if (over) throw new SandboxError('limit_exceeded', `what setup wrote is larger than the cache's limit (${Math.round(maxBytes / 1048576)} MiB)`);
    if (signal?.aborted) throw new CancelledError('the capture was cancelled');
    if (o.exitCode !== 0 || o.timedOut) throw new SandboxError('sandbox_failed', `capturing what setup wrote failed (exit ${o.exitCode ?? 'none'}): ${o.stderr.text().trim().slice(0, 500)}`);
    const own = await scanCapture(dest, this.o.seed);
    return { bytes, ownPaths: own.paths, ownCount: own.count };
  }

  /**
   * sha256 of a tar of the workspace as setup will find it — names in order, modes, contents, link
   * targets; owners and times fixed, `.git` left out — and of the commit HEAD names and the
   * repository's config (read from .git's files, not by running git). Runs before anything of the
   * tenant's has run in the sandbox.
   */
  private async workspaceDigest(signal?: AbortSignal): Promise<string> {
    this.assertLive();
    const script = [
      'set -o pipefail; cd /workspace || exit 1',
      't=$(tar --sort=name --format=gnu --numeric-owner --owner=0 --group=0 --mtime=@0 --exclude=.git -cf - . | sha256sum) || exit 1',
      // the commit HEAD names, and the repository's own config (setup may read either)
      'c=""; if [ -f .git/config ] && [ ! -L .git/config ]; then c=$(head -c 65536 .git/config | sha256sum); fi',
      'h=""; if [ -f .git/HEAD ] && [ ! -L .git/HEAD ]; then h=$(head -c 4096 .git/HEAD); r=${h#ref: }',
      '  if [ "$r" != "$h" ]; then case "$r" in refs/*) ;; *) r=refs/invalid;; esac; case "$r" in *..*) r=refs/invalid;; esac',
      '    if [ -f ".git/$r" ]; then h="$h $(head -c 200 ".git/$r")"; elif [ -f .git/packed-refs ]; then h="$h $(grep -F " $r" .git/packed-refs | head -c 200)"; fi; fi; fi',
      'printf "%s\n%s\n%s" "$t" "$h" "$c" | sha256sum | cut -c1-64',
    ].join('\n');
    const o = await this.internal(['bash', '-c', script], { maxOutputBytes: 1024, signal, timeoutMs: 10 * INTERNAL_TIMEOUT_MS });
    const d = o.stdout.headBuffer().toString('utf8').trim();
    if (o.exitCode !== 0 || !/^[0-9a-f]{64}$/.test(d)) throw new SandboxError('sandbox_failed', `digesting the workspace failed (exit ${o.exitCode ?? 'none'}): ${o.stderr.text().trim().slice(0, 300)}`);
    return d;
  }

  /** Adds a capture's workspace files to the patch's baseline. */
  private async rebaseline(path: string): Promise<{ files: number }> {
    const index = await indexSeedFile(path, this.o.seedCaps, tmpdir(), { under: WORKSPACE_DIR.replace(/^\//, '') });
    this.captures.push(index);
    for (const [name, side] of index.sides) this.o.seed.set(name, side);
    return { files: index.sides.size };
  }

  noteToolCall(callId: string | null, net?: NetExpectation): void {
    this.o.noteToolCall?.(callId, net);
  }

  releaseEgress(id: number, allow: boolean): void {
    this.o.proxy?.release(id, allow);
  }

  async egressSync(): Promise<void> {
    await this.o.proxy?.sync();
  }

  async exec(req: ExecRequest): Promise<ExecResult> {
    this.assertLive();
    if (!Array.isArray(req.argv) || req.argv.length === 0 || req.argv.some((a) => typeof a !== 'string' || a.includes('\0'))) {
      throw new SandboxError('sandbox_failed', 'exec: argv must be a non-empty array of strings without NUL');
    }
    const o = await runExec(this.container, {
      argv: req.argv,
      env: this.o.env,
      user: this.o.user,
      died: this.o.watch,
      timeoutMs: Math.max(1, req.timeoutMs),
      maxOutputBytes: req.maxOutputBytes ?? this.o.maxOutputBytes,
      stdin: req.stdin,
      signal: req.signal,
    });
    if (!o.timedOut && (o.exitCode === null || o.exitCode >= 128)) await this.assertRunning();
    const oomKilled = o.exitCode === EXIT_SIGKILL && !o.timedOut ? await this.newOomKill() : false;
    return {
      exitCode: o.exitCode,
      stdout: o.stdout.text(),
      stderr: o.stderr.text(),
      truncated: o.stdout.truncated || o.stderr.truncated,
      timedOut: o.timedOut,
      oomKilled,
      durationMs: o.durationMs,
      stdoutBytes: o.stdout.total,
      stderrBytes: o.stderr.total,
    };
  }

  /** A long-lived process (an MCP server) as the agent's user: sandbox-process.ts. */
  spawn(req: SpawnRequest): Promise<SandboxProcess> {
    this.assertLive();
    return spawnProcess(this.container, { ...req, baseEnv: this.o.env, user: this.o.user, died: this.o.watch });
  }

  readFile(path: string, opts?: { maxBytes?: number; signal?: AbortSignal }): Promise<FileContent> {
    this.assertLive();
    return readWorkspaceFile(this.internal, path, opts?.maxBytes ?? 256 * 1024, opts?.signal);
  }

  writeFile(path: string, content: string, opts?: WriteOptions): Promise<void> {
    this.assertLive();
    return writeWorkspaceFile(this.internal, path, content, opts);
  }

  removeFile(path: string, opts?: { expectSha256?: string; signal?: AbortSignal }): Promise<void> {
    this.assertLive();
    return removeWorkspaceFile(this.internal, path, opts);
  }

  listFiles(path: string, opts?: { maxEntries?: number; signal?: AbortSignal }): Promise<FileEntry[]> {
    this.assertLive();
    return listWorkspace(this.internal, path, opts?.maxEntries ?? 500, opts?.signal);
  }

  /**
   * `corral-fs export` in the sandbox streams a sorted tar of the workspace (sizes checked before
   * any content is read); the ExportWriter checks it entry by entry and writes the tar and the patch
   * to disk as it goes. Memory: one file of at most 1 MiB plus stream buffers, whatever the size.
   */
  async exportWorkspace(opts: ExportTarget): Promise<WorkspaceExport> {
    this.assertLive();
    const t0 = performance.now();
    const caps = this.o.exportCaps;
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const ignore = await loadIgnoreRules(this.o.seed, opts.patchIgnore ?? { gitignore: true, exclude: [] });
    const writer = new ExportWriter({
      seed: this.o.seed, caps, ignore, tarPath: opts.tarPath, patchPath: opts.patchPath, onFatal: () => stop.abort(),
      ...(opts.protectedSet ? { protectedSet: opts.protectedSet } : {}),
    });
    try {
      const run = runExec(this.container, {
        argv: [CORRAL_FS, 'export', String(caps.maxFileBytes), String(caps.maxTotalBytes), String(caps.maxEntries)],
        env: this.o.env, user: this.o.user, died: this.o.watch, timeoutMs: this.o.exportTimeoutMs, headOnly: true, maxOutputBytes: 64 * 1024,
        stdoutSink: writer.input, signal: stop.signal,
      });
      // An exec that never started (the container is gone) never ends the writer's input.
      run.catch((err: Error) => writer.abort(err));
      const [exec, written] = await Promise.allSettled([run, writer.done]);
      if (opts.signal?.aborted) throw new CancelledError('the export was cancelled');
      if (written.status === 'rejected' && !(exec.status === 'fulfilled' && exec.value.exitCode !== 0)) throw written.reason;
      if (exec.status === 'rejected') throw exec.reason;
      const o = exec.value;
      if (o.timedOut) throw new SandboxError('sandbox_failed', `export: timed out after ${Math.round(this.o.exportTimeoutMs / 1000)} s (CORRAL_EXPORT_TIMEOUT_S)`);
      if (o.exitCode !== 0) {
        if (written.status === 'fulfilled') await Promise.all([rm(opts.tarPath, { force: true }), rm(opts.patchPath, { force: true })]);
        const why = o.exitCode === 126 || o.exitCode === 127 ? `the sandbox image has no ${CORRAL_FS}; rebuild it from sandbox.Dockerfile` : o.stderr.text().trim();
        throw new SandboxError('sandbox_failed', `export: ${CORRAL_FS} failed (exit ${o.exitCode ?? 'none'}): ${why}`);
      }
      if (written.status === 'rejected') throw written.reason;
      return { ...written.value, stats: { ...written.value.stats, ms: Math.round(performance.now() - t0) } };
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  /** Removes the container and whatever the run had beside it; never rejects (a failed step is logged and left to the reaper). */
  dispose(): Promise<void> {
    this.disposed ??= this.o.dispose().finally(() => Promise.all(this.captures.map((c) => c.close().catch(() => undefined))));
    return this.disposed;
  }

  /** Extracts a checked, uncompressed tar file (streamed from disk, never read whole) into /workspace. */
  async extractFile(path: string, signal?: AbortSignal, dir = WORKSPACE_DIR): Promise<void> {
    const { size } = await stat(path);
    const source = createReadStream(path, { highWaterMark: 1024 * 1024 });
    try {
      // A minute, plus a second for every 20 MB (a loaded host writes a tmpfs at well over that).
      await this.extract(source, signal, INTERNAL_TIMEOUT_MS + Math.ceil(size / (20 * 1024 * 1024)) * 1000, dir);
    } finally {
      source.destroy();
    }
  }

  /** Extracts a checked, uncompressed tar into /workspace through `tar -x` in the sandbox. */
  async extract(tarData: Buffer | Readable, signal?: AbortSignal, timeoutMs = INTERNAL_TIMEOUT_MS, dir = WORKSPACE_DIR): Promise<void> {
    const o: ExecOutcome = await this.internal(
      ['tar', '-x', '-f', '-', '-C', dir, '--no-same-owner', '--no-same-permissions', '--no-overwrite-dir'],
      { stdin: tarData, maxOutputBytes: 8192, signal, timeoutMs },
    );
    if (o.exitCode !== 0) {
      const msg = o.stderr.text().trim();
      const full = /No space left on device/i.test(msg);
      throw new SandboxError(full ? 'limit_exceeded' : 'sandbox_failed', `seeding the workspace failed${full ? ' (the workspace is full)' : ''}: ${msg}`);
    }
  }

  /** true when the memory cgroup counted a new OOM kill since the last check (cgroup v1 or v2). */
  private async newOomKill(): Promise<boolean> {
    const o = await this.internal(
      ['sh', '-c', 'cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || cat /sys/fs/cgroup/memory.events'],
      { maxOutputBytes: 4096 },
    ).catch(() => undefined);
    const m = o ? /oom_kill (\d+)/.exec(o.stdout.headBuffer().toString('utf8')) : null;
    if (!m) return false;
    const n = Number(m[1]);
    const fresh = n > this.oomKills;
    this.oomKills = n;
    return fresh;
  }

  /**
   * After a call that ended by a signal: if the container itself stopped (killed from outside, at its
   * deadline, its init died), that is broken infrastructure, not a command result the model should
   * reason about. The watch knows at once; a container being killed may still report Running for a
   * moment, so it gets a short grace.
   */
  private async assertRunning(): Promise<void> {
    const grace = (ms: number) => Promise.race([this.o.watch.died, new Promise<undefined>((r) => setTimeout(() => r(undefined), ms).unref())]);
    let d = this.o.watch.dead ?? (await grace(300));
    if (!d) {
      let running: boolean;
      try {
        running = (await this.container.inspect()).State.Running;
      } catch (err) {
        throw new SandboxError('sandbox_failed', `the sandbox container ${this.id.slice(0, 12)} is gone (${(err as Error).message})`, { cause: err });
      }
      if (running) return;
      d = (await grace(2000)) ?? { status: 'exited', exitCode: null, oomKilled: false, cause: 'died' };
    }
    throw new SandboxError('sandbox_failed', `${describeDeath(d, this.id)} during the call`, { details: { oomKilled: d.oomKilled, exitCode: d.exitCode, status: d.status, cause: d.cause } });
  }

  private assertLive(): void {
    if (this.disposed) throw new SandboxError('sandbox_failed', 'the sandbox was disposed');
    const d = this.o.watch.dead;
    if (d) throw new SandboxError('sandbox_failed', describeDeath(d, this.id), { details: { oomKilled: d.oomKilled, exitCode: d.exitCode, status: d.status, cause: d.cause } });
  }
}
