/** Percentiles and timing helpers shared by the benchmarks. */

export interface P50P95 {
  p50: number;
  p95: number;
}

/** Nearest-rank p50 / p95, rounded to 0.1. */
export function stats(xs: readonly number[]): P50P95 {
  if (xs.length === 0) return { p50: NaN, p95: NaN };
  const s = [...xs].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
  return { p50: round(q(0.5)), p95: round(q(0.95)) };
}

export function round(x: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** Milliseconds `fn` takes. */
export async function time(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A positive integer from the environment, else `def`. */
export function envInt(name: string, def: number): number {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : def;
}

/** Progress on stderr, so stdout stays one JSON document. */
export function note(msg: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
}
