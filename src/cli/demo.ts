/**
 * `corral demo`: the README's main job. Uses the Redis at REDIS_URL when one answers, else starts a
 * throw-away Redis container (corral/redis:7, made by .ci/bootstrap); starts `corral serve` (API +
 * worker) as a child process; submits examples/fix-median.task.json through the REST API; prints the
 * run's progress, then the report's path and the final answer; stops what it started.
 * With OPENAI_API_KEY (and optional OPENAI_BASE_URL, CORRAL_MODEL) the run uses that model; without
 * one it replays examples/fix-median.replay.json and says so — the sandbox, the policy gate, the
 * logs and the report are real either way.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { childEnvironment, loadConfig } from '../config';
import { redactRedisUrl } from '../domain/redis-url';
import { RedisConnections } from '../queue/redis-connections';
import { ApiClient } from './api-client';
import { UsageError } from './cli-args';
import { submitAndFollow } from './submit-and-follow';

const run$ = promisify(execFile);
const ROOT = resolve(__dirname, '../..');
const TASK = join(ROOT, 'examples/fix-median.task.json');
const REPLAY = join(ROOT, 'examples/fix-median.replay.json');

const say = (line: string) => process.stdout.write(`${line}\n`);

async function redisAnswers(url: string): Promise<boolean> {
  let r;
  try {
    const conns = new RedisConnections(url);
    r = conns.open('api', 'demo-probe', { lazy: true });
    r.on('error', () => undefined);
    await conns.connect(r, 2000);
    return true;
  } catch {
    return false;
  } finally {
    r?.disconnect();
  }
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** Starts a Redis container on a loopback port; returns its URL and a stopper. */
async function startRedisContainer(): Promise<{ url: string; stop: () => Promise<void> }> {
  const image = 'corral/redis:7';
  let id: string;
  try {
    id = (await run$('docker', ['run', '-d', '--rm', '--label', 'corral.demo=redis', '-p', '127.0.0.1::6379', image])).stdout.trim();
  } catch (err) {
    throw new Error(`no Redis at REDIS_URL and could not start the ${image} container (run .ci/bootstrap first): ${(err as { stderr?: string }).stderr?.trim() || (err as Error).message}`, { cause: err });
  }
  const stop = async () => {
    await run$('docker', ['rm', '-f', id]).catch(() => undefined);
  };
  const port = (await run$('docker', ['port', id, '6379/tcp'])).stdout.trim().split('\n')[0]!.split(':').pop();
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 100 && !(await redisAnswers(url)); i++) await new Promise((r) => setTimeout(r, 100));
  if (!(await redisAnswers(url))) {
    await stop();
    throw new Error(`the Redis container ${id.slice(0, 12)} did not answer at ${url}`);
  }
  return { url, stop };
}

async function waitHealthy(client: ApiClient, child: ChildProcess, logPath: string): Promise<void> {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    if (child.exitCode !== null) throw new Error(`corral serve exited with code ${child.exitCode}; see ${logPath}:\n${tail(logPath)}`);
    try {
      await client.health();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  throw new Error(`corral serve did not answer within 60 s; see ${logPath}`);
}

function tail(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim().split('\n').slice(-15).join('\n');
  } catch {
    return '(no log)';
  }
}

export async function run(argv: string[]): Promise<number> {
  if (argv.length) throw new UsageError(`unexpected argument "${argv[0]}" (configure the demo with OPENAI_API_KEY, OPENAI_BASE_URL, CORRAL_MODEL, REDIS_URL)`);
  const config = loadConfig();
  const replay = !config.OPENAI_API_KEY && !config.OPENAI_BASE_URL;
  const cleanups: Array<() => Promise<void>> = [];
  try {
    let redisUrl = config.REDIS_URL;
    if (await redisAnswers(redisUrl)) {
      say(`using Redis at ${redactRedisUrl(redisUrl)}`);
    } else {
      const r = await startRedisContainer();
      cleanups.push(r.stop);
      redisUrl = r.url;
      say(`no Redis at ${redactRedisUrl(config.REDIS_URL)}; started a corral/redis:7 container at ${redisUrl} (removed at the end)`);
    }

    const port = await freePort();
    const dataDir = resolve(config.CORRAL_DATA_DIR);
    mkdirSync(dataDir, { recursive: true });
    const logPath = join(dataDir, 'demo-serve.log');
    const env = childEnvironment({
      REDIS_URL: redisUrl, CORRAL_API_HOST: '127.0.0.1', CORRAL_API_PORT: String(port), CORRAL_DATA_DIR: dataDir,
      ...(replay ? { CORRAL_REPLAY: REPLAY } : {}),
    });
    const log = createWriteStream(logPath);
    const child = spawn(process.execPath, [...process.execArgv, join(ROOT, 'src/cli/index.ts'), 'serve'], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    cleanups.push(async () => {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
    });
    const client = new ApiClient(`http://127.0.0.1:${port}`);
    say(`starting corral serve (API + worker) on ${client.baseUrl}; its log: ${logPath}`);
    await waitHealthy(client, child, logPath);
    say(replay
      ? `model: REPLAY of ${REPLAY} — no OPENAI_API_KEY is set, so no model is called; the sandbox, policy gate, logs and report are real`
      : `model: ${config.CORRAL_MODEL} at ${config.OPENAI_BASE_URL ?? 'https://api.openai.com/v1'}`);
    say('');

    const spec = JSON.parse(readFileSync(TASK, 'utf8')) as unknown;
    const result = await submitAndFollow(client, spec, process.stdout);
    if (replay) say(`\n(this was a replay of a recorded transcript; set OPENAI_API_KEY to run the task with a real model)`);
    return result.status === 'succeeded' ? 0 : 1;
  } finally {
    for (const c of cleanups.reverse()) await c();
  }
}
