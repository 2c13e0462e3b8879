/**
 * buildApp for unit tests, without Redis: the store, queue and Redis-backed helpers are stand-ins that
 * throw when touched, so a test shows that a request was answered (401, 400, 413, the OpenAPI page)
 * before anything reached Redis — and a test that does reach it fails loudly instead of hanging.
 * With `store` (a MemoryRunStore), the routes that only read and answer runs work too, still without Redis.
 */
import { resolve } from 'node:path';
import { TenantAuth } from '../../src/api/auth';
import { buildApp, type ApiDeps } from '../../src/api/build-app';
import { loadConfig } from '../../src/config';
import { MemoryHeldSlots } from './memory-held-slots';

export const OFFLINE_TOKENS = { acme: 'acme-token-0123456789', globex: 'globex-token-0123456789' } as const;

function untouchable<T>(name: string): T {
  return new Proxy({}, {
    get(_t, prop) {
      if (prop === 'then') return undefined;
      throw new Error(`unit test reached ${name}.${String(prop)}: this request should have been answered before Redis`);
    },
  }) as T;
}

/** What the app logged (every 5xx with its cause): a request that got past validation shows here as "unit test reached …". */
export type Logged = Array<{ msg: string; fields?: Record<string, unknown> }>;

export function offlineApp(o: { env?: Record<string, string>; tokens?: string | null; store?: ApiDeps['store']; uploads?: ApiDeps['uploads']; httpCounts?: ApiDeps['httpCounts']; held?: ApiDeps['held'] } = {}) {
  const logged: Logged = [];
  const config = loadConfig({ CORRAL_POLICY_DIR: resolve(__dirname, '../../policies'), ...o.env });
  const tokens = o.tokens === undefined ? `acme=${OFFLINE_TOKENS.acme},globex=${OFFLINE_TOKENS.globex}` : o.tokens;
  const deps: ApiDeps = {
    config,
    store: o.store ?? untouchable('store'),
    ...(o.uploads ? { uploads: o.uploads } : {}),
    ...(o.httpCounts ? { httpCounts: o.httpCounts } : {}),
    queue: untouchable('queue'),
    quota: untouchable('quota'),
    held: o.held ?? new MemoryHeldSlots(),
    idempotency: untouchable('idempotency'),
    metrics: untouchable('metrics'),
    newRunId: () => 'run_unit000001',
    clock: () => 0,
    policyNames: ['default'],
    auth: tokens ? TenantAuth.fromSources({ tokens }) : TenantAuth.off(),
    log: (msg, fields) => logged.push({ msg, ...(fields ? { fields } : {}) }),
  };
  return Object.assign(buildApp(deps), { logged });
}
