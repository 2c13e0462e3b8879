/**
 * The composition root: the only place that constructs Redis clients, the Docker client, the OpenAI
 * client, Fastify and the clock, and wires them into the API and the worker. `startCorral` starts
 * either or both roles and returns one close() that stops everything it started, in order.
 */
import { gateReadyCheck } from './docker-gate/readiness';
import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { resolve } from 'node:path';
import { FlowProducer } from 'bullmq';
import type { Redis } from 'ioredis';
import OpenAI from 'openai';
import type { FastifyInstance } from 'fastify';
import { SHUTDOWN_CLEANUP_MS, tracingSettings, type Config } from './config';
import { LogSigner, loadVerifyKey } from './report/log-signature';
import { CorralError, InvalidInputError, StoreUnavailableError } from './domain/errors';
import type { Model } from './domain/model';
import type { RunSpec } from './domain/run-spec';
import { loadTenantAuth } from './api/auth';
import { isLoopbackHost } from './api/origin-guard';
import { buildApp } from './api/build-app';
import { OpenAIModel } from './llm/openai-model';
import { ReplayModel, loadReplay, replayFromEvents } from './llm/replay-model';
import { readJsonl } from './report/jsonl-sink';
import { Classifier } from './policy/classifier';
import { loadEnvironments } from './environments/load-environments';
import { SetupCache } from './environments/setup-cache';
import { checkGitCaFile, loadGitCredentials, parseGitUrl } from './git/git-remote';
import type { EgressTestHooks } from './sandbox/egress-test-hooks';
import { loadPolicies } from './policy/load-policy';
import { AnalysisPool } from './policy/analysis-pool';
import type { ApiDeps } from './api/api-deps';
import { loadTemplates } from './api/load-templates';
import { startScheduleRunner } from './api/schedule-runner';
import { ScheduleStore } from './queue/schedule-store';
import { PolicyGate } from './policy/policy-gate';
import { DEFAULT_PROTECTED_SET } from './domain/protected-set';
import { SecretScanPool } from './policy/secret-scan-pool';
import { createRunQueue, newRunId } from './queue/run-queue';
import { IdempotencyStore } from './queue/idempotency';
import { RunMetrics } from './queue/run-metrics';
import { RedisRunStore } from './queue/redis-run-store';
import { startHealthFile } from './worker/health-file';
import { HeldSlots } from './queue/held-slots';
import { RedisUploadQuota, uploadCaps } from './queue/upload-quota';
import { RedisConnections } from './queue/redis-connections';
import type { DurabilityPolicy } from './queue/durability';
import { WorkspaceUploads } from './workspaces/workspace-uploads';
import { artifactStoreFor, type ArtifactStore } from './artifacts';
import { readStored } from './artifacts/artifact-store';
import type { RunEvent } from './domain/events';
import { DEFAULT_TENANT, type RunStore } from './queue/run-store';
import { RedisTenantMemory } from './queue/redis-memory';
import { RunTree } from './queue/run-tree';
import { routingFor } from './run/model-router';
import { TenantQuota } from './queue/tenant-quota';
import { POOL_PREFIX, createDockerClient, createSandboxProvider, engineKeyOf, startReaper, type Reaper } from './sandbox';
import { sweepRunFiles } from './worker/run-files-sweeper';
import { startWorker, type RunningWorker } from './worker/start-worker';
import type { WorkerLog } from './worker/run-processor';

export interface CorralRoles {
  api: boolean;
  worker: boolean;
}

export interface StartedCorral {
  /** Set when the API role runs: the address it listens on. */
  url?: string;
  app?: FastifyInstance;
  worker?: RunningWorker;
  workerId: string;
  modelDescription: string;
  close(): Promise<void>;
}

/** One line of JSON per log record, on stderr. */
export function jsonLog(component: string): WorkerLog {
  return (msg, fields) => process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), component, msg, ...fields })}\n`);
}

const CORRAL_VERSION = '0.1.0';

/** The model server's address for model spans (server.address/port). */
function modelServerOf(config: Config): { address: string; port?: number } | undefined {
  if (config.CORRAL_REPLAY) return undefined;
  const u = new URL(config.OPENAI_BASE_URL ?? 'https://api.openai.com/v1');
  return { address: u.hostname, ...(u.port ? { port: Number(u.port) } : {}) };
}

/** How runs reach a model: the configured OpenAI-compatible endpoint, or a replayed transcript. */
function modelFactory(config: Config): { modelFor: (spec: RunSpec) => Model; client?: OpenAI; description: string } {
  if (config.CORRAL_REPLAY) {
    const path = resolve(config.CORRAL_REPLAY);
    const replay = loadReplay(path);
    return { modelFor: () => new ReplayModel(replay, path), description: `replay of ${path}` };
  }
  if (!config.OPENAI_API_KEY && !config.OPENAI_BASE_URL) {
    throw new InvalidInputError('no model configured: set OPENAI_API_KEY (and optionally OPENAI_BASE_URL, CORRAL_MODEL), or CORRAL_REPLAY to replay a recorded transcript', 'OPENAI_API_KEY');
  }
  const client = new OpenAI({
    apiKey: config.OPENAI_API_KEY ?? 'unused',
    ...(config.OPENAI_BASE_URL ? { baseURL: config.OPENAI_BASE_URL } : {}),
    timeout: config.CORRAL_MODEL_TIMEOUT_MS,
    maxRetries: 2,
  });
  const opts = { stream: config.CORRAL_MODEL_STREAM, idleTimeoutMs: config.CORRAL_MODEL_TIMEOUT_MS };
  return {
    // With model routing, the adapter's own model (compaction, and turns the router does not name) is the strong one.
    modelFor: (spec) => new OpenAIModel(client, spec.model ?? routingFor(spec, config)?.strong ?? config.CORRAL_MODEL, opts),
    client,
    description: `${config.CORRAL_MODEL} at ${client.baseURL}`,
  };
}

/**
 * Runs with `replayOf` replay that run's model turns from its log: in this worker's data dir, or in
 * the object store (the run may have run on another host).
 */
function withReplays(config: Config, modelFor: (spec: RunSpec) => Model, artifacts: ArtifactStore, store: RunStore): (spec: RunSpec) => Promise<Model> {
  return async (spec) => {
    if (!spec.replayOf) return modelFor(spec);
    const log = resolve(config.CORRAL_DATA_DIR, 'runs', spec.replayOf, 'events.jsonl');
    if (existsSync(log)) return new ReplayModel(replayFromEvents(readJsonl(log), `replayOf: run ${spec.replayOf}`), log);
    if (artifacts.kind === 'local') throw new InvalidInputError(`replayOf: the log of ${spec.replayOf} is not in this worker's data dir (${log})`, 'replayOf');
    const key = artifacts.runFileKey((await store.tenantOf(spec.replayOf)) ?? DEFAULT_TENANT, spec.replayOf, 'events.jsonl');
    // Bounded like the log itself (CORRAL_LOG_MAX_BYTES): a larger object is not a log this service wrote.
    const stored = await readStored(artifacts, key, config.CORRAL_LOG_MAX_BYTES + 64 * 1024);
    if (!stored) throw new InvalidInputError(`replayOf: the log of ${spec.replayOf} is not in ${artifacts.description}`, 'replayOf');
    if (stored.over) throw new InvalidInputError(`replayOf: the log of ${spec.replayOf} in the store is larger than CORRAL_LOG_MAX_BYTES`, 'replayOf');
    const events: RunEvent[] = [];
    for (const line of stored.bytes.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      try {
        events.push(JSON.parse(line) as RunEvent);
      } catch {
        throw new InvalidInputError(`replayOf: the log of ${spec.replayOf} in the store has a line that is not JSON`, 'replayOf');
      }
    }
    return new ReplayModel(replayFromEvents(events, `replayOf: run ${spec.replayOf}`), artifacts.locationOf(key));
  };
}

/**
 * A Redis that may evict keys under memory pressure can silently drop queued jobs: refuse it. And when
 * writes that matter wait for replicas, say so at once if the primary has fewer than that.
 */
async function checkRedisPolicy(redis: Redis, url: string, log: WorkerLog, durable: DurabilityPolicy): Promise<void> {
  if (durable.replicas > 0) {
    const info = await redis.info('replication').catch(() => '');
    const connected = Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? NaN);
    if (connected < durable.replicas) {
      log('the Redis primary has fewer replicas than CORRAL_REDIS_DURABLE_REPLICAS: new runs are refused (503) and workers wait before starting or ending a run until enough replicas are back', { level: 'warn', replicas: connected, wanted: durable.replicas });
    }
  }
  let policy: string | undefined;
  try {
    const r = (await redis.config('GET', 'maxmemory-policy')) as string[];
    policy = r[1];
  } catch (err) {
    log('cannot read Redis maxmemory-policy (CONFIG GET refused); make sure it is noeviction', { error: (err as Error).message });
    return;
  }
  if (policy && policy !== 'noeviction') {
    throw new StoreUnavailableError(`Redis at ${url} has maxmemory-policy "${policy}", which can evict queued jobs; set it to "noeviction" (redis-server --maxmemory-policy noeviction)`);
  }
}

/** How long one shutdown step may take before it is left behind. */
const CLOSE_STEP_MS = 3000;
/** After the grace period, how long cancelled runs have to clean up (sandbox removal, records). */
const CLEANUP_MS = SHUTDOWN_CLEANUP_MS;
export { shutdownBudgetMs } from './config';

/** `p`'s value, or 'late' when it has not settled within `ms` (the timer is cleared either way). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | 'late'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<'late'>((res) => (timer = setTimeout(() => res('late'), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether Redis answers a PING within half a second. */
async function answers(r: Redis): Promise<boolean> {
  return (await within(r.ping().then(() => true, () => false), 500)) === true;
}

/**
 * Drops a connection and fails the commands waiting on it at once. ioredis flushes its queues when a
 * live connection closes, but not for a client that is between reconnect attempts (Redis stopped), so
 * those are failed here (flushQueue is ioredis's own, not in its typings).
 */
function dropRedis(r: Redis): void {
  r.disconnect();
  (r as unknown as { flushQueue?: (err: Error) => void }).flushQueue?.(new Error('Redis does not answer and this process is stopping'));
}

/** QUIT when Redis answers; a connection that is away or hangs is dropped instead of waiting for it. */
async function quitRedis(r: Redis): Promise<void> {
  if (r.status === 'ready') await within(r.quit().catch(() => undefined), 1000);
  r.disconnect();
}

/** What only tests pass in (never set from configuration). */
export interface CorralExtras {
  /** Egress overrides: test DNS servers, exempt loopback addresses (sandbox/egress-test-hooks.ts). */
  egressTestHooks?: EgressTestHooks;
}

/**
 * Where a deployment's tenant caps live in Redis (live streams, uploads in flight, upload bytes): per
 * queue, like the run quotas, so two deployments sharing one Redis do not share their tenants' caps.
 */
const capsPrefix = (config: Config): string => `corral:q:${config.CORRAL_QUEUE}`;

export async function startCorral(config: Config, roles: CorralRoles, log: WorkerLog = jsonLog('corral'), extras: CorralExtras = {}): Promise<StartedCorral> {
  const workerId = config.CORRAL_WORKER_ID ?? `${hostname()}-${process.pid}`;
  // Shutdown steps run in reverse order of start, each bounded: a step that hangs (a Redis that is
  // paused, a Docker engine that does not answer) is logged and left behind, and the next one runs.
  // The API's steps and the worker's run side by side (the worker's grace starts at the signal, not
  // after the API has closed); the shared Redis connection goes last.
  type Group = 'base' | 'api' | 'worker';
  const closers: Array<{ what: string; run: () => Promise<unknown>; ms: number; group: Group }> = [];
  let group: Group = 'base';
  const onClose = (what: string, run: () => Promise<unknown>, ms = CLOSE_STEP_MS) => closers.push({ what, run, ms, group });
  const closeGroup = async (g: Group, steps: typeof closers) => {
    for (const c of steps.filter((x) => x.group === g).reverse()) {
      const done = c.run().then(() => 'done' as const, (err: Error) => log('shutdown step failed', { step: c.what, error: err.message }));
      if ((await within(done, c.ms)) === 'late') log('shutdown step did not finish in time; going on', { step: c.what, ms: c.ms });
    }
  };
  const close = async () => {
    const steps = closers.splice(0);
    await Promise.all([closeGroup('api', steps), closeGroup('worker', steps)]);
    await closeGroup('base', steps);
  };
  const policies = loadPolicies(config.CORRAL_POLICY_DIR);
  const environments = loadEnvironments(config.CORRAL_ENVIRONMENT_DIR, config);
  // Read by the worker only (its clones); a bad file stops start-up before anything runs.
  const gitCredentials = roles.worker ? loadGitCredentials(config.CORRAL_GIT_CREDENTIALS_FILE) : new Map();
  if (roles.worker) checkGitCaFile(config.CORRAL_GIT_CA_FILE);
  for (const r of config.CORRAL_GIT_REMOTES) {
    const p = parseGitUrl(r, { prefix: true });
    if ('error' in p) throw new CorralError('invalid_input', `CORRAL_GIT_REMOTES: ${r}: ${p.error}`);
  }
  const templates = roles.api ? loadTemplates(config.CORRAL_TEMPLATES_DIR) : [];
  // The operator's log keys are checked now: a bad key file stops start-up, not a run's end.
  const logSigner = roles.worker && config.CORRAL_LOG_SIGNING_KEY_FILE ? LogSigner.fromFile(config.CORRAL_LOG_SIGNING_KEY_FILE) : undefined;
  const logVerifyKey = !roles.api ? undefined
    : config.CORRAL_LOG_VERIFY_KEY_FILE ? loadVerifyKey(config.CORRAL_LOG_VERIFY_KEY_FILE)
      : config.CORRAL_LOG_SIGNING_KEY_FILE ? loadVerifyKey(config.CORRAL_LOG_SIGNING_KEY_FILE, 'CORRAL_LOG_SIGNING_KEY_FILE') : undefined;
  const auth = loadTenantAuth(config); // before anything starts: a bad token list fails fast
  // Auth off is for one person on one machine: the API then listens on loopback only unless the
  // operator says otherwise (and its Host and Origin checks keep web pages out: origin-guard.ts).
  if (roles.api && !auth.enabled && !isLoopbackHost(config.CORRAL_API_HOST) && !config.CORRAL_API_AUTH_OFF_ALLOW_REMOTE) {
    throw new InvalidInputError(`CORRAL_API_HOST=${config.CORRAL_API_HOST}: with auth off (no CORRAL_API_TOKENS or CORRAL_API_TOKENS_FILE) the API listens on a loopback address only; set tokens, or CORRAL_API_AUTH_OFF_ALLOW_REMOTE=true if everyone who can reach that address may run tasks`, 'CORRAL_API_HOST');
  }
  // Run files and uploads: the data dir, or an object store every API and worker reaches.
  const artifacts = artifactStoreFor(config);
  onClose('artifact store', () => artifacts.close());
  if (artifacts.kind !== 'local') log('run files and uploads go to an object store', { artifacts: artifacts.description });
  // Every Redis connection of this process comes from here (one REDIS_URL: one Redis, or Sentinel).
  let conns: RedisConnections;
  try {
    conns = new RedisConnections(config.REDIS_URL, { commandTimeoutMs: config.CORRAL_REDIS_COMMAND_TIMEOUT_MS });
  } catch (err) {
    await close();
    throw err;
  }
  // Registered before every connection, so it runs after they are closed (base steps run in reverse).
  onClose('redis sentinel watch', async () => conns.close());
  const durability: DurabilityPolicy = {
    replicas: config.CORRAL_REDIS_DURABLE_REPLICAS ?? (conns.sentinel ? 1 : 0), timeoutMs: config.CORRAL_REDIS_DURABLE_TIMEOUT_MS,
  };
  const redis = conns.open('commands', 'main', { lazy: true });
  onClose('redis', () => quitRedis(redis));
  redis.on('error', (err) => log('redis error', { error: err.message }));
  let primary: string;
  try {
    primary = await conns.connect(redis, 15_000);
  } catch (err) {
    await close();
    throw err;
  }
  if (conns.sentinel) log('Redis via Sentinel', { redis: conns.description, primary, durableReplicas: durability.replicas });
  await checkRedisPolicy(redis, conns.redactedUrl, log, durability).catch(async (err: unknown) => {
    await close();
    throw err;
  });
  // Blocking readers (a live view's XREAD BLOCK, an approval's BLPOP) each get a connection of their own.
  const blocking = (what: 'stream' | 'answer') => conns.open('blocking', what === 'stream' ? 'live-feed' : 'approval-waiter', { failFast: what === 'stream' });
  // The stream's cap leaves room for a run's live deltas beside every event its log may keep.
  const store = new RedisRunStore(redis, undefined, config.CORRAL_LOG_MAX_EVENTS + 16 + config.CORRAL_STREAM_MAX_DELTAS, { durability, blocking });
  const tree = new RunTree(redis);
  const metrics = new RunMetrics(redis);
  // Traces (OTEL_* settings; off without an endpoint): one tracer for this process, its export counts into /metrics.
  const traceSettings = tracingSettings(config);
  // The SDK is loaded only when traces are on: with them off no module of it is in the process.
  const otel = traceSettings ? { ...(await import('./telemetry/tracer')), ...(await import('./telemetry/corral-tracing')), ...(await import('./telemetry/counts-pusher')) } : undefined;
  const tracer = traceSettings && otel ? otel.startTracing(traceSettings, { role: roles.api && roles.worker ? 'api+worker' : roles.api ? 'api' : 'worker', instance: workerId, version: CORRAL_VERSION }) : undefined;
  const tracing = tracer && otel ? new otel.CorralTracing(tracer, { ...(modelServerOf(config) ? { modelServer: modelServerOf(config)! } : {}) }) : undefined;
  if (tracer && otel) {
    const pusher = otel.startCountsPusher(() => tracer.counts(), (d) => metrics.addTraceCounts(d), 5000, (err) => log('could not record span counts', { error: err.message }));
    onClose('traces', async () => {
      await tracer.shutdown();
      await pusher.stop();
    });
    const u = new URL(traceSettings!.url);
    log('traces go to an OTLP collector', { url: `${u.origin}${u.pathname}`, protocol: traceSettings!.protocol, sampler: traceSettings!.sampler.kind });
  }
  /** Set when this process runs a worker: /readyz then checks the Docker engine too. */
  let dockerPing: (() => Promise<unknown>) | undefined;
  const started: StartedCorral = { workerId, modelDescription: '', close };

  try {
    if (roles.worker) {
      group = 'worker';
      const models = modelFactory(config);
      started.modelDescription = models.description;
      const classifier = config.CORRAL_CLASSIFIER && models.client
        ? new Classifier({
          client: models.client, model: config.CORRAL_CLASSIFIER_MODEL ?? config.CORRAL_MODEL,
          denyAt: config.CORRAL_RISK_DENY_AT, allowBelow: config.CORRAL_RISK_ALLOW_BELOW,
          authorizedAllowAt: config.CORRAL_AUTHORIZED_ALLOW_AT, timeoutMs: config.CORRAL_CLASSIFIER_TIMEOUT_MS,
        })
        : undefined;
      if (!classifier) log('risk classifier off: calls the policy does not settle go to approval, or are refused when the run is unattended');
      const analyzer = await AnalysisPool.start({
        policies, threads: config.CORRAL_POLICY_THREADS, timeoutMs: config.CORRAL_POLICY_ANALYSIS_TIMEOUT_MS, heapMb: config.CORRAL_POLICY_ANALYSIS_HEAP_MB, log,
      });
      onClose('policy analysis threads', () => analyzer.close());
      const docker = createDockerClient(config);
      const sandboxes = createSandboxProvider(config, { docker, log, ...(extras.egressTestHooks ? { egressTestHooks: extras.egressTestHooks } : {}) });
      dockerPing = () => docker.ping();
      const subscriber = conns.open('subscriber', 'cancel-subscriber');
      onClose('redis subscriber', () => quitRedis(subscriber));
      const workerConn = conns.open('commands', 'worker');
      onClose('worker redis', () => quitRedis(workerConn));
      const flowConn = conns.open('commands', 'flow');
      onClose('flow redis', () => quitRedis(flowConn));
      const flow = new FlowProducer({ connection: flowConn });
      onClose('flow producer', () => flow.close());
      // Its ledger keeps an upload's quota entry alive as long as its runs use it (admission touches both).
      const workerUploads = new WorkspaceUploads(resolve(config.CORRAL_DATA_DIR, 'workspaces'), config.CORRAL_WORKSPACE_TTL_S, Date.now, artifacts, new RedisUploadQuota(redis, uploadCaps(config), capsPrefix(config)));
      if (artifacts.kind !== 'local') {
        // This host's copies of uploads are a cache of the store's: expired ones go like the API's.
        const sweep = () => void workerUploads.sweep().catch((err: Error) => log('workspace cache sweep failed', { error: err.message }));
        const t = setInterval(sweep, 3600_000).unref();
        onClose('workspace cache sweeper', async () => clearInterval(t));
      }
      // This host keeps a run's files no longer than the run store keeps the run; files the object store refused are stored again.
      const sweepFiles = () => void sweepRunFiles({ dataDir: resolve(config.CORRAL_DATA_DIR), runs: store, artifacts, retentionMs: config.CORRAL_RUN_FILES_RETENTION_DAYS * 86_400_000, clock: Date.now }).then(
        (r) => void ((r.removed.length || r.checkpoints || r.published.length || r.pending.length) && log('run files swept', { removed: r.removed.length, checkpoints: r.checkpoints, published: r.published.length, pending: r.pending.length })),
        (err: Error) => log('run files sweep failed', { error: err.message }),
      );
      const filesSweeper = setInterval(sweepFiles, 3600_000).unref();
      sweepFiles();
      onClose('run files sweeper', async () => clearInterval(filesSweeper));
      // Secrets are masked in a worker thread of its own; its rules compile now, not on a run's first call.
      const secrets = new SecretScanPool();
      await secrets.warm();
      onClose('secret scanner', () => secrets.close());
      const worker = await startWorker({
        config, sandboxes, store, metrics, workerId, clock: Date.now, log,
        modelFor: withReplays(config, models.modelFor, artifacts, store),
        policyNames: [...policies.keys()], environments,
        gitCredentials,
        artifacts,
        memory: new RedisTenantMemory(redis, { legacyDir: resolve(config.CORRAL_DATA_DIR, 'memory') }),
        setupCache: new SetupCache(resolve(config.CORRAL_DATA_DIR), config.CORRAL_SETUP_CACHE_MB * 1024 * 1024),
        gateFor: (approvals) => new PolicyGate({ policies, analyzer, approvals, ...(classifier ? { classifier } : {}) }),
        protectedSetFor: (name) => policies.get(name)?.compiled.protectedSet ?? DEFAULT_PROTECTED_SET,
        secrets,
        queueName: config.CORRAL_QUEUE, concurrency: config.CORRAL_CONCURRENCY,
        sandboxReady: () => sandboxes.ping(), dockerRetries: config.CORRAL_DOCKER_RETRIES, dockerBackoffMs: config.CORRAL_DOCKER_BACKOFF_MS,
        stalledIntervalMs: config.CORRAL_STALLED_INTERVAL_MS, retryStalled: config.CORRAL_RETRY_STALLED, lockMs: config.CORRAL_JOB_LOCK_MS,
        connection: workerConn, subscriber, cancelChannel: store.cancelChannel, flow, tree, newRunId,
        // The API's uploads (PUT /v1/workspaces): in the object store (fetched into this host's data dir, a
        // cache), or on the data directory this worker shares with the API.
        uploads: workerUploads,
        ...(logSigner ? { logSigner } : {}), ...(tracing ? { tracing } : {}),
      });
      onClose('worker', async () => {
        const graceMs = config.CORRAL_SHUTDOWN_GRACE_S * 1000;
        // Past the grace the running runs are cancelled: their sandboxes go (Docker), then their records
        // are written (Redis). A Redis that is away or hangs would hold those writes until the step times
        // out, so they are failed at once instead; the runs' jobs then stall, and the next worker records
        // their end (worker_lost) and reaps what is left.
        let closed = false;
        let redisGone = false;
        const giveUpOnRedis = setTimeout(() => {
          void answers(redis).then((ok) => {
            if (ok || closed) return;
            log('Redis does not answer at shutdown: the records of cancelled runs are left for the next worker', { level: 'warn', runs: [...worker.active] });
            redisGone = true;
            for (const r of [redis, workerConn]) dropRedis(r);
          });
        }, graceMs + 250);
        // Without Redis, BullMQ cannot finish closing; once this worker's runs have ended (sandboxes
        // removed), the step is over.
        const runsEnded = (async () => {
          while (!closed && !(redisGone && worker.active.size === 0)) await new Promise((r) => setTimeout(r, 100));
        })();
        try {
          await Promise.race([worker.close(graceMs), runsEnded]);
        } finally {
          closed = true;
          clearTimeout(giveUpOnRedis);
        }
      }, config.CORRAL_SHUTDOWN_GRACE_S * 1000 + CLEANUP_MS);
      started.worker = worker;
      if (config.CORRAL_HEALTH_FILE) {
        const health = startHealthFile({
          path: config.CORRAL_HEALTH_FILE, intervalMs: config.CORRAL_HEALTH_INTERVAL_S * 1000, workerId, log, active: () => worker.active.size,
          checks: { redis: () => store.ping(), docker: () => docker.ping(), ...gateReadyCheck(config.DOCKER_HOST), ...(artifacts.kind !== 'local' ? { artifacts: () => artifacts.check() } : {}) },
        });
        onClose('health file', async () => health.stop());
      }
      const reaper: Reaper = startReaper(config, {
        docker, log, graceMs: config.CORRAL_REAP_GRACE_S * 1000, queue: config.CORRAL_QUEUE, engine: engineKeyOf(config), sandboxEngine: sandboxes.engine,
        isActive: async (runId, owner) => {
          // Pool containers: this worker's while held; another worker's until their deadline.
          if (runId.startsWith(POOL_PREFIX)) return owner === workerId ? sandboxes.poolOwns(runId) : true;
          if (owner === workerId) return worker.active.has(runId);
          const run = await store.get(runId);
          return !!run && !run.finishedAt;
        },
      });
      onClose('reaper', async () => reaper.stop());
      await reaper.first;
      if (config.CORRAL_WARM_POOL > 0) {
        onClose('warm pool', () => sandboxes.stopPool());
        // Not awaited (the worker takes runs while the pool fills); a pool that cannot start leaves runs cold.
        sandboxes.startPool(workerId).then(
          () => log('warm pool ready', { ...sandboxes.poolStats() }),
          (err: Error) => log('warm pool could not start: runs start cold', { level: 'warn', error: err.message }),
        );
      }
    }
    if (roles.api) {
      group = 'api';
      // The API fails fast while Redis is away (503), instead of holding requests in an offline queue.
      // The run store and the queue share this one connection: a submission's record and job are then
      // confirmed by one WAIT (queue/durability.ts) before the API answers 201.
      const apiRedis = conns.open('api', 'api', { lazy: true });
      apiRedis.on('error', () => undefined); // reported by the main connection's handler
      onClose('api redis', () => quitRedis(apiRedis));
      await apiRedis.connect().catch(() => undefined);
      const apiStore = new RedisRunStore(apiRedis, undefined, undefined, { durability, blocking });
      const held = new HeldSlots(apiRedis, capsPrefix(config));
      onClose('held slots', async () => held.close());
      const queueConn = apiRedis;
      const queue = createRunQueue(config.CORRAL_QUEUE, queueConn);
      queue.on('error', () => undefined); // a connection error: the request that met it answers 503, the main connection logs it
      onClose('queue', () => queue.close());
      if (auth.enabled) log('API auth on: bearer tokens required', { tenants: auth.tenants() });
      else log('WARNING: API AUTH IS OFF (neither CORRAL_API_TOKENS nor CORRAL_API_TOKENS_FILE is set): anyone who reaches the API can submit and read runs; every request is tenant "default"', { level: 'warn' });
      const schedules = new ScheduleStore(apiRedis, config.CORRAL_QUEUE, queueConn);
      onClose('schedules', () => schedules.close());
      // Uploaded workspaces (PUT /v1/workspaces) live under the data dir; expired ones are swept hourly.
      const uploadQuota = new RedisUploadQuota(apiRedis, uploadCaps(config), capsPrefix(config));
      const uploads = new WorkspaceUploads(resolve(config.CORRAL_DATA_DIR, 'workspaces'), config.CORRAL_WORKSPACE_TTL_S, Date.now, artifacts, uploadQuota);
      const sweepUploads = () => void uploads.sweep().then((n) => n && log('expired workspace uploads removed', { count: n }), (err: Error) => log('workspace upload sweep failed', { error: err.message }));
      const uploadSweeper = setInterval(sweepUploads, 3600_000).unref();
      sweepUploads();
      onClose('upload sweeper', async () => clearInterval(uploadSweeper));
      const apiDeps: ApiDeps = {
        config, store: apiStore, queue, metrics: new RunMetrics(apiRedis), tree: new RunTree(apiRedis), auth, newRunId, clock: Date.now, policyNames: [...policies.keys()], environments, templates, schedules,
        quota: new TenantQuota(apiRedis, queue), held, idempotency: new IdempotencyStore(apiRedis), uploads, uploadQuota, artifacts,
        log: (msg, fields) => log(msg, fields), operatorTenants: config.CORRAL_OPERATOR_TENANTS,
        ...(tracing ? { tracing } : {}), ...(logVerifyKey ? { logVerifyKey } : {}),
        readyChecks: {
          ...(dockerPing ? { docker: dockerPing, ...gateReadyCheck(config.DOCKER_HOST) } : {}),
          ...(artifacts.kind !== 'local' ? { artifacts: () => artifacts.check() } : {}),
        },
      };
      const app = buildApp(apiDeps);
      onClose('http server', () => app.close());
      // Every SSE subscriber of this process shares one blocking reader (its own connection); closed
      // first, it ends the open streams, so the server's close does not wait for them.
      onClose('live event feed', () => apiStore.closeLive());
      // Every API process fires schedules (BullMQ gives each firing to one of them).
      // BullMQ does not close a connection it was given: this one is quit after the runner has closed.
      const runnerConn = conns.open('commands', 'schedule-runner');
      onClose('schedule runner redis', () => quitRedis(runnerConn));
      const runner = startScheduleRunner(apiDeps, runnerConn, (msg, fields) => log(msg, fields));
      onClose('schedule runner', () => runner.close());
      started.url = await app.listen({ host: config.CORRAL_API_HOST, port: config.CORRAL_API_PORT });
      started.app = app;
    }
  } catch (err) {
    await close();
    throw err;
  }
  return started;
}
