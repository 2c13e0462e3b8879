/**
 * Starts a whole corral (API + worker, as `corral serve` does) against the real Docker engine, the
 * test Redis and a scripted OpenAI-compatible server: its own queue name, data dir and worker id.
 * The worker reaches the engine only through a docker gate of its own (DOCKER_HOST at the gate's
 * socket, as compose.yaml deploys it), so every run these suites make proves the gate's subset is
 * enough: a request the gate refused fails close() with the refusals. A suite that sets DOCKER_HOST
 * itself (an engine that is away) gets no gate; `docker` is the engine itself, for the tests' checks.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { loadConfig, type Config } from '../../src/config';
import { engineSocketPath, policyFromConfig, startGate, type DockerGate } from '../../src/docker-gate';
import { startCorral, type CorralExtras, type StartedCorral } from '../../src/main';
import { apiRequest } from './api-request';
import { startFakeDecisionsServer, type FakeServer, type Handler } from './fake-decisions-server';
import { sandboxTestEnv } from './sandbox-env';
import { eventually } from './eventually';

export interface Harness {
  url: string;
  config: Config;
  corral: StartedCorral;
  fake: FakeServer;
  docker: Docker;
  logs: Array<{ msg: string; fields?: Record<string, unknown> }>;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }>;
  /** Polls GET /v1/runs/:id until it has finishedAt (or `until` holds). */
  waitFor(id: string, until?: (run: Record<string, unknown>) => boolean, timeoutMs?: number): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startHarness(name: string, handlers: { chat: Handler; decisions?: Handler }, env: Record<string, string> = {}, extras: CorralExtras = {}): Promise<Harness> {
  if (!process.env.REDIS_URL && !env.REDIS_URL) throw new Error('REDIS_URL is not set: the integration global setup did not run');
  const fake = await startFakeDecisionsServer(handlers);
  const suffix = `${name}-${process.pid}-${Date.now().toString(36)}`;
  const base = loadConfig({
    REDIS_URL: process.env.REDIS_URL,
    CORRAL_QUEUE: `test-${suffix}`,
    CORRAL_DATA_DIR: mkdtempSync(join(tmpdir(), 'corral-data-')),
    CORRAL_API_PORT: '0',
    CORRAL_WORKER_ID: `test-${suffix}`,
    CORRAL_POLICY_DIR: resolve(__dirname, '../../policies'),
    OPENAI_API_KEY: 'test-key',
    OPENAI_BASE_URL: fake.baseURL,
    CORRAL_MODEL: 'fake-agent',
    CORRAL_CLASSIFIER: handlers.decisions ? 'true' : 'false',
    CORRAL_REAP_INTERVAL_S: '3600',
    ...sandboxTestEnv(),
    ...env,
  });
  const logs: Harness['logs'] = [];
  const refusals: unknown[] = [];
  let gate: DockerGate | undefined;
  let gateDir: string | undefined;
  let config = base;
  if (!env.DOCKER_HOST) {
    gateDir = mkdtempSync(join(tmpdir(), 'corral-gate-'));
    chmodSync(gateDir, 0o755);
    const listen = join(gateDir, 'gate.sock');
    gate = await startGate({
      policy: policyFromConfig(base), listen, engineSocket: engineSocketPath(process.env.DOCKER_HOST),
      log: (msg, fields) => {
        logs.push({ msg, ...(fields ? { fields } : {}) });
        if (msg === 'docker-gate refused') refusals.push(fields);
      },
    });
    config = { ...base, DOCKER_HOST: `unix://${listen}` };
  }
  const corral = await startCorral(config, { api: true, worker: true }, (msg, fields) => logs.push({ msg, fields }), extras);
  const url = corral.url!;
  const api: Harness['api'] = (method, path, body) => apiRequest(url, method, path, body);
  const waitFor: Harness['waitFor'] = async (id, until = (r) => !!r.finishedAt, timeoutMs = 60_000) =>
    eventually(async () => (await api('GET', `/v1/runs/${id}`)).body, { what: `run ${id} in the expected state`, until, timeoutMs });
  return {
    url, config, corral, fake, docker: new Docker(), logs, api, waitFor,
    async close() {
      await corral.close();
      await fake.close();
      await gate?.close();
      if (gateDir) rmSync(gateDir, { recursive: true, force: true });
      if (refusals.length) throw new Error(`the docker gate refused what the worker asked for: ${JSON.stringify(refusals).slice(0, 2000)}`);
    },
  };
}
