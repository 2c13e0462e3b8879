/**
 * Idempotency keys for POST /v1/runs, per tenant, in Redis with a TTL: the first request with a key
 * reserves it for the run id it is about to create (SET NX, so two racing requests cannot both
 * create a run); later requests with that key get that run id back, or a mismatch when their body
 * hash differs. A submission that fails after reserving releases the key so the client can retry.
 *   {p}:idem:{tenant}:{sha256(key)}   string: {"runId","bodyHash"}
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { parseStored } from './stored-json';
import type { Redis } from 'ioredis';

export type Reservation =
  | { kind: 'new' }
  | { kind: 'existing'; runId: string }
  | { kind: 'mismatch'; runId: string };

export class IdempotencyStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
  ) {}

  private key(tenant: string, key: string): string {
    return `${this.prefix}:idem:${tenant}:${createHash('sha256').update(key).digest('hex')}`;
  }

  async reserve(tenant: string, key: string, bodyHash: string, runId: string, ttlS: number): Promise<Reservation> {
    const k = this.key(tenant, key);
    for (let attempt = 0; attempt < 3; attempt++) {
      const set = await this.redis.set(k, JSON.stringify({ runId, bodyHash }), 'EX', ttlS, 'NX');
      if (set === 'OK') return { kind: 'new' };
      const raw = await this.redis.get(k);
      if (raw === null) continue; // expired or released between the two calls
      const held = parseStored(Held, raw, `idempotency record ${k}`);
      return held.bodyHash === bodyHash ? { kind: 'existing', runId: held.runId } : { kind: 'mismatch', runId: held.runId };
    }
    throw new Error('idempotency key kept changing under this request');
  }

  /** Releases a reservation this request made (only if it still names `runId`). */
  async release(tenant: string, key: string, runId: string): Promise<void> {
    const k = this.key(tenant, key);
    const raw = await this.redis.get(k);
    if (raw && parseStored(Held, raw, `idempotency record ${k}`).runId === runId) await this.redis.del(k);
  }
}

const Held = z.object({ runId: z.string(), bodyHash: z.string() });

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
