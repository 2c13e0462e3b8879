/**
 * The REST API alone (buildApp, no worker) over the real test Redis, for app.inject() tests: its own
 * store prefix and queue name (so counts, lists and limits see only this fixture's runs), tenants from
 * a token list, a clock the test moves, and a data dir the test can write run files into.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { TenantAuth } from '../../src/api/auth';
import { buildApp, type ApiDeps } from '../../src/api/build-app';
import { loadConfig, type Config } from '../../src/config';
import { IdempotencyStore } from '../../src/queue/idempotency';
import { newRunId } from '../../src/queue/run-queue';
import { RunMetrics } from '../../src/queue/run-metrics';
import { RedisConnections } from '../../src/queue/redis-connections';
import { RedisRunStore } from '../../src/queue/redis-run-store';
import { TenantQuota } from '../../src/queue/tenant-quota';
import { HeldSlots } from '../../src/queue/held-slots';
import { sandboxTestEnv } from './sandbox-env';

export const TOKENS = { acme: 'acme-token-0123456789', globex: 'globex-token-0123456789' } as const;

export interface ApiFixture {
  app: ReturnType<typeof buildApp>;
  config: Config;
  redis: Redis;
  store: RedisRunStore;
  queue: Queue;
  metrics: RunMetrics;
  prefix: string;
  /** The fixture's clock (ms); tests move it. */
  clock: { now: number };
  call(method: string, url: string, o?: { token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; headers: Record<string, unknown>; body: unknown; json: <T = Record<string, unknown>>() => T }>;
  close(): Promise<void>;
}

export interface Injected {
  status: number;
  headers: Record<string, unknown>;
  /** The body parsed as JSON, or its text when it is not JSON. */
  body: unknown;
  text: string;
  json: <T = Record<string, unknown>>() => T;
}

/**
 * One request through app.inject(): a bearer token (TOKENS.acme unless `token` says otherwise; null:
 * none), a JSON body (a string is sent as it is), the answer with its body parsed when it is JSON.
 */
export async function injectJson(app: { inject: ReturnType<typeof buildApp>['inject'] }, method: string, url: string, c: { token?: string | null; body?: unknown; headers?: Record<string, string> } = {}): Promise<Injected> {
  const token = c.token === undefined ? TOKENS.acme : c.token;
  const res = await app.inject({
    method: method as 'GET',
    url,
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(c.body !== undefined && typeof c.body !== 'string' && !Buffer.isBuffer(c.body) ? { 'content-type': 'application/json' } : {}), ...c.headers },
    ...(c.body !== undefined ? { payload: typeof c.body === 'string' || Buffer.isBuffer(c.body) ? c.body : JSON.stringify(c.body) } : {}),
  });
  let body: unknown = res.body;
  try {
    body = JSON.parse(res.body);
  } catch {
    /* not JSON */
  }
  return { status: res.statusCode, headers: res.headers, body, text: res.body, json: <T>() => body as T };
}

export async function startApiFixture(o: { env?: Record<string, string>; tokens?: string | null; deps?: Partial<ApiDeps>; depsOf?: (f: { redis: Redis; prefix: string; config: Config }) => Partial<ApiDeps> } = {}): Promise<ApiFixture> {
  if (!process.env.REDIS_URL) throw new Error('REDIS_URL is not set: the integration global setup did not run');
  const suffix = `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 6)}`;
  const prefix = `apitest-${suffix}`;
  const config = loadConfig({
    REDIS_URL: process.env.REDIS_URL,
    CORRAL_QUEUE: `api-${suffix}`,
    CORRAL_DATA_DIR: mkdtempSync(join(tmpdir(), 'corral-api-')),
    CORRAL_POLICY_DIR: resolve(__dirname, '../../policies'),
    ...sandboxTestEnv(),
    ...o.env,
  });
  // The same factory main.ts builds every connection with (a Sentinel REDIS_URL works here too).
  const redis = new RedisConnections(config.REDIS_URL).open('commands', 'test-api');
  const queueConn = redis.duplicate();
  const queue = new Queue(config.CORRAL_QUEUE, { connection: queueConn });
  const store = new RedisRunStore(redis, prefix);
  const metrics = new RunMetrics(redis, prefix);
  const clock = { now: Date.now() };
  const tokens = o.tokens === undefined ? `acme=${TOKENS.acme},globex=${TOKENS.globex}` : o.tokens;
  const app = buildApp({
    config, store, queue, metrics, newRunId, clock: () => clock.now, policyNames: ['default'],
    quota: new TenantQuota(redis, queue, prefix), held: new HeldSlots(redis, prefix), idempotency: new IdempotencyStore(redis, prefix),
    auth: tokens ? TenantAuth.fromSources({ tokens }) : TenantAuth.off(),
    ...o.deps,
    ...o.depsOf?.({ redis, prefix, config }),
  });
  await app.ready();
  const call: ApiFixture['call'] = (method, url, c = {}) => injectJson(app, method, url, c);
  return {
    app, config, redis, store, queue, metrics, prefix, clock, call,
    async close() {
      await store.closeLive();
      await app.close();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      const keys = await redis.keys(`${prefix}:*`);
      if (keys.length) await redis.del(...keys);
      await queueConn.quit();
      await redis.quit();
    },
  };
}
