/**
 * The web console (issue 18): three static files served by the API at /ui — no build step, no dev
 * server, no third-party origin. The page talks to the same tenant-scoped API with the token the user
 * typed (kept in sessionStorage). Every answer carries a strict Content-Security-Policy: scripts and
 * styles from this origin only (no inline script, no eval), connections to this origin only, no
 * frames, no forms posting elsewhere — so text that slipped through as markup still could not run.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { RouteDoc } from '../api/openapi';
import { route } from '../api/openapi';

export const CONSOLE_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const ASSETS = join(__dirname, 'assets');
const FILES = [
  { url: '/ui', file: 'index.html', type: 'text/html; charset=utf-8', summary: 'The web console (sign in with a tenant token)' },
  { url: '/ui/console.js', file: 'console.js', type: 'text/javascript; charset=utf-8', summary: 'The console\'s script' },
  { url: '/ui/console.css', file: 'console.css', type: 'text/css; charset=utf-8', summary: 'The console\'s style sheet' },
  { url: '/ui/icon.svg', file: 'icon.svg', type: 'image/svg+xml', summary: 'The console\'s icon' },
] as const;

function secure(reply: FastifyReply, type: string): FastifyReply {
  return reply.type(type).headers({
    'content-security-policy': CONSOLE_CSP, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY', 'cross-origin-opener-policy': 'same-origin', 'cache-control': 'no-cache',
  });
}

export function registerConsoleRoutes(app: FastifyInstance, docs: RouteDoc[]): void {
  for (const f of FILES) {
    const body = readFileSync(join(ASSETS, f.file));
    route(app, docs, {
      method: 'GET', url: f.url, tag: 'operations', public: true, redis: false, summary: f.summary,
      responses: { 200: { description: f.file, contentType: f.type } },
    }, async (_req, reply) => secure(reply, f.type).send(body));
  }
}
