/**
 * Entry point of a run's egress proxy process (started by egress-proxy-host.ts, never imported by the
 * worker). Reads its whole configuration as the first message on fd 3 (a socketpair to the worker),
 * listens on the run's socket, and reports attempts, aggregates and totals back on fd 3. It holds no
 * secrets (its environment is empty), no Docker socket, and runs under its own heap and fd limits;
 * when fd 3 closes (the worker stopped or died) it exits.
 */
/* eslint-disable no-restricted-properties -- the entry point of its own process (as main.ts is of the worker's): it ends that process */
import { chmodSync, readFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { Resolver as DnsResolver } from 'node:dns/promises';
import { Socket } from 'node:net';
import { getHeapStatistics } from 'node:v8';
import { parseEgressEntry, type EgressEntry } from '../domain/egress-rules';
import { forbiddenRangeChecker, hostAddressRanges } from './egress-address';
import type { FromProxy, ToProxy } from './egress-ipc';
import { encode, readMessages, type Parsed } from './egress-ipc-lines';
import { EgressProxy, type Resolver } from './egress-proxy';
import type { TallyOut } from './egress-tally';

const pipe = new Socket({ fd: 3, readable: true, writable: true });
/** Above this many unsent bytes, attempts are no longer sent (they are still counted in the totals). */
const BACKLOG = 1024 * 1024;

function send(m: FromProxy): void {
  // totals, holds and sync answers are never dropped: someone waits for them
  if (pipe.writableLength > BACKLOG && m.t !== 'stats' && m.t !== 'held' && m.t !== 'synced') return;
  pipe.write(encode(m));
}

function nofileLimit(): number | null {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

function resolverFor(r: Extract<ToProxy, { t: 'init' }>['resolver']): Resolver {
  if (r.kind === 'system') return async (name) => (await lookup(name, { all: true, verbatim: true })).map((a) => a.address);
  const dns = new DnsResolver({ timeout: 2000, tries: 1 });
  dns.setServers(r.servers);
  return async (name) => {
    const [v4, v6] = await Promise.allSettled([dns.resolve4(name), dns.resolve6(name)]);
    const out = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (out.length === 0) throw (v4.status === 'rejected' ? v4.reason : new Error('no addresses')) as Error;
    return out;
  };
}

let proxy: EgressProxy | undefined;
let timer: NodeJS.Timeout | undefined;

function stop(code: number): void {
  if (timer) clearInterval(timer);
  const done = () => {
    if (proxy) send({ t: 'stats', stats: proxy.tally.stats });
    pipe.end(() => process.exit(code));
    setTimeout(() => process.exit(code), 1000).unref();
  };
  if (proxy) void proxy.close().then(done, done);
  else done();
}

/** Names the operator listed as internal hosts: their entries may sit under a private-use domain. */
let isInternal: (name: string) => boolean = () => false;

async function start(init: Extract<ToProxy, { t: 'init' }>): Promise<void> {
  const internal = new Set(init.site.internal.map((h) => h.name));
  isInternal = (name) => internal.has(name);
  const allow: EgressEntry[] = [];
  for (const a of init.allow) {
    const e = parseEgressEntry(a, undefined, isInternal);
    if (typeof e === 'string') throw new Error(`allowlist entry ${e}`);
    allow.push(e);
  }
  const report = (m: TallyOut) => {
    if (m.kind === 'attempt') send({ t: 'attempt', ...m.attempt, code: m.attempt.code ?? 'allowed', callId: m.attempt.callId });
    else send({ t: 'aggregate', callId: m.callId, method: m.method, decision: m.decision, code: m.code, count: m.count, sample: m.sample, reason: m.reason });
  };
  proxy = new EgressProxy({
    allow, resolve: resolverFor(init.resolver), forbidden: forbiddenRangeChecker(hostAddressRanges(), init.exempt), caps: init.caps, report, site: init.site,
    onHold: (h) => send({ t: 'held', id: h.id, callId: h.callId, host: h.host.slice(0, 400), port: h.port, method: h.method.slice(0, 20) }),
  });
  await proxy.listen(init.socketPath);
  chmodSync(init.socketPath, 0o666); // the sandbox's uid must be able to connect
  let last = '';
  timer = setInterval(() => {
    proxy!.tally.flush();
    const s = JSON.stringify(proxy!.tally.stats);
    if (s !== last) send({ t: 'stats', stats: proxy!.tally.stats });
    last = s;
  }, init.flushMs);
  send({
    t: 'ready', pid: process.pid, uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1, groups: (process.getgroups?.() ?? []).slice(0, 64),
    nofile: nofileLimit(), heapMb: Math.round(getHeapStatistics().heap_size_limit / 1024 / 1024),
  });
}

/** The worker is trusted; this only refuses what is not a message at all (the worker sends from the ToProxy schema). */
function parseToProxy(v: unknown): Parsed<ToProxy> {
  const t = (v as { t?: unknown } | null)?.t;
  if (t === 'narrow' && Array.isArray((v as { allow?: unknown }).allow)) return { ok: true, value: v as ToProxy };
  if (t === 'stop' || (t === 'call' && ['string', 'object'].includes(typeof (v as { callId?: unknown }).callId))) return { ok: true, value: v as ToProxy };
  if ((t === 'release' && typeof (v as { id?: unknown }).id === 'number') || (t === 'sync' && typeof (v as { n?: unknown }).n === 'number')) return { ok: true, value: v as ToProxy };
  if (t === 'init' && typeof (v as { socketPath?: unknown }).socketPath === 'string' && Array.isArray((v as { allow?: unknown }).allow)) return { ok: true, value: v as ToProxy };
  return { ok: false, reason: 'a message that is not init, call, release, sync, narrow or stop' };
}

/** Replaces the allowlist; an entry that does not parse (the worker checked them) narrows to nothing at all. */
function narrow(list: string[]): void {
  const allow: EgressEntry[] = [];
  for (const a of list) {
    const e = parseEgressEntry(a, undefined, isInternal);
    if (typeof e === 'string') {
      allow.length = 0;
      break;
    }
    allow.push(e);
  }
  const closed = proxy ? proxy.narrow(allow) : 0;
  send({ t: 'narrowed', closed });
}

let started = false;
readMessages(pipe, parseToProxy, (m) => {
  if (m.t === 'init') {
    if (started) return;
    started = true;
    start(m).catch((err: Error) => {
      process.stderr.write(`egress proxy failed to start: ${err.message}\n`);
      process.exit(2);
    });
  } else if (m.t === 'call') proxy?.setCall(m.callId, m.net === 'hold' || m.net === 'refuse' ? m.net : 'open');
  else if (m.t === 'release') proxy?.release(m.id, m.allow === true);
  else if (m.t === 'sync') {
    proxy?.tally.flush();
    send({ t: 'synced', n: m.n });
  }
  else if (m.t === 'narrow') narrow(m.allow);
  else stop(0);
}, (reason) => {
  process.stderr.write(`egress proxy: the worker sent ${reason}\n`);
  process.exit(3);
});
pipe.on('end', () => stop(0));
pipe.on('error', () => process.exit(0));
