/**
 * The second engine (test/support/second-engine.ts) that stands in for another host: it runs a
 * container shaped like a sandbox (no network, read-only rootfs, tmpfs, a host directory bound in,
 * uid 1000, no capabilities, no-new-privileges, seccomp, memory and pids limits), it and the main
 * engine do not see each other's containers, its containers die with it and are listed again (exited)
 * after a restart, dispose() leaves no process, mount, cgroup or directory of it, and the main
 * engine's bridge (docker0) is left alone throughout.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import Docker from 'dockerode';
import { startSecondEngine, type SecondEngine } from '../support/second-engine';
import { instanceLabels } from '../support/sandbox-env';

jest.setTimeout(60_000);

const IMAGE = 'corral/sandbox:latest';
const main = new Docker();
let engine: SecondEngine | undefined;
let b: Docker;
let hostDir: string;
/** A container of this test's on the main engine, on its default bridge network. */
let onMainId = '';
const lines: string[] = [];

/** stdout of a non-TTY container's log (frames: 1 byte stream, 3 padding, 4 size, payload). */
function stdoutOf(buf: Buffer): string {
  let out = '';
  for (let i = 0; i + 8 <= buf.length; i += 8 + buf.readUInt32BE(i + 4)) {
    if (buf[i] === 1) out += buf.subarray(i + 8, i + 8 + buf.readUInt32BE(i + 4)).toString();
  }
  return out;
}

/** A process that is there and not a zombie (one its reaper has not got to yet is gone for us). */
const alive = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

const processesOf = (dir: string) => readdirSync('/proc').filter((e) => /^\d+$/.test(e) && Number(e) !== process.pid).filter((e) => {
  try {
    return readFileSync(`/proc/${e}/cmdline`, 'utf8').includes(dir);
  } catch {
    return false;
  }
});

// `--bridge none` deletes an interface docker0 where dockerd runs: the main engine's, were it not in a
// network namespace of its own.
const mainBridge = existsSync('/sys/class/net/docker0');

beforeAll(async () => {
  hostDir = mkdtempSync(join(tmpdir(), 'corral-engine-bind-'));
  chmodSync(hostDir, 0o777);
  const probe = await main.createContainer({ Image: IMAGE, Entrypoint: [], Cmd: ['sleep', '300'], Labels: { 'corral.test': 'second-engine', ...instanceLabels() }, HostConfig: { Init: true } });
  onMainId = probe.id;
  await probe.start();
  engine = await startSecondEngine({ images: [IMAGE], log: (l) => lines.push(l) });
  b = new Docker({ socketPath: engine.socketPath });
});

afterAll(async () => {
  await engine?.dispose();
  if (onMainId) await main.getContainer(onMainId).remove({ force: true });
  rmSync(hostDir, { recursive: true, force: true });
  console.log(lines.join('\n'));
});

let ranId = '';

test('it is an engine of its own: runc only (not the main daemon.json), default seccomp, an ID of its own, the image', async () => {
  const [info, mainInfo] = await Promise.all([b.info(), main.info()]);
  expect(Object.keys(info.Runtimes as Record<string, unknown>)).not.toContain('runsc');
  expect(info.SecurityOptions).toContain('name=seccomp,profile=default');
  expect(info.ID).not.toBe(mainInfo.ID);
  expect(info.Name).toBe(basename(engine!.dir)); // a host name of its own (UTS namespace)
  expect(existsSync('/sys/class/net/docker0')).toBe(mainBridge);
  expect(info.DockerRootDir).toBe(join(engine!.dir, 'data'));
  expect(engine!.dockerHost).toBe(`unix://${engine!.socketPath}`);
  expect((await b.getImage(IMAGE).inspect()).Id).toBe((await main.getImage(IMAGE).inspect()).Id);
});

test('a sandbox-shaped container runs on it and writes into the bound host directory', async () => {
  const c = await b.createContainer({
    Image: IMAGE,
    Entrypoint: [],
    Cmd: ['sh', '-c', [
      'echo hi > /mnt/x; cat /etc/os-release | head -1',
      'id -u', 'ls /sys/class/net', 'touch /etc/y 2>/dev/null || echo rootfs-ro', 'echo t > /tmp/t && echo tmpfs-rw',
      'grep ^Seccomp: /proc/self/status', 'grep ^CapEff: /proc/self/status', 'grep ^NoNewPrivs: /proc/self/status',
      'cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max',
      'grep memory /proc/self/cgroup',
    ].join('; ')],
    User: '1000',
    Labels: { 'corral.test': 'second-engine' },
    HostConfig: {
      NetworkMode: 'none', ReadonlyRootfs: true, Tmpfs: { '/tmp': 'rw,nosuid,nodev,size=16m' },
      Binds: [`${hostDir}:/mnt:rw`], CapDrop: ['ALL'], SecurityOpt: ['no-new-privileges'],
      Memory: 64 * 1024 * 1024, PidsLimit: 64, Runtime: 'runc',
    },
  });
  ranId = c.id;
  await c.start();
  expect(await c.wait()).toMatchObject({ StatusCode: 0 });
  const out = stdoutOf(await c.logs({ stdout: true, stderr: true }) as unknown as Buffer).trim().split('\n');
  expect(out).toEqual([
    'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"',
    '1000', 'lo', 'rootfs-ro', 'tmpfs-rw',
    'Seccomp:\t2', 'CapEff:\t0000000000000000', 'NoNewPrivs:\t1',
    String(64 * 1024 * 1024),
    expect.stringContaining(`/${basename(engine!.dir)}/${c.id}`), // under the engine's own cgroup parent
  ]);
  expect(readFileSync(join(hostDir, 'x'), 'utf8')).toBe('hi\n');
  expect(statSync(join(hostDir, 'x')).uid).toBe(1000);
});

test('neither engine lists the other one\'s containers', async () => {
  const [onMain, onB] = await Promise.all([main.listContainers({ all: true }), b.listContainers({ all: true })]);
  expect(onMain.map((c) => c.Id)).toContain(onMainId);
  expect(onMain.map((c) => c.Id)).not.toContain(ranId);
  expect(onB.map((c) => c.Id)).toEqual([ranId]);
  await expect(main.getContainer(ranId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  await expect(b.getContainer(onMainId).inspect()).rejects.toMatchObject({ statusCode: 404 });
});

test('stop() takes its containers down with it; after start() they are listed, exited, and can be removed', async () => {
  const sleeper = await b.createContainer({ Image: IMAGE, Entrypoint: [], Cmd: ['sleep', '300'], User: '1000', HostConfig: { NetworkMode: 'none', Init: true } });
  await sleeper.start();
  const pid = (await sleeper.inspect()).State.Pid;
  expect(alive(pid)).toBe(true);

  await engine!.stop();
  await expect(b.ping()).rejects.toThrow();
  expect(alive(pid)).toBe(false);
  expect(processesOf(engine!.dir)).toEqual([]); // dockerd, its containerd and the shims are gone
  await engine!.stop(); // stopped: a no-op

  await engine!.start();
  const listed = await b.listContainers({ all: true });
  expect(listed.map((c) => [c.Id, c.State]).sort()).toEqual([[ranId, 'exited'], [sleeper.id, 'exited']].sort());
  expect((await b.getContainer(ranId).inspect()).State).toMatchObject({ Running: false, ExitCode: 0 });
  for (const id of [ranId, sleeper.id]) await b.getContainer(id).remove();
  expect(await b.listContainers({ all: true })).toEqual([]);
  // the main engine's container ran on throughout
  expect((await main.getContainer(onMainId).inspect()).State.Running).toBe(true);
});

test('dispose() leaves no process, mount, cgroup or directory of it, and may be called again', async () => {
  const { dir } = engine!;
  await b.createContainer({ Image: IMAGE, Entrypoint: [], Cmd: ['sleep', '300'], HostConfig: { NetworkMode: 'none', Init: true } }).then((c) => c.start());
  await engine!.dispose();
  expect(processesOf(dir)).toEqual([]);
  expect(readFileSync('/proc/self/mountinfo', 'utf8')).not.toContain(dir);
  expect(readdirSync('/sys/fs/cgroup').some((h) => existsSync(join('/sys/fs/cgroup', h, basename(dir))))).toBe(false);
  expect(existsSync(dir)).toBe(false);
  await engine!.dispose();
  await expect(engine!.start()).rejects.toThrow(/disposed/);
  expect(existsSync('/sys/class/net/docker0')).toBe(mainBridge);
  expect((await main.getContainer(onMainId).inspect()).State.Running).toBe(true);
});
