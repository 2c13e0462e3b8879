/**
 * Follows a Sentinel failover for every connection one RedisConnections opened. It subscribes to
 * `+switch-master` on each sentinel and, when the master it watches moves, makes each connection that
 * is still on the old address reconnect (ioredis then asks the sentinels again and reaches the new
 * primary). That matters when the old primary hangs instead of dying (frozen, partitioned): its
 * sockets stay open and nothing else would tell the client.
 *
 * Why not ioredis' own `failoverDetector`: its detector belongs to the last connection that reached a
 * server, outlives that connection when the server dies, and on `+switch-master` disconnects the
 * connector even while a new connection attempt is asking the sentinels — that attempt then fails
 * with "Connection is closed.", every queued command with it, and the client ends for good (seen in
 * test/integration/redis-failover.test.ts: a worker's connections dead after a SIGKILL failover).
 * Here a connection is only dropped where that is safe: once its socket is up (status connect or
 * ready), never while its connector is resolving the primary.
 */
import type { ConnectionOptions as TlsOptions } from 'node:tls';
import { Redis } from 'ioredis';

export interface SentinelWatchOptions {
  sentinels: { host: string; port: number }[];
  masterName: string;
  username?: string;
  password?: string;
  tls?: TlsOptions;
}

/** The parts of a +switch-master message: MASTER OLD_IP OLD_PORT NEW_IP NEW_PORT. */
export function parseSwitchMaster(message: string): { master: string; host: string; port: number } | undefined {
  const p = message.trim().split(/\s+/);
  if (p.length !== 5) return undefined;
  const port = Number(p[4]);
  return Number.isInteger(port) && port > 0 ? { master: p[0]!, host: p[3]!, port } : undefined;
}

/** Whether `conn`'s socket is connected to host:port. */
function connectedTo(conn: Redis, host: string, port: number): boolean {
  const s = (conn as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
  return !!s && s.remotePort === port && (s.remoteAddress === host || s.remoteAddress === `::ffff:${host}`);
}

export class SentinelWatch {
  private readonly conns = new Set<Redis>();
  private subscribers: Redis[] = [];
  private closed = false;
  /** How many failovers were seen (tests, logs). */
  switches = 0;

  constructor(private readonly o: SentinelWatchOptions) {}

  /** Watches `conn` until it ends; starts the subscriptions with the first connection. */
  track(conn: Redis): void {
    this.conns.add(conn);
    conn.once('end', () => {
      this.conns.delete(conn);
      if (this.conns.size === 0) this.stop();
    });
    if (this.subscribers.length === 0 && !this.closed) this.start();
  }

  /** Called on +switch-master (public for tests): moves every connection not on host:port. */
  switched(host: string, port: number): void {
    this.switches++;
    for (const conn of this.conns) {
      if (conn.status === 'ready' || conn.status === 'connect') {
        if (!connectedTo(conn, host, port)) conn.disconnect(true);
      } else if (conn.status === 'connecting') {
        // Its connector may have been told the old address a moment ago: check once the socket is up.
        conn.once('connect', () => {
          if (!connectedTo(conn, host, port)) conn.disconnect(true);
        });
      }
      // reconnecting / wait / close: the next attempt asks the sentinels, which now name the new primary.
    }
  }

  private start(): void {
    const { o } = this;
    this.subscribers = o.sentinels.map((s) => {
      const sub = new Redis({
        host: s.host, port: s.port, maxRetriesPerRequest: null, retryStrategy: (n) => Math.min(200 * n, 2000),
        connectionName: 'corral:sentinel-watch',
        ...(o.username ? { username: o.username } : {}), ...(o.password ? { password: o.password } : {}), ...(o.tls ? { tls: o.tls } : {}),
      });
      sub.on('error', () => undefined); // a sentinel away is retried; the others still speak
      // The subscriptions serve the connections; they never keep a process alive on their own.
      sub.on('connect', () => (sub as unknown as { stream?: { unref?: () => void } }).stream?.unref?.());
      sub.subscribe('+switch-master').catch(() => undefined);
      sub.on('message', (_channel: string, message: string) => {
        const m = parseSwitchMaster(message);
        if (m && m.master === o.masterName) this.switched(m.host, m.port);
      });
      return sub;
    });
  }

  /** Ends the subscriptions for good (the owner is closing); connections tracked later start none. */
  close(): void {
    this.closed = true;
    this.stop();
  }

  private stop(): void {
    for (const s of this.subscribers) s.disconnect();
    this.subscribers = [];
  }
}
