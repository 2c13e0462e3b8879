/**
 * compose.yaml on this machine with docker-compose (Debian's 1.29): a project of its own (-p) on a free
 * loopback port, with its own data and egress dirs; two worker replicas replay the bundled transcript
 * (CORRAL_REPLAY), so no model is needed. The API is healthy only when ready (/readyz), the workers
 * when their health file is fresh and every check in it passes. One run goes in through the REST API
 * and its report comes back; another through `corral submit` from a directory over 2 MiB with a
 * relative symlink (uploaded to the API's writable workspaces dir), whose patch, fetched with
 * `corral artifacts`, applies with `git apply` to that directory and gives the sandbox's tree; the same
 * directory again is not sent. `down -v` afterwards must leave no container of the project and no
 * sandbox of the run.
 * The images come from .ci/bootstrap; images/service-image.sh rebuilds the service image here only
 * when its inputs changed since (a check of well under a second otherwise).
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { eventually } from '../support/eventually';

jest.setTimeout(240_000);
const exec = promisify(execFile);
const ROOT = resolve(__dirname, '../..');
// Within a CI run the project name carries the run's CORRAL_INSTANCE, which .ci/run's clean-up looks for.
const INSTANCE = (process.env.CORRAL_INSTANCE ?? '').toLowerCase().replace(/[^a-z0-9_-]/g, '');
const PROJECT = `corral-compose-test-${INSTANCE ? `${INSTANCE}-` : ''}${randomBytes(3).toString('hex')}`;
const TOKEN = randomBytes(16).toString('hex');

let env: NodeJS.ProcessEnv;
let dirs: string[] = [];
let base = '';
let composeInstalled = false;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((ok, fail) => srv.once('error', fail).listen(0, '127.0.0.1', ok));
  const { port } = srv.address() as { port: number };
  await new Promise((ok) => srv.close(ok));
  return port;
}

function compose(...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return exec('docker-compose', ['-p', PROJECT, '-f', join(ROOT, 'compose.yaml'), ...args], { cwd: ROOT, env, maxBuffer: 16 * 1024 * 1024 });
}

async function composeLogs(): Promise<string> {
  const { stdout } = await compose('logs', '--no-color', '--tail', '40').catch((e: { stdout?: string }) => ({ stdout: e.stdout ?? '' }));
  return stdout;
}

async function api<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T; text: string }> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // report.md and other text bodies
  }
  return { status: res.status, body: parsed as T, text };
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  try {
    return (await eventually(() => probe().catch(() => undefined), { what, until: (v) => v !== undefined, timeoutMs: ms, intervalMs: 500 })) as T;
  } catch (err) {
    throw new Error(`${(err as Error).message}\n${await composeLogs()}`, { cause: err });
  }
}

beforeAll(async () => {
  composeInstalled = await exec('docker-compose', ['version', '--short']).then(() => true, () => false);
  if (!composeInstalled) throw new Error('docker-compose is not installed: apt-get install docker-compose (.ci/bootstrap installs it)');
  await exec(join(ROOT, 'images/service-image.sh'), [], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 });
  for (const image of [process.env.CORRAL_REDIS_IMAGE ?? 'corral/redis:7', process.env.CORRAL_SANDBOX_IMAGE ?? 'corral/sandbox:latest']) {
    await exec('docker', ['image', 'inspect', image]).catch(() => {
      throw new Error(`image ${image} is missing: run .ci/bootstrap`);
    });
  }
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-compose-data-'));
  const egressDir = mkdtempSync(join(tmpdir(), 'corral-compose-egress-'));
  dirs = [dataDir, egressDir];
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // Only this test's settings reach compose: no CORRAL_*, OPENAI_* or COMPOSE_* from the caller's shell.
  env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(CORRAL_|OPENAI_|COMPOSE_)/.test(k)));
  for (const k of ['CORRAL_IMAGE', 'CORRAL_REDIS_IMAGE', 'CORRAL_SANDBOX_IMAGE', 'CORRAL_INSTANCE']) if (process.env[k]) env[k] = process.env[k];
  Object.assign(env, {
    CORRAL_API_PORT: String(port), CORRAL_DATA_DIR: dataDir, CORRAL_EGRESS_DIR: egressDir, CORRAL_WORKERS: '2',
    CORRAL_REPLAY: '/app/examples/fix-median.replay.json', CORRAL_API_TOKENS: `ci=${TOKEN}`, CORRAL_OPERATOR_TENANTS: 'ci',
    // A queue of its own: reapers only sweep their own deployment's sandboxes (label corral.queue).
    CORRAL_QUEUE: PROJECT,
  });
  await compose('up', '-d', '--no-build').catch(async (err: Error) => {
    throw new Error(`docker-compose up failed: ${err.message}\n${await composeLogs()}`);
  });
  await until('GET /readyz answers 200', 60_000, async () => ((await api('GET', '/readyz')).status === 200 ? true : undefined));
});

/** `docker inspect`'s health status of each container of a compose service. */
async function healthOf(service: string): Promise<string[]> {
  const ids = (await compose('ps', '-q', service)).stdout.trim().split('\n').filter(Boolean);
  if (!ids.length) return [];
  const { stdout } = await exec('docker', ['inspect', '-f', '{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}', ...ids]);
  return stdout.trim().split('\n');
}

afterAll(async () => {
  if (!composeInstalled) return;
  await compose('down', '-v', '--remove-orphans', '-t', '20');
  const { stdout } = await exec('docker', ['ps', '-aq', '--filter', `label=com.docker.compose.project=${PROJECT}`]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  expect(stdout.trim()).toBe('');
});

test('compose.yaml: no service but the docker gate mounts the Docker socket; workers reach the engine through the gate', () => {
  const doc = parseYaml(readFileSync(join(ROOT, 'compose.yaml'), 'utf8')) as { services: Record<string, { volumes?: string[]; environment?: string[]; group_add?: string[] }> };
  const holders = Object.entries(doc.services).filter(([, s]) => (s.volumes ?? []).some((v) => v.includes('docker.sock'))).map(([n]) => n);
  expect(holders).toEqual(['docker-gate']);
  expect(Object.entries(doc.services).filter(([, s]) => s.group_add).map(([n]) => n)).toEqual(['docker-gate']);
  expect(doc.services.worker!.environment).toContain('DOCKER_HOST=unix:///run/corral-gate/gate.sock');
});

test('compose up: a run submitted through the API is done by a worker replica in a sibling sandbox, and its report comes back', async () => {
  const { stdout: workers } = await compose('ps', '-q', 'worker');
  expect(workers.trim().split('\n')).toHaveLength(2);
  const { stdout: users } = await exec('docker', ['inspect', '-f', '{{.Config.User}}', ...(await compose('ps', '-q', 'api')).stdout.trim().split('\n'), ...workers.trim().split('\n')]);
  expect(new Set(users.trim().split('\n'))).toEqual(new Set(['10100:10100'])); // API and workers: not root

  const task = JSON.parse(readFileSync(join(ROOT, 'examples/fix-median.task.json'), 'utf8')) as Record<string, unknown>;
  const created = await api<{ id: string }>('POST', '/v1/runs', task);
  expect(created.status).toBe(201);
  const id = created.body.id;

  const run = await until(`run ${id} finishes`, 90_000, async () => {
    const r = await api<Record<string, unknown>>('GET', `/v1/runs/${id}`);
    return r.status === 200 && r.body.finishedAt ? r.body : undefined;
  });
  expect(run).toMatchObject({ status: 'succeeded' });
  // The data dir is mounted at the same path inside as on the host: the paths the worker reports are the host's.
  expect(String(run.reportPath).startsWith(`${dirs[0]}/runs/${id}/`)).toBe(true);
  expect(existsSync(String(run.reportPath))).toBe(true);

  const report = await api('GET', `/v1/runs/${id}/report`);
  expect(report.status).toBe(200);
  expect(report.text).toContain('succeeded');

  const { stdout: sandboxes } = await exec('docker', ['ps', '-aq', '--filter', `label=corral.run-id=${id}`]);
  expect(sandboxes.trim()).toBe(''); // the worker removed the run's sandbox
});

test('the API is healthy when ready and each worker has a health check of its own', async () => {
  expect(await until('the API container to be healthy', 60_000, async () => ((await healthOf('api')).join() === 'healthy' ? true : undefined))).toBe(true);
  const workers = await until('both workers to be healthy', 90_000, async () => {
    const h = await healthOf('worker');
    return h.length === 2 && h.every((s) => s === 'healthy') ? h : undefined;
  });
  expect(workers).toEqual(['healthy', 'healthy']);
  const ready = await api<{ ok: boolean; checks: Record<string, { ok: boolean }> }>('GET', '/readyz');
  expect(ready.body).toMatchObject({ ok: true, checks: { redis: { ok: true } } });
});

test('corral submit of a directory over 2 MiB with a relative symlink: uploaded, run, and its patch applies to the directory', async () => {
  const task = JSON.parse(readFileSync(join(ROOT, 'examples/fix-median.task.json'), 'utf8')) as { task: string; workspace: { files: Record<string, string> } };
  const work = mkdtempSync(join(tmpdir(), 'corral-compose-ws-'));
  dirs.push(work);
  const ws = join(work, 'project');
  mkdirSync(join(ws, 'data'), { recursive: true });
  for (const [name, body] of Object.entries(task.workspace.files)) writeFileSync(join(ws, name), body);
  writeFileSync(join(ws, 'data', 'sample.bin'), randomBytes(3 * 1024 * 1024));
  symlinkSync('sample.bin', join(ws, 'data', 'latest.bin'));
  symlinkSync('/etc/passwd', join(ws, 'outside'));
  writeFileSync(join(ws, '.gitignore'), '__pycache__/\n*.pyc\n');
  writeFileSync(join(work, 'TASK.md'), `# Task\n${task.task}\n\n# Done means\n- check: \`python3 -m unittest -q\`\n`);
  const corral = (...args: string[]) => exec(join(ROOT, 'bin/corral'), args, { env: { ...process.env, CORRAL_API_URL: base, CORRAL_API_TOKEN: TOKEN }, maxBuffer: 16 * 1024 * 1024 });

  const sub1 = await corral('submit', join(work, 'TASK.md'), '--workspace', ws);
  const id = sub1.stdout.trim();
  expect(id).toMatch(/^run_/);
  // Over 2 MiB: a PUT /v1/workspaces into the API's data dir (read-only but for workspaces/); the link that leaves is named.
  expect(sub1.stderr).toMatch(/uploaded .*project: 5 file\(s\), 1 directory, 1 symbolic link\(s\), \d+ bytes of files as ws_[0-9a-f]{64}/);
  expect(sub1.stderr).toContain('skipped outside: a symbolic link that is not kept: it points to the absolute path /etc/passwd, outside the workspace');
  const run = await until(`run ${id} finishes`, 120_000, async () => {
    const r = await api<Record<string, unknown>>('GET', `/v1/runs/${id}`);
    return r.status === 200 && r.body.finishedAt ? r.body : undefined;
  });
  expect(run).toMatchObject({ status: 'succeeded' });

  // The patch and the tar through the CLI; git apply on a copy of the directory gives the sandbox's files.
  const patchFile = join(work, 'run.patch');
  const tarFile = join(work, 'run.tar');
  expect((await corral('artifacts', id, 'patch', '-o', patchFile)).stdout).toContain(`wrote workspace.patch of ${id} to ${patchFile}`);
  await corral('artifacts', id, 'tar', '-o', tarFile);
  const applied = join(work, 'applied');
  cpSync(ws, applied, { recursive: true, verbatimSymlinks: true });
  execFileSync('git', ['apply', patchFile], { cwd: applied });
  const sandbox = join(work, 'sandbox');
  mkdirSync(sandbox);
  execFileSync('tar', ['-xf', tarFile, '-C', sandbox]);
  const files = execFileSync('find', ['.', '-type', 'f'], { cwd: sandbox }).toString().trim().split('\n').sort();
  expect(files).toEqual(['./.gitignore', './README.md', './data/sample.bin', './stats.py', './test_stats.py']);
  for (const f of files) expect({ f, same: readFileSync(join(applied, f)).equals(readFileSync(join(sandbox, f))) }).toEqual({ f, same: true });
  expect(readFileSync(join(applied, 'stats.py'), 'utf8')).not.toBe(task.workspace.files['stats.py']);

  // The same directory again: its id is computed first, and the server keeps it: nothing is sent.
  const sub2 = await corral('submit', join(work, 'TASK.md'), '--workspace', ws, '--dry-run');
  expect(sub2.stderr).toMatch(/the server keeps it already as ws_[0-9a-f]{64} \(nothing sent/);

  // The API counted its answers by route and status class.
  const metrics = await api('GET', '/metrics');
  expect(metrics.text).toMatch(/corral_http_responses_total\{method="PUT",route="\/v1\/workspaces",status_class="2xx"\} 1/);
  expect(metrics.text).toMatch(/corral_http_responses_total\{method="GET",route="\/v1\/workspaces\/:id",status_class="4xx"\} 1/);
});
