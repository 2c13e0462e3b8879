/**
 * A corral deployment for load tests and the benchmark: optionally an API in this process
 * (startCorral with the api role only), and workers as `bin/corral worker` child processes, all on
 * one queue, one data dir and one Redis, reaching the engine through a `corral docker-gate` process. Each worker has its own CORRAL_WORKER_ID and concurrency;
 * startWorker resolves once the worker logged "started" (it is taking jobs). No assertions here:
 * the load test and bench/ both use it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { apiRequest } from './api-request';
import { startCorral, type StartedCorral } from '../../src/main';
import { startGateProcess, type GateProcess } from './gate-process';

export const ROOT = resolve(__dirname, '../..');

export interface LoadStackOptions {
  redisUrl: string;
  /** The OpenAI-compatible base URL the workers' model calls go to (a fake server on loopback). */
  modelBaseURL: string;
  /** Prefix of the queue name; a timestamp and this pid are appended. */
  name: string;
  /** Start the REST API in this process (default true). */
  api?: boolean;
  /** More environment for the API and every worker. */
  env?: Record<string, string>;
}

export interface WorkerLogRecord {
  msg: string;
  [field: string]: unknown;
}

export interface LoadWorker {
  id: string;
  concurrency: number;
  child: ChildProcess;
  pid: number;
  /** Its stderr so far (one JSON record per line). */
  logText(): string;
  records(): WorkerLogRecord[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (drain), then SIGKILL after `killAfterMs`; resolves with how it exited. */
  stop(killAfterMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface LoadStack {
  env: Record<string, string>;
  queue: string;
  dataDir: string;
  api?: StartedCorral;
  url?: string;
  workers: LoadWorker[];
  /** The docker gate the workers reach the engine through (none when `env` sets DOCKER_HOST). */
  gate?: GateProcess;
  startWorker(id: string, concurrency: number, env?: Record<string, string>): Promise<LoadWorker>;
  /** A JSON request to the in-process API. */
  request<T = Record<string, unknown>>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: T }>;
  /** Stops every worker (SIGTERM, then SIGKILL) and the API, and removes the data dir (unless CORRAL_KEEP_LOAD_DATA is set). */
  close(): Promise<void>;
}

export async function startLoadStack(o: LoadStackOptions): Promise<LoadStack> {
  const queue = `${o.name}-${process.pid}-${Date.now().toString(36)}`;
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-load-'));
  const env: Record<string, string> = {
    REDIS_URL: o.redisUrl, CORRAL_QUEUE: queue, CORRAL_DATA_DIR: dataDir, CORRAL_POLICY_DIR: join(ROOT, 'policies'),
    OPENAI_API_KEY: 'load-test', OPENAI_BASE_URL: o.modelBaseURL, CORRAL_MODEL: 'fake-agent', CORRAL_CLASSIFIER: 'false',
    CORRAL_API_HOST: '127.0.0.1', CORRAL_API_PORT: '0',
    ...o.env,
  };
  // The workers reach the engine through a docker gate process, as compose.yaml deploys them.
  const gate = o.env?.DOCKER_HOST ? undefined : await startGateProcess(env);
  if (gate) env.DOCKER_HOST = gate.dockerHost;
  const api = o.api === false ? undefined : await startCorral(loadConfig(env), { api: true, worker: false }, () => undefined);
  const workers: LoadWorker[] = [];

  const startWorker: LoadStack['startWorker'] = (id, concurrency, extra = {}) => new Promise((resolveStarted, reject) => {
    const child = spawn(join(ROOT, 'bin/corral'), ['worker'], {
      env: { ...process.env, ...env, ...extra, CORRAL_WORKER_ID: id, CORRAL_CONCURRENCY: String(concurrency) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let text = '';
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.once('exit', (code, signal) => res({ code, signal })));
    const w: LoadWorker = {
      id, concurrency, child, pid: child.pid ?? -1, exited,
      logText: () => text,
      records: () => text.split('\n').filter((l) => l.startsWith('{')).map((l) => {
        try {
          return JSON.parse(l) as WorkerLogRecord;
        } catch {
          return { msg: l };
        }
      }),
      async stop(killAfterMs = 20_000) {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
          try {
            return await exited;
          } finally {
            clearTimeout(t);
          }
        }
        return exited;
      },
    };
    workers.push(w);
    // A hang bound, not a speed check: a worker (tsx compiling src) on a busy 2-core host can take a minute.
    const timer = setTimeout(() => reject(new Error(`worker ${id} did not start in 180 s:\n${text.slice(-2000)}`)), 180_000);
    let started = false;
    child.stderr!.on('data', (d: Buffer) => {
      text += d.toString();
      if (!started && text.includes('"msg":"started"')) {
        started = true;
        clearTimeout(timer);
        resolveStarted(w);
      }
    });
    void exited.then(({ code, signal }) => {
      if (started) return;
      clearTimeout(timer);
      reject(new Error(`worker ${id} exited (${code ?? signal}) before it started:\n${text.slice(-2000)}`));
    });
  });

  const url = api?.url;
  return {
    env, queue, dataDir, api, url, workers, startWorker, ...(gate ? { gate } : {}),
    async request(method, path, body, headers = {}) {
      if (!url) throw new Error('this load stack has no API');
      return apiRequest<never>(url, method, path, body, headers);
    },
    async close() {
      await Promise.all(workers.map((w) => w.stop()));
      await api?.close();
      await gate?.close();
      if (!process.env.CORRAL_KEEP_LOAD_DATA) rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
