/**
 * Tenant memory in Redis, shared by every worker on every host: one string per memory key,
 * {p}:memory:{key} (the worker already puts a non-default tenant's name in the key). Appends are one
 * atomic script that refuses to grow a memory past its cap, so two runs on two hosts that finish at
 * once both land, in order, and none can grow it without bound. A key that Redis does not hold yet is
 * read once from the legacy file ({data dir}/memory/{key}.md, where single-host deployments kept it)
 * and imported.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Redis } from 'ioredis';

/** The memory port the worker uses. */
export interface TenantMemory {
  /** Where it lives, for the log (e.g. `redis corral:memory:team-a`). */
  describe(key: string): string;
  read(key: string): Promise<string | null>;
  /** Appends `text` unless that would pass the cap; false when refused. */
  append(key: string, text: string): Promise<boolean>;
  readonly maxBytes: number;
}

const APPEND_CAPPED = `local n = redis.call('STRLEN', KEYS[1])
if n + string.len(ARGV[1]) > tonumber(ARGV[2]) then return -1 end
return redis.call('APPEND', KEYS[1], ARGV[1])`;

export class RedisTenantMemory implements TenantMemory {
  constructor(
    private readonly redis: Redis,
    private readonly o: { prefix?: string; legacyDir?: string; maxBytes?: number } = {},
  ) {}

  get maxBytes(): number {
    return this.o.maxBytes ?? 256 * 1024;
  }

  private key(k: string): string {
    return `${this.o.prefix ?? 'corral'}:memory:${k}`;
  }

  describe(key: string): string {
    return `redis ${this.key(key)}`;
  }

  async read(key: string): Promise<string | null> {
    const v = await this.redis.get(this.key(key));
    if (v !== null) return v;
    if (!this.o.legacyDir) return null;
    const legacy = await readFile(resolve(this.o.legacyDir, `${key}.md`), 'utf8').catch(() => null);
    if (legacy === null) return null;
    // Imported once; a concurrent import or append that got there first wins.
    await this.redis.set(this.key(key), legacy, 'NX');
    return (await this.redis.get(this.key(key))) ?? legacy;
  }

  async append(key: string, text: string): Promise<boolean> {
    await this.read(key); // imports a legacy file first, so the append goes after it
    return (await this.redis.eval(APPEND_CAPPED, 1, this.key(key), text, this.maxBytes)) !== -1;
  }
}
