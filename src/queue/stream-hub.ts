/**
 * One shared blocking reader of run event streams per API process (LiveFeed on Redis): a single
 * connection runs `XREAD BLOCK … STREAMS` over every run some subscriber waits on, from the lowest
 * cursor among that run's subscribers, and hands each subscriber the rows after its own cursor —
 * one read per row for any number of subscribers, one connection for any number of streams
 * (a connection per stream exhausted Redis's connection path at a few thousand).
 *
 * A subscriber that arrives while the read is blocked on other streams (or asks from an earlier
 * cursor than the read covers) kicks it: one XADD to this hub's own kick stream, which the read
 * always includes, from the last kick id it saw — so a kick is never lost to ordering between the
 * two connections. Kicks are coalesced to one per read. The kick key carries a TTL and is deleted
 * on close.
 *
 * What is held per subscriber: a cursor, a timer and the rows handed to it (at most `count` per
 * read); the caller bounds how many subscribers there are (held-slots.ts) and how much it buffers.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { LiveDelta, RunEvent } from '../domain/events';
import type { LiveFeed, LiveRow } from './run-store';

interface Waiter {
  runId: string;
  after: string;
  resolve(rows: LiveRow[]): void;
  reject(err: Error): void;
}

/** Stream ids (MS-SEQ, each part below 2^64) compared as numbers; "0" is the smallest. */
export function compareStreamIds(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  const d = BigInt(am) - BigInt(bm);
  if (d !== 0n) return d < 0n ? -1 : 1;
  const e = BigInt(as) - BigInt(bs);
  return e === 0n ? 0 : e < 0n ? -1 : 1;
}

const KICK_TTL_MS = 60_000;
/** After a failed read, the next waits this long (the subscribers of the failed read were told). */
const RETRY_MS = 500;

export interface StreamHubOptions {
  /** The longest one XREAD blocks (subscribers have their own, shorter or longer, timeouts). */
  blockMs?: number;
  /** Rows per stream per read. */
  count?: number;
}

export class RedisStreamHub implements LiveFeed {
  private readonly waiters = new Map<string, Set<Waiter>>();
  /** What the XREAD in flight covers: run → the id it reads after. Empty when no read is in flight. */
  private covered = new Map<string, string>();
  private reading = false;
  private kicked = false;
  private lastKick = '0-0';
  private closed = false;
  private readonly kickKey: string;
  private readonly blockMs: number;
  private readonly count: number;

  constructor(
    /** The blocking connection: used by this hub only. */
    private readonly reader: Redis,
    /** Any connection for the kicks (never blocked). */
    private readonly cmd: Redis,
    private readonly keyOf: (runId: string) => string,
    prefix: string,
    o: StreamHubOptions = {},
  ) {
    this.kickKey = `${prefix}:api:live-kick:${randomBytes(8).toString('hex')}`;
    this.blockMs = o.blockMs ?? 10_000;
    this.count = o.count ?? 100;
  }

  /** How many subscribers wait now, on how many runs (for /metrics and tests). */
  stats(): { subscribers: number; runs: number } {
    let subscribers = 0;
    for (const s of this.waiters.values()) subscribers += s.size;
    return { subscribers, runs: this.waiters.size };
  }

  next(runId: string, after: string, timeoutMs: number, signal?: AbortSignal): Promise<LiveRow[]> {
    if (this.closed) return Promise.reject(new Error('the live feed is closed'));
    if (signal?.aborted) return Promise.resolve([]);
    return new Promise<LiveRow[]>((resolve, reject) => {
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        const set = this.waiters.get(runId);
        set?.delete(w);
        if (set?.size === 0) this.waiters.delete(runId);
      };
      const w: Waiter = {
        runId, after,
        resolve: (rows) => {
          done();
          resolve(rows);
        },
        reject: (err) => {
          done();
          reject(err);
        },
      };
      const onAbort = () => w.resolve([]);
      const timer = setTimeout(() => w.resolve([]), Math.max(1, timeoutMs));
      signal?.addEventListener('abort', onAbort, { once: true });
      let set = this.waiters.get(runId);
      if (!set) this.waiters.set(runId, (set = new Set()));
      set.add(w);
      this.wake(runId, after);
    });
  }

  /** Makes sure the read covers `runId` from `after`: starts the loop, or kicks the read in flight. */
  private wake(runId: string, after: string): void {
    if (!this.reading) {
      void this.loop();
      return;
    }
    const from = this.covered.get(runId);
    if (from !== undefined && compareStreamIds(from, after) <= 0) return;
    if (this.kicked) return;
    this.kicked = true;
    void this.cmd.multi().xadd(this.kickKey, 'MAXLEN', '1', '*', 'k', '1').pexpire(this.kickKey, KICK_TTL_MS).exec().catch(() => undefined);
  }

  private async loop(): Promise<void> {
    this.reading = true;
    try {
      while (!this.closed && this.waiters.size > 0) {
        const covered = new Map<string, string>();
        for (const [runId, set] of this.waiters) {
          let min: string | undefined;
          for (const w of set) if (min === undefined || compareStreamIds(w.after, min) < 0) min = w.after;
          covered.set(runId, min === '0' ? '0-0' : min!);
        }
        this.covered = covered;
        this.kicked = false;
        const runs = [...covered.keys()];
        const keys = runs.map((r) => this.keyOf(r));
        const byKey = new Map(keys.map((k, i) => [k, runs[i]!]));
        let reply: Array<[string, Array<[string, string[]]>]> | null;
        try {
          reply = (await this.reader.xread('COUNT', this.count, 'BLOCK', this.blockMs, 'STREAMS', ...keys, this.kickKey, ...runs.map((r) => covered.get(r)!), this.lastKick)) as typeof reply;
        } catch (err) {
          // Everyone this read was for hears of it (their streams end; clients resume by Last-Event-ID).
          for (const runId of runs) for (const w of [...(this.waiters.get(runId) ?? [])]) w.reject(err as Error);
          if (!this.closed) await new Promise((r) => setTimeout(r, RETRY_MS));
          continue;
        }
        for (const [key, entries] of reply ?? []) {
          if (key === this.kickKey) {
            this.lastKick = entries.at(-1)?.[0] ?? this.lastKick;
            continue;
          }
          const runId = byKey.get(key);
          if (!runId || entries.length === 0) continue;
          const rows = entries.map(([id, fields]) => toRow(id, fields));
          for (const w of [...(this.waiters.get(runId) ?? [])]) {
            const mine = rows.filter((r) => compareStreamIds(r.id, w.after) > 0);
            if (mine.length) w.resolve(mine);
          }
        }
      }
    } finally {
      this.covered = new Map();
      this.reading = false;
    }
  }

  /** Ends every wait (empty) and the read; the reader connection is the caller's to close after. */
  async close(): Promise<void> {
    this.closed = true;
    for (const set of [...this.waiters.values()]) for (const w of [...set]) w.resolve([]);
    await this.cmd.del(this.kickKey).catch(() => undefined);
  }
}

function toRow(id: string, fields: string[]): LiveRow {
  const value = fields[1] ?? 'null';
  return fields[0] === 'd' ? { id, delta: JSON.parse(value) as LiveDelta } : { id, event: JSON.parse(value) as RunEvent };
}
