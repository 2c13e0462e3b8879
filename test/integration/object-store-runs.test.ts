/**
 * Runs with their files in an object store (CORRAL_ARTIFACTS=s3://… on s3rver, on loopback): the
 * worker puts every file into the store at the run's end and keeps nothing of the run on its disk;
 * the API streams the report, log, tar and patch from the store (the log of a run still going from
 * its event stream in Redis); an upload taken by the API is found by a worker that never saw it on
 * its disk. The two-host version of this is two-engines.test.ts. A run that ended while the same
 * deployment kept its files in the data dir is still served after the switch to the store, and
 * `corral artifacts migrate` moves it into the store.
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { promisify } from 'node:util';
import { join } from 'node:path';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { makeTar } from '../support/make-tar';
import { S3_CREDENTIALS, startS3Server, type S3Server } from '../support/s3-server';
import { eventually } from '../support/eventually';
import { listObjects } from '../support/s3-objects';

jest.setTimeout(120_000);

const agent = scriptedAgent({
  'STORE-EDIT': [
    toolCallTurn([{ name: 'bash', args: { command: 'cat in.txt && echo changed > in.txt && echo new > out.txt' } }]),
    finalTurn('edited'),
  ],
  // goes on until the test has read the live log and leaves /tmp/go in the sandbox
  'STORE-SLOW': [toolCallTurn([{ name: 'bash', args: { command: 'echo started; until [ -e /tmp/go ]; do sleep 0.1; done' } }]), finalTurn('slept')],
  'STORE-UPLOAD': [toolCallTurn([{ name: 'bash', args: { command: 'cat uploaded.txt' } }]), finalTurn('read the upload')],
  'STORE-BEFORE': [toolCallTurn([{ name: 'bash', args: { command: 'echo before > before.txt' } }]), finalTurn('ran before the switch')],
});

let h: Harness;
let s3: S3Server;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  s3 = await startS3Server();
  for (const [k, v] of Object.entries(S3_CREDENTIALS)) {
    saved[k] = process.env[k];
    process.env[k] = v; // the SDK's standard chain, as a deployed process's
  }
  const env = s3.env('one-host');
  h = await startHarness('object-store', { chat: agent }, { CORRAL_ARTIFACTS: env.CORRAL_ARTIFACTS! });
});
afterAll(async () => {
  await h?.close();
  await s3?.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function get(path: string): Promise<{ status: number; type: string | null; body: Buffer; headers: Headers }> {
  const res = await fetch(`${h.url}${path}`);
  return { status: res.status, type: res.headers.get('content-type'), body: Buffer.from(await res.arrayBuffer()), headers: res.headers };
}

test('a run\'s files are in the store under its tenant\'s keys, served by the API, and gone from the worker\'s disk', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'STORE-EDIT: edit a file', workspace: { files: { 'in.txt': 'original\n' } } });
  expect(created.status).toBe(201);
  const id = created.body.id;
  const run = await h.waitFor(id);
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: 'edited' });
  expect(run.reportPath).toBe(`s3://${s3.bucket}/one-host/tenants/default/runs/${id}/report.md`);
  expect((run.artifacts as Array<{ path: string }>).map((a) => a.path)).toEqual([
    `s3://${s3.bucket}/one-host/tenants/default/runs/${id}/workspace.tar`,
    `s3://${s3.bucket}/one-host/tenants/default/runs/${id}/workspace.patch`,
    `s3://${s3.bucket}/one-host/tenants/default/runs/${id}/needs-review.jsonl`,
  ]);
  const keys = await listObjects(s3, `one-host/tenants/default/runs/${id}/`);
  expect(keys.sort()).toEqual(['events.jsonl', 'needs-review.jsonl', 'report.md', 'workspace.patch', 'workspace.tar'].map((n) => `one-host/tenants/default/runs/${id}/${n}`));
  // The worker's host keeps nothing of the run.
  expect(existsSync(join(h.config.CORRAL_DATA_DIR, 'runs', id))).toBe(false);

  const report = await get(`/v1/runs/${id}/report`);
  expect(report).toMatchObject({ status: 200, type: 'text/markdown; charset=utf-8' });
  expect(report.body.toString()).toContain('edited');
  const log = await get(`/v1/runs/${id}/logs`);
  expect(log.status).toBe(200);
  const events = log.body.toString().trim().split('\n').map((l) => JSON.parse(l) as { type: string });
  expect(events[0]).toMatchObject({ type: 'run.started' });
  expect(events.at(-1)).toMatchObject({ type: 'run.finished', outcome: 'succeeded' });
  const patch = await get(`/v1/runs/${id}/artifacts/patch`);
  expect(patch.body.toString()).toContain('-original\n+changed\n');
  expect(patch.body.toString()).toContain('+new\n');
  const tar = await get(`/v1/runs/${id}/artifacts/workspace.tar`);
  expect(tar).toMatchObject({ status: 200, type: 'application/x-tar' });
  expect(tar.headers.get('content-disposition')).toBe(`attachment; filename="${id}-workspace.tar"`);
  expect(tar.body.includes(Buffer.from('changed\n'))).toBe(true);
  expect(Number(tar.headers.get('content-length'))).toBe(tar.body.length);

  // A replay reads the run's log from the store (the worker kept no copy).
  const served = agent.served['STORE-EDIT'];
  const replay = await h.api<{ id: string }>('POST', `/v1/runs/${id}/replay`);
  expect(replay.status).toBe(201);
  const replayed = await h.waitFor(replay.body.id);
  expect(replayed).toMatchObject({ status: 'succeeded', finalAnswer: 'edited' });
  expect(agent.served['STORE-EDIT']).toBe(served); // no model call
});

test('the log of a run still going comes from its event stream; once it ends, from the store', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'STORE-SLOW: sleep a while' });
  const id = created.body.id;
  const live = await eventually(async () => {
    const r = await get(`/v1/runs/${id}/logs`);
    return r.status === 200 && r.body.toString().includes('"tool.call"') ? r : null;
  }, { what: 'the live log to show the tool call', timeoutMs: 30_000 });
  expect(live.headers.get('x-corral-log-source')).toBe('live event stream');
  expect(live.body.toString()).not.toContain('"run.finished"');
  expect((await get(`/v1/runs/${id}/report`)).status).toBe(404);
  const { containerId } = (await h.api<{ containerId: string }>('GET', `/v1/runs/${id}`)).body;
  const go = await h.docker.getContainer(containerId).exec({ Cmd: ['touch', '/tmp/go'] });
  await go.start({ Detach: true });
  await h.waitFor(id);
  const done = await get(`/v1/runs/${id}/logs`);
  expect(done.headers.get('x-corral-log-source')).toBeNull();
  expect(done.body.toString()).toContain('"run.finished"');
});

test('an upload the API took is found by the worker through the store, though its own copy is gone', async () => {
  const res = await fetch(`${h.url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/x-tar' }, body: await makeTar([{ name: 'uploaded.txt', body: 'from the store\n' }]) });
  expect(res.status).toBe(201);
  const { id: wsId } = (await res.json()) as { id: string };
  expect((await listObjects(s3, 'one-host/tenants/default/workspaces/')).sort()).toEqual([`one-host/tenants/default/workspaces/${wsId}.json`, `one-host/tenants/default/workspaces/${wsId}.tar`]);
  // As on a second host: the data dir has no copy of the upload.
  rmSync(join(h.config.CORRAL_DATA_DIR, 'workspaces'), { recursive: true, force: true });
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'STORE-UPLOAD: read it', workspace: { id: wsId } });
  expect(created.status).toBe(201);
  const run = await h.waitFor(created.body.id);
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: 'read the upload' });
  const log = (await get(`/v1/runs/${created.body.id}/logs`)).body.toString();
  expect(log).toContain('from the store');
  // The same tar again: deduplicated against the store.
  const again = await fetch(`${h.url}/v1/workspaces`, { method: 'PUT', headers: { 'content-type': 'application/x-tar' }, body: await makeTar([{ name: 'uploaded.txt', body: 'from the store\n' }]) });
  expect(again.status).toBe(200);
  expect(readdirSync(join(h.config.CORRAL_DATA_DIR, 'workspaces', 'default')).filter((f) => f.endsWith('.tar'))).toEqual([`${wsId}.tar`]);
});

test('switching to the store orphans no older run: served from the data dir, then moved by corral artifacts migrate', async () => {
  // The same deployment before the switch: the local store, the same data dir (a worker wrote the files there).
  const before = await startHarness('before-store', { chat: agent }, { CORRAL_DATA_DIR: h.config.CORRAL_DATA_DIR });
  let id: string;
  try {
    const created = await before.api<{ id: string }>('POST', '/v1/runs', { task: 'STORE-BEFORE: write a file' });
    id = created.body.id;
    expect(await before.waitFor(id)).toMatchObject({ status: 'succeeded' });
  } finally {
    await before.close();
  }
  const runDir = join(h.config.CORRAL_DATA_DIR, 'runs', id);
  expect(existsSync(join(runDir, 'report.md'))).toBe(true);
  expect(await listObjects(s3, `one-host/tenants/default/runs/${id}/`)).toEqual([]);

  // After the switch: the API (with the store) serves the old run from the data dir.
  for (const [path, want] of [[`/v1/runs/${id}/report`, 'succeeded'], [`/v1/runs/${id}/artifacts/patch`, '+before'], [`/v1/runs/${id}/logs`, '"run.finished"']] as const) {
    const r = await get(path);
    expect({ path, status: r.status, has: r.body.toString().includes(want) }).toEqual({ path, status: 200, has: true });
  }
  expect((await get(`/v1/runs/${id}/artifacts/workspace.tar`)).status).toBe(200);

  // The operator's migration: a dry run sends nothing; then every file goes to the store under the run's tenant's keys.
  const corral = (...args: string[]) => promisify(execFile)(join(__dirname, '../../bin/corral'), ['artifacts', 'migrate', ...args], {
    env: { ...process.env, ...S3_CREDENTIALS, REDIS_URL: process.env.REDIS_URL!, CORRAL_ARTIFACTS: h.config.CORRAL_ARTIFACTS, CORRAL_DATA_DIR: h.config.CORRAL_DATA_DIR },
  });
  const dry = await corral('--dry-run');
  expect(dry.stdout).toContain(`${id} (tenant default): would store events.jsonl, report.md, workspace.tar, workspace.patch, needs-review.jsonl`);
  expect(await listObjects(s3, `one-host/tenants/default/runs/${id}/`)).toEqual([]);
  const moved = await corral('--remove');
  expect(moved.stdout).toContain(`${id} (tenant default): stored events.jsonl, report.md, workspace.tar, workspace.patch, needs-review.jsonl`);
  expect((await listObjects(s3, `one-host/tenants/default/runs/${id}/`)).sort()).toEqual(['events.jsonl', 'needs-review.jsonl', 'report.md', 'workspace.patch', 'workspace.tar'].map((n) => `one-host/tenants/default/runs/${id}/${n}`));
  expect(existsSync(runDir)).toBe(false);
  // Still served, now from the store; and again, nothing left to move.
  expect((await get(`/v1/runs/${id}/artifacts/patch`)).body.toString()).toContain('+before');
  expect((await corral()).stdout).not.toContain(id);
});
