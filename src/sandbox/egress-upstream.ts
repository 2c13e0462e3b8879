/**
 * Chaining through the operator's upstream proxy (CORRAL_EGRESS_UPSTREAM_PROXY): a CONNECT tunnel
 * for HTTPS (Node's HTTP client writes the request and parses the answer), and the request options
 * for plain HTTP in absolute form. Proxy-Authorization is added here and only here; the sandbox's own
 * proxy headers never reach the upstream (the proxy drops them as hop-by-hop).
 */
import { request as httpRequest, type ClientRequest, type RequestOptions } from 'node:http';
import type { Socket } from 'node:net';
import type { UpstreamProxy } from '../domain/egress-site';

/** The upstream answered the CONNECT with something other than 200, or could not be reached. */
export class UpstreamError extends Error {
  constructor(readonly code: 'upstream_refused' | 'upstream_unreachable', message: string, readonly status: number | null = null) {
    super(message);
  }
}

/**
 * Opens a tunnel to host:port through the upstream. `onSocket` sees the socket as soon as it exists
 * (the proxy counts and tracks it from then on). Resolves with the tunnel and any bytes the upstream
 * sent after its answer.
 */
export function tunnelViaUpstream(up: UpstreamProxy, shown: string, host: string, port: number, timeoutMs: number, onSocket: (s: Socket) => void): { done: Promise<{ socket: Socket; head: Buffer }>; cancel: () => void } {
  const authority = `${host}:${port}`;
  const headers: Record<string, string> = { host: authority };
  if (up.authorization) headers['proxy-authorization'] = up.authorization;
  let req: ClientRequest;
  const done = new Promise<{ socket: Socket; head: Buffer }>((resolve, reject) => {
    req = httpRequest({ host: up.host, port: up.port, method: 'CONNECT', path: authority, headers, agent: false, setHost: false, timeout: timeoutMs, maxHeaderSize: 16 * 1024 });
    req.on('socket', (s) => onSocket(s));
    req.once('connect', (res, socket, head) => {
      res.resume();
      if (res.statusCode === 200) {
        socket.setTimeout(0);
        resolve({ socket, head });
        return;
      }
      socket.destroy();
      const status = res.statusCode ?? 0;
      const hint = status === 407 ? ' (check the credentials in CORRAL_EGRESS_UPSTREAM_PROXY)' : '';
      reject(new UpstreamError('upstream_refused', `the upstream proxy ${shown} refused CONNECT ${authority}: ${status} ${(res.statusMessage ?? '').slice(0, 80)}${hint}`, status));
    });
    req.once('response', (res) => {
      // An answer to CONNECT that is not a CONNECT answer (a broken upstream).
      res.resume();
      req.destroy();
      reject(new UpstreamError('upstream_refused', `the upstream proxy ${shown} answered CONNECT ${authority} with ${res.statusCode ?? '?'}`, res.statusCode ?? null));
    });
    req.once('timeout', () => req.destroy(new Error('timed out')));
    req.once('error', (err) => reject(new UpstreamError('upstream_unreachable', `the upstream proxy ${shown} could not be reached for ${authority}: ${err.message.slice(0, 200)}`)));
    req.end();
  });
  return { done, cancel: () => req.destroy() };
}

/** http.request options that send a plain-HTTP request through the upstream (absolute form). */
export function upstreamRequestOptions(up: UpstreamProxy, t: { host: string; port: number; path: string; method: string; headers: string[]; timeoutMs: number }): RequestOptions {
  const authority = t.port === 80 ? t.host : `${t.host}:${t.port}`;
  const headers = [...t.headers];
  if (up.authorization) headers.push('Proxy-Authorization', up.authorization);
  return { host: up.host, port: up.port, method: t.method, path: `http://${authority}${t.path}`, headers, agent: false, setHost: false, timeout: t.timeoutMs };
}
