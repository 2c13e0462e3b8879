/**
 * What a web page the operator happens to visit can do to this API (issue 38, break 6):
 *   - DNS rebinding: a page on attacker.example whose name is re-pointed at 127.0.0.1 reaches this
 *     API as same-origin and reads what it answers. With auth off (or whenever
 *     CORRAL_API_ALLOWED_HOSTS is set) the Host header must name this API — localhost, 127.0.0.1,
 *     [::1], the address it listens on, or a configured name — else 421 (health checks exempt);
 *   - cross-site requests that change state (a form or a no-cors fetch POSTing to
 *     /v1/runs/ID/cancel): any method but GET/HEAD/OPTIONS is refused with 403 when the browser says
 *     the request comes from another origin (Sec-Fetch-Site other than same-origin or none), or —
 *     for a browser that does not send Sec-Fetch-Site, with auth off — when its Origin is not this
 *     API's. With auth on, a page cannot send the bearer token anyway; the Sec-Fetch-Site check
 *     still holds (it never depends on a proxy keeping the Host header).
 * The CLI and other programs send neither header and are unaffected; the console is same-origin.
 */
import type { FastifyInstance } from 'fastify';
import { HttpError } from './http-errors';

const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);
const LOOPBACK_NAMES = ['localhost', '127.0.0.1', '[::1]'];
const EXEMPT = new Set(['/healthz', '/readyz']);

/** The host name of a Host header value or URL authority (lower case, no port; IPv6 kept in brackets). */
export function hostName(authority: string): string {
  const a = authority.trim().toLowerCase();
  if (a.startsWith('[')) return a.slice(0, a.indexOf(']') + 1);
  const colon = a.lastIndexOf(':');
  return colon >= 0 ? a.slice(0, colon) : a;
}

/** True for an address or name that only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

export interface OriginGuardOptions {
  authOff: boolean;
  /** CORRAL_API_ALLOWED_HOSTS. */
  allowedHosts: readonly string[];
  /** CORRAL_API_HOST: a specific address it listens on is a name it answers to. */
  listenHost: string;
}

export function registerOriginGuard(app: FastifyInstance, o: OriginGuardOptions, log: (msg: string, fields?: Record<string, unknown>) => void = () => undefined): void {
  const checkHost = o.authOff || o.allowedHosts.length > 0;
  const listen = o.listenHost.includes(':') && !o.listenHost.startsWith('[') ? `[${o.listenHost.toLowerCase()}]` : o.listenHost.toLowerCase();
  const names = new Set([...LOOPBACK_NAMES, ...o.allowedHosts, ...(['0.0.0.0', '[::]', '::'].includes(listen) ? [] : [listen])]);
  const shown = [...names].join(', ');

  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0]!;
    const host = req.headers.host ?? '';
    if (checkHost && !EXEMPT.has(path) && !names.has(hostName(host))) {
      log('request for another host refused (421)', { level: 'warn', method: req.method, path: path.slice(0, 200), host: host.slice(0, 100) });
      throw new HttpError(421, 'misdirected_request', `this API answers to the host names ${shown} (CORRAL_API_ALLOWED_HOSTS adds more); the request named ${JSON.stringify(host.slice(0, 100))} — a page using DNS rebinding, or a name the operator has not configured`);
    }
    if (SAFE.has(req.method)) return;
    const site = req.headers['sec-fetch-site'];
    if (typeof site === 'string' && site !== 'same-origin' && site !== 'none') {
      log('cross-origin state change refused (403)', { level: 'warn', method: req.method, path: path.slice(0, 200), secFetchSite: site.slice(0, 20), origin: String(req.headers.origin ?? '').slice(0, 100) });
      throw new HttpError(403, 'cross_origin', `${req.method} from another origin (Sec-Fetch-Site: ${site.slice(0, 20)}) is refused: state changes come only from this API's own pages or from programs`);
    }
    const origin = req.headers.origin;
    if (o.authOff && site === undefined && origin !== undefined) {
      const same = origin !== 'null' && URL.canParse(origin) && new URL(origin).host.toLowerCase() === host.toLowerCase();
      if (!same) log('cross-origin state change refused (403)', { level: 'warn', method: req.method, path: path.slice(0, 200), origin: origin.slice(0, 100) });
      if (!same) throw new HttpError(403, 'cross_origin', `${req.method} from another origin (Origin: ${origin.slice(0, 100)}) is refused: state changes come only from this API's own pages or from programs`);
    }
  });
}
