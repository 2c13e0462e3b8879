/**
 * A real Redis that fails over, on loopback, for tests and the bench: one primary, one replica and
 * three sentinels (quorum 2), each a container of the local Redis image (corral/redis:7, or
 * CORRAL_REDIS_IMAGE) that the caller starts here — on the host's network namespace, bound to
 * 127.0.0.1 on a free port of its own, so the addresses the sentinels hand out are the ones a client
 * on this host reaches (no NAT between what Sentinel announces and what is reachable). Each has its
 * config file and data in a scratch directory (mktemp) mounted at the same path, AOF everysec and
 * noeviction as the README asks for production, and the labels corral.test=redis-ha plus this run's
 * corral.instance (CI's clean-up removes exactly those). The test signals a node's process through
 * the engine (`docker kill --signal`: SIGKILL ends the container, SIGSTOP/SIGCONT freeze and thaw it)
 * and starts a killed one again with its own config, as a supervisor would; the sentinels then make
 * it a replica. Also a plain single Redis the same way, for benches that compare both.
 * Everything waits for facts: sentinels that know each other and the replica, a promotion they agree
 * on, a demoted node that reports role:slave.
 */
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Redis } from 'ioredis';
import { eventually } from './eventually';
import { instanceLabels } from './sandbox-env';

export interface RedisProcess {
  name: string;
  port: number;
  dir: string;
  /** The node's container (labelled corral.test=redis-ha). */
  containerId(): string;
  /** Sends a signal to the node's redis-server (the container's first process), through the engine. */
  signal(sig: NodeJS.Signals): Promise<void>;
  /** Starts it again with the same config and data (after a SIGKILL); resolves once it answers PING. */
  restart(): Promise<void>;
  /** Removes its container (whatever state it is in). */
  stop(): Promise<void>;
  /** A direct connection to this node (not through the sentinels); close it. */
  connect(): Redis;
  /** The node's output (redis-server's log). */
  log(): Promise<string>;
}

/** A free loopback port (the kernel's pick; closed again before it is used). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
}

const docker = new Docker();
const IMAGE = process.env.CORRAL_REDIS_IMAGE ?? 'corral/redis:7';

async function answersPing(port: number): Promise<string> {
  const c = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, connectTimeout: 1000, commandTimeout: 1000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return await c.ping();
  } finally {
    c.disconnect();
  }
}

/** The text of Docker's multiplexed log frames (an 8-byte header each: stream, 0, 0, 0, length). */
function demux(b: Buffer): string {
  let out = '';
  let i = 0;
  while (i + 8 <= b.length && b[i]! <= 2 && b[i + 1] === 0) {
    const n = b.readUInt32BE(i + 4);
    out += b.subarray(i + 8, i + 8 + n).toString('utf8');
    i += 8 + n;
  }
  return i === 0 ? b.toString('utf8') : out;
}

async function startProcess(name: string, root: string, conf: string, args: string[], port: number): Promise<RedisProcess> {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  const confPath = join(dir, `${name}.conf`);
  writeFileSync(confPath, conf);
  // A sentinel rewrites its config file (and its directory's temp file) as the topology changes.
  chmodSync(dir, 0o777);
  chmodSync(confPath, 0o666);
  let container: Docker.Container;
  try {
    container = await docker.createContainer({
      Image: IMAGE, name: `corral-redis-ha-${name}-${port}`,
      Cmd: ['redis-server', confPath, ...args], WorkingDir: dir,
      // The caller's own uid: the scratch directory, and what redis writes in it, stay removable by it.
      ...(process.getuid ? { User: `${process.getuid()}:${process.getgid!()}` } : {}),
      Labels: { 'corral.test': 'redis-ha', ...instanceLabels() },
      HostConfig: { NetworkMode: 'host', Binds: [`${dir}:${dir}`], AutoRemove: false },
    });
  } catch (err) {
    throw new Error(`these tests run Redis and Sentinel in containers of ${IMAGE} (run .ci/bootstrap to build it): ${(err as Error).message}`, { cause: err });
  }
  const logs = async () => {
    const b = await container.logs({ stdout: true, stderr: true, tail: 60 }).catch((e: Error) => Buffer.from(e.message));
    return demux(b);
  };
  const launch = async () => {
    await container.start();
    await eventually(async () => {
      const st = await container.inspect();
      if (!st.State.Running) throw new Error(`${name} exited (${st.State.ExitCode}): ${await logs()}`);
      return answersPing(port);
    }, { what: `${name} to answer on 127.0.0.1:${port}`, until: (r) => r === 'PONG', timeoutMs: 30_000, intervalMs: 50 });
  };
  await launch().catch(async (err: unknown) => {
    await container.remove({ force: true }).catch(() => undefined);
    throw err;
  });
  return {
    name, port, dir,
    containerId: () => container.id,
    signal: async (sig) => {
      await container.kill({ signal: sig });
    },
    restart: launch,
    stop: async () => {
      await container.remove({ force: true }).catch((err: { statusCode?: number }) => {
        if (err.statusCode !== 404) throw err;
      });
    },
    connect: () => new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1, retryStrategy: () => null }),
    log: logs,
  };
}

const dataConf = (port: number, extra = '') => `port ${port}
bind 127.0.0.1
protected-mode no
dir .
appendonly yes
appendfsync everysec
save ""
maxmemory-policy noeviction
${extra}
`;

/** A single redis-server of its own (for benches beside the Sentinel setup). */
export async function startSingleRedis(name = 'single'): Promise<{ url: string; node: RedisProcess; close(): Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'corral-redis-'));
  const port = await freePort();
  const node = await startProcess(name, root, dataConf(port), [], port);
  return {
    url: `redis://127.0.0.1:${port}`, node,
    async close() {
      await node.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export interface SentinelRedis {
  /** REDIS_URL for corral: redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/MASTER. */
  url: string;
  masterName: string;
  /** The two data nodes, by their first role (node 0 starts as the primary). */
  nodes: [RedisProcess, RedisProcess];
  sentinels: RedisProcess[];
  /** The primary's port as a majority of the sentinels report it. */
  primaryPort(): Promise<number>;
  /** The data node that is primary now. */
  primary(): Promise<RedisProcess>;
  /** Waits until the sentinels agree on a primary other than `oldPort` (a failover happened); returns it. */
  waitForPromotion(oldPort: number, timeoutMs?: number): Promise<RedisProcess>;
  /** Waits until `node` runs as a replica of the current primary and is in sync (role:slave, link up). */
  waitReplicaOf(node: RedisProcess, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export interface SentinelOptions {
  /** sentinel down-after-milliseconds (how long a silent primary takes to be declared down). */
  downAfterMs?: number;
  /** sentinel failover-timeout. */
  failoverTimeoutMs?: number;
  masterName?: string;
}

async function sentinelSays(s: RedisProcess, master: string): Promise<number | null> {
  const c = new Redis({ host: '127.0.0.1', port: s.port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, commandTimeout: 1000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    const r = (await c.call('SENTINEL', 'get-master-addr-by-name', master)) as [string, string] | null;
    return r ? Number(r[1]) : null;
  } catch {
    return null;
  } finally {
    c.disconnect();
  }
}

async function roleOf(node: RedisProcess): Promise<string> {
  const c = new Redis({ host: '127.0.0.1', port: node.port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0, commandTimeout: 1000 });
  c.on('error', () => undefined);
  try {
    await c.connect();
    return await c.info('replication');
  } catch (err) {
    return `unreachable: ${(err as Error).message}`;
  } finally {
    c.disconnect();
  }
}

export async function startSentinelRedis(o: SentinelOptions = {}): Promise<SentinelRedis> {
  const master = o.masterName ?? 'corral-test';
  const downAfter = o.downAfterMs ?? 2000;
  const root = mkdtempSync(join(tmpdir(), 'corral-sentinel-'));
  const started: RedisProcess[] = [];
  try {
    const [p0, p1, s1, s2, s3] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]) as [number, number, number, number, number];
    const primary = await startProcess('node-a', root, dataConf(p0), [], p0);
    started.push(primary);
    const replica = await startProcess('node-b', root, dataConf(p1, `replicaof 127.0.0.1 ${p0}`), [], p1);
    started.push(replica);
    const sentinels: RedisProcess[] = [];
    for (const [i, port] of [s1, s2, s3].entries()) {
      const conf = `port ${port}
bind 127.0.0.1
protected-mode no
dir .
sentinel monitor ${master} 127.0.0.1 ${p0} 2
sentinel down-after-milliseconds ${master} ${downAfter}
sentinel failover-timeout ${master} ${o.failoverTimeoutMs ?? 10_000}
sentinel parallel-syncs ${master} 1
`;
      const s = await startProcess(`sentinel-${i + 1}`, root, conf, ['--sentinel'], port);
      sentinels.push(s);
      started.push(s);
    }
    const nodes: [RedisProcess, RedisProcess] = [primary, replica];
    const setup: SentinelRedis = {
      url: `redis+sentinel://${sentinels.map((s) => `127.0.0.1:${s.port}`).join(',')}/${master}`,
      masterName: master, nodes, sentinels,
      async primaryPort() {
        const said = await Promise.all(sentinels.map((s) => sentinelSays(s, master)));
        const votes = new Map<number, number>();
        for (const p of said) if (p !== null) votes.set(p, (votes.get(p) ?? 0) + 1);
        const [port] = [...votes.entries()].sort((a, b) => b[1] - a[1])[0] ?? [];
        if (port === undefined || (votes.get(port) ?? 0) < 2) throw new Error(`the sentinels do not agree on a primary: ${JSON.stringify(said)}`);
        return port;
      },
      async primary() {
        const port = await setup.primaryPort();
        return nodes.find((n) => n.port === port)!;
      },
      async waitForPromotion(oldPort, timeoutMs = 60_000) {
        const port = await eventually(async () => {
          const said = await Promise.all(sentinels.map((s) => sentinelSays(s, master)));
          return said.every((p) => p !== null && p !== oldPort) && new Set(said).size === 1 ? said[0]! : null;
        }, { what: `every sentinel to name a new primary (not :${oldPort})`, until: (p) => p !== null, timeoutMs, intervalMs: 100 });
        const node = nodes.find((n) => n.port === port)!;
        await eventually(() => roleOf(node), { what: `${node.name} to report role:master`, until: (i) => /role:master/.test(i), timeoutMs, intervalMs: 100 });
        return node;
      },
      async waitReplicaOf(node, timeoutMs = 60_000) {
        const primaryPort = await setup.primaryPort();
        await eventually(() => roleOf(node), {
          what: `${node.name} to be a replica of :${primaryPort}, in sync`,
          until: (i) => /role:slave/.test(i) && new RegExp(`master_port:${primaryPort}\\b`).test(i) && /master_link_status:up/.test(i) && /master_sync_in_progress:0/.test(i),
          timeoutMs, intervalMs: 100,
        });
      },
      async close() {
        await Promise.all(started.map((p) => p.stop()));
        rmSync(root, { recursive: true, force: true });
      },
    };
    // Ready when every sentinel knows the two others and the replica (a vote needs the others known).
    await setup.waitReplicaOf(replica, 30_000);
    for (const s of sentinels) {
      await eventually(async () => {
        const c = s.connect();
        c.on('error', () => undefined);
        try {
          const others = (await c.call('SENTINEL', 'sentinels', master)) as unknown[];
          const replicas = (await c.call('SENTINEL', 'replicas', master)) as string[][];
          return { others: others.length, replicas: replicas.filter((r) => { const f = r[r.indexOf('flags') + 1] ?? ''; return !/s_down|disconnected/.test(f); }).length };
        } finally {
          c.disconnect();
        }
      }, { what: `${s.name} to know the other sentinels and the replica`, until: (v) => v.others === 2 && v.replicas === 1, timeoutMs: 30_000, intervalMs: 100 });
    }
    return setup;
  } catch (err) {
    await Promise.all(started.map((p) => p.stop().catch(() => undefined)));
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
}
