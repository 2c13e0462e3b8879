/**
 * compose.yaml on this machine with docker-compose (Debian's 1.29), twice: with the run files in the
 * data dir, and in an S3 object store (s3rver in a container of the project, the workers and the API
 * its clients). Each deployment is a project of its own on a free loopback port; two worker replicas
 * replay the bundled transcript (no model needed). The API is healthy only when ready (/readyz), the
 * workers when their health file is fresh and every check in it passes. One run goes in through the
 * REST API and its report comes back; another through `corral submit` from a directory over 2 MiB with
 * a relative symlink — uploaded into the API's writable workspaces dir, with the store too — whose
 * patch, fetched with `corral artifacts`, applies with `git apply` to that directory and gives the
 * sandbox's tree; the same directory again is not sent. `down -v` afterwards must leave no container
 * of the project and no sandbox of the run.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { exec, ROOT, startComposeProject, type ComposeProject } from '../support/compose-project';

jest.setTimeout(300_000);

test('compose.yaml: no service but the docker gate mounts the Docker socket; workers reach the engine through the gate', () => {
  const doc = parseYaml(readFileSync(join(ROOT, 'compose.yaml'), 'utf8')) as { services: Record<string, { volumes?: string[]; environment?: string[]; group_add?: string[] }> };
  const holders = Object.entries(doc.services).filter(([, s]) => (s.volumes ?? []).some((v) => v.includes('docker.sock'))).map(([n]) => n);
  expect(holders).toEqual(['docker-gate']);
  expect(Object.entries(doc.services).filter(([, s]) => s.group_add).map(([n]) => n)).toEqual(['docker-gate']);
  expect(doc.services.worker!.environment).toContain('DOCKER_HOST=unix:///run/corral-gate/gate.sock');
});

/** An S3-compatible store in the project: s3rver (this repository's dev dependency) in the service image. */
function objectStore(dir: string): { files: string[]; env: Record<string, string> } {
  const file = join(dir, 'object-store.yaml');
  writeFileSync(file, `services:
  s3:
    image: \${CORRAL_IMAGE:-corral/service:latest}
    user: "10100:10100"
    read_only: true
    tmpfs: [/tmp]
    entrypoint: ["node", "/opt/node_modules/s3rver/bin/s3rver.js", "-d", "/tmp/s3", "-a", "0.0.0.0", "-p", "9000", "--silent", "--no-vhost-buckets", "--configure-bucket", "corral"]
    volumes:
      - ${join(ROOT, 'node_modules')}:/opt/node_modules:ro
`);
  return {
    files: [file],
    env: { CORRAL_ARTIFACTS: 's3://corral/runs?endpoint=http://s3:9000&pathStyle=true', AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' },
  };
}

describe.each([['the data dir', false], ['an S3 object store', true]] as const)('compose with the run files in %s', (_where, s3) => {
  let p: ComposeProject;
  let work: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'corral-compose-ws-'));
    // The hostname "s3" would read as a virtual-host bucket name: path-style only.
    p = await startComposeProject({ prefix: 'corral-compose-test', ...(s3 ? { variant: 's3' } : {}), ...(s3 ? objectStore(work) : {}) });
  }, 420_000);
  afterAll(async () => {
    const left = await p?.down();
    rmSync(work, { recursive: true, force: true });
    // (A project that never came up was taken down by startComposeProject, and its error is the one shown.)
    if (p) expect(left).toBe('');
  });

  const finished = (id: string) => p.until(`run ${id} finishes`, 120_000, async () => {
    const r = await p.api<Record<string, unknown>>('GET', `/v1/runs/${id}`);
    return r.status === 200 && r.body.finishedAt ? r.body : undefined;
  });

  test('a run submitted through the API is done by a worker replica in a sibling sandbox, and its report comes back', async () => {
    const { stdout: workers } = await p.compose('ps', '-q', 'worker');
    expect(workers.trim().split('\n')).toHaveLength(2);
    const { stdout: users } = await exec('docker', ['inspect', '-f', '{{.Config.User}}', ...(await p.compose('ps', '-q', 'api')).stdout.trim().split('\n'), ...workers.trim().split('\n')]);
    expect(new Set(users.trim().split('\n'))).toEqual(new Set(['10100:10100'])); // API and workers: not root

    const task = JSON.parse(readFileSync(join(ROOT, 'examples/fix-median.task.json'), 'utf8')) as Record<string, unknown>;
    const created = await p.api<{ id: string }>('POST', '/v1/runs', task);
    expect(created.status).toBe(201);
    const id = created.body.id;
    const run = await finished(id);
    expect(run).toMatchObject({ status: 'succeeded' });
    if (s3) {
      // In the store under the tenant's keys; nothing of the run stays in the data dir.
      expect(run.reportPath).toBe(`s3://corral/runs/tenants/ci/runs/${id}/report.md`);
      // (the worker removes it once the store took every file, just after it marked the run finished)
      await p.until(`run ${id}'s directory to leave the data dir`, 60_000, async () => (existsSync(join(p.dataDir, 'runs', id)) ? undefined : true));
    } else {
      // The data dir is mounted at the same path inside as on the host: the paths the worker reports are the host's.
      expect(String(run.reportPath).startsWith(`${p.dataDir}/runs/${id}/`)).toBe(true);
      expect(existsSync(String(run.reportPath))).toBe(true);
    }
    const report = await p.api('GET', `/v1/runs/${id}/report`);
    expect(report.status).toBe(200);
    expect(report.text).toContain('succeeded');
    const { stdout: sandboxes } = await exec('docker', ['ps', '-aq', '--filter', `label=corral.run-id=${id}`]);
    expect(sandboxes.trim()).toBe(''); // the worker removed the run's sandbox
  });

  test('the API is healthy when ready and each worker has a health check of its own', async () => {
    expect(await p.until('the API container to be healthy', 60_000, async () => ((await p.healthOf('api')).join() === 'healthy' ? true : undefined))).toBe(true);
    const workers = await p.until('both workers to be healthy', 90_000, async () => {
      const h = await p.healthOf('worker');
      return h.length === 2 && h.every((s) => s === 'healthy') ? h : undefined;
    });
    expect(workers).toEqual(['healthy', 'healthy']);
    const ready = await p.api<{ ok: boolean; checks: Record<string, { ok: boolean }> }>('GET', '/readyz');
    expect(ready.body).toMatchObject({ ok: true, checks: { redis: { ok: true }, ...(s3 ? { artifacts: { ok: true } } : {}) } });
  });

  test('corral submit of a directory over 2 MiB with a relative symlink: uploaded, run, and its patch applies to the directory', async () => {
    const task = JSON.parse(readFileSync(join(ROOT, 'examples/fix-median.task.json'), 'utf8')) as { task: string; workspace: { files: Record<string, string> } };
    const ws = join(work, 'project');
    mkdirSync(join(ws, 'data'), { recursive: true });
    for (const [name, body] of Object.entries(task.workspace.files)) writeFileSync(join(ws, name), body);
    writeFileSync(join(ws, 'data', 'sample.bin'), randomBytes(3 * 1024 * 1024));
    symlinkSync('sample.bin', join(ws, 'data', 'latest.bin'));
    symlinkSync('/etc/passwd', join(ws, 'outside'));
    writeFileSync(join(ws, '.gitignore'), '__pycache__/\n*.pyc\n');
    writeFileSync(join(work, 'TASK.md'), `# Task\n${task.task}\n\n# Done means\n- check: \`python3 -m unittest -q\`\n`);
    const corral = (...args: string[]) => exec(join(ROOT, 'bin/corral'), args, { env: { ...process.env, CORRAL_API_URL: p.base, CORRAL_API_TOKEN: p.token }, maxBuffer: 16 * 1024 * 1024 });

    const sub1 = await corral('submit', join(work, 'TASK.md'), '--workspace', ws);
    const id = sub1.stdout.trim();
    expect(id).toMatch(/^run_/);
    // Over 2 MiB: a PUT /v1/workspaces into the API's data dir (read-only but for workspaces/); the link that leaves is named.
    expect(sub1.stderr).toMatch(/uploaded .*project: 5 file\(s\), 1 directory, 1 symbolic link\(s\), \d+ bytes of files as ws_[0-9a-f]{64}/);
    expect(sub1.stderr).toContain('skipped outside: a symbolic link that is not kept: it points to the absolute path /etc/passwd, outside the workspace');
    expect(await finished(id)).toMatchObject({ status: 'succeeded' });

    // The patch and the tar through the CLI; git apply on a copy of the directory gives the sandbox's files.
    const patchFile = join(work, `${id}.patch`);
    const tarFile = join(work, `${id}.tar`);
    expect((await corral('artifacts', id, 'patch', '-o', patchFile)).stdout).toContain(`wrote workspace.patch of ${id} to ${patchFile}`);
    await corral('artifacts', id, 'tar', '-o', tarFile);
    const applied = join(work, `${id}-applied`);
    cpSync(ws, applied, { recursive: true, verbatimSymlinks: true });
    execFileSync('git', ['apply', patchFile], { cwd: applied });
    const sandbox = join(work, `${id}-sandbox`);
    mkdirSync(sandbox);
    execFileSync('tar', ['-xf', tarFile, '-C', sandbox]);
    const files = execFileSync('find', ['.', '-type', 'f'], { cwd: sandbox }).toString().trim().split('\n').sort();
    expect(files).toEqual(['./.gitignore', './README.md', './data/sample.bin', './stats.py', './test_stats.py']);
    for (const f of files) expect({ f, same: readFileSync(join(applied, f)).equals(readFileSync(join(sandbox, f))) }).toEqual({ f, same: true });
    expect(readFileSync(join(applied, 'stats.py'), 'utf8')).not.toBe(task.workspace.files['stats.py']);

    // The same directory again: its id is computed first, and the server keeps it: nothing is sent.
    const sub2 = await corral('submit', join(work, 'TASK.md'), '--workspace', ws, '--dry-run');
    expect(sub2.stderr).toMatch(/the server keeps it already as ws_[0-9a-f]{64} \(nothing sent/);
    if (s3) expect(readdirSync(join(p.dataDir, 'runs'))).toEqual([]); // the store holds the run files

    // The API counted its answers by route and status class.
    const metrics = await p.api('GET', '/metrics');
    expect(metrics.text).toMatch(/corral_http_responses_total\{method="PUT",route="\/v1\/workspaces",status_class="2xx"\} 1/);
    expect(metrics.text).toMatch(/corral_http_responses_total\{method="GET",route="\/v1\/workspaces\/:id",status_class="2xx"\} 1/);
  });
});
