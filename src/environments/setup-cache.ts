/**
 * The setup cache of one worker host: CORRAL_DATA_DIR/setup-cache/<key>.tar, each a capture of what
 * an environment's setup phase wrote (SetupFacet.capture), keyed by everything that capture depends
 * on: the tenant, the environment as loaded (its digest: image, commands, egress), the digests of the
 * lockfiles it names, and a digest of the whole workspace setup found (every file, mode and link, and
 * the commit HEAD names) — so a run of one tenant never restores what another tenant's setup wrote,
 * one repository's setup is never restored into another's, and a changed lockfile, setup or source
 * never reuses an old result. An entry holds only files setup made: a capture that changed the
 * workspace's own files or its git internals is never stored (setup-phase.ts). Least recently used entries (mtime, touched on every hit) are evicted past
 * CORRAL_SETUP_CACHE_MB. A host-local cache: a worker on another host runs setup once for itself.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';

export interface CacheKeyParts {
  tenant: string;
  environment: string;
  /** Environment.digest. */
  digest: string;
  /** `sha256sum` lines of the lockfiles (or `absent  NAME`), in the environment's order. */
  lockfiles: string[];
  /** SetupFacet.workspaceDigest: the whole workspace as setup found it. */
  workspace: string;
}

const KEY = /^[0-9a-f]{64}$/;

export class SetupCache {
  private readonly dir: string;

  constructor(dataDir: string, private readonly maxBytes: number) {
    this.dir = join(dataDir, 'setup-cache');
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  static key(p: CacheKeyParts): string {
    return createHash('sha256').update(JSON.stringify(['corral-setup-v2', p.tenant, p.environment, p.digest, p.lockfiles, p.workspace])).digest('hex');
  }

  /** The capture stored under `key` (its mtime refreshed: it was used), or null. */
  get(key: string): string | null {
    if (!KEY.test(key)) return null;
    const path = join(this.dir, `${key}.tar`);
    try {
      const now = new Date();
      utimesSync(path, now, now);
      return path;
    } catch {
      return null;
    }
  }

  /** A fresh path in the cache's directory for a capture that may become an entry (rename is atomic there). */
  scratch(): string {
    return join(this.dir, `tmp-${randomBytes(8).toString('hex')}.tar`);
  }

  /** Moves a finished capture in under `key`, then evicts down to the cap; one larger than the whole cap is not kept (false). */
  put(key: string, capture: string): boolean {
    if (!KEY.test(key)) throw new Error(`bad setup cache key ${key}`);
    if (statSync(capture).size > this.maxBytes) {
      rmSync(capture, { force: true });
      return false;
    }
    const path = join(this.dir, `${key}.tar`);
    renameSync(capture, path);
    this.evict();
    return this.get(key) !== null;
  }

  delete(key: string): void {
    if (KEY.test(key)) rmSync(join(this.dir, `${key}.tar`), { force: true });
  }

  /** Removes least recently used entries (and scratch files older than a day) until the total fits. */
  evict(): { removed: number; bytes: number } {
    const entries: Array<{ path: string; size: number; mtime: number }> = [];
    const dayAgo = Date.now() - 86_400_000;
    for (const f of readdirSync(this.dir)) {
      const path = join(this.dir, f);
      let st;
      try {
        st = statSync(path);
      } catch {
        continue;
      }
      if (f.startsWith('tmp-')) {
        if (st.mtimeMs < dayAgo) rmSync(path, { force: true });
        continue;
      }
      if (/^[0-9a-f]{64}\.tar$/.test(f)) entries.push({ path, size: st.size, mtime: st.mtimeMs });
    }
    entries.sort((a, b) => a.mtime - b.mtime);
    let total = entries.reduce((n, e) => n + e.size, 0);
    let removed = 0;
    for (const e of entries) {
      if (total <= this.maxBytes) break;
      rmSync(e.path, { force: true });
      total -= e.size;
      removed++;
    }
    return { removed, bytes: total };
  }
}
