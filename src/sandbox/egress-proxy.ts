/**
 * The per-run egress proxy: the sandbox's only way out when its run has an allowlist. Listens on a
 * unix socket (bind-mounted into the sandbox, reached through the in-sandbox relay on 127.0.0.1:3128)
 * and serves HTTP absolute-form requests and HTTPS CONNECT tunnels.
 *
 * Decision for each attempt, strictest first: a `deny` pattern wins; an IP literal (any spelling) is
 * refused unless listed verbatim; a name must match an exact entry or a `*.suffix` entry (a wildcard
 * never matches its apex); the port must be an allowed port for the method (CONNECT: 443, HTTP: 80 by
 * default); every address the name resolves to must pass `isForbiddenAddress` (loopback, private,
 * link-local, CGNAT, metadata refused). The proxy then connects to the address it checked — there is
 * no second DNS lookup, so DNS rebinding cannot swap it. Every attempt produces one onAttempt record.
 */
import { lookup } from 'node:dns/promises';
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EgressAttempt } from '../domain/sandbox';
import { ipLiteral, isForbiddenAddress as defaultForbidden } from './egress-address';

export interface EgressProxyOptions {
  /** Exact names and `*.suffix` patterns (lower case). */
  allow: string[];
  /** Patterns that win over `allow`. */
  deny?: string[];
  /** Name → addresses; default: dns.lookup with all: true. */
  resolve?: (host: string) => Promise<string[]>;
  /** true = never connect there; default refuses loopback/private/link-local/CGNAT/metadata. */
  isForbiddenAddress?: (address: string) => boolean;
  connectPorts?: number[];
  httpPorts?: number[];
  onAttempt?: (attempt: EgressAttempt) => void;
  connectTimeoutMs?: number;
}

type Decision = { ok: true; address: string } | { ok: false; status: number; reason: string };

const HOP_BY_HOP = ['connection', 'proxy-connection', 'proxy-authorization', 'keep-alive', 'te', 'trailer', 'upgrade', 'transfer-encoding'];

function matches(host: string, pattern: string): boolean {
  const p = pattern.toLowerCase().replace(/\.$/, '');
  if (p.startsWith('*.')) return host.endsWith(p.slice(1)) && host.length > p.length - 1;
  return host === p;
}

export class EgressProxy {
  private readonly server: Server;
  private readonly sockets = new Set<Socket | Duplex>();
  private readonly resolve: (host: string) => Promise<string[]>;
  private readonly forbidden: (address: string) => boolean;

  constructor(private readonly o: EgressProxyOptions) {
    this.resolve = o.resolve ?? (async (h) => (await lookup(h, { all: true, verbatim: true })).map((a) => a.address));
    this.forbidden = o.isForbiddenAddress ?? defaultForbidden;
    this.server = createServer((req, res) => void this.onRequest(req, res));
    this.server.on('connect', (req: IncomingMessage, sock: Duplex, head: Buffer) => void this.onConnect(req, sock, head));
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
  }

  listen(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(path, () => resolve());
    });
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  /** The whole decision for one attempt, without side effects other than name resolution. */
  async decide(rawHost: string, port: number, method: string): Promise<Decision> {
    const host = rawHost.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
    const ports = method === 'CONNECT' ? (this.o.connectPorts ?? [443]) : (this.o.httpPorts ?? [80]);
    if (!host) return { ok: false, status: 400, reason: 'no target host' };
    if ((this.o.deny ?? []).some((p) => matches(host, p))) return { ok: false, status: 403, reason: `${host} is on the run's deny list` };
    const literal = ipLiteral(host);
    if (literal !== undefined) {
      if (literal === '?' || !this.o.allow.some((p) => p.toLowerCase() === host)) {
        return { ok: false, status: 403, reason: `${rawHost} is an IP address literal${literal !== '?' && literal !== host ? ` (= ${literal})` : ''}; only listed host names are allowed` };
      }
      if (this.forbidden(literal)) return { ok: false, status: 403, reason: `${rawHost} is a loopback, private, link-local or metadata address` };
      if (!ports.includes(port)) return { ok: false, status: 403, reason: `port ${port} is not allowed for ${method} (allowed: ${ports.join(', ')})` };
      return { ok: true, address: literal };
    }
    if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(host)) return { ok: false, status: 400, reason: `${rawHost} is not a valid host name` };
    if (!this.o.allow.some((p) => matches(host, p))) return { ok: false, status: 403, reason: `${host} is not on the run's egress allowlist` };
    if (!ports.includes(port)) return { ok: false, status: 403, reason: `port ${port} is not allowed for ${method} (allowed: ${ports.join(', ')})` };
    let addresses: string[];
    try {
      addresses = await this.resolve(host);
    } catch (err) {
      return { ok: false, status: 502, reason: `${host} could not be resolved (${(err as Error).message})` };
    }
    if (addresses.length === 0) return { ok: false, status: 502, reason: `${host} has no addresses` };
    const bad = addresses.find((a) => this.forbidden(a));
    if (bad) return { ok: false, status: 403, reason: `${host} resolves to ${bad}, a loopback, private, link-local or metadata address` };
    return { ok: true, address: addresses[0]! };
  }

  private record(host: string, port: number, method: string, d: Decision): void {
    this.o.onAttempt?.({ host, port, method, decision: d.ok ? 'allow' : 'deny', reason: d.ok ? `allowed; connecting to ${d.address}` : d.reason });
  }

  private async onConnect(req: IncomingMessage, client: Duplex, head: Buffer): Promise<void> {
    this.sockets.add(client);
    client.on('close', () => this.sockets.delete(client));
    client.on('error', () => client.destroy());
    const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '');
    const host = m?.[1] ?? req.url ?? '';
    const port = m ? Number(m[2]) : 0;
    const d: Decision = m ? await this.decide(host, port, 'CONNECT') : { ok: false, status: 400, reason: 'CONNECT target must be host:port' };
    this.record(host, port, 'CONNECT', d);
    if (!d.ok) {
      client.end(`HTTP/1.1 ${d.status} Forbidden\r\nContent-Type: text/plain\r\nX-Corral-Egress: denied\r\nConnection: close\r\n\r\ncorral egress denied: ${d.reason}\n`);
      return;
    }
    const upstream = connect({ host: d.address, port, timeout: this.o.connectTimeoutMs ?? 10_000 });
    this.sockets.add(upstream);
    upstream.on('close', () => this.sockets.delete(upstream));
    upstream.once('timeout', () => upstream.destroy(new Error('connect timeout')));
    upstream.once('connect', () => {
      upstream.setTimeout(0);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    upstream.on('error', (err) => {
      if (!client.destroyed) client.end(`HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\ncorral egress: ${host}:${port} unreachable (${err.message})\n`);
    });
    client.on('close', () => upstream.destroy());
  }

  private async onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL | undefined;
    try {
      url = /^http:\/\//i.test(req.url ?? '') ? new URL(req.url!) : undefined;
    } catch {
      url = undefined;
    }
    const method = req.method ?? 'GET';
    // Take the host as the client wrote it: WHATWG URL would already canonicalise 2130706433.
    const rawHost = /^http:\/\/(?:[^@/]*@)?(\[[^\]]*\]|[^:/?#]*)/i.exec(req.url ?? '')?.[1] ?? '';
    const port = url ? Number(url.port || 80) : 0;
    const d: Decision = url ? await this.decide(rawHost, port, method) : { ok: false, status: 400, reason: 'only absolute http:// URLs (or CONNECT for https) go through this proxy' };
    this.record(rawHost, port, method, d);
    if (!d.ok || !url) {
      const reason = d.ok ? 'bad request' : d.reason;
      res.writeHead(d.ok ? 400 : d.status, { 'content-type': 'text/plain', 'x-corral-egress': 'denied', connection: 'close' });
      res.end(`corral egress denied: ${reason}\n`);
      return;
    }
    const headers = { ...req.headers };
    for (const h of HOP_BY_HOP) delete headers[h];
    headers.host = url.host;
    const up = httpRequest({ host: d.address, port, method, path: `${url.pathname}${url.search}`, headers, timeout: this.o.connectTimeoutMs ?? 10_000 });
    up.on('response', (r) => {
      const out = { ...r.headers };
      for (const h of HOP_BY_HOP) delete out[h];
      res.writeHead(r.statusCode ?? 502, out);
      r.pipe(res);
    });
    up.on('timeout', () => up.destroy(new Error('timeout')));
    up.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`corral egress: ${url!.host} unreachable (${err.message})\n`);
    });
    req.pipe(up);
  }
}
