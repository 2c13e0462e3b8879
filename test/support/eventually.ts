/**
 * Waiting in tests without fixed sleeps. `eventually` polls a probe until its value satisfies a
 * condition, and fails with what it waited for and the last value seen; `consistently` checks that a
 * condition keeps holding for a window (the only honest way to claim that something does *not*
 * happen). A probe that throws counts as "not yet" until the time is up; then its error is reported.
 */
import { inspect } from 'node:util';

export interface WaitOptions<T> {
  /** What is awaited, for the failure message ("the container to be running"). */
  what: string;
  /** The condition on the probe's value; default: truthy. */
  until?: (v: T) => boolean;
  timeoutMs?: number;
  intervalMs?: number;
}

const show = (v: unknown) => inspect(v, { depth: 3, breakLength: Infinity }).slice(0, 400);

export async function eventually<T>(probe: () => T | Promise<T>, o: WaitOptions<T> & { until: (v: T) => boolean }): Promise<T>;
/** Without `until`: the first truthy value. */
export async function eventually<T>(probe: () => T | Promise<T>, o: Omit<WaitOptions<T>, 'until'>): Promise<NonNullable<T>>;
export async function eventually<T>(probe: () => T | Promise<T>, o: WaitOptions<T>): Promise<T> {
  const ok = o.until ?? ((v: T) => Boolean(v));
  const end = Date.now() + (o.timeoutMs ?? 30_000);
  let last: { value: T } | { error: unknown } | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (ok(value)) return value;
      last = { value };
    } catch (error) {
      last = { error };
    }
    if (Date.now() >= end) {
      const seen = last === undefined ? 'nothing' : 'error' in last ? `an error: ${(last.error as Error)?.message ?? show(last.error)}` : show(last.value);
      throw new Error(`timed out after ${o.timeoutMs ?? 30_000} ms waiting for ${o.what}; last saw ${seen}`);
    }
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 100));
  }
}

/** Fails as soon as the condition does not hold, checked every intervalMs for forMs. */
export async function consistently<T>(probe: () => T | Promise<T>, o: { what: string; holds: (v: T) => boolean; forMs: number; intervalMs?: number }): Promise<void> {
  const end = Date.now() + o.forMs;
  for (;;) {
    const v = await probe();
    if (!o.holds(v)) throw new Error(`expected ${o.what} to hold for ${o.forMs} ms; it did not: ${show(v)}`);
    if (Date.now() >= end) return;
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 200));
  }
}

/** The probe's value once it has stopped changing for quietMs (compared as JSON), within timeoutMs. */
export async function settled<T>(probe: () => T | Promise<T>, o: { what: string; quietMs: number; timeoutMs?: number; intervalMs?: number }): Promise<T> {
  const end = Date.now() + (o.timeoutMs ?? 30_000);
  let v = await probe();
  let since = Date.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 100));
    const next = await probe();
    if (JSON.stringify(next) !== JSON.stringify(v)) {
      v = next;
      since = Date.now();
    } else if (Date.now() - since >= o.quietMs) {
      return v;
    }
    if (Date.now() >= end) throw new Error(`timed out after ${o.timeoutMs ?? 30_000} ms waiting for ${o.what} to settle; last saw ${show(v)}`);
  }
}
