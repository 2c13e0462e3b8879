/**
 * The egress proxy of one run: the sandbox's only way out when the run has an allowlist. It runs in
 * its own process (egress-proxy-process.ts; the worker side is egress-proxy-host.ts) and listens on a
 * unix socket that is bind-mounted into the sandbox. Requests are parsed by Node's http server
 * (llhttp, strict mode): HTTPS goes through CONNECT tunnels, plain HTTP as absolute-form requests that
 * are re-framed by Node's http client, so the upstream parses exactly the request that was checked.
 *
 * Decision for each attempt: the target must parse canonically (egress-target.ts); an IP literal in
 * any spelling is refused; the name must match an allowlist entry and its port (443 for CONNECT, 80
 * for HTTP, or the entry's own port); a name matched only by a wildcard counts against the run's
 * distinct-name cap and rate; every address the name resolves to must be outside the forbidden table
 * (egress-address.ts); the proxy connects to the checked address and checks the peer again on
 * connect (no second lookup: rebinding cannot swap it). A plain-HTTP request is forwarded only when
 * the URL's host, the single Host header and the checked name agree.
 *
 * Caps per run (concurrent connections, new connections and requests per second, bytes each way):
 * over a cap the attempt is refused and recorded once, then counted (egress-tally.ts).
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { nameMatches, nameProblem, ipLiteral, portMatches, type EgressEntry } from '../domain/egress-rules';
import type { EgressCode, NetExpectation } from '../domain/sandbox';
import { NO_SITE, type EgressSite } from '../domain/egress-site';
import type { ForbiddenRange } from './egress-address';
import { SiteRules, type Route } from './egress-route';
import { tunnelViaUpstream, UpstreamError, upstreamRequestOptions } from './egress-upstream';
import { EgressTally, TokenBucket, type TallyOut } from './egress-tally';
import { headerCount, parseAbsoluteTarget, parseAuthority, shown, singleHost } from './egress-target';

export type Resolver = (name: string) => Promise<string[]>;

export interface EgressCaps {
  maxConnections: number;
  connectionsPerS: number;
  requestsPerS: number;
  maxBytesOut: number;
  maxBytesIn: number;
  wildcardResolvesPerS: number;
  wildcardMaxNames: number;
  idleTimeoutMs: number;
}

/** A connection held for the worker's decision (the call opened it though the gate predicted no network use). */
export interface HeldConnection {
  id: number;
  callId: string | null;
  host: string;
  port: number;
  method: string;
}

export interface EgressProxyOptions {
  /** Reports a connection held for a decision; release(id, allow) answers it. */
  onHold?: (h: HeldConnection) => void;
  /** How long a held connection waits for its answer before it is refused (default: the idle timeout). */
  holdTimeoutMs?: number;
  allow: EgressEntry[];
  resolve: Resolver;
  /** The range an address falls in, or null when a sandbox may connect to it. */
  forbidden: (address: string) => ForbiddenRange | null;
  /** The operator's upstream proxy, NO_PROXY and internal hosts (config only). */
  site?: EgressSite;
  caps: EgressCaps;
  /** Attempts (the first of each kind) and aggregates (the rest, counted). */
  report: (m: TallyOut) => void;
  now?: () => number;
  connectTimeoutMs?: number;
  resolveTimeoutMs?: number;
}

/** An allowed attempt goes direct to the checked address, or through the upstream proxy (by name; the address when one was resolved). */
type Decision = { ok: true; route: Route; address: string | null } | { ok: false; status: number; code: EgressCode; reason: string };

const HOP_BY_HOP = new Set(['connection', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'keep-alive', 'te', 'trailer', 'upgrade', 'transfer-encoding', 'host']);
const deny = (status: number, code: EgressCode, reason: string): Decision => ({ ok: false, status, code, reason });

export class EgressProxy {
  readonly tally: EgressTally;
  private readonly server: Server;
  private readonly sockets = new Set<Duplex>();
  private readonly now: () => number;
  private readonly connBucket: TokenBucket;
  private readonly reqBucket: TokenBucket;
  private readonly nameBucket: TokenBucket;
  private readonly wildcardSeen = new Set<string>();
  private open = 0;
  /** Upstream connections open now (a client may pipeline requests; each gets its own upstream). */
  private upstreams = 0;
  private callId: string | null = null;
  /** What to do with connections the current call opens (the worker sets it with the call). */
  private net: NetExpectation = 'open';
  private nextHold = 1;
  private readonly held = new Map<number, { callId: string | null; resolve: (allow: boolean) => void }>();
  /** The allowlist now (narrowed once a setup phase ends), and how many times it changed. */
  private allow: EgressEntry[];
  private epoch = 0;
  private readonly site: SiteRules;

  constructor(private readonly o: EgressProxyOptions) {
    this.now = o.now ?? Date.now;
    this.site = new SiteRules(o.site ?? NO_SITE, o.forbidden);
    this.allow = o.allow;
    const { caps } = o;
    this.connBucket = new TokenBucket(caps.connectionsPerS, caps.connectionsPerS * 4, this.now);
    this.reqBucket = new TokenBucket(caps.requestsPerS, caps.requestsPerS * 4, this.now);
    this.nameBucket = new TokenBucket(caps.wildcardResolvesPerS, caps.wildcardResolvesPerS * 4, this.now);
    this.tally = new EgressTally(o.report);
    const headersTimeout = Math.min(10_000, Math.max(1000, caps.idleTimeoutMs / 10));
    this.server = createServer({ maxHeaderSize: 8192, headersTimeout, requestTimeout: caps.idleTimeoutMs, keepAliveTimeout: 5000, joinDuplicateHeaders: false });
    this.server.maxConnections = caps.maxConnections;
    this.server.on('drop', () => this.refuse('?', 0, 'TCP', 'cap_connections', `the run already has ${caps.maxConnections} egress connections open (CORRAL_EGRESS_MAX_CONNECTIONS)`));
    this.server.on('connection', (s: Socket) => this.onConnection(s));
    this.server.on('clientError', (err: Error & { code?: string }, s: Duplex) => this.onClientError(err, s));
    // A handler that throws (a bug) fails closed: that connection is dropped, the proxy goes on.
    this.server.on('request', (req: IncomingMessage, res: ServerResponse) => this.onRequest(req, res).catch(() => res.destroy()));
    this.server.on('connect', (req: IncomingMessage, s: Duplex, head: Buffer) => this.onConnect(req, s, head).catch(() => s.destroy()));
    this.server.on('upgrade', (req: IncomingMessage, s: Duplex) => {
      this.refuse(req.url ?? '', 0, req.method ?? '?', 'upgrade_refused', 'protocol upgrades (WebSocket over plain HTTP) are not proxied; use wss:// through CONNECT');
      s.end('HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
  }

  /** Connections open now: the sandbox's to the proxy, and the proxy's own to upstreams. */
  get openConnections(): { clients: number; upstreams: number } {
    return { clients: this.open, upstreams: this.upstreams };
  }

  /**
   * The tool call that new connections are attributed to (null: none), and what to do with them.
   * Connections still held for another call are refused: their call is over.
   */
  setCall(callId: string | null, net: NetExpectation = 'open'): void {
    if (callId !== this.callId) {
      this.tally.flush();
      for (const [id, h] of this.held) if (h.callId !== callId) this.release(id, false);
    }
    this.callId = callId;
    this.net = net;
  }

  /** Answers a held connection: it goes on (allow) or is refused. Unknown ids are ignored. */
  release(id: number, allow: boolean): void {
    const h = this.held.get(id);
    if (!h) return;
    this.held.delete(id);
    h.resolve(allow);
  }

  /**
   * The call's expectation applied to an attempt the allowlist accepted: null to go on, or why it is
   * refused. `hold` parks it until the worker answers (or the call ends, or the hold times out).
   */
  private async expected(host: string, port: number, method: string, client: { destroyed: boolean; once(e: 'close', f: () => void): unknown }): Promise<string | null> {
    const net = this.net;
    if (net === 'open') return null;
    const refuse = this.callId === null
      ? 'no tool call is running, so no call\'s decision covers a connection (a background process?)'
      : 'the gate predicted no network use for this call';
    if (net === 'refuse') return `${refuse}; this run is unattended, so it is refused`;
    const id = this.nextHold++;
    const callId = this.callId;
    const allow = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => this.release(id, false), this.o.holdTimeoutMs ?? this.o.caps.idleTimeoutMs);
      timer.unref?.();
      this.held.set(id, { callId, resolve: (a) => { clearTimeout(timer); resolve(a); } });
      client.once('close', () => this.release(id, false));
      this.o.onHold?.({ id, callId, host, port, method });
    });
    return allow ? null : `${refuse}; it was held and not approved`;
  }

  /**
   * Replaces the allowlist (a setup phase ended): every connection open now is closed — tunnels,
   * keep-alive clients, upstreams — and a decision still waiting for its name's resolution is taken
   * again under the new list. Names seen under wildcards start again; the byte caps do not (they are
   * the run's, setup included). Returns how many connections were closed.
   */
  narrow(allow: EgressEntry[]): number {
    this.tally.flush();
    this.allow = allow;
    this.epoch += 1;
    this.wildcardSeen.clear();
    const open = [...this.sockets];
    for (const s of open) s.destroy();
    return open.length;
  }

  listen(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ path, backlog: 128 }, () => resolve());
    });
  }

  close(): Promise<void> {
    for (const id of [...this.held.keys()]) this.release(id, false);
    for (const s of this.sockets) s.destroy();
    this.tally.flush();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The decision for one target, with the caps on wildcard names; resolves the name only when it is allowed. */
  async decide(host: string, port: number, kind: 'connect' | 'http'): Promise<Decision> {
    const epoch = this.epoch;
    const d = await this.decideOnce(host, port, kind);
    // The allowlist changed while the name was resolved: decide again under the new one.
    return this.epoch === epoch ? d : this.decide(host, port, kind);
  }

  private async decideOnce(host: string, port: number, kind: 'connect' | 'http'): Promise<Decision> {
    // An operator's internal host may sit under a private-use domain (registry.corp); nothing else may.
    const problem = this.site.isInternal(host) ? null : nameProblem(host);
    if (problem) return deny(403, ipLiteral(host) !== undefined ? 'ip_literal' : 'invalid_name', `the proxy refused ${shown(host)}: ${shown(host)} ${problem}`);
    const entries = this.allow.filter((e) => nameMatches(host, e));
    if (entries.length === 0) return deny(403, 'not_allowed', `the proxy refused ${host}: ${host} is not on the run's egress allowlist`);
    const fitting = entries.filter((e) => portMatches(port, e, kind));
    if (fitting.length === 0) {
      const ports = [...new Set(entries.map((e) => e.port ?? (kind === 'connect' ? 443 : 80)))];
      return deny(403, 'port_not_allowed', `port ${port} is not allowed for ${host} by ${kind === 'connect' ? 'CONNECT' : 'plain HTTP'} (allowed: ${ports.join(', ')})`);
    }
    if (!fitting.some((e) => !e.wildcard) && !this.wildcardSeen.has(host)) {
      const st = this.tally.stats;
      if (this.wildcardSeen.size >= this.o.caps.wildcardMaxNames) {
        st.wildcardRefused += 1;
        return deny(403, 'wildcard_names', `${host}: the run already resolved ${this.o.caps.wildcardMaxNames} distinct names under wildcard entries (CORRAL_EGRESS_WILDCARD_MAX_NAMES)`);
      }
      if (!this.nameBucket.take()) {
        st.wildcardRefused += 1;
        return deny(429, 'wildcard_rate', `${host}: new names under wildcard entries are limited to ${this.o.caps.wildcardResolvesPerS}/s (CORRAL_EGRESS_WILDCARD_RESOLVES_PER_S)`);
      }
      this.wildcardSeen.add(host);
      for (const e of fitting) st.wildcardNames[e.text] = (st.wildcardNames[e.text] ?? 0) + 1;
    }
    let addresses: string[];
    this.tally.stats.resolutions += 1;
    try {
      addresses = await withTimeout(this.o.resolve(host), this.o.resolveTimeoutMs ?? 5000, 'resolution timed out');
    } catch (err) {
      // Behind an upstream proxy the name may resolve only there: it goes on by name (NO_PROXY can
      // still send it direct, which needs an address).
      if (this.site.route(host, port, []) === 'upstream') return { ok: true, route: 'upstream', address: null };
      return deny(502, 'resolve_failed', `${host} could not be resolved (${(err as Error).message.slice(0, 200)})`);
    }
    if (addresses.length === 0) return deny(502, 'resolve_failed', `${host} has no addresses`);
    for (const a of addresses) {
      const why = this.site.addressProblem(host, a);
      if (why) return deny(403, 'forbidden_address', why);
    }
    return { ok: true, route: this.site.route(host, port, addresses), address: addresses[0]! };
  }

  /** Why the peer a direct connection reached is not the one checked for `host`, or null. */
  private peerProblem(host: string, peer: string, checked: string | null): string | null {
    if (peer !== checked) return `${host}: connected peer ${peer} is not the checked address`;
    return this.site.addressProblem(host, peer);
  }

  private refuse(host: string, port: number, method: string, code: EgressCode, reason: string): void {
    this.tally.record(this.callId, { host, port, method, decision: 'deny', code, reason });
  }

  private onConnection(s: Socket): void {
    const st = this.tally.stats;
    if (!this.connBucket.take()) {
      this.refuse('?', 0, 'TCP', 'cap_rate', `more than ${this.o.caps.connectionsPerS} new egress connections per second (CORRAL_EGRESS_CONNECTIONS_PER_S)`);
      s.destroy();
      return;
    }
    st.connections += 1;
    this.open += 1;
    st.peakConnections = Math.max(st.peakConnections, this.open);
    this.track(s, () => (this.open -= 1));
    s.setTimeout(this.o.caps.idleTimeoutMs, () => s.destroy());
  }

  private track(s: Duplex, onClose?: () => void): void {
    this.sockets.add(s);
    s.once('close', () => {
      this.sockets.delete(s);
      onClose?.();
    });
    s.on('error', () => s.destroy());
  }

  private trackUpstream(s: Duplex): void {
    this.upstreams += 1;
    this.track(s, () => (this.upstreams -= 1));
  }

  private upstreamCapReached(): { code: EgressCode; reason: string } | null {
    if (this.upstreams < this.o.caps.maxConnections) return null;
    return { code: 'cap_connections', reason: `the run already has ${this.o.caps.maxConnections} upstream connections open (CORRAL_EGRESS_MAX_CONNECTIONS)` };
  }

  private onClientError(err: Error & { code?: string; reason?: string }, s: Duplex): void {
    const overflow = err.code === 'HPE_HEADER_OVERFLOW';
    const code: EgressCode = overflow ? 'invalid_target' : 'framing';
    this.refuse('?', 0, 'HTTP', code, `the request was refused by the HTTP parser: ${err.code ?? 'error'} ${(err.reason ?? err.message).slice(0, 120)}${overflow ? ' (request line and headers are limited to 8 KiB)' : ''}`);
    if (s.writable) s.end(`HTTP/1.1 ${overflow ? 431 : 400} Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    s.destroy();
  }

  private async onConnect(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    // Read (and hold, up to 64 KiB) what the client sends while the name resolves, so a client that
    // leaves is noticed and never gets an upstream connection.
    const early: Buffer[] = [head];
    let earlyBytes = head.length;
    let gone = false;
    const onEarly = (c: Buffer) => {
      early.push(c);
      earlyBytes += c.length;
      if (earlyBytes > 64 * 1024) client.pause();
    };
    client.on('data', onEarly);
    // The server's sockets are half-open capable: a client that ends while its name resolves is gone,
    // and its socket is closed at once (not left counted against the connection cap until idle).
    let deciding = true;
    client.once('end', () => {
      gone = true;
      if (deciding) client.destroy();
    });
    client.once('close', () => (gone = true));
    const target = parseAuthority(req.url ?? '', null);
    const host = target.ok ? target.value.host : shown(req.url ?? '');
    const port = target.ok ? target.value.port : 0;
    let d: Decision;
    if (!target.ok) d = deny(400, 'invalid_target', `CONNECT target ${shown(req.url ?? '')}: ${target.reason}`);
    else if (headerCount(req.rawHeaders, 'host') > 1) d = deny(400, 'framing', 'more than one Host header');
    else d = await this.decide(host, port, 'connect');
    deciding = false;
    if (!d.ok) {
      this.refuse(host, port, 'CONNECT', d.code, d.reason);
      client.end(`HTTP/1.1 ${d.status} ${d.status === 429 ? 'Too Many Requests' : 'Forbidden'}\r\nContent-Type: text/plain\r\nX-Corral-Egress: denied\r\nConnection: close\r\n\r\ncorral egress denied: ${d.reason}\n`);
      return;
    }
    if (gone || client.destroyed) { // gone while the name was resolved: no upstream for nobody
      client.destroy();
      return;
    }
    const unexpected = await this.expected(host, port, 'CONNECT', client);
    if (unexpected !== null) {
      this.refuse(host, port, 'CONNECT', 'unpredicted', unexpected);
      client.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Corral-Egress: denied\r\nConnection: close\r\n\r\ncorral egress denied: ${unexpected}\n`);
      return;
    }
    if (gone || client.destroyed) { client.destroy(); return; }
    const capped = this.byteCapReached() ?? this.upstreamCapReached();
    if (capped) {
      this.refuse(host, port, 'CONNECT', capped.code, capped.reason);
      client.end(`HTTP/1.1 403 Forbidden\r\nConnection: close\r\n\r\ncorral egress denied: ${capped.reason}\n`);
      return;
    }
    if (d.route === 'upstream') {
      const tunnel = tunnelViaUpstream(this.site.upstream!, this.site.upstreamShown(), host, port, this.o.connectTimeoutMs ?? 10_000, (s) => this.trackUpstream(s));
      client.once('close', () => tunnel.cancel());
      let t: { socket: Socket; head: Buffer };
      try {
        t = await tunnel.done;
      } catch (err) {
        const e = err instanceof UpstreamError ? err : new UpstreamError('upstream_unreachable', (err as Error).message);
        if (!client.destroyed) {
          this.refuse(host, port, 'CONNECT', e.code, e.message);
          client.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nX-Corral-Egress: denied\r\nConnection: close\r\n\r\ncorral egress denied: ${e.message}\n`);
        }
        client.destroy();
        return;
      }
      if (client.destroyed) {
        t.socket.destroy();
        return;
      }
      client.once('close', () => t.socket.destroy());
      this.established(client, t.socket, host, port, early, () => client.off('data', onEarly), `allowed; tunnel through the upstream proxy ${this.site.upstreamShown()}`, t.head);
      return;
    }
    const upstream = connect({ host: d.address!, port, timeout: this.o.connectTimeoutMs ?? 10_000 });
    let established = false;
    this.trackUpstream(upstream);
    client.once('close', () => upstream.destroy());
    upstream.once('timeout', () => upstream.destroy(new Error('connect timeout')));
    upstream.on('error', (err) => {
      if (!client.destroyed && !established) {
        this.refuse(host, port, 'CONNECT', 'unreachable', `${host}:${port} (${d.address}) is unreachable: ${err.message}`);
        client.end(`HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncorral egress: ${host}:${port} unreachable (${err.message})\n`);
      }
      client.destroy();
    });
    upstream.once('connect', () => {
      const why = this.peerProblem(host, upstream.remoteAddress ?? '', d.address);
      if (why) {
        upstream.destroy();
        this.refuse(host, port, 'CONNECT', 'forbidden_address', why);
        client.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Corral-Egress: denied\r\nConnection: close\r\n\r\ncorral egress denied: ${why}\n`);
        return;
      }
      established = true;
      this.established(client, upstream, host, port, early, () => client.off('data', onEarly), `allowed; tunnel to ${d.address}`, Buffer.alloc(0));
    });
  }

  /** A tunnel is up: answers 200, sends what the client sent early, then copies both ways with the caps. */
  private established(client: Duplex, upstream: Socket, host: string, port: number, early: Buffer[], stopEarly: () => void, reason: string, head: Buffer): void {
    upstream.setTimeout(this.o.caps.idleTimeoutMs, () => upstream.destroy());
    this.tally.record(this.callId, { host, port, method: 'CONNECT', decision: 'allow', code: 'allowed', reason });
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    stopEarly();
    const first = Buffer.concat(early);
    if ((head.length && !this.countIn(head.length)) || (first.length && !this.countOut(first.length))) {
      // what came with the CONNECT already crosses the run's cap: the tunnel is cut, as in pump()
      const capped = this.byteCapReached()!;
      this.refuse(host, port, 'DATA', capped.code, capped.reason);
      client.destroy();
      upstream.destroy();
      return;
    }
    if (head.length) client.write(head);
    if (first.length) upstream.write(first);
    this.pump(client, upstream, (n) => this.countOut(n), host, port);
    client.resume();
    this.pump(upstream, client, (n) => this.countIn(n), host, port);
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const target = parseAbsoluteTarget(req.url ?? '');
    const host = target.ok ? target.value.host : shown(req.url ?? '');
    const port = target.ok ? target.value.port : 0;
    const hostHeader = singleHost(req.rawHeaders);
    let d: Decision;
    if (!this.reqBucket.take()) d = deny(429, 'cap_requests', `more than ${this.o.caps.requestsPerS} plain-HTTP requests per second (CORRAL_EGRESS_REQUESTS_PER_S)`);
    else if (!target.ok) d = deny(400, 'invalid_target', `${shown(req.url ?? '')}: ${target.reason}`);
    else if (!hostHeader.ok) d = deny(400, 'framing', hostHeader.reason);
    else if (req.httpVersion !== '1.1' && req.headers['transfer-encoding'] !== undefined) d = deny(400, 'framing', `Transfer-Encoding in an HTTP/${req.httpVersion} request`);
    else {
      const h = parseAuthority(hostHeader.value, 80);
      if (!h.ok || h.value.host !== host || h.value.port !== port) d = deny(400, 'host_mismatch', `the Host header (${shown(hostHeader.value)}) is not the URL's host (${host}:${port})`);
      else {
        const capped = this.byteCapReached() ?? this.upstreamCapReached();
        d = capped ? deny(403, capped.code, capped.reason) : await this.decide(host, port, 'http');
      }
    }
    if (!d.ok || !target.ok) {
      const fail = (d.ok ? deny(400, 'invalid_target', 'bad request') : d) as Extract<Decision, { ok: false }>;
      this.refuse(host, port, method, fail.code, fail.reason);
      req.resume();
      res.writeHead(fail.status, { 'content-type': 'text/plain', 'x-corral-egress': 'denied', connection: 'close' });
      res.end(`corral egress denied: ${fail.reason}\n`);
      return;
    }
    if (res.destroyed || req.socket.destroyed) return;
    const unexpected = await this.expected(host, port, method, req.socket);
    if (unexpected !== null) {
      this.refuse(host, port, method, 'unpredicted', unexpected);
      req.resume();
      res.writeHead(403, { 'content-type': 'text/plain', 'x-corral-egress': 'denied', connection: 'close' });
      res.end(`corral egress denied: ${unexpected}\n`);
      return;
    }
    if (res.destroyed || req.socket.destroyed) return;
    this.tally.stats.requests += 1;
    const via = d.route === 'upstream' ? `through the upstream proxy ${this.site.upstreamShown()}` : `to ${d.address}`;
    this.tally.record(this.callId, { host, port, method, decision: 'allow', code: 'allowed', reason: `allowed; request ${via}` });
    this.forward(req, res, { host, port, path: target.value.path, address: d.address, route: d.route });
  }

  /** Sends the checked request upstream with framing Node's client writes itself (never the client's bytes). */
  private forward(req: IncomingMessage, res: ServerResponse, t: { host: string; port: number; path: string; address: string | null; route: Route }): void {
    const named = new Set((req.headers.connection ?? '').toLowerCase().split(',').map((x) => x.trim()).filter(Boolean));
    const headers: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const k = req.rawHeaders[i]!;
      const lk = k.toLowerCase();
      if (HOP_BY_HOP.has(lk) || named.has(lk)) continue;
      headers.push(k, req.rawHeaders[i + 1]!);
    }
    headers.push('Host', t.port === 80 ? t.host : `${t.host}:${t.port}`);
    if (req.headers['transfer-encoding'] !== undefined) headers.push('Transfer-Encoding', 'chunked');
    const viaUpstream = t.route === 'upstream';
    const up = viaUpstream
      ? httpRequest(upstreamRequestOptions(this.site.upstream!, { host: t.host, port: t.port, path: t.path, method: req.method ?? 'GET', headers, timeoutMs: this.o.caps.idleTimeoutMs }))
      : httpRequest({ host: t.address!, port: t.port, method: req.method, path: t.path, headers, agent: false, setHost: false, timeout: this.o.caps.idleTimeoutMs });
    res.once('close', () => up.destroy());
    up.on('socket', (s) => {
      this.trackUpstream(s);
      if (viaUpstream) return; // the operator's proxy: its address is the operator's choice
      s.once('connect', () => {
        const why = this.peerProblem(t.host, (s as Socket).remoteAddress ?? '', t.address);
        if (why) s.destroy(new Error(why));
      });
    });
    up.on('response', (r) => {
      if (viaUpstream && r.statusCode === 407) {
        // The upstream wants credentials: the sandbox cannot give them (it never has them), so it is told why.
        r.resume();
        const why = `the upstream proxy ${this.site.upstreamShown()} refused ${req.method ?? 'GET'} http://${t.host}:${t.port}: 407 Proxy Authentication Required (check the credentials in CORRAL_EGRESS_UPSTREAM_PROXY)`;
        this.refuse(t.host, t.port, req.method ?? '?', 'upstream_refused', why);
        res.writeHead(502, { 'content-type': 'text/plain', 'x-corral-egress': 'denied', connection: 'close' });
        res.end(`corral egress denied: ${why}\n`);
        return;
      }
      const out: string[] = [];
      for (let i = 0; i < r.rawHeaders.length; i += 2) if (!HOP_BY_HOP.has(r.rawHeaders[i]!.toLowerCase())) out.push(r.rawHeaders[i]!, r.rawHeaders[i + 1]!);
      res.writeHead(r.statusCode ?? 502, out);
      this.pump(r, res, (n) => this.countIn(n), t.host, t.port);
    });
    up.on('timeout', () => up.destroy(new Error('timeout')));
    up.on('error', (err) => {
      if (viaUpstream) this.refuse(t.host, t.port, req.method ?? '?', 'upstream_unreachable', `the upstream proxy ${this.site.upstreamShown()} could not be reached for ${t.host}:${t.port}: ${err.message}`);
      else this.refuse(t.host, t.port, req.method ?? '?', 'unreachable', `${t.host}:${t.port} (${t.address}): ${err.message}`);
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain', connection: 'close' });
      res.end(`corral egress: ${t.host}:${t.port} unreachable (${err.message})\n`);
    });
    this.pump(req, up, (n) => this.countOut(n), t.host, t.port);
  }

  /** Copies src to dst with backpressure, counting bytes; a cap reached destroys both. */
  private pump(src: NodeJS.ReadableStream & Duplex | IncomingMessage, dst: NodeJS.WritableStream & { destroy(e?: Error): void }, count: (n: number) => boolean, host: string, port: number): void {
    src.on('data', (c: Buffer) => {
      if (!count(c.length)) {
        const capped = this.byteCapReached()!;
        this.refuse(host, port, 'DATA', capped.code, capped.reason);
        src.destroy();
        dst.destroy();
        return;
      }
      if (!dst.write(c)) src.pause();
    });
    dst.on('drain', () => src.resume());
    let ended = false;
    src.on('end', () => {
      ended = true;
      dst.end();
    });
    // A body the parser refused half-way (bad chunk size, reset): the upstream's request is cut, never completed.
    src.on('error', () => dst.destroy());
    src.on('close', () => {
      if (!ended) dst.destroy();
    });
  }

  private countOut(n: number): boolean {
    this.tally.stats.bytesOut += n;
    return this.tally.stats.bytesOut <= this.o.caps.maxBytesOut;
  }

  private countIn(n: number): boolean {
    this.tally.stats.bytesIn += n;
    return this.tally.stats.bytesIn <= this.o.caps.maxBytesIn;
  }

  private byteCapReached(): { code: EgressCode; reason: string } | null {
    const { stats } = this.tally;
    const { maxBytesOut, maxBytesIn } = this.o.caps;
    if (stats.bytesOut > maxBytesOut) return { code: 'cap_bytes_out', reason: `the run sent more than ${maxBytesOut} bytes through its egress proxy (CORRAL_EGRESS_MAX_BYTES_OUT)` };
    if (stats.bytesIn > maxBytesIn) return { code: 'cap_bytes_in', reason: `the run received more than ${maxBytesIn} bytes through its egress proxy (CORRAL_EGRESS_MAX_BYTES_IN)` };
    return null;
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]).finally(() => clearTimeout(timer));
}
