/**
 * The one place that turns REDIS_URL into ioredis clients. Every connection corral opens — the
 * worker's store, BullMQ's consumers and their blocking connections (BullMQ duplicates the client it
 * is given), the API's, SSE readers, approval waiters, subscribers, benches, the demo's probe — comes
 * from `open(role, name)` (or is a `duplicate()` of one, which keeps these options), so a Sentinel URL
 * reaches all of them the same way.
 *
 * Roles (what a caller needs while Redis is away or failing over):
 *   commands    waits it out: commands queue offline and are sent once a primary answers (BullMQ's
 *               Worker/FlowProducer require maxRetriesPerRequest: null)
 *   api         fails fast, so a request becomes a 503: no offline queue, one retry, and a bound on
 *               each command (a primary that hangs — paused, partitioned — does not hang the request)
 *   blocking    XREAD BLOCK / BLPOP readers: wait out an outage, but each blocking call is bounded
 *               client-side a little past its own timeout (a frozen primary cannot hold it forever)
 *   subscriber  pub/sub (cancel requests)
 * With Sentinel every connection — and every duplicate() of one, such as BullMQ's blocking connections —
 * also follows a failover at once (SentinelWatch listens for +switch-master on the sentinels and moves
 * the connections still on the old primary, even one that hangs), and a write that meets a replica
 * (READONLY: a demoted primary) reconnects to the current primary and is sent again.
 */
import { readFileSync } from 'node:fs';
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Redis, type RedisOptions } from 'ioredis';
import { InvalidInputError, StoreUnavailableError } from '../domain/errors';
import { SentinelWatch } from './sentinel-watch';
import { describeRedisTarget, parseRedisUrl, redactRedisUrl, type RedisTarget, type RedisTls } from '../domain/redis-url';

export type ConnectionRole = 'commands' | 'api' | 'blocking' | 'subscriber';

export interface RedisConnectionsOptions {
  /** The api role's bound on one command (ms). */
  commandTimeoutMs?: number;
  /** How the TLS CA file is read (tests). */
  readFile?: (path: string) => Buffer;
}

/** Reconnect quickly: a failover's new primary should be used within a second of answering. */
const retryStrategy = (times: number): number => Math.min(100 * times, 1000);
/** A write refused by a replica means this connection reached a demoted primary: reconnect (via the sentinels) and send it again. */
const reconnectOnError = (err: Error): boolean | 2 => (err.message.startsWith('READONLY') ? 2 : false);
/** Past a blocking call's own timeout, how long the client waits before it gives up on the call. */
const BLOCKING_GRACE_MS = 2000;
/** The client-side bound of a blocking call that names no timeout (blocks "forever"). */
const BLOCKING_FOREVER_MS = 60_000;

export class RedisConnections {
  readonly target: RedisTarget;
  /** Where Redis is, without secrets, for logs and errors. */
  readonly description: string;
  /** REDIS_URL with its passwords replaced by ***. */
  readonly redactedUrl: string;
  private readonly base: RedisOptions;
  private readonly commandTimeoutMs: number;
  /** With Sentinel: moves this factory's connections on a failover. */
  readonly watch?: SentinelWatch;

  constructor(url: string, o: RedisConnectionsOptions = {}) {
    this.target = parseRedisUrl(url);
    this.description = describeRedisTarget(this.target);
    this.redactedUrl = redactRedisUrl(url);
    this.commandTimeoutMs = o.commandTimeoutMs ?? 5000;
    const read = o.readFile ?? ((p: string) => readFileSync(p));
    const tlsOf = (t: RedisTls | undefined): TlsOptions | undefined => {
      if (!t) return undefined;
      let ca: Buffer | undefined;
      if (t.caFile) {
        try {
          ca = read(t.caFile);
        } catch (err) {
          throw new InvalidInputError(`REDIS_URL: option tlsCaFile: cannot read ${t.caFile}: ${(err as Error).message}`, 'REDIS_URL');
        }
      }
      return { ...(ca ? { ca } : {}), ...(t.servername ? { servername: t.servername } : {}) };
    };
    const t = this.target;
    const auth = { ...(t.username ? { username: t.username } : {}), ...(t.password ? { password: t.password } : {}) };
    this.base = t.kind === 'standalone'
      ? { host: t.node.host, port: t.node.port, db: t.db, ...auth, ...(t.tls ? { tls: tlsOf(t.tls) } : {}) }
      : {
        sentinels: t.sentinels.map((s) => ({ host: s.host, port: s.port })), name: t.masterName, db: t.db, ...auth,
        ...(t.sentinelUsername ? { sentinelUsername: t.sentinelUsername } : {}),
        ...(t.sentinelPassword ? { sentinelPassword: t.sentinelPassword } : {}),
        ...(t.tls ? { tls: tlsOf(t.tls), enableTLSForSentinelMode: true } : {}),
        ...(t.sentinelTls ? { sentinelTLS: tlsOf(t.sentinelTls) } : {}),
        // Not ioredis' failoverDetector (it can end a connection for good mid-failover): SentinelWatch.
        sentinelRetryStrategy: retryStrategy,
      };
    if (t.kind === 'sentinel') {
      this.watch = new SentinelWatch({
        sentinels: t.sentinels, masterName: t.masterName,
        ...(t.sentinelUsername ? { username: t.sentinelUsername } : {}), ...(t.sentinelPassword ? { password: t.sentinelPassword } : {}),
        ...(this.base.sentinelTLS ? { tls: this.base.sentinelTLS } : {}),
      });
    }
  }

  get sentinel(): boolean {
    return this.target.kind === 'sentinel';
  }

  /** ioredis options for a connection of `role` named `name` (CLIENT SETNAME corral:NAME). */
  optionsFor(role: ConnectionRole, name: string): RedisOptions {
    const common: RedisOptions = { ...this.base, retryStrategy, reconnectOnError, connectionName: `corral:${name.replace(/[^A-Za-z0-9._:-]/g, '-')}` };
    switch (role) {
      case 'commands': return { ...common, maxRetriesPerRequest: null };
      case 'api': return { ...common, maxRetriesPerRequest: 1, enableOfflineQueue: false, commandTimeout: this.commandTimeoutMs };
      case 'blocking': return { ...common, maxRetriesPerRequest: null, blockingTimeout: BLOCKING_FOREVER_MS, blockingTimeoutGrace: BLOCKING_GRACE_MS };
      case 'subscriber': return { ...common, maxRetriesPerRequest: null };
    }
  }

  /**
   * A new connection; with `lazy`, it connects on connect() or its first command; with `failFast`, a
   * command fails after one reconnect attempt instead of waiting for Redis (a blocking reader whose
   * caller would rather start again, like an SSE stream).
   */
  open(role: ConnectionRole, name: string, o: { lazy?: boolean; failFast?: boolean } = {}): Redis {
    return this.tracked(new Redis({ ...this.optionsFor(role, name), ...(o.lazy ? { lazyConnect: true } : {}), ...(o.failFast ? { maxRetriesPerRequest: 1 } : {}) }));
  }

  /** Stops following failovers (the sentinel subscriptions); the connections themselves are their owners' to close. */
  close(): void {
    this.watch?.close();
  }

  /** With Sentinel, `conn` and every duplicate made of it (BullMQ duplicates what it is given) follow failovers. */
  private tracked(conn: Redis): Redis {
    const watch = this.watch;
    if (!watch) return conn;
    watch.track(conn);
    const duplicate = conn.duplicate.bind(conn);
    conn.duplicate = (override?: Partial<RedisOptions>) => this.tracked(duplicate(override));
    return conn;
  }

  /**
   * Start-up check, before anything relies on Redis: with Sentinel, asks every sentinel for the
   * master's address and fails naming what each one said (unreachable, refused the password, does not
   * know the master name); then connects `conn` within `timeoutMs`. Resolves with the primary's address.
   */
  async connect(conn: Redis, timeoutMs: number): Promise<string> {
    if (this.target.kind === 'sentinel') await this.askSentinels(this.target, Math.min(timeoutMs, 5000));
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        conn.status === 'wait' ? conn.connect() : conn.ping(),
        new Promise((_r, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs))),
      ]);
    } catch (err) {
      conn.disconnect();
      throw new StoreUnavailableError(`cannot reach Redis at ${this.redactedUrl} (REDIS_URL): ${(err as Error).message} (${this.description})`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
    const stream = (conn as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
    return stream?.remoteAddress ? `${stream.remoteAddress}:${stream.remotePort}` : this.description;
  }

  private async askSentinels(t: Extract<RedisTarget, { kind: 'sentinel' }>, timeoutMs: number): Promise<void> {
    const said = await Promise.all(t.sentinels.map(async (s) => {
      const where = `${s.host}:${s.port}`;
      const c = new Redis({
        host: s.host, port: s.port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, enableOfflineQueue: false,
        connectTimeout: timeoutMs, commandTimeout: timeoutMs,
        ...(t.sentinelUsername ? { username: t.sentinelUsername } : {}), ...(t.sentinelPassword ? { password: t.sentinelPassword } : {}),
        ...(this.base.sentinelTLS ? { tls: this.base.sentinelTLS } : {}),
      });
      c.on('error', () => undefined);
      try {
        await c.connect();
        const addr = (await c.call('SENTINEL', 'get-master-addr-by-name', t.masterName)) as [string, string] | null;
        return addr ? { ok: `${addr[0]}:${addr[1]}` } : { problem: `sentinel ${where} does not monitor a master named "${t.masterName}"` };
      } catch (err) {
        const m = (err as Error).message;
        const auth = /NOAUTH|WRONGPASS|invalid password|Authentication required/i.test(m);
        return { problem: `sentinel ${where}: ${auth ? `refused the credentials (sentinelUsername/sentinelPassword in REDIS_URL): ${m}` : m}` };
      } finally {
        c.disconnect();
      }
    }));
    if (said.some((r) => 'ok' in r)) return;
    throw new StoreUnavailableError(`cannot reach Redis at ${this.redactedUrl} (REDIS_URL): no sentinel gave the address of master "${t.masterName}": ${said.map((r) => ('problem' in r ? r.problem : '')).join('; ')}`);
  }
}
