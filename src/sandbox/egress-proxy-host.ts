/**
 * The worker's side of a run's egress proxy: one process per run (egress-proxy-process.ts, bundled
 * once per worker process into plain JavaScript by esbuild and handed to `node -` on stdin, so it
 * starts without tsx and no file has to be readable by the proxy's uid or outlive a reaper sweep).
 *
 * The process is started through `setpriv` and `prlimit` (util-linux): when the worker is root it
 * runs as CORRAL_EGRESS_PROXY_USER with no supplementary groups (so no Docker socket) and an empty
 * capability bounding set; always with no_new_privs, RLIMIT_NOFILE sized for its connection cap,
 * no core dumps, a V8 heap cap, an empty environment, cwd `/` and a lower CPU priority. A worker that
 * is not root cannot switch users: the proxy then runs as the worker's uid and keeps its groups.
 *
 * The two talk over fd 3 with bounded, validated messages (egress-ipc.ts). The worker tells the proxy
 * which tool call runs (attribution happens where the connection arrives) and turns what comes back
 * into attempts and summaries for the run's log. When the process dies or breaks the protocol, that
 * run's egress ends with the reason (a `failed` summary); nothing else on the worker is touched.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown } from 'node:fs/promises';
import { setPriority } from 'node:os';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import type { Config } from '../config';
import type { EgressSite } from '../domain/egress-site';
import { SandboxError } from '../domain/errors';
import type { EgressAttempt, EgressHold, EgressSummary, NetExpectation } from '../domain/sandbox';
import { encode, FromProxy, readMessages, zodParser, type ToProxy } from './egress-ipc';
import type { EgressCaps } from './egress-proxy';
import type { EgressTestHooks } from './egress-test-hooks';

export interface EgressProxyHostOptions {
  runId: string;
  /** The run's socket directory (exists; bind-mounted into the sandbox). */
  dir: string;
  allow: string[];
  config: Config;
  /** The operator's upstream proxy, NO_PROXY and internal hosts (egressSiteOf(config), read once by the provider). */
  site?: EgressSite;
  hooks?: EgressTestHooks;
  onAttempt: (a: EgressAttempt) => void;
  onSummary: (s: EgressSummary) => void;
  /** A connection held for the worker's decision (answer with handle.release). */
  onHold?: (h: EgressHold) => void;
  log: (msg: string, fields?: Record<string, unknown>) => void;
}

export interface EgressProxyHandle {
  readonly socketPath: string;
  readonly pid: number;
  noteCall(callId: string | null, net?: NetExpectation): void;
  /** Answers a held connection. */
  release(id: number, allow: boolean): void;
  /** Resolves once the proxy has reported every attempt so far (or after SYNC_TIMEOUT_MS, or at once when it is gone). */
  sync(): Promise<void>;
  /**
   * Replaces the proxy's allowlist and closes every connection open now (a setup phase ended);
   * resolves with how many were closed. A proxy that does not answer in time is killed: the run then
   * has no egress at all, which is narrower still.
   */
  narrow(allow: string[]): Promise<{ closed: number; killed: boolean }>;
  /** Asks the proxy to stop (final totals arrive first), then kills it if it does not. */
  stop(): Promise<void>;
}

const FLUSH_MS = 1000;
const READY_TIMEOUT_MS = 15_000;
const STDERR_KEEP = 4096;
const NARROW_TIMEOUT_MS = 5000;
const SYNC_TIMEOUT_MS = 2000;

export function capsFromConfig(config: Config): EgressCaps {
  return {
    maxConnections: config.CORRAL_EGRESS_MAX_CONNECTIONS,
    connectionsPerS: config.CORRAL_EGRESS_CONNECTIONS_PER_S,
    requestsPerS: config.CORRAL_EGRESS_REQUESTS_PER_S,
    maxBytesOut: config.CORRAL_EGRESS_MAX_BYTES_OUT,
    maxBytesIn: config.CORRAL_EGRESS_MAX_BYTES_IN,
    wildcardResolvesPerS: config.CORRAL_EGRESS_WILDCARD_RESOLVES_PER_S,
    wildcardMaxNames: config.CORRAL_EGRESS_WILDCARD_MAX_NAMES,
    idleTimeoutMs: config.CORRAL_EGRESS_IDLE_TIMEOUT_S * 1000,
  };
}

let bundle: Promise<Uint8Array> | undefined;

/** The proxy process as one plain JavaScript program (built once per worker process). */
export function proxyBundle(): Promise<Uint8Array> {
  if (!bundle) {
    const p = (async () => {
      const { build } = await import('esbuild');
      const r = await build({ entryPoints: [join(__dirname, 'egress-proxy-process.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node22', write: false, logLevel: 'silent' });
      return r.outputFiles[0]!.contents;
    })();
    p.catch(() => (bundle = undefined));
    bundle = p;
  }
  return bundle;
}

function findTool(name: string): string {
  for (const d of ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']) if (existsSync(join(d, name))) return join(d, name);
  throw new SandboxError('sandbox_unavailable', `the egress proxy needs \`${name}\` (util-linux) to drop privileges and set its limits; install util-linux`);
}

export async function startEgressProxy(o: EgressProxyHostOptions): Promise<EgressProxyHandle> {
  const { config } = o;
  const caps = capsFromConfig(config);
  const code = await proxyBundle();
  const socketPath = join(o.dir, 'egress.sock');
  const root = process.getuid?.() === 0;
  const [uid, gid] = config.CORRAL_EGRESS_PROXY_USER.split(':').map(Number) as [number, number];
  if (root) await chown(o.dir, uid, gid);
  const nofile = caps.maxConnections * 2 + 64;
  const heapMb = config.CORRAL_EGRESS_PROXY_HEAP_MB;
  const argv = [
    ...(root ? ['--reuid', String(uid), '--regid', String(gid), '--clear-groups', '--inh-caps=-all', '--bounding-set=-all'] : []),
    '--no-new-privs', '--', findTool('prlimit'), `--nofile=${nofile}:${nofile}`, '--core=0', '--',
    process.execPath, `--max-old-space-size=${heapMb}`, '--max-semi-space-size=4', '--stack-size=512', '-',
  ];
  const child: ChildProcess = spawn(findTool('setpriv'), argv, { env: {}, cwd: '/', stdio: ['pipe', 'ignore', 'pipe', 'pipe'] });
  child.stdin!.on('error', () => undefined);
  child.stdin!.end(code); // the program; the proxy never reads stdin otherwise
  if (child.pid) setPriority(child.pid, 10);
  const pipe = child.stdio[3] as Socket;
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString('utf8')).slice(-STDERR_KEEP)));
  const callIds = new Set<string>();
  let stopping = false;
  let failed = false;
  let stats: Extract<FromProxy, { t: 'stats' }>['stats'] | undefined;
  let narrowed: ((closed: number) => void) | undefined;
  let syncN = 0;
  const syncs = new Map<number, () => void>();
  const send = (m: ToProxy) => {
    if (!pipe.destroyed && pipe.writable) pipe.write(encode(m));
  };
  const call = (id: string | null): string | null => (id !== null && callIds.has(id) ? id : null);

  let ready: (m: Extract<FromProxy, { t: 'ready' }>) => void = () => undefined;
  let notReady: (e: Error) => void = () => undefined;
  const readyP = new Promise<Extract<FromProxy, { t: 'ready' }>>((res, rej) => { ready = res; notReady = rej; });
  // 'close' comes after the process exited and its pipes are drained, so the final totals are in.
  const exited = new Promise<void>((res) => child.once('close', () => res()));

  const fail = (detail: string) => {
    if (failed || stopping) return;
    failed = true;
    child.kill('SIGKILL');
    o.log('egress proxy failed', { runId: o.runId, detail });
    o.onSummary({ kind: 'proxy', state: 'failed', detail: `${detail}; this run has no egress from now on` });
    if (stats) o.onSummary({ kind: 'stats', stats });
  };
  readMessages(pipe, zodParser(FromProxy), (m) => {
    if (m.t === 'ready') ready(m);
    else if (m.t === 'attempt') o.onAttempt({ host: m.host, port: m.port, method: m.method, decision: m.decision, reason: m.reason, code: m.code, callId: call(m.callId) });
    else if (m.t === 'aggregate') {
      const { t: _t, ...rest } = m;
      o.onSummary({ ...rest, kind: 'aggregate', callId: call(m.callId) });
    }
    else if (m.t === 'narrowed') narrowed?.(m.closed);
    else if (m.t === 'held') {
      if (o.onHold) o.onHold({ id: m.id, callId: call(m.callId), host: m.host, port: m.port, method: m.method });
      else send({ t: 'release', id: m.id, allow: false });
    } else if (m.t === 'synced') {
      syncs.get(m.n)?.();
      syncs.delete(m.n);
    } else stats = m.stats;
  }, (reason) => {
    notReady(new Error(`protocol violation: ${reason}`));
    fail(`the egress proxy broke its protocol (${reason}) and was stopped`);
  });
  pipe.on('error', () => undefined);
  child.once('close', (code: number | null, signal: NodeJS.Signals | null) => {
    // The line that says what went wrong (an Error, a FATAL ERROR from V8), else the last one.
    const lines = stderr.trim().split('\n').map((l) => l.trim()).filter(Boolean);
    const tail = (lines.find((l) => /error|denied|EACCES/i.test(l) && !/^\s*at /.test(l)) ?? lines.at(-1) ?? '').slice(0, 500);
    const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
    notReady(new Error(`the egress proxy ${how} before it was ready${tail ? `: ${tail}` : ''}`));
    fail(`the egress proxy process ${how}${/heap/i.test(tail) ? ' (out of memory)' : ''}${tail ? `: ${tail}` : ''}`);
  });
  child.once('error', (err) => notReady(err));

  send({
    t: 'init', socketPath, allow: o.allow, caps, flushMs: FLUSH_MS,
    resolver: o.hooks && o.hooks.dnsServers.length ? { kind: 'servers', servers: [...o.hooks.dnsServers] } : { kind: 'system' },
    exempt: o.hooks ? [...o.hooks.exempt] : [],
    site: { upstream: o.site?.upstream ?? null, noProxy: o.site?.noProxy ?? [], internal: o.site?.internal ?? [] },
  });
  let r: Extract<FromProxy, { t: 'ready' }>;
  const timer = setTimeout(() => notReady(new Error(`the egress proxy did not start within ${READY_TIMEOUT_MS / 1000} s`)), READY_TIMEOUT_MS);
  try {
    r = await readyP;
  } catch (err) {
    stopping = true;
    child.kill('SIGKILL');
    throw new SandboxError('sandbox_failed', `egress proxy for ${o.runId}: ${(err as Error).message}`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
  const user = `uid ${r.uid} gid ${r.gid} groups [${r.groups.join(',')}]`;
  o.onSummary({
    kind: 'proxy', state: 'started', pid: r.pid, user,
    detail: `egress proxy process ${r.pid} as ${user}${root ? '' : ' (the worker is not root, so the proxy keeps its uid and groups)'}, no_new_privs, heap ≤ ${r.heapMb} MB, ≤ ${r.nofile ?? '?'} open files`,
    limits: { heapMb: r.heapMb, nofile: r.nofile ?? -1, ...caps },
  });

  return {
    socketPath,
    pid: r.pid,
    noteCall(callId, net) {
      if (callId !== null) {
        if (callIds.size >= 10_000) callIds.clear();
        callIds.add(callId);
      }
      send({ t: 'call', callId, ...(net ? { net } : {}) });
    },
    release(id, allow) {
      send({ t: 'release', id, allow });
    },
    sync() {
      if (failed || stopping || pipe.destroyed) return Promise.resolve();
      const n = ++syncN;
      return new Promise<void>((resolve) => {
        const t = setTimeout(() => { syncs.delete(n); resolve(); }, SYNC_TIMEOUT_MS);
        t.unref?.();
        syncs.set(n, () => { clearTimeout(t); resolve(); });
        exited.then(() => resolve(), () => resolve());
        send({ t: 'sync', n });
      });
    },
    async narrow(allow) {
      if (failed || stopping || pipe.destroyed) return { closed: 0, killed: false };
      const answer = new Promise<number | null>((res) => {
        narrowed = res;
        exited.then(() => res(null), () => res(null));
        setTimeout(() => res(null), NARROW_TIMEOUT_MS).unref();
      });
      send({ t: 'narrow', allow });
      const closed = await answer;
      narrowed = undefined;
      if (closed !== null) return { closed, killed: false };
      fail(`the egress proxy did not confirm the narrowed allowlist within ${NARROW_TIMEOUT_MS / 1000} s`);
      return { closed: 0, killed: true };
    },
    async stop() {
      if (stopping) return;
      stopping = true;
      send({ t: 'stop' });
      const kill = setTimeout(() => child.kill('SIGKILL'), 3000);
      await exited;
      clearTimeout(kill);
      if (stats) o.onSummary({ kind: 'stats', stats });
      if (!failed) o.onSummary({ kind: 'proxy', state: 'stopped', detail: 'egress proxy stopped with the sandbox' });
    },
  };
}
