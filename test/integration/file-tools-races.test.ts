/**
 * The file tools against a sandbox that fights back, on the real Docker engine: a background loop
 * swaps a directory (and, separately, a file) with a symlink into /home/agent thousands of times
 * while the tools write, read and edit through it; fifos, sockets and symlinked final or
 * intermediate components. The target outside /workspace is real (/home/agent/.bashrc and
 * .profile, planted with known content), so a write that escaped would show there.
 */
import { randomBytes } from 'node:crypto';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import type { LeasedSandbox, SandboxRequest } from '../../src/domain/sandbox';
import { DockerSandboxProvider } from '../../src/sandbox';
import { TOOLS } from '../../src/tools/registry';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(240_000);

const WORKER = `test-filerace-${randomBytes(3).toString('hex')}`;
const docker = new Docker();
const provider = new DockerSandboxProvider({ docker, config: loadConfig(sandboxTestEnv()) });
let sb: LeasedSandbox;

function request(): SandboxRequest {
  return {
    runId: `run_filerace_${randomBytes(4).toString('hex')}`, workerId: WORKER, deadline: new Date(Date.now() + 10 * 60_000),
    files: {}, limits: { memoryMb: 256, cpus: 1, pids: 128, workspaceMb: 32 }, egressAllow: [],
  };
}

const sh = (script: string, timeoutMs = 30_000) => sb.exec({ argv: ['bash', '-c', script], timeoutMs });
const tool = (name: string) => TOOLS.find((t) => t.name === name)!;
const ctx = () => ({ sandbox: sb, execTimeoutMs: 10_000, maxOutputBytes: 10_000 });

/** What happened to each call: 'ok', or the error code. Anything but ok / path_refused / conflict fails the test. */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'ok';
  } catch (err) {
    return (err as { code?: string }).code ?? `threw ${(err as Error).message}`;
  }
}

const HOME_BEFORE = 'untouched bashrc\n';

beforeAll(async () => {
  sb = await provider.acquire(request());
  await sh(`printf '${HOME_BEFORE}' > /home/agent/.bashrc && printf 'untouched profile\\n' > /home/agent/.profile`);
});

afterAll(async () => {
  await sb?.dispose();
  const left = await docker.listContainers({ all: true, filters: { label: [`corral.worker-id=${WORKER}`] } });
  await Promise.all(left.map((c) => docker.getContainer(c.Id).remove({ force: true })));
});

/**
 * Starts a swapper in the background: each round runs `steps` (os calls, one per line), each allowed
 * to fail (the tools create names too). Returns a function that stops it and says how many rounds it made.
 */
async function swapper(name: string, steps: string): Promise<() => Promise<number>> {
  const body = steps.split('\n').map((l) => `    try:\n        ${l}\n    except OSError:\n        pass`).join('\n');
  const r = await sh(`cat > /tmp/${name}.py <<'EOF'
import os, sys
def put(n):
    # Replaced whole, never truncated in place: a reader never sees an empty count.
    open('/tmp/${name}.count.new', 'w').write(str(n))
    os.replace('/tmp/${name}.count.new', '/tmp/${name}.count')
n = 0
while not os.path.exists('/tmp/${name}.stop'):
${body}
    n += 1
    if n % 200 == 0:
        put(n)
put(n)
EOF
nohup python3 /tmp/${name}.py >/tmp/${name}.log 2>&1 &
until [ -s /tmp/${name}.count ]; do sleep 0.1; done; cat /tmp/${name}.count /tmp/${name}.log`);
  expect(r.stdout).toMatch(/^[1-9]\d*$/);
  return async () => {
    await sh(`touch /tmp/${name}.stop; while pgrep -f /tmp/${name}.py >/dev/null; do sleep 0.1; done; cat /tmp/${name}.count`).then((o) => o.stdout);
    const c = await sh(`cat /tmp/${name}.count; cat /tmp/${name}.log >&2`);
    return Number(c.stdout);
  };
}

test('a directory swapped with a symlink to /home/agent in a loop: no write, edit or read ever goes through it', async () => {
  await sh('mkdir -p /workspace/d && printf "inside\\n" > /workspace/d/.bashrc');
  // (A directory `d` the tools create meanwhile is moved aside, so the loop keeps going.)
  const stop = await swapper('dirswap', `os.rename('/workspace/d', '/workspace/d.real')
os.symlink('/home/agent', '/workspace/d')
os.unlink('/workspace/d')
os.path.isdir('/workspace/d') and os.rename('/workspace/d', '/workspace/d.made-%d' % n)
os.rename('/workspace/d.real', '/workspace/d')`);
  const seen: Record<string, number> = {};
  const count = (k: string) => { seen[k] = (seen[k] ?? 0) + 1; };
  for (let i = 0; i < 60; i++) {
    count(`write:${await outcome(sb.writeFile('d/.bashrc', `PWNED by write ${i}\n`))}`);
    count(`nested:${await outcome(sb.writeFile('d/sub/x.txt', `PWNED nested ${i}\n`))}`);
    if (i % 3 === 0) {
      // The tool's refusals are outcomes the model sees; any other message is counted as itself and fails below.
      const edit = await tool('edit_file').execute({ path: 'd/.bashrc', old: 'PWNED', new: 'PWNED-edit' }, ctx());
      count(`edit:${edit.ok ? 'ok' : /symbolic link|meanwhile|changed since|changed while|no such file|was not found/.test(edit.content) ? 'path_refused' : edit.content}`);
      const read = await sb.readFile('d/.bashrc').then((f) => f.content, (e: { code?: string }) => e.code);
      count(`read:${read === HOME_BEFORE ? 'LEAKED' : typeof read === 'string' && read.startsWith('path_') ? read : 'ok'}`);
    }
  }
  const swaps = await stop();
  // Nothing outside /workspace changed, and nothing was read from it.
  expect((await sh('cat /home/agent/.bashrc; ls -A /home/agent')).stdout).toBe(`${HOME_BEFORE}.bashrc\n.profile\n`);
  expect(seen['read:LEAKED']).toBeUndefined();
  expect(Object.keys(seen).filter((k) => !/:(ok|path_refused|conflict)$/.test(k))).toEqual([]);
  // The race was really run: thousands of swaps, and the tools saw both states.
  expect(swaps).toBeGreaterThan(2000);
  expect(seen['write:ok']).toBeGreaterThan(0);
  expect((seen['write:path_refused'] ?? 0) + (seen['nested:path_refused'] ?? 0)).toBeGreaterThan(0);
  process.stdout.write(`[file-races] directory swaps: ${swaps}; outcomes ${JSON.stringify(seen)}\n`);
});

test('a file swapped with a symlink to /home/agent/.profile: writes replace the link itself, never the target', async () => {
  await sh('printf "mine\\n" > /workspace/f.txt');
  const stop = await swapper('fileswap', `os.rename('/workspace/f.txt', '/workspace/f.real')
os.symlink('/home/agent/.profile', '/workspace/f.txt')
os.unlink('/workspace/f.txt')
os.rename('/workspace/f.real', '/workspace/f.txt')`);
  const seen: Record<string, number> = {};
  for (let i = 0; i < 80; i++) {
    const o = await outcome(sb.writeFile('f.txt', `PWNED ${i}\n`));
    seen[o] = (seen[o] ?? 0) + 1;
  }
  const swaps = await stop();
  expect((await sh('cat /home/agent/.profile')).stdout).toBe('untouched profile\n');
  expect(Object.keys(seen).filter((k) => !['ok', 'path_refused', 'conflict'].includes(k))).toEqual([]);
  expect(swaps).toBeGreaterThan(2000);
  process.stdout.write(`[file-races] file swaps: ${swaps}; outcomes ${JSON.stringify(seen)}\n`);
});

test('fifos and sockets are refused at once by read, write and edit (no 60 s hang)', async () => {
  await sh('mkfifo /workspace/pipe && python3 -c "import socket; socket.socket(socket.AF_UNIX).bind(\'/workspace/sock\')"');
  for (const p of ['pipe', 'sock']) {
    await expect(sb.readFile(p)).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/not a regular file|a socket|fifo/) });
    await expect(sb.writeFile(p, 'x')).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/not a regular file: \w+ is a (fifo|socket)/) });
    const edit = await tool('edit_file').execute({ path: p, old: 'a', new: 'b' }, ctx());
    expect(edit).toMatchObject({ ok: false, content: expect.stringMatching(/not a regular file|socket|fifo/) });
  }
  // Nothing was written into the fifo: a reader sees no data.
  expect((await sh('timeout 1 cat /workspace/pipe <> /workspace/pipe; test -p /workspace/pipe && echo still-a-fifo')).stdout).toContain('still-a-fifo');
});

test('devices cannot be made in /workspace, and links to devices are refused', async () => {
  const mknod = await sh('mknod /workspace/zero c 1 5 2>&1; echo rc=$?');
  expect(mknod.stdout).toMatch(/Operation not permitted[\s\S]*rc=1/);
  await sh('ln -sfn /dev/zero /workspace/zero-link && ln -sfn /dev/tty /workspace/tty-link');
  for (const p of ['zero-link', 'tty-link']) {
    await expect(sb.readFile(p)).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/is a symbolic link \(to \/dev\//) });
    await expect(sb.writeFile(p, 'x')).rejects.toMatchObject({ code: 'path_refused' });
  }
  await expect(sb.readFile('/dev/zero')).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/absolute/) });
});

test('symlinked final and intermediate components are refused, even when they point inside /workspace', async () => {
  await sh('mkdir -p /workspace/real/sub && printf "x\\n" > /workspace/real/sub/a.txt && ln -sfn real /workspace/alias && ln -sfn real/sub/a.txt /workspace/a-link && ln -sfn /home/agent/.bashrc /workspace/rc');
  const cases: Array<[string, RegExp]> = [
    ['a-link', /a-link is a symbolic link \(to real\/sub\/a\.txt\)/],
    ['alias/sub/a.txt', /alias is a symbolic link \(to real\)/],
    ['rc', /rc is a symbolic link \(to \/home\/agent\/\.bashrc\)/],
  ];
  for (const [p, why] of cases) {
    await expect(sb.readFile(p)).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(why) });
    await expect(sb.writeFile(p, 'PWNED\n')).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(why) });
    await expect(sb.removeFile(p)).rejects.toMatchObject({ code: 'path_refused' });
  }
  await expect(sb.listFiles('alias')).rejects.toMatchObject({ code: 'path_refused' });
  expect((await sh('cat /home/agent/.bashrc /workspace/real/sub/a.txt; test -L /workspace/rc && echo link-kept')).stdout).toBe(`${HOME_BEFORE}x\nlink-kept\n`);
  // The real path works, and a write keeps the file's mode.
  await sh('chmod 755 /workspace/real/sub/a.txt');
  await sb.writeFile('real/sub/a.txt', 'y\n');
  expect((await sh('stat -c %a /workspace/real/sub/a.txt; cat /workspace/real/sub/a.txt; ls -A /workspace/real/sub')).stdout).toBe('755\ny\na.txt\n');
  await expect(sb.writeFile('real', 'x')).rejects.toMatchObject({ code: 'path_refused', message: expect.stringMatching(/is a directory|not a regular file/) });
});

test('edit_file refuses to clobber a change made between its read and its write', async () => {
  await sh('printf "count = 1\\n" > /workspace/c.py');
  const file = await sb.readFile('c.py');
  await sh('printf "count = 2  # someone else\\n" > /workspace/c.py');
  await expect(sb.writeFile('c.py', 'count = 10\n', { expectSha256: file.sha256! })).rejects.toMatchObject({ code: 'conflict' });
  expect((await sh('cat /workspace/c.py')).stdout).toBe('count = 2  # someone else\n');
  await expect(sb.writeFile('new.py', 'x', { expectSha256: 'absent' })).resolves.toBeUndefined();
  await expect(sb.writeFile('new.py', 'y', { expectSha256: 'absent' })).rejects.toMatchObject({ code: 'conflict' });
});
