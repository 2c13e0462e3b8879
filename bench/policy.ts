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
 * Part of `npm run bench` (stage 7); alone: `BENCH_STAGES=policy npm run bench` or `npx tsx bench/policy.ts`.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
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
export interface PolicyBench {
  baseline_commit: string;
  calls: number;
  current: PolicySide;
  baseline: PolicySide | { error: string };
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

export function benchPolicy(): PolicyBench {
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
  return { baseline_commit: commit, calls: n, current: side(ROOT, 'current', lines, crash), baseline };
}

if (require.main === module) {
  process.stdout.write(`${JSON.stringify(benchPolicy(), null, 2)}\n`);
}
