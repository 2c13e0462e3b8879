/**
 * Beyond one host, on this one machine: two Docker engines stand for two hosts (the main engine and
 * a second dockerd in its own network namespace, test/support/second-engine.ts). Worker A uses engine
 * A, worker B engine B, each with its own data dir; the API has a third; the only things they share
 * are Redis and an S3-compatible object store on loopback (s3rver). Proved here:
 *  - tenant memory written by a run on A is read by the next run on B (it lives in Redis);
 *  - 20 runs spread over both workers: each run's report, log, patch and tar are served by the API
 *    (from the store), and no worker's data dir keeps anything of them;
 *  - engine B stopped mid-run: B's runs end with their reason, A's go on and succeed; once B is back
 *    its reaper removes what the stop left; nothing of the deployment is left on either engine.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { startCorral, type StartedCorral } from '../../src/main';
import { startFakeDecisionsServer, promptText, type FakeServer } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';
import { S3_CREDENTIALS, startS3Server, type S3Server } from '../support/s3-server';
import { listObjects } from '../support/s3-objects';
import { eventually } from '../support/eventually';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(300_000);

const ROOT = join(__dirname, '..', '..');
const afterTool = (body: Record<string, unknown>) => messagesOf(body).some((m) => m.role === 'tool');
const agent = scriptedAgent({
  'SPREAD': (b) => (afterTool(b) ? finalTurn('spread done') : toolCallTurn([{ name: 'bash', args: { command: 'cat in.txt && echo "changed on $(hostname)" > in.txt' } }])),
  'MEMORY-WRITE': () => finalTurn('noted.\nMEMORY: the build uses make -j4'),
  'MEMORY-READ': (b) => finalTurn(promptText(b).includes('the build uses make -j4') ? 'remembered: make -j4' : 'no memory'),
  // waits in its sandbox until the test leaves /tmp/go there (B's never get it: their engine stops under them)
  'LONG': (b) => (afterTool(b) ? finalTurn('slept') : toolCallTurn([{ name: 'bash', args: { command: 'until [ -e /tmp/go ]; do sleep 0.1; done; echo woke' } }])),
});

let fake: FakeServer;
let s3: S3Server;
let engineB: SecondEngine;
let api: StartedCorral;
const dockerA = new Docker();
let dockerB: Docker;
const queue = `two-engines-${Date.now().toString(36)}`;
const workers: Record<'A' | 'B', { child?: ChildProcess; dataDir: string; dockerHost?: string; stderr: string }> = {
  A: { dataDir: mkdtempSync(join(tmpdir(), 'corral-host-a-')), stderr: '' },
  B: { dataDir: mkdtempSync(join(tmpdir(), 'corral-host-b-')), stderr: '' },
};
const saved: Record<string, string | undefined> = {};
let commonEnv: Record<string, string>;

function startWorker(w: 'A' | 'B'): ChildProcess {
  const host = workers[w];
  const child = spawn(join(ROOT, 'bin/corral'), ['worker'], {
    env: {
      ...process.env, ...commonEnv, CORRAL_WORKER_ID: `worker-${w}`, CORRAL_DATA_DIR: host.dataDir,
      ...(host.dockerHost ? { DOCKER_HOST: host.dockerHost } : {}),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  child.stderr!.on('data', (d: Buffer) => (host.stderr += d.toString()));
  host.child = child;
  return child;
}
async function stopWorker(w: 'A' | 'B'): Promise<void> {
  const c = workers[w].child;
  if (!c || c.exitCode !== null || c.signalCode !== null) return;
  const done = new Promise((r) => c.once('exit', r));
  c.kill('SIGTERM');
  await done;
}

async function http(path: string, init?: RequestInit): Promise<{ status: number; body: Buffer; json: () => Record<string, unknown> }> {
  const res = await fetch(`${api.url}${path}`, init);
  const body = Buffer.from(await res.arrayBuffer());
  return { status: res.status, body, json: () => JSON.parse(body.toString()) as Record<string, unknown> };
}
async function submit(spec: Record<string, unknown>): Promise<string> {
  const r = await http('/v1/runs', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec) });
  expect(r.status).toBe(201);
  return r.json().id as string;
}
const run = async (id: string) => (await http(`/v1/runs/${id}`)).json();
const finished = (id: string, ms = 120_000) => eventually(async () => { const r = await run(id); return r.finishedAt ? r : null; }, { what: `run ${id} to end`, timeoutMs: ms });
const ours = (d: Docker) => d.listContainers({ all: true, filters: { label: [`corral.queue=${queue}`] } });
/** Runs a command in a container as its configured user, to its end. */
async function execIn(d: Docker, containerId: string, cmd: string[]): Promise<string> {
  const e = await d.getContainer(containerId).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const s = await e.start({ hijack: true, stdin: false });
  const chunks: Buffer[] = [];
  s.on('data', (c: Buffer) => chunks.push(c));
  await new Promise((r) => s.on('end', r));
  return Buffer.concat(chunks).toString('latin1');
}

beforeAll(async () => {
  fake = await startFakeDecisionsServer({ chat: agent });
  s3 = await startS3Server();
  engineB = await startSecondEngine({ images: ['corral/sandbox:latest'], name: 'hostb' });
  workers.B.dockerHost = engineB.dockerHost;
  dockerB = new Docker({ socketPath: engineB.socketPath });
  for (const [k, v] of Object.entries(S3_CREDENTIALS)) {
    saved[k] = process.env[k];
    process.env[k] = v; // the API's SDK reads the AWS environment, as a deployed one does
  }
  commonEnv = {
    ...sandboxTestEnv(), ...s3.env('fleet'),
    REDIS_URL: process.env.REDIS_URL!, CORRAL_QUEUE: queue, CORRAL_POLICY_DIR: join(ROOT, 'policies'),
    OPENAI_API_KEY: 'test', OPENAI_BASE_URL: fake.baseURL, CORRAL_MODEL: 'fake-agent', CORRAL_CLASSIFIER: 'false',
    CORRAL_CONCURRENCY: '2', CORRAL_REAP_INTERVAL_S: '1', CORRAL_REAP_GRACE_S: '0', CORRAL_JOB_LOCK_MS: '5000', CORRAL_STALLED_INTERVAL_MS: '2000',
    CORRAL_DOCKER_RETRIES: '1', CORRAL_API_PORT: '0', CORRAL_TENANT_MAX_ACTIVE_RUNS: '50', CORRAL_TENANT_SUBMITS_PER_MIN: '500',
  };
  api = await startCorral(loadConfig({ ...commonEnv, CORRAL_DATA_DIR: mkdtempSync(join(tmpdir(), 'corral-host-api-')) }), { api: true, worker: false }, () => undefined);
});

afterAll(async () => {
  await stopWorker('A').catch(() => undefined);
  await stopWorker('B').catch(() => undefined);
  await api?.close();
  for (const c of await ours(dockerA).catch(() => [])) await dockerA.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  await engineB?.dispose();
  await s3?.close();
  await fake?.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

test('tenant memory written by a run on host A is read by the next run on host B', async () => {
  startWorker('A');
  const w = await submit({ task: 'MEMORY-WRITE: note how we build', memory: { key: 'build', trusted: true } });
  expect(await finished(w)).toMatchObject({ status: 'succeeded', workerId: 'worker-A' });
  startWorker('B');
  await stopWorker('A'); // the next run can only go to B
  const r = await submit({ task: 'MEMORY-READ: how do we build?', memory: { key: 'build' } });
  expect(await finished(r)).toMatchObject({ status: 'succeeded', workerId: 'worker-B', finalAnswer: 'remembered: make -j4' });
});

test('20 runs spread over both hosts: every file served by the API from the store, none kept on a worker', async () => {
  startWorker('A');
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) ids.push(await submit({ task: `SPREAD ${i}: change a file`, workspace: { files: { 'in.txt': `run ${i}\n` } } }));
  const runs = await Promise.all(ids.map((id) => finished(id)));
  const spread: Record<string, number> = {};
  for (const r of runs) spread[String(r.workerId)] = (spread[String(r.workerId)] ?? 0) + 1;
  process.stdout.write(`[two-engines] 20 runs: ${JSON.stringify(spread)}\n`);
  expect(runs.map((r) => r.status)).toEqual(Array(20).fill('succeeded'));
  expect(spread['worker-A']).toBeGreaterThan(0);
  expect(spread['worker-B']).toBeGreaterThan(0);
  for (const [i, id] of ids.entries()) {
    const report = await http(`/v1/runs/${id}/report`);
    expect(report.status).toBe(200);
    expect(report.body.toString()).toContain('spread done');
    const log = await http(`/v1/runs/${id}/logs`);
    expect(log.body.toString()).toContain('"run.finished"');
    const patch = await http(`/v1/runs/${id}/artifacts/patch`);
    expect(patch.body.toString()).toContain(`-run ${i}\n+changed on `);
    const tar = await http(`/v1/runs/${id}/artifacts/workspace.tar`);
    expect(tar.status).toBe(200);
    expect(tar.body.includes(Buffer.from('changed on '))).toBe(true);
  }
  expect((await listObjects(s3, 'fleet/tenants/default/runs/')).length).toBe(5 * 22); // 20 + the two memory runs, 5 files each (events, report, tar, patch, needs-review)
  for (const w of ['A', 'B'] as const) expect(readdirSync(join(workers[w].dataDir, 'runs')).filter((d) => ids.includes(d))).toEqual([]);
  expect(await ours(dockerA)).toEqual([]);
  expect(await ours(dockerB)).toEqual([]);
});

test('engine B stopped mid-run: B\'s runs end with their reason, A\'s go on; nothing is left on either engine', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 4; i++) ids.push(await submit({ task: `LONG ${i}: sleep` }));
  // Two on each worker (concurrency 2 each), all in their sleep.
  const running = await eventually(async () => {
    const rs = await Promise.all(ids.map(run));
    return rs.filter((r) => r.status === 'running' && r.containerId).length === 4 ? rs : null;
  }, { what: 'all four runs to be running', timeoutMs: 60_000 });
  const onB = running.filter((r) => r.workerId === 'worker-B').map((r) => r.id as string);
  const onA = running.filter((r) => r.workerId === 'worker-A').map((r) => r.id as string);
  expect(onA.length).toBeGreaterThan(0);
  expect(onB.length).toBeGreaterThan(0);
  // every run is in its wait (the command runs in its sandbox)
  for (const r of running) {
    const d = r.workerId === 'worker-B' ? dockerB : dockerA;
    await eventually(async () => (await execIn(d, r.containerId as string, ['ps', '-eo', 'args'])).includes('until [ -e /tmp/go ]'), { what: `run ${r.id as string} to wait in its sandbox` });
  }
  await engineB.stop();
  for (const r of running.filter((x) => x.workerId === 'worker-A')) await execIn(dockerA, r.containerId as string, ['touch', '/tmp/go']);
  const reasons: string[] = [];
  for (const id of onB) {
    const r = await finished(id);
    reasons.push(String(r.reason));
    expect(r.status).toBe('error');
    expect(String(r.reason)).toMatch(/sandbox|docker|engine|container/i);
    // Its files still reached the store: a report saying why.
    const report = await http(`/v1/runs/${id}/report`);
    expect(report.status).toBe(200);
    expect(report.body.toString()).toContain('error');
  }
  for (const id of onA) expect(await finished(id)).toMatchObject({ status: 'succeeded', finalAnswer: 'slept', workerId: 'worker-A' });
  // Back on: B's reaper removes the containers the stop left (their runs have ended).
  await engineB.start();
  const left = await eventually(async () => ((await ours(dockerB)).length === 0 ? 'none' : null), { what: 'engine B to hold none of our containers', timeoutMs: 60_000 });
  expect(left).toBe('none');
  expect(await ours(dockerA)).toEqual([]);
  process.stdout.write(`[two-engines] engine B stopped with ${onB.length} run(s) on it (ended: error — ${JSON.stringify(reasons[0]?.slice(0, 200))}), ${onA.length} on A (succeeded); left behind: nothing\n`);
});
