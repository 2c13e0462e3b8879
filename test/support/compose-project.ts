/**
 * A compose.yaml deployment for a test: a project of its own (-p) on a free loopback port, with its
 * own data and egress dirs, workers replaying the bundled transcript (no model needed), a token of
 * tenant `ci` (an operator tenant), and only the test's settings (no CORRAL_*, OPENAI_* or COMPOSE_*
 * from the caller's shell but the image names). Extra compose files and variables come from the test
 * (the object-store test adds an S3 server). down() removes the project with its volumes and dirs.
 * The images come from .ci/bootstrap; images/service-image.sh rebuilds the service image only when its
 * inputs changed (CORRAL_IMAGE / CORRAL_RUNTIME_IMAGE pick a helper's own tags).
 */
import { eventually } from './eventually';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

export const exec = promisify(execFile);
export const ROOT = resolve(__dirname, '../..');

export interface ComposeProject {
  name: string;
  base: string;
  token: string;
  dataDir: string;
  env: NodeJS.ProcessEnv;
  compose(...args: string[]): Promise<{ stdout: string; stderr: string }>;
  logs(): Promise<string>;
  api<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T; text: string }>;
  /** Polls `probe` until it gives a value; fails with the project's logs after `ms`. */
  until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T>;
  /** `docker inspect`'s health status of each container of a service. */
  healthOf(service: string): Promise<string[]>;
  down(): Promise<string>;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok, fail) => srv.once('error', fail).listen(0, '127.0.0.1', ok));
  const { port } = srv.address() as { port: number };
  await new Promise((ok) => srv.close(ok));
  return port;
}

export async function startComposeProject(o: { prefix: string; variant?: string; files?: string[]; env?: Record<string, string> }): Promise<ComposeProject> {
  await exec('docker-compose', ['version', '--short']).catch(() => {
    throw new Error('docker-compose is not installed: apt-get install docker-compose (.ci/bootstrap installs it)');
  });
  await exec(join(ROOT, 'images/service-image.sh'), [], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  for (const image of [process.env.CORRAL_REDIS_IMAGE ?? 'corral/redis:7', process.env.CORRAL_SANDBOX_IMAGE ?? 'corral/sandbox:latest']) {
    await exec('docker', ['image', 'inspect', image]).catch(() => {
      throw new Error(`image ${image} is missing: run .ci/bootstrap`);
    });
  }
  // Within a CI run the project name carries the run's CORRAL_INSTANCE, which .ci/run's clean-up looks for.
  const instance = (process.env.CORRAL_INSTANCE ?? '').toLowerCase().replace(/[^a-z0-9_-]/g, '');
  const name = `${o.prefix}-${instance ? `${instance}-` : ''}${o.variant ? `${o.variant}-` : ''}${randomBytes(3).toString('hex')}`;
  const token = randomBytes(16).toString('hex');
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-compose-data-'));
  const egressDir = mkdtempSync(join(tmpdir(), 'corral-compose-egress-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env: NodeJS.ProcessEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(CORRAL_|OPENAI_|COMPOSE_|AWS_)/.test(k)));
  for (const k of ['CORRAL_IMAGE', 'CORRAL_REDIS_IMAGE', 'CORRAL_SANDBOX_IMAGE', 'CORRAL_INSTANCE']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, {
    CORRAL_API_PORT: String(port), CORRAL_DATA_DIR: dataDir, CORRAL_EGRESS_DIR: egressDir, CORRAL_WORKERS: '2',
    CORRAL_REPLAY: '/app/examples/fix-median.replay.json', CORRAL_API_TOKENS: `ci=${token}`, CORRAL_OPERATOR_TENANTS: 'ci',
    // A queue of its own: reapers only sweep their own deployment's sandboxes (label corral.queue).
    CORRAL_QUEUE: name,
    ...o.env,
  });
  const files = ['-f', join(ROOT, 'compose.yaml'), ...(o.files ?? []).flatMap((f) => ['-f', f])];
  const compose = (...args: string[]) => exec('docker-compose', ['-p', name, ...files, ...args], { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 });
  const logs = async () => (await compose('logs', '--no-color', '--tail', '40').catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }))).stdout;
  const api: ComposeProject['api'] = async (method, path, body) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // report.md and other text bodies
    }
    return { status: res.status, body: parsed as never, text };
  };
  const until: ComposeProject['until'] = async (what, ms, probe) => {
    try {
      return (await eventually(() => probe().catch(() => undefined), { what, until: (v) => v !== undefined, timeoutMs: ms, intervalMs: 500 })) as never;
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${await logs()}`, { cause: err });
    }
  };
  const healthOf = async (service: string) => {
    const ids = (await compose('ps', '-q', service)).stdout.trim().split('\n').filter(Boolean);
    if (!ids.length) return [];
    const { stdout } = await exec('docker', ['inspect', '-f', '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}', ...ids]);
    return stdout.trim().split('\n');
  };
  const p: ComposeProject = {
    name, base, token, dataDir, env, compose, logs, api, until, healthOf,
    async down() {
      await compose('down', '-v', '--remove-orphans', '-t', '20');
      const { stdout } = await exec('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${name}`]);
      for (const d of [dataDir, egressDir]) rmSync(d, { recursive: true, force: true });
      return stdout.trim();
    },
  };
  try {
    await compose('up', '-d', '--no-build').catch(async (err: Error) => {
      throw new Error(`docker-compose up failed: ${err.message}\n${await logs()}`);
    });
    // A bound, not a wait: on a loaded host the API's first answer has taken over 2 minutes.
    await until('GET /readyz answers 200', 240_000, async () => ((await api('GET', '/readyz')).status === 200 ? true : undefined));
  } catch (err) {
    // A project that never came up is taken down here: the test has no handle to do it.
    await p.down().catch(() => undefined);
    throw err;
  }
  return p;
}
