/**
 * Artifacts and file tools, this tree side by side with a baseline in the same run: the baseline is
 * the sandbox code of BENCH_ARTIFACTS_BASELINE (default 219e231, the last commit before the streamed
 * export), extracted with `git archive` into data/bench-baseline/ (gitignored; its imports resolve
 * to this tree's node_modules). Each measurement runs in its own process (bench/artifacts-child.ts):
 *   large   export of a BENCH_EXPORT_MB (300) MB workspace: time, tar size, peak RSS / external /
 *           array-buffer growth of the worker process during the export
 *   sparse  export of a workspace holding a 20 GB sparse file: time, and whether it produced artifacts
 *   files   p50 of write_file / read_file sandbox calls (BENCH_FILE_OPS each)
 * Part of `npm run bench` (bench/index.ts); alone: `npx tsx bench/artifacts.ts` (JSON on stdout).
 * Set CORRAL_SANDBOX_IMAGE to a branch's image; the baseline runs on the same image.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { note } from './stats';

const ROOT = resolve(__dirname, '..');

export interface ArtifactsSide {
  large: Record<string, unknown>;
  sparse: Record<string, unknown>;
  files: Record<string, unknown>;
}
export interface ArtifactsBench {
  baseline_commit: string;
  export_mb: number;
  current: ArtifactsSide;
  baseline: ArtifactsSide | { error: string };
}

function baselineSrc(commit: string): string {
  const dir = join(ROOT, 'data', 'bench-baseline', commit);
  if (!existsSync(join(dir, 'src', 'config.ts'))) {
    mkdirSync(dir, { recursive: true });
    const archive = execFileSync('git', ['-C', ROOT, 'archive', commit, 'src'], { maxBuffer: 64 * 1024 * 1024 });
    execFileSync('tar', ['-x', '-C', dir], { input: archive });
  }
  return join(dir, 'src');
}

function child(src: string, scenario: string): Record<string, unknown> {
  const r = spawnSync(join(ROOT, 'node_modules', '.bin', 'tsx'), [join(__dirname, 'artifacts-child.ts'), src, scenario], {
    cwd: ROOT, encoding: 'utf8', env: process.env, timeout: 15 * 60_000, maxBuffer: 1024 * 1024,
  });
  const line = r.stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return { ok: false, error: `the child failed (status ${r.status}): ${(r.stderr || line).trim().slice(-400)}` };
  }
}

function side(src: string, label: string): ArtifactsSide {
  const out = {} as ArtifactsSide;
  for (const s of ['large', 'sparse', 'files'] as const) {
    note(`artifacts: ${label} ${s}`);
    out[s] = child(src, s);
  }
  return out;
}

export function benchArtifacts(): ArtifactsBench {
  const commit = process.env.BENCH_ARTIFACTS_BASELINE ?? '219e231';
  let baseline: ArtifactsBench['baseline'];
  try {
    baseline = side(baselineSrc(commit), `baseline ${commit}`);
  } catch (err) {
    baseline = { error: (err as Error).message };
  }
  return { baseline_commit: commit, export_mb: Number(process.env.BENCH_EXPORT_MB ?? 300), current: side(join(ROOT, 'src'), 'current'), baseline };
}

if (require.main === module) {
  process.stdout.write(`${JSON.stringify(benchArtifacts(), null, 2)}\n`);
}
