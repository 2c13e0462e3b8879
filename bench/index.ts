/**
 * `npm run bench`: every benchmark of issue 7 in one run, one JSON document on stdout and in
 * bench/results.json (progress goes to stderr). Stages, in order, on one quiet host:
 *   1. sandbox costs            exec_ms.*, acquire_ms.{cold,warm,raw_create_start}, remove_ms (bench/sandbox-exec.ts);
 *                               isolation.{runc,gvisor}: exec and create+start per class, side by side (bench/isolation.ts)
 *   2. enqueue → start          bare BullMQ Worker, and corral's worker process (bench/enqueue-to-start.ts)
 *   3. runs per minute          one worker process at concurrency 1, 4, 8, a 5-tool-call task (bench/runs-per-minute.ts);
 *                               then a soak of the concurrency-8 worker (its RSS once settled)
 *   4. load                     the 200-run burst onto 3 workers through the API (bench/load-burst.ts)
 *   5. egress                   CONNECT throughput and per-request latency vs a direct loopback connection, proxy
 *                               start, and corral serve with a run flooding its proxy (bench/egress.ts)
 *   6. artifacts                workspace export (300 MB, 20 GB sparse) and file-tool calls, beside the
 *                               pre-streaming baseline commit (bench/artifacts.ts; BENCH_EXPORT_MB, BENCH_FILE_OPS)
 *   7. policy                   `corral policy check --batch` throughput, startup and crash class, beside the baseline
 *                               (the gate before its second pass) (bench/policy.ts; BENCH_POLICY_CALLS)
 *   8. streaming                a model turn streamed beside the same turn as plain JSON (client cost), and paced
 *                               with live deltas to Redis (first text, deltas per turn) (bench/streaming.ts)
 *   9. docker gate              exec and create+start through `corral docker-gate` beside the engine directly (bench/docker-gate.ts;
 *                               BENCH_GATE_EXECS, BENCH_GATE_ACQUIRES)
 *  10. workspace-upload         a 200 MB tar through PUT /v1/workspaces, plain and gzip: MB/s and the API's peak RSS (bench/workspace-upload.ts)
 *  11. setup-cache              a run's start in an environment with a setup phase (npm install from a loopback registry),
 *                               first and cached, beside the default environment (bench/setup-cache.ts);
 *                               with BENCH_SETUP_UPLOAD_MB=200 each run starts from a 200 MB upload (setup_cache_upload)
 *  13. effects                  the per-call effect check (protected files read through the engine) beside a call without
 *                               it, for three workspace sizes, and the secret scan of a tool output (bench/effects.ts; BENCH_EFFECT_CALLS)
 *  14. tracing                  runs with OTLP traces on beside off, alternating in the same minutes: run wall time, CPU, spans (bench/tracing.ts; BENCH_TRACE_RUNS, BENCH_TRACE_TOOLS)
 *  15. redis-ha                 runs per minute, enqueue → start and POST /v1/runs on a single Redis beside Sentinel (a
 *                               primary, a replica, 3 sentinels), with and without the WAIT on writes that matter, and one
 *                               WAIT's raw price (bench/redis-ha.ts; BENCH_HA_RUNS, BENCH_HA_TOOLS, BENCH_HA_CONCURRENCY, BENCH_HA_POSTS)
 * BENCH_STAGES=egress (or =artifacts, =policy, =streaming, =docker-gate, =workspace-upload, =setup-cache, =artifact-store, =effects, =tracing, =redis-ha) runs stage 5 (or 6, 7, 8, 9, 10, 11, 12, 13, 14, 15) alone and merges its result into bench/results.json.
 * Redis: REDIS_URL, else a throw-away corral/redis:7 container on loopback. The model is a scripted
 * OpenAI-compatible server on loopback (test/support/load-agent.ts). Knobs (environment):
 *   BENCH_EXECS (60)  BENCH_ACQUIRES (12)  BENCH_ISOLATION_EXECS (30)  BENCH_ISOLATION_ACQUIRES (8)  BENCH_WARM (20)  BENCH_ENQUEUE_SAMPLES (20)  BENCH_BARE_SAMPLES (200)
 *   BENCH_RATE_TOOLS (5)  BENCH_RATE_RUNS_PER_SLOT (3)  BENCH_SOAK_RUNS (240)  CORRAL_LOAD_RUNS (200)  BENCH_LOAD_TOOLS (3)
 *   BENCH_EGRESS_MB (256)  BENCH_EGRESS_REQUESTS (300)
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { RedisConnections } from '../src/queue/redis-connections';
import { startFakeDecisionsServer } from '../test/support/fake-decisions-server';
import { loadAgent } from '../test/support/load-agent';
import { startRssSampler } from '../test/support/load-rss';
import { startLoadStack } from '../test/support/load-stack';
import { benchArtifacts } from './artifacts';
import { benchWorkspaceUpload } from './workspace-upload';
import { benchSetupCache } from './setup-cache';
import { benchArtifactStore } from './artifact-store';
import { benchEffects, type EffectsBench } from './effects';
import { benchBareBullmq, benchCorralEnqueue } from './enqueue-to-start';
import { benchDockerGate, type GateBench } from './docker-gate';
import { benchEgress, type EgressBench } from './egress';
import { benchLoadBurst } from './load-burst';
import { benchRedis } from './redis';
import { benchRedisHa, summariseRedisHa } from './redis-ha';
import { benchRunsPerMinute, soak, type RateResult, type SoakResult } from './runs-per-minute';
import { benchIsolation } from './isolation';
import { benchPolicy, type PolicyBench } from './policy';
import { benchSandbox } from './sandbox-exec';
import { benchStreaming } from './streaming';
import { benchTracing } from './tracing';
import { envInt, note, round } from './stats';

const CONCURRENCIES = [1, 4, 8] as const;

interface Target {
  target: string;
  measured: number | boolean | null;
  met: boolean;
  note?: string;
}

function egressTargets(e: EgressBench): Record<string, Target> {
  const f = e.serve_flood;
  return {
    egress_flood_worker_rss_lt_400mb: { target: 'corral serve (2 slots): the worker process\'s peak RSS < 400 MB while a run floods its proxy', measured: f?.processRssPeakMb.worker ?? null, met: !!f && f.processRssPeakMb.worker < 400 },
    egress_flood_log_lt_20mb: { target: "the flooding run's events.jsonl < 20 MB", measured: f ? round(f.attacker.logBytes / 1024 / 1024, 3) : null, met: !!f && f.attacker.logBytes < 20 * 1024 * 1024 },
    egress_flood_other_run_succeeded: { target: 'the other run on that worker succeeded, the service still ready', measured: !!f && f.other.status === 'succeeded' && f.readyAfter, met: !!f && f.other.status === 'succeeded' && f.readyAfter },
  };
}

/**
 * One stage run alone: its result (and its targets, merged over the earlier ones) written into
 * bench/results.json under `name` with `name_measured_at`, the rest of the file kept; printed too.
 */
function mergeResults(name: string, result: unknown, targets?: Record<string, Target>): void {
  const file = join(__dirname, 'results.json');
  const prev = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>) : {};
  const merged = targets ? { targets: { ...(prev.targets as Record<string, Target> | undefined), ...targets } } : {};
  writeFileSync(file, `${JSON.stringify({ ...prev, [name]: result, [`${name}_measured_at`]: new Date().toISOString(), ...merged }, null, 2)}\n`);
  process.stdout.write(`${JSON.stringify({ [name]: result, ...(targets ? { targets } : {}) }, null, 2)}\n`);
}

/** Stage 5 alone (BENCH_STAGES=egress): its result merged into bench/results.json. */
async function egressOnly(): Promise<void> {
  const redisBox = await benchRedis();
  try {
    note('stage 5/5: egress');
    const egress = await benchEgress({ redisUrl: redisBox.url });
    mergeResults('egress', egress, egressTargets(egress));
  } finally {
    await redisBox.close();
  }
}

/** Stage 6 alone (BENCH_STAGES=artifacts): its result merged into bench/results.json. */
function artifactsOnly(): void {
  note('stage 6: artifacts — export and file tools beside the baseline');
  mergeResults('artifacts', benchArtifacts());
}

function policyTargets(p: PolicyBench): Record<string, Target> {
  const c = p.current;
  return {
    policy_batch_ge_1000_per_s: { target: 'corral policy check --batch ≥ 1,000 calls/s', measured: c.calls_per_s, met: c.calls_per_s >= 1000, note: `${c.end_to_end_per_s}/s with the ${c.startup_ms} ms start-up included, over ${p.calls} calls` },
    policy_crash_class_answered: { target: 'every line of the crash class answered', measured: c.crash_class.answered, met: c.crash_class.answered === c.crash_class.lines },
  };
}

/** Stage 7 alone (BENCH_STAGES=policy): its result merged into bench/results.json. */
async function policyOnly(): Promise<void> {
  note('stage 7: policy — corral policy check --batch beside the baseline');
  const policy = await benchPolicy();
  mergeResults('policy', policy, policyTargets(policy));
}

/** Stage 8 alone (BENCH_STAGES=streaming): its result merged into bench/results.json. */
async function streamingOnly(): Promise<void> {
  const redisBox = await benchRedis();
  try {
    note('stage 8: streaming — streamed turns beside plain ones, and live deltas to Redis');
    mergeResults('streaming', await benchStreaming({ redisUrl: redisBox.url }));
  } finally {
    await redisBox.close();
  }
}

function gateTargets(g: GateBench): Record<string, Target> {
  return { docker_gate_exec_le_1_1x: { target: 'exec through the docker gate ≤ 1.1× direct (p50)', measured: g.ratio_exec_p50, met: g.ratio_exec_p50 <= 1.1, note: `${g.exec_ms.gate.p50} ms vs ${g.exec_ms.direct.p50} ms; create+start ${g.ratio_create_start_p50}×` } };
}

/** Stage 9 alone (BENCH_STAGES=docker-gate): its result merged into bench/results.json. */
async function gateOnly(): Promise<void> {
  note('stage 9: docker gate — exec and create+start through the gate beside direct');
  const docker_gate = await benchDockerGate({ execs: envInt('BENCH_GATE_EXECS', 60), acquires: envInt('BENCH_GATE_ACQUIRES', 10) });
  mergeResults('docker_gate', docker_gate, gateTargets(docker_gate));
}

/** Stage 10 alone (BENCH_STAGES=workspace-upload): its result merged into bench/results.json. */
async function uploadOnly(): Promise<void> {
  note('stage 10: workspace upload — a 200 MB tar through PUT /v1/workspaces, the API\'s peak RSS');
  mergeResults('workspace_upload', await benchWorkspaceUpload());
}

/** Stage 11 alone (BENCH_STAGES=setup-cache): its result merged into bench/results.json. */
async function setupOnly(): Promise<void> {
  note('stage 11: setup cache — a run\'s start in an environment with setup, first and cached, beside the default');
  // With BENCH_SETUP_UPLOAD_MB the runs start from a large upload: kept beside the inline case.
  mergeResults(process.env.BENCH_SETUP_UPLOAD_MB ? 'setup_cache_upload' : 'setup_cache', await benchSetupCache());
}

/** Stage 12 alone (BENCH_STAGES=artifact-store): its result merged into bench/results.json. */
async function storeOnly(): Promise<void> {
  note('stage 12: artifact store — a run\'s files (10 MB tar) into the local store and an S3-compatible one');
  mergeResults('artifact_store', await benchArtifactStore());
}

function effectTargets(e: EffectsBench): Record<string, Target> {
  const small = e.small_project as { check_ms: { p50: number }; call_ms: { p50: number } };
  const repo = e.repo_2000_files_4500_entries as { check_ms: { p50: number } };
  const large = e.node_modules_20000_files_targeted as { check_ms: { p95: number } };
  return {
    effect_check_small_p50_le_100ms: { target: 'the per-call effect check on a small project ≤ 100 ms (p50)', measured: small.check_ms.p50, met: small.check_ms.p50 <= 100, note: `a call without it: ${small.call_ms.p50} ms` },
    effect_check_repo_p50_le_500ms: { target: 'on a 2,000-file git repository (4,500 entries, 14 MB) ≤ 500 ms (p50)', measured: repo.check_ms.p50, met: repo.check_ms.p50 <= 500 },
    effect_check_large_p95_le_1000ms: { target: "on a 20,000-file workspace (read targeted) ≤ 1 s (p95)", measured: large.check_ms.p95, met: large.check_ms.p95 <= 1000 },
  };
}

/** Stage 13 alone (BENCH_STAGES=effects): its result merged into bench/results.json. */
async function effectsOnly(): Promise<void> {
  note('stage 13: effects — the per-call effect check beside a call without it; the secret scan');
  const effects = await benchEffects({ calls: envInt('BENCH_EFFECT_CALLS', 30) });
  mergeResults('effects', effects, effectTargets(effects));
}

/** Stage 14 alone (BENCH_STAGES=tracing): its result merged into bench/results.json. */
async function tracingOnly(): Promise<void> {
  const redisBox = await benchRedis();
  try {
    note('stage 14: tracing — runs with traces exported over OTLP beside runs without, alternating');
    mergeResults('tracing', await benchTracing({ redisUrl: redisBox.url, runs: envInt('BENCH_TRACE_RUNS', 12), tools: envInt('BENCH_TRACE_TOOLS', 3) }));
  } finally {
    await redisBox.close();
  }
}

/** Stage 15 alone (BENCH_STAGES=redis-ha): its result merged into bench/results.json. */
async function redisHaOnly(): Promise<void> {
  note('stage 15: redis-ha — single Redis beside Sentinel, with and without WAIT');
  const r = await benchRedisHa();
  mergeResults('redis_ha', { ...r, summary: summariseRedisHa(r) });
}

async function main(): Promise<void> {
  if (process.env.BENCH_STAGES === 'tracing') return tracingOnly();
  if (process.env.BENCH_STAGES === 'effects') return effectsOnly();
  if (process.env.BENCH_STAGES === 'redis-ha') return redisHaOnly();
  if (process.env.BENCH_STAGES === 'artifact-store') return storeOnly();
  if (process.env.BENCH_STAGES === 'setup-cache') return setupOnly();
  if (process.env.BENCH_STAGES === 'workspace-upload') return uploadOnly();
  if (process.env.BENCH_STAGES === 'docker-gate') return gateOnly();
  if (process.env.BENCH_STAGES === 'streaming') return streamingOnly();
  if (process.env.BENCH_STAGES === 'egress') return egressOnly();
  if (process.env.BENCH_STAGES === 'artifacts') return artifactsOnly();
  if (process.env.BENCH_STAGES === 'policy') return await policyOnly();
  const started = new Date();
  const t0 = Date.now();
  note('stage 1/5: sandbox exec / acquire / remove');
  const sandbox = await benchSandbox({ execs: envInt('BENCH_EXECS', 60), acquires: envInt('BENCH_ACQUIRES', 12), warm: envInt('BENCH_WARM', 20) });
  note('stage 1/4: isolation classes side by side (runc, gVisor)');
  const isoOpts = { execs: envInt('BENCH_ISOLATION_EXECS', 30), acquires: envInt('BENCH_ISOLATION_ACQUIRES', 8) };
  const isolation = { runc: await benchIsolation('runc', isoOpts), gvisor: await benchIsolation('gvisor', isoOpts) };

  const redisBox = await benchRedis();
  const agent = loadAgent();
  const model = await startFakeDecisionsServer({ chat: agent });
  const rss = startRssSampler(100);
  const redis = new RedisConnections(redisBox.url).open('commands', 'bench');
  try {
    note('stage 2/5: enqueue → start (bare BullMQ)');
    const bare = await benchBareBullmq(redis, envInt('BENCH_BARE_SAMPLES', 200));

    const stack = await startLoadStack({ redisUrl: redisBox.url, modelBaseURL: model.baseURL, name: 'bench', api: false });
    const qConn = redis.duplicate({ maxRetriesPerRequest: null });
    const queue = new Queue(stack.queue, { connection: qConn });
    const rates: Record<string, RateResult> = {};
    const rssByConcurrency: Record<string, number> = {};
    let corralEnqueue: Awaited<ReturnType<typeof benchCorralEnqueue>> | undefined;
    let soaked: SoakResult | undefined;
    try {
      for (const c of CONCURRENCIES) {
        const worker = await stack.startWorker(`bench-c${c}`, c);
        rss.track(worker.id, worker.pid);
        if (c === 1) {
          note('stage 2/5: enqueue → start (corral worker process, concurrency 1)');
          corralEnqueue = await benchCorralEnqueue(redis, queue, envInt('BENCH_ENQUEUE_SAMPLES', 20));
        }
        const runs = envInt('BENCH_RATE_RUNS_PER_SLOT', 3) * c;
        note(`stage 3/5: runs per minute at concurrency ${c} (${runs} runs × ${envInt('BENCH_RATE_TOOLS', 5)} tool calls)`);
        rates[String(c)] = await benchRunsPerMinute({ stack, worker, queue, redis, runs, tools: envInt('BENCH_RATE_TOOLS', 5) });
        if (c === 8) {
          const n = envInt('BENCH_SOAK_RUNS', 240);
          note(`stage 3/5: soak at concurrency 8 (${n} more runs on the same worker, for its settled RSS)`);
          soaked = await soak({ stack, worker, queue, redis, runs: n, tools: envInt('BENCH_RATE_TOOLS', 5) });
        }
        await worker.stop();
        rssByConcurrency[String(c)] = rss.peaks()[worker.id] ?? 0;
      }
    } finally {
      await stack.close();
      await queue.close();
      qConn.disconnect();
    }

    const loadRuns = envInt('CORRAL_LOAD_RUNS', 200);
    note(`stage 4/5: load — ${loadRuns} runs burst onto 3 workers`);
    const load = await benchLoadBurst({
      redisUrl: redisBox.db(1), modelBaseURL: model.baseURL, modelRequests: agent.requests, rss,
      runs: loadRuns, tools: envInt('BENCH_LOAD_TOOLS', 3),
    });

    note('stage 5/5: egress');
    const egress = await benchEgress({ redisUrl: redisBox.db(2) });
    note('stage 6: artifacts — export and file tools beside the baseline');
    const artifacts = benchArtifacts();
    note('stage 7: policy — corral policy check --batch beside the baseline');
    const policy = await benchPolicy();
    note('stage 8: streaming — streamed turns beside plain ones, and live deltas to Redis');
    const streaming = await benchStreaming({ redisUrl: redisBox.db(3) });
    note('stage 9: docker gate — exec and create+start through the gate beside direct');
    const docker_gate = await benchDockerGate({ execs: envInt('BENCH_GATE_EXECS', 60), acquires: envInt('BENCH_GATE_ACQUIRES', 10) });
    note('stage 10: workspace upload — a 200 MB tar through PUT /v1/workspaces');
    const workspace_upload = await benchWorkspaceUpload();
    note('stage 11: setup cache — first and cached start beside the default environment');
    const setup_cache = await benchSetupCache();
    note('stage 12: artifact store — a run\'s files into the local store and an S3-compatible one');
    const artifact_store = await benchArtifactStore();

    const enq = corralEnqueue!;
    const rssPeak = Math.max(...Object.values(rssByConcurrency));
    const coldRatio = round(sandbox.acquire_ms.cold.p50 / sandbox.acquire_ms.raw_create_start.p50, 2);
    const targets: Record<string, Target> = {
      ...gateTargets(docker_gate),
      acquire_warm_p50_lt_20ms: {
        target: 'acquire_ms.warm.p50 < 20 (warm pool, CORRAL_WARM_POOL)', measured: sandbox.acquire_ms.warm?.p50 ?? null,
        met: sandbox.acquire_ms.warm !== null && sandbox.acquire_ms.warm.p50 < 20,
        ...(sandbox.warm_note ? { note: sandbox.warm_note } : {}),
      },
      acquire_cold_within_1_2x_raw: { target: 'acquire_ms.cold.p50 ≤ 1.2 × acquire_ms.raw_create_start.p50', measured: coldRatio, met: coldRatio <= 1.2 },
      enqueue_to_start_p50_lt_10ms: { target: 'enqueue_to_start_ms.p50 < 10 (corral worker)', measured: enq.enqueue_to_start_ms.p50, met: enq.enqueue_to_start_ms.p50 < 10 },
      exec_corral_within_1_2x_raw: { target: 'exec_ms.corral.p50 ≤ 1.2 × exec_ms.raw_api.p50', measured: sandbox.ratio_corral_to_raw_p50, met: sandbox.ratio_corral_to_raw_p50 <= 1.2 },
      worker_rss_lt_250mb_at_c8: {
        target: 'worker RSS peak at concurrency 8 < 250 MB (over its rate stage and the soak)', measured: rssByConcurrency['8'] ?? null, met: (rssByConcurrency['8'] ?? Infinity) < 250,
        note: `peak over ${rates['8']?.runs ?? 0} + ${soaked?.runs ?? 0} runs on one worker process`,
      },
      load_every_run_once: { target: `${loadRuns} runs on 3 workers: every run succeeded exactly once`, measured: load.every_run_once, met: load.every_run_once },
      ...egressTargets(egress),
      ...policyTargets(policy),
      load_nothing_left: {
        target: 'no container of the queue and no unexpected Redis key left', measured: load.containers_left === 0 && load.redis_ok,
        met: load.containers_left === 0 && load.redis_ok,
      },
    };

    const out = {
      started_at: started.toISOString(),
      host: { cpus: (await import('node:os')).cpus().length, node: process.version, redis: redisBox.ownContainer ? 'own container (corral/redis:7)' : 'REDIS_URL' },
      exec_ms: sandbox.exec_ms,
      acquire_ms: sandbox.acquire_ms,
      remove_ms: sandbox.remove_ms,
      ratio_corral_to_raw_p50: sandbox.ratio_corral_to_raw_p50,
      isolation,
      enqueue_to_start_ms: enq.enqueue_to_start_ms,
      enqueue_to_pickup_ms_corral: enq.enqueue_to_pickup_ms,
      enqueue_to_start_ms_bare_bullmq: { p50: bare.p50, p95: bare.p95 },
      runs_per_minute: Object.fromEntries(CONCURRENCIES.map((c) => [String(c), rates[String(c)]!.runs_per_minute])),
      worker_rss_mb_peak: rssPeak,
      worker_rss_mb_peak_by_concurrency: rssByConcurrency,
      worker_rss_soak: soaked,
      load,
      egress,
      artifacts,
      policy,
      streaming,
      docker_gate,
      workspace_upload,
      setup_cache,
      artifact_store,
      targets,
      notes: {
        isolation: 'the same provider per class (CORRAL_SANDBOX_RUNTIME=runc / gvisor); exec_ms.python = `python3 -c pass`; gVisor on the ptrace platform, as .ci/bootstrap registers it',
        acquire_ms_warm: sandbox.warm_note ?? 'DockerSandboxProvider.startPool (2 sandboxes of the default class, refilled between samples); only acquisitions the provider logged as pooled count; cold uses 256 MB/1 CPU/128 pids/64 MB limits, warm the configured defaults (the pool\'s class); both seed one file',
        enqueue_to_start_ms: 'corral worker process (bin/corral worker, concurrency 1, idle): Date.now() before enqueueRun → the run\'s startedAt written by corral\'s processor; enqueue_to_pickup_ms_corral = job.processedOn − job.timestamp (BullMQ pick-up only); enqueue_to_start_ms_bare_bullmq = a bare BullMQ Worker in-process, performance.now() before queue.add → processor entry',
        runs_per_minute: `one worker process; ${envInt('BENCH_RATE_RUNS_PER_SLOT', 3)}×concurrency runs of a ${envInt('BENCH_RATE_TOOLS', 5)}-bash-call scripted task enqueued at once after one warm-up run; wall = enqueue → last finishedAt`,
        worker_rss_mb_peak: 'peak VmRSS of the worker processes over the concurrency 1, 4, 8 stages, the concurrency-8 one including its soak (sampled every 100 ms)',
      },
      details: {
        runs_per_minute: rates,
        enqueue_samples: { corral: enq.samples, corral_failed: enq.failed, bare_bullmq: bare.samples },
        sandbox_samples: sandbox.samples,
        rss_samples: rss.samples(),
      },
      bench_wall_s: round((Date.now() - t0) / 1000, 1),
    };
    const text = JSON.stringify(out, null, 2);
    writeFileSync(join(__dirname, 'results.json'), `${text}\n`);
    process.stdout.write(`${text}\n`);
  } finally {
    rss.stop();
    redis.disconnect();
    await model.close();
    await redisBox.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
