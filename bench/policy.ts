/**
 * The policy gate's throughput through `corral policy check --batch`, this tree side by side with
 * a baseline in the same run: the baseline is BENCH_POLICY_BASELINE (default 693ea79, the last commit
 * before the gate's second pass), its src/ and policies/ extracted with `git archive` into
 * data/bench-baseline/ (gitignored; imports resolve to this tree's node_modules).
 * Input: every bash call of the labelled sets except the crash class (the baseline dies on those,
 * and a dead batch answers nothing), repeated to BENCH_POLICY_CALLS (10,000) lines. Per side:
 *   startup_ms      an empty batch (process start, module load, policy load)
 *   wall_ms         the whole batch, startup included
 *   calls_per_s     lines / (wall - startup): the steady rate
 *   end_to_end_per_s lines / wall
 *   decisions       how many lines came back allow / ask / deny / error
 * The crash class is then sent alone to each side: answered lines and the exit status.
 *
 * `analysis_threads` (issue 37): the static layer in-process beside the same calls through the
 * analysis threads (AnalysisPool, 2 threads): calls per second one at a time and with 4 in flight,
 * and the main thread's event-loop delay (monitorEventLoopDelay, p50/p99/max) while one hostile call
 * (60 functions each calling the next twice: ≈ 0.5 s of analysis) is analysed on the main thread
 * beside the same call in a thread — what every other run on that worker would feel.
 * Part of `npm run bench` (stage 7); alone: `BENCH_STAGES=policy npm run bench` or `npx tsx bench/policy.ts`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { AnalysisPool } from '../src/policy/analysis-pool';
import { evaluateStatic, type StaticCall } from '../src/policy/evaluate-static';
import { loadPolicies } from '../src/policy/load-policy';
import { envInt, note, round } from './stats';

const ROOT = resolve(__dirname, '..');
const SETS = ['labelled', 'attacks', 'ordinary'].map((s) => join(ROOT, 'test', 'fixtures', 'policy', `${s}.jsonl`));

export interface PolicySide {
  startup_ms: number;
  wall_ms: number;
  calls_per_s: number;
  end_to_end_per_s: number;
  decisions: Record<string, number>;
  crash_class: { lines: number; answered: number; status: number | null };
}
export interface LoopDelay { p50_ms: number; p99_ms: number; max_ms: number }
export interface AnalysisThreadsBench {
  calls: number;
  in_process_per_s: number;
  threads_sequential_per_s: number;
  threads_4_in_flight_per_s: number;
  /** The main thread's event-loop delay while one hostile call is analysed. */
  hostile_call: { analysis_ms_in_process: number; loop_delay_in_process: LoopDelay; loop_delay_with_threads: LoopDelay };
}
export interface PolicyBench {
  baseline_commit: string;
  calls: number;
  current: PolicySide;
  baseline: PolicySide | { error: string };
  analysis_threads?: AnalysisThreadsBench;
}

const HOSTILE = `${Array.from({ length: 60 }, (_, i) => `f${i}(){ f${i + 1} "$@" "$@"; }`).join('; ')}; f0 a`;

async function loopDelayWhile(work: () => Promise<unknown>): Promise<LoopDelay> {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  // a timer keeps the loop turning while the work is pending, as other runs' I/O would
  const tick = setInterval(() => undefined, 5);
  try {
    await work();
    await new Promise((r) => setTimeout(r, 20)); // the tick a blocked loop delayed is recorded when it runs
  } finally { clearInterval(tick); h.disable(); }
  return { p50_ms: round(h.percentile(50) / 1e6, 1), p99_ms: round(h.percentile(99) / 1e6, 1), max_ms: round(h.max / 1e6, 1) };
}

export async function benchAnalysisThreads(calls: StaticCall[]): Promise<AnalysisThreadsBench> {
  const policies = loadPolicies(join(ROOT, 'policies'));
  const policy = policies.get('default')!;
  note(`policy: ${calls.length} calls in-process and through the analysis threads`);
  let t = performance.now();
  for (const c of calls) evaluateStatic(policy, c);
  const inProcess = (calls.length / (performance.now() - t)) * 1000;
  const pool = await AnalysisPool.start({ policies, threads: 2, timeoutMs: 10_000, heapMb: 96 });
  try {
    t = performance.now();
    for (const c of calls) await pool.analyze('default', c);
    const sequential = (calls.length / (performance.now() - t)) * 1000;
    t = performance.now();
    let i = 0;
    await Promise.all(Array.from({ length: 4 }, async () => { while (i < calls.length) await pool.analyze('default', calls[i++]!); }));
    const inFlight = (calls.length / (performance.now() - t)) * 1000;
    note('policy: event-loop delay during one hostile call, in-process and in a thread');
    const hostile: StaticCall = { tool: 'bash', args: { command: HOSTILE } };
    let analysisMs = 0;
    const loopIn = await loopDelayWhile(async () => { await new Promise((r) => setTimeout(r, 20)); const t0 = performance.now(); evaluateStatic(policy, hostile); analysisMs = performance.now() - t0; });
    const loopThreads = await loopDelayWhile(() => pool.analyze('default', hostile));
    return {
      calls: calls.length, in_process_per_s: round(inProcess, 0), threads_sequential_per_s: round(sequential, 0), threads_4_in_flight_per_s: round(inFlight, 0),
      hostile_call: { analysis_ms_in_process: round(analysisMs, 0), loop_delay_in_process: loopIn, loop_delay_with_threads: loopThreads },
    };
  } finally {
    await pool.close();
  }
}

function baselineRoot(commit: string): string {
  const dir = join(ROOT, 'data', 'bench-baseline', `${commit}-policy`);
  if (!existsSync(join(dir, 'src', 'cli', 'index.ts'))) {
    mkdirSync(dir, { recursive: true });
    const archive = execFileSync('git', ['-C', ROOT, 'archive', commit, 'src', 'policies'], { maxBuffer: 64 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
  }
  return dir;
}

function batch(root: string, input: string): { ms: number; out: string; status: number | null } {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--max-old-space-size=192', '--import', join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs'), join(root, 'src', 'cli', 'index.ts'), 'policy', 'check', '--batch', '--policy', join(root, 'policies', 'default.yaml')], {
    cwd: ROOT, input, encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 10 * 60_000, env: { ...process.env, OPENAI_API_KEY: '', CORRAL_CLASSIFIER_MODEL: '' },
  });
  return { ms: performance.now() - t0, out: r.stdout ?? '', status: r.status };
}

function side(root: string, label: string, lines: string[], crash: string[]): PolicySide {
  note(`policy: ${label} startup`);
  const startups = [0, 1, 2].map(() => batch(root, '').ms).sort((a, b) => a - b);
  const startup = startups[1]!;
  note(`policy: ${label} ${lines.length} calls`);
  const r = batch(root, lines.join('\n') + '\n');
  const decisions: Record<string, number> = {};
  for (const l of r.out.split('\n').filter(Boolean)) {
    const o = JSON.parse(l) as { decision?: string; error?: string };
    const k = o.decision ?? (o.error ? 'error' : 'none');
    decisions[k] = (decisions[k] ?? 0) + 1;
  }
  const c = batch(root, crash.join('\n') + '\n');
  return {
    startup_ms: round(startup, 0),
    wall_ms: round(r.ms, 0),
    calls_per_s: round((lines.length / Math.max(1, r.ms - startup)) * 1000, 0),
    end_to_end_per_s: round((lines.length / r.ms) * 1000, 0),
    decisions,
    crash_class: { lines: crash.length, answered: c.out.split('\n').filter(Boolean).length, status: c.status },
  };
}

export async function benchPolicy(): Promise<PolicyBench> {
  const commit = process.env.BENCH_POLICY_BASELINE ?? '693ea79';
  const n = envInt('BENCH_POLICY_CALLS', 10_000);
  const cases = SETS.flatMap((f) => readFileSync(f, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { id: string; tool: string; args: unknown; task?: string; class?: string }));
  const toLine = (c: (typeof cases)[number], i: number) => JSON.stringify({ id: `${c.id}#${i}`, tool: c.tool, args: c.args, task: c.task ?? '' });
  const pool = cases.filter((c) => c.tool === 'bash' && c.class !== 'c14-crash');
  const lines = Array.from({ length: n }, (_, i) => toLine(pool[i % pool.length]!, i));
  const crash = cases.filter((c) => c.class === 'c14-crash').map(toLine);
  let baseline: PolicyBench['baseline'];
  try {
    baseline = side(baselineRoot(commit), `baseline ${commit}`, lines, crash);
  } catch (err) {
    baseline = { error: (err as Error).message };
  }
  const current = side(ROOT, 'current', lines, crash);
  const analysis = await benchAnalysisThreads(pool.slice(0, Math.min(pool.length, 3000)).map((c) => ({ tool: c.tool, args: c.args as Record<string, unknown> })));
  return { baseline_commit: commit, calls: n, current, baseline, analysis_threads: analysis };
}

if (require.main === module) {
  void benchPolicy().then((r) => process.stdout.write(`${JSON.stringify(r, null, 2)}\n`));
}
