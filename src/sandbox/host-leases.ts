/**
 * Uid slots leased per host, not per engine. The container's name (`corral-u<uid>`) makes a slot
 * unique on one engine, but a host may run several engines (the README's two-engine layout), and
 * Linux counts RLIMIT_NPROC and other per-uid limits host-wide: two sandboxes of one uid on two engines
 * share them (one took the other's process limit). So whoever allocates a slot — the docker gate, or a
 * worker that holds the engine itself — also takes the host's lease for its uid: a file `u<uid>` in the
 * host's lease directory (CORRAL_HOST_LEASE_DIR, the same for every deployment and engine on a host),
 * made with link(2) so that exactly one allocator makes it, holding its engine and container name.
 *
 * A lease lives as long as its container: it is released when the container is removed, and an
 * allocator's sweep releases the leases of its own engine whose container is gone (a crash between the
 * two). A lease of another engine is never judged here: that engine's allocator sweeps it.
 */
import { randomBytes } from 'node:crypto';
import { link, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';

export interface Lease {
  engine: string;
  name: string;
  at: string;
}

export type TakeResult = { ok: true; fresh: boolean } | { ok: false; holder: Lease | null };

/** The default lease directory: the host's temporary directory, shared by every process of the host. */
export function defaultLeaseDir(): string {
  return join(tmpdir(), 'corral-leases');
}

const LEASE_RE = /^u(\d{1,10})$/;

export class HostLeases {
  constructor(readonly dir: string, readonly engine: string, private readonly now: () => Date = () => new Date()) {}

  private path(uid: number): string {
    return join(this.dir, `u${uid}`);
  }

  async read(uid: number): Promise<Lease | null> {
    try {
      const v = JSON.parse(await readFile(this.path(uid), 'utf8')) as Partial<Lease>;
      return typeof v.engine === 'string' && typeof v.name === 'string' ? { engine: v.engine, name: v.name, at: String(v.at ?? '') } : null;
    } catch {
      return null;
    }
  }

  /**
   * Takes the lease of `uid` for container `name` on this engine. Held already by the same engine and
   * name: ok (not fresh). Held by anyone else: not ok, with the holder.
   */
  async take(uid: number, name: string): Promise<TakeResult> {
    const lease: Lease = { engine: this.engine, name, at: this.now().toISOString() };
    const tmp = join(this.dir, `.tmp-${randomBytes(8).toString('hex')}`);
    await writeFile(tmp, JSON.stringify(lease), { mode: 0o644, flag: 'wx' });
    try {
      await link(tmp, this.path(uid));
      return { ok: true, fresh: true };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = await this.read(uid);
      if (holder && holder.engine === this.engine && holder.name === name) return { ok: true, fresh: false };
      return { ok: false, holder };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /**
   * Takes a slot's two uids — PID 1's (`agentUid - 1`) and the agent's — for container `name`: two
   * deployments whose uid ranges overlap must not share either (one's PID 1 could be the other's agent).
   */
  async takeSlot(agentUid: number, name: string): Promise<TakeResult> {
    const agent = await this.take(agentUid, name);
    if (!agent.ok) return agent;
    const init = await this.take(agentUid - 1, name);
    if (!init.ok) {
      if (agent.fresh) await this.release(agentUid, name);
      return init;
    }
    return { ok: true, fresh: agent.fresh || init.fresh };
  }

  async releaseSlot(agentUid: number, name: string): Promise<void> {
    await this.release(agentUid, name);
    await this.release(agentUid - 1, name);
  }

  /** Releases `uid`'s lease if this engine's container `name` holds it. */
  async release(uid: number, name: string): Promise<void> {
    const holder = await this.read(uid);
    if (holder && holder.engine === this.engine && holder.name === name) await rm(this.path(uid), { force: true });
  }

  /**
   * Releases this engine's leases whose container is not in `live` (names of every container on the
   * engine), once older than `graceMs` (an allocator between lease and create). Returns their uids.
   */
  async sweep(live: Set<string>, graceMs = 60_000): Promise<number[]> {
    const released: number[] = [];
    const names = await readdir(this.dir).catch(() => [] as string[]);
    for (const f of names) {
      const m = LEASE_RE.exec(f);
      if (!m) {
        if (f.startsWith('.tmp-')) {
          const st = await stat(join(this.dir, f)).catch(() => undefined);
          if (st && this.now().getTime() - st.mtimeMs > graceMs) await rm(join(this.dir, f), { force: true });
        }
        continue;
      }
      const uid = Number(m[1]);
      const holder = await this.read(uid);
      // An unreadable lease (a torn write cannot happen: leases appear whole by link) is anyone's to clear.
      if (holder && (holder.engine !== this.engine || live.has(holder.name))) continue;
      const st = await stat(this.path(uid)).catch(() => undefined);
      if (!st || this.now().getTime() - st.mtimeMs < graceMs) continue;
      await rm(this.path(uid), { force: true });
      released.push(uid);
    }
    return released;
  }
}
