/**
 * Idempotency keys for POST /v1/runs, per tenant, in Redis with a TTL: the first request with a key
 * reserves it for the run id it is about to create (SET NX, so two racing requests cannot both
 * create a run); later requests with that key get that run id back, or a mismatch when their body
 * hash differs. A submission that fails after reserving releases the key so the client can retry.
 * One whose run Redis could not confirm (a failover) keeps the key, marked `unconfirmed`: a later
 * request with it that finds no run may make it again — one request only (claimRemake).
 *   {p}:idem:{tenant}:{sha256(key)}          string: {"runId","bodyHash","at","unconfirmed"?}
 *   {p}:idem:{tenant}:{sha256(key)}:remake   string: the one request allowed to make the run again
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { parseStored } from './stored-json';
import type { Redis } from 'ioredis';

export type Reservation =
  | { kind: 'new' }
  /** `at`: when the key was reserved (ms); `unconfirmed`: its request ended without a confirmed run. */
  | { kind: 'existing'; runId: string; at?: number; unconfirmed?: boolean }
  | { kind: 'mismatch'; runId: string };

export class IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
  ) {}

  private key(tenant: string, key: string): string {
    return `${this.prefix}:idem:${tenant}:${createHash('sha256').update(key).digest('hex')}`;
  }

  async reserve(tenant: string, key: string, bodyHash: string, runId: string, ttlS: number, now = Date.now()): Promise<Reservation> {
    const k = this.key(tenant, key);
    for (let attempt = 0; attempt < 3; attempt++) {
      const set = await this.redis.set(k, JSON.stringify({ runId, bodyHash, at: now }), 'EX', ttlS, 'NX');
      if (set === 'OK') return { kind: 'new' };
      const raw = await this.redis.get(k);
      if (raw === null) continue; // expired or released between the two calls
      const held = parseStored(Held, raw, `idempotency record ${k}`);
      if (held.bodyHash !== bodyHash) return { kind: 'mismatch', runId: held.runId };
      return { kind: 'existing', runId: held.runId, ...(held.at !== undefined ? { at: held.at } : {}), ...(held.unconfirmed ? { unconfirmed: true } : {}) };
    }
    throw new Error('idempotency key kept changing under this request');
  }

  /** Marks the key's run as not confirmed by Redis (only if the key still names `runId`; its TTL kept). */
  async markUnconfirmed(tenant: string, key: string, runId: string): Promise<void> {
    const k = this.key(tenant, key);
    const raw = await this.redis.get(k);
    if (!raw) return;
    const held = parseStored(Held, raw, `idempotency record ${k}`);
    if (held.runId === runId) await this.redis.set(k, JSON.stringify({ ...held, unconfirmed: true }), 'KEEPTTL', 'XX');
  }

  /** Whether this request is the one that makes the key's lost run again (SET NX; the claim lasts `ttlS`). */
  async claimRemake(tenant: string, key: string, runId: string, ttlS: number): Promise<boolean> {
    return (await this.redis.set(`${this.key(tenant, key)}:remake`, runId, 'EX', ttlS, 'NX')) === 'OK';
  }

  /** Gives up a remake claim (the remake failed: another request may try). */
  async releaseRemake(tenant: string, key: string): Promise<void> {
    await this.redis.del(`${this.key(tenant, key)}:remake`);
  }

  /** Releases a reservation this request made (only if it still names `runId`). */
  async release(tenant: string, key: string, runId: string): Promise<void> {
    const k = this.key(tenant, key);
    const raw = await this.redis.get(k);
    if (raw && parseStored(Held, raw, `idempotency record ${k}`).runId === runId) await this.redis.del(k);
  }
}

const Held = z.object({ runId: z.string(), bodyHash: z.string(), at: z.number().optional(), unconfirmed: z.boolean().optional() });

/** A stable hash of a JSON value: object keys sorted, so key order never makes two bodies differ. */
export function hashJson(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object') {
    const entries = Object.entries(v as Record<string, unknown>).filter(([, x]) => x !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v);
}
