/**
 * A corral deployment as operators run it, for the attack suites of issue 38: real processes from
 * bin/corral — `corral serve` (the supervisor with its API and worker children) or `corral api` and
 * `corral worker` side by side — on the test Redis and the real Docker engine, with a scripted model
 * (load-agent.ts; a task with HOLD-RUN gets an answer only after 15 minutes: a run that stays
 * running). Tenants `victim`, `attacker` and `ops` (an operator, for /metrics). Knows the processes'
 * pids (for RSS), kills and brings back the API, and removes everything it made.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeDecisionsServer, promptText, type FakeServer, type Scripted } from './fake-decisions-server';
import { finalTurn } from './fake-openai-chat';
import { loadAgent } from './load-agent';
import { ROOT } from './load-stack';
import { sandboxTestEnv } from './sandbox-env';

export type DeploymentKind = 'serve' | 'split';

export const TENANT_TOKENS = { victim: 'victim-token-0123456789', attacker: 'attacker-token-0123456789', ops: 'ops-token-0123456789' } as const;

export interface Deployment {
  kind: DeploymentKind;
  url: string;
  port: number;
  dataDir: string;
  queue: string;
  /** The processes now (the API's pid changes when it is brought back). */
  pids(): { api: number; worker: number; supervisor?: number };
  /** SIGKILLs the API process; resolves once an API answers again (the supervisor's, or one started by hand). */
  killApi(): Promise<void>;
  stderr(): string;
  close(): Promise<void>;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

/** The scripted model every deployment of the suite talks to. */
export async function startSuiteModel(): Promise<FakeServer> {
  const agent = loadAgent();
  return startFakeDecisionsServer({
    chat: (body): Scripted => (promptText(body).includes('HOLD-RUN') ? { ...finalTurn('held'), delayMs: 900_000 } : agent(body)),
  });
}

export async function startDeployment(kind: DeploymentKind, o: { redisUrl: string; model: FakeServer; env?: Record<string, string>; authOff?: boolean }): Promise<Deployment> {
  const dataDir = mkdtempSync(join(tmpdir(), `corral-${kind}-`));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const queue = `tenants-${kind}-${process.pid}-${Date.now().toString(36)}`;
  const env: Record<string, string> = {
    ...(process.env as Record<string, string>), ...sandboxTestEnv(),
    REDIS_URL: o.redisUrl, CORRAL_QUEUE: queue, CORRAL_DATA_DIR: dataDir, CORRAL_API_HOST: '127.0.0.1', CORRAL_API_PORT: String(port),
    CORRAL_CONCURRENCY: '3', CORRAL_POLICY_DIR: join(ROOT, 'policies'), OPENAI_API_KEY: 'tenant-suite', OPENAI_BASE_URL: o.model.baseURL,
    CORRAL_MODEL: 'fake-agent', CORRAL_MODEL_STREAM: 'false', CORRAL_MODEL_TIMEOUT_MS: '1200000', CORRAL_CLASSIFIER: 'false', CORRAL_REAP_INTERVAL_S: '3600',
    CORRAL_WORKER_ID: `suite-${kind}-${process.pid}`, CORRAL_SHUTDOWN_GRACE_S: '2',
    ...(o.authOff ? {} : { CORRAL_API_TOKENS: Object.entries(TENANT_TOKENS).map(([t, k]) => `${t}=${k}`).join(','), CORRAL_OPERATOR_TENANTS: 'ops' }),
    ...o.env,
  };
  delete env.CORRAL_API_TOKENS_FILE;
  if (o.authOff) delete env.CORRAL_API_TOKENS;
  let log = '';
  const procs: ChildProcess[] = [];
  const launch = (role: 'serve' | 'api' | 'worker') => {
    const child = spawn(join(ROOT, 'bin/corral'), [role], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-400_000)));
    procs.push(child);
    return child;
  };
  const waitFor = async (what: string, pred: () => boolean, ms = 90_000) => {
    const end = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > end) throw new Error(`${what} did not happen in ${ms / 1000} s:\n${log.slice(-3000)}`);
      if (procs.some((p) => p.exitCode !== null && p.exitCode !== 0 && !killed.has(p))) throw new Error(`a corral process exited:\n${log.slice(-3000)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const killed = new Set<ChildProcess>();
  const lines = (msg: string, component: string) => log.split('\n').filter((l) => l.includes(`"component":"${component}"`) && l.includes(`"msg":"${msg}"`));
  const answers = async () => fetch(`${url}/healthz`).then((r) => r.ok, () => false);

  let api: ChildProcess | undefined;
  let worker: ChildProcess | undefined;
  let supervisor: ChildProcess | undefined;
  if (kind === 'serve') {
    supervisor = launch('serve');
    await waitFor('corral serve to start', () => lines('started', 'serve').length > 0);
  } else {
    worker = launch('worker');
    api = launch('api');
    await waitFor('corral api and corral worker to start', () => lines('started', 'api').length > 0 && lines('started', 'worker').length > 0);
  }
  const servePids = () => {
    const last = [...lines('started', 'serve'), ...log.split('\n').filter((l) => l.includes('"component":"serve"') && l.includes('runs again'))]
      .map((l) => JSON.parse(l) as { ts: string; pids: { api: number; worker: number } })
      .sort((a, b) => a.ts.localeCompare(b.ts)).at(-1)!;
    return last.pids;
  };
  return {
    kind, url, port, dataDir, queue,
    pids: () => (kind === 'serve' ? { ...servePids(), supervisor: supervisor!.pid! } : { api: api!.pid!, worker: worker!.pid! }),
    async killApi() {
      if (kind === 'serve') {
        const before = servePids().api;
        const again = log.split('runs again').length;
        process.kill(before, 'SIGKILL');
        await waitFor('the supervisor to start the API again', () => log.split('runs again').length > again);
      } else {
        killed.add(api!);
        api!.kill('SIGKILL');
        await new Promise((r) => (api!.exitCode !== null || api!.signalCode !== null ? r(null) : api!.once('exit', r)));
        const n = lines('started', 'api').length;
        api = launch('api');
        await waitFor('corral api to start again', () => lines('started', 'api').length > n);
      }
      const end = Date.now() + 30_000;
      while (!(await answers())) {
        if (Date.now() > end) throw new Error(`the API does not answer again:\n${log.slice(-2000)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    stderr: () => log,
    async close() {
      for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
      await Promise.all(procs.map((p) => new Promise((r) => {
        if (p.exitCode !== null || p.signalCode !== null) return r(null);
        const t = setTimeout(() => p.kill('SIGKILL'), 30_000);
        p.once('exit', () => {
          clearTimeout(t);
          r(null);
        });
      })));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
