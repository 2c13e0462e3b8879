/**
 * A worker's health for a container health check (it serves no HTTP): every interval the same checks
 * /readyz runs (Redis, the Docker engine or its gate, the object store) are taken with a time bound
 * and written as JSON to CORRAL_HEALTH_FILE — `{ts, ok, checks: {name: {ok, ms, error?}}, workerId,
 * active}` — atomically (a temporary file renamed over it). A check that fails makes `ok` false; a
 * worker whose event loop is stuck stops writing, so the file's age says so. compose.yaml's health
 * check reads it: healthy when `ok` and younger than three intervals.
 */
import { rename, writeFile } from 'node:fs/promises';

export interface HealthFileOptions {
  path: string;
  intervalMs: number;
  checks: Record<string, () => Promise<unknown>>;
  workerId: string;
  active: () => number;
  log: (msg: string, fields?: Record<string, unknown>) => void;
  /** Each check's bound (default 3 s, as /readyz's). */
  checkTimeoutMs?: number;
}

async function timed(check: () => Promise<unknown>, ms: number): Promise<{ ok: boolean; ms: number; error?: string }> {
  const t0 = Date.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([check(), new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms); })]);
    return { ok: true, ms: Date.now() - t0 };
  } catch (err) {
    return { ok: false, ms: Date.now() - t0, error: (err as Error).message.slice(0, 300) };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Writes the file now and every interval (never two writes at once: a tick while one is in flight is
 * skipped); stop() ends it and resolves once a write in flight has landed, so nothing is written after
 * (the file stays, and ages).
 */
export function startHealthFile(o: HealthFileOptions): { stop(): Promise<void>; written: Promise<void> } {
  let stopped = false;
  let failing = false;
  const tmp = `${o.path}.${process.pid}.tmp`;
  const write = async () => {
    const checks: Record<string, { ok: boolean; ms: number; error?: string }> = {};
    await Promise.all(Object.entries(o.checks).map(async ([name, check]) => {
      checks[name] = await timed(check, o.checkTimeoutMs ?? 3000);
    }));
    const ok = Object.values(checks).every((c) => c.ok);
    if (stopped) return;
    try {
      await writeFile(tmp, `${JSON.stringify({ ts: new Date().toISOString(), ok, checks, workerId: o.workerId, active: o.active() })}\n`, { mode: 0o644 });
      await rename(tmp, o.path);
      failing = false;
    } catch (err) {
      if (!failing) o.log('cannot write the health file', { path: o.path, error: (err as Error).message });
      failing = true;
    }
  };
  let inFlight: Promise<void> | undefined;
  const tick = (): Promise<void> => {
    if (!inFlight) inFlight = write().finally(() => { inFlight = undefined; });
    return inFlight;
  };
  const written = tick();
  const timer = setInterval(() => void tick(), o.intervalMs);
  timer.unref();
  return { stop: async () => { stopped = true; clearInterval(timer); await inFlight; }, written };
}
