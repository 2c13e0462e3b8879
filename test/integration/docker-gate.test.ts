/**
 * The docker gate against the real engine and the real `docker` CLI, as a compromised worker would
 * use them (DOCKER_HOST at the gate): every escape a create body, an exec or a non-sandbox endpoint
 * could give is refused with 403 naming its rule, and logged. Then a real sandbox (the provider with
 * a dockerode client on the gate) is acquired, execs byte-exact (binary, stdin), copies files and is
 * disposed through it. Containers this file makes directly on the engine are labelled and removed.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { policyFromConfig, startGate, type DockerGate } from '../../src/docker-gate';
import { gateReadyCheck } from '../../src/docker-gate/readiness';
import { containerSpec } from '../../src/sandbox/container-spec';
import { DockerSandboxProvider } from '../../src/sandbox';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { GateEgressDirs } from '../../src/sandbox/egress-dirs';
import { uidSlot } from '../../src/sandbox/uid-slots';
import { createRequest } from '../../src/sandbox/sandbox-engine';
import { instanceLabels, sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(120_000);

const TEST_LABEL = 'corral.test';
const tag = `docker-gate-${randomBytes(3).toString('hex')}`;
const QUEUE = `gate${randomBytes(3).toString('hex')}`;
const base = 2_200_000 + 2 * Math.floor(Math.random() * 1000) * 4;
const config = loadConfig({ ...sandboxTestEnv(), CORRAL_QUEUE: QUEUE, CORRAL_SANDBOX_UID_BASE: String(base), CORRAL_SANDBOX_SLOTS: '4' });
const engine = new Docker();
let dir: string;
let sock: string;
let gate: DockerGate;
const logs: Array<{ msg: string; rule?: unknown }> = [];
const foreign: Docker.Container[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cg-'));
  await chmod(dir, 0o755); // the egress proxy (another uid) makes its socket below it
  sock = join(dir, 'gate.sock');
  const policy = policyFromConfig(config, { egressRoot: join(dir, 'egress') });
  gate = await startGate({ policy, listen: sock, engineSocket: '/var/run/docker.sock', log: (msg, f) => logs.push({ msg, ...f }) });
});

afterAll(async () => {
  await gate?.close();
  await Promise.all(foreign.map((c) => c.remove({ force: true }).catch(() => undefined)));
  const left = await engine.listContainers({ all: true, filters: { label: [`${TEST_LABEL}=${tag}`] } });
  await Promise.all(left.map((c) => engine.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  const ours = await engine.listContainers({ all: true, filters: { label: [`corral.queue=${QUEUE}`] } });
  await Promise.all(ours.map((c) => engine.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  await rm(dir, { recursive: true, force: true });
});

function cli(args: string[], extraEnv: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('docker', args, { env: { ...process.env, DOCKER_HOST: `unix://${sock}`, ...extraEnv }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: `${stdout}${stderr}` });
    });
  });
}

const image = config.CORRAL_SANDBOX_IMAGE;
const run = (...flags: string[]) => ['run', '--rm', '--label', `${TEST_LABEL}=${tag}`, ...flags, image, 'true'];

describe('the docker CLI, pointed at the gate, is refused', () => {
  const cases: Array<[string, string[], string]> = [
    ['docker run --privileged', run('--privileged'), 'not-privileged'],
    ['docker run -v /:/host', run('-v', '/:/host'), 'binds-egress-only'],
    ['docker run --mount type=bind', run('--mount', 'type=bind,src=/etc,dst=/x'), 'binds-egress-only'],
    ['docker run --mount type=bind at /workspace', run('--mount', 'type=bind,src=/etc,dst=/workspace'), 'workspace-volume'],
    ['docker run --pid host', run('--pid', 'host'), 'no-host-namespaces'],
    ['docker run --ipc host', run('--ipc', 'host'), 'no-host-namespaces'],
    ['docker run --uts host', run('--uts', 'host'), 'no-host-namespaces'],
    ['docker run --userns host', run('--userns', 'host'), 'no-host-namespaces'],
    ['docker run --network host', run('--network', 'host'), 'network-none'],
    ['docker run --cap-add SYS_ADMIN', run('--cap-add', 'SYS_ADMIN'), 'no-cap-add'],
    ['docker run --device /dev/null', run('--device', '/dev/null'), 'no-devices'],
    ['docker run (a plain container of the sandbox image)', run(), 'network-none'],
    ['docker run --network none --read-only (still no seccomp, no labels)', run('--network', 'none', '--read-only', '--cap-drop', 'ALL'), 'no-new-privileges'],
    ['docker run of a non-sandbox image', ['run', '--rm', '--label', `${TEST_LABEL}=${tag}`, 'debian:bookworm-slim', 'true'], 'image-allowlist'],
    ['docker pull', ['pull', 'debian:bookworm-slim'], 'endpoint-not-allowed'],
    ['docker volume create', ['volume', 'create', `v-${tag}`], 'endpoint-not-allowed'],
    ['docker plugin install', ['plugin', 'install', '--grant-all-permissions', 'vieux/sshfs'], 'endpoint-not-allowed'],
    ['docker swarm join', ['swarm', 'join', '--token', 'SWMTKN-1-x', '127.0.0.1:2377'], 'endpoint-not-allowed'],
    ['docker network create', ['network', 'create', `n-${tag}`], 'endpoint-not-allowed'],
    ['docker images', ['images'], 'endpoint-not-allowed'],
  ];
  test.each(cases)('%s', async (_name, args, rule) => {
    const before = logs.length;
    const r = await cli(args);
    expect(r.code).not.toBe(0);
    expect(r.out).toContain(`docker-gate refused (rule ${rule})`);
    expect(logs.slice(before)).toContainEqual(expect.objectContaining({ msg: 'docker-gate refused', rule }));
  });

  test('docker build (the classic builder) is refused', async () => {
    const ctx = join(dir, 'build');
    await rm(ctx, { recursive: true, force: true });
    await mkdir(ctx);
    await writeFile(join(ctx, 'Dockerfile'), `FROM ${image}\nRUN true\n`);
    const r = await cli(['build', '-t', `x-${tag}`, ctx], { DOCKER_BUILDKIT: '0' });
    expect(r.code).not.toBe(0);
    expect(r.out).toContain('docker-gate refused (rule endpoint-not-allowed)');
  });

  test('nothing the attacks asked for exists on the engine', async () => {
    expect(await engine.listContainers({ all: true, filters: { label: [`${TEST_LABEL}=${tag}`] } })).toEqual([]);
    expect((await engine.listVolumes()).Volumes?.filter((v) => v.Name === `v-${tag}`) ?? []).toEqual([]);
  });
});

describe('containers that are not this deployment\'s own', () => {
  const start = async (labels: Record<string, string>) => {
    const c = await engine.createContainer({ name: `cg-foreign-${randomBytes(4).toString('hex')}`, Image: image, Cmd: ['sleep', '120'], Labels: { [TEST_LABEL]: tag, ...instanceLabels(), ...labels } });
    foreign.push(c);
    await c.start();
    return c;
  };
  test('docker exec / inspect / rm / cp into an unlabelled container are refused', async () => {
    const c = await start({});
    const name = (await c.inspect()).Name.slice(1);
    for (const args of [['exec', name, 'id'], ['inspect', name], ['rm', '-f', name], ['cp', `${name}:/etc/passwd`, join(dir, 'x')], ['kill', name], ['logs', name]]) {
      const r = await cli(args);
      expect(r.out).toMatch(/docker-gate refused \(rule (container-not-ours|endpoint-not-allowed)\)/);
    }
    expect((await c.inspect()).State.Running).toBe(true);
  });
  test('labels forged onto a foreign container (even a copied ownership label) do not make it ours', async () => {
    const c = await start({ corral: '1', 'corral.queue': QUEUE, 'corral.run-id': 'run_forged', 'corral.uid': String(base + 1), 'corral.gate': 'f'.repeat(64) });
    const name = (await c.inspect()).Name.slice(1);
    const r = await cli(['exec', '-u', `${base + 1}:${base + 1}`, name, 'id']);
    expect(r.out).toContain('docker-gate refused (rule container-not-ours)');
    const ps = await cli(['ps', '-a', '--format', '{{.Names}}']);
    expect(ps.code).toBe(0);
    expect(ps.out).not.toContain(name);
  });
});

describe('create bodies one rule away from the sandbox spec', () => {
  const gateDocker = () => new Docker({ socketPath: sock });
  const spec = () => containerSpec({
    runId: 'run_gatevariant', workerId: 'w', queue: QUEUE, instance: config.CORRAL_INSTANCE, deadline: new Date(Date.now() + 60_000), now: new Date(),
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, image, isolation: 'runc', gvisorRuntime: config.CORRAL_GVISOR_RUNTIME,
    slot: uidSlot({ base, slots: 4 }, 3),
  });
  const variants: Array<[string, (s: Docker.ContainerCreateOptions) => void, string]> = [
    ['apparmor unconfined', (s) => s.HostConfig!.SecurityOpt!.push('apparmor=unconfined'), 'security-opt'],
    ['seccomp unconfined', (s) => { s.HostConfig!.SecurityOpt = ['no-new-privileges:true', 'seccomp=unconfined']; }, 'seccomp-profile'],
    ['no no-new-privileges', (s) => { s.HostConfig!.SecurityOpt = s.HostConfig!.SecurityOpt!.slice(1); }, 'no-new-privileges'],
    ['writable root', (s) => { s.HostConfig!.ReadonlyRootfs = false; }, 'read-only-root'],
    ['a bind of /etc at the egress mount', (s) => { s.HostConfig!.Binds = ['/etc:/run/corral:ro']; }, 'binds-egress-only'],
    ['a bind climbing out of the egress root', (s) => { s.HostConfig!.Binds = [`${join(dir, 'egress')}/../..:/run/corral:ro`]; }, 'binds-egress-only'],
    // the operator CA's binds (egress-ca.ts): only the egress directory's ca/, read-only, at their exact places
    ...([
      ['a CA bind of /etc at the CA mount', (ed: string) => [`${ed}:/run/corral:ro`, '/etc:/etc/corral/ca:ro']],
      ['a writable system-store bind', (ed: string) => [`${ed}:/run/corral:ro`, `${ed}/ca:/etc/corral/ca:ro`, `${ed}/ca/bundle.crt:/etc/ssl/certs/ca-certificates.crt:rw`]],
      ['the CA file over another system file', (ed: string) => [`${ed}:/run/corral:ro`, `${ed}/ca:/etc/corral/ca:ro`, `${ed}/ca/bundle.crt:/etc/passwd:ro`]],
      ['a fourth bind', (ed: string) => [`${ed}:/run/corral:ro`, `${ed}/ca:/etc/corral/ca:ro`, `${ed}/ca/bundle.crt:/etc/ssl/certs/ca-certificates.crt:ro`, '/:/host:ro']],
    ] as const).map(([what, binds]): [string, (s: Docker.ContainerCreateOptions) => void, string] => [what, (s) => {
      const ed = `${join(dir, 'egress')}/r-catest01`; // a name the gate could have made: the CA rule itself refuses
      s.Labels!['corral.egress-dir'] = ed;
      s.HostConfig!.Binds = [...binds(ed)];
    }, 'binds-egress-only']),
    ['CapDrop missing', (s) => { s.HostConfig!.CapDrop = []; }, 'cap-drop-all'],
    // the workspace volume: only a tmpfs of the local driver, anonymous, with exactly the sandbox's options
    ['a workspace volume that binds the host root', (s) => { s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options = { type: 'none', device: '/', o: 'bind' }; }, 'workspace-volume'],
    ['a workspace volume on a block device', (s) => { s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options = { type: 'ext4', device: '/dev/sda1', o: 'size=8m,uid=1,gid=1,mode=0755,nosuid,nodev,exec' }; }, 'workspace-volume'],
    ['a workspace volume with extra mount options', (s) => { const o = s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options; o.o = `${o.o},dev,suid`; }, 'workspace-volume'],
    ['a named workspace volume (another container\'s)', (s) => { s.HostConfig!.Mounts![0]!.Source = 'someone-elses-volume'; }, 'workspace-volume'],
    ['a workspace volume of another driver', (s) => { s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Name = 'rexray'; }, 'workspace-volume'],
    ['a workspace volume over the size maximum', (s) => { const o = s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options; o.o = o.o!.replace(/size=\d+m/, 'size=999999m'); }, 'workspace-volume'],
    ['a workspace volume bound to the host root by its o= options', (s) => { const o = s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options; o.o = `${o.o},bind`; o.device = '/'; }, 'workspace-volume'],
    ['a workspace volume owned by root', (s) => { const o = s.HostConfig!.Mounts![0]!.VolumeOptions!.DriverConfig.Options; o.o = o.o!.replace(/uid=\d+,gid=\d+/, 'uid=0,gid=0'); }, 'sandbox-user'],
    ['a workspace volume with labels', (s) => { s.HostConfig!.Mounts![0]!.VolumeOptions!.Labels = { 'com.example.keep': '1' }; }, 'workspace-volume'],
    ['a read-only workspace volume', (s) => { s.HostConfig!.Mounts![0]!.ReadOnly = true; }, 'workspace-volume'],
    ['a workspace volume that copies the image\'s files in', (s) => { s.HostConfig!.Mounts![0]!.VolumeOptions!.NoCopy = false; }, 'workspace-volume'],
    ['no workspace volume under runc (a tmpfs instead)', (s) => { s.HostConfig!.Mounts!.shift(); s.HostConfig!.Tmpfs!['/workspace'] = `rw,exec,nosuid,nodev,size=8m,uid=${base + 7},gid=${base + 7},mode=0755`; }, 'workspace-volume'],
    ['a tmpfs over the workspace volume', (s) => { s.HostConfig!.Tmpfs!['/workspace'] = `rw,exec,nosuid,nodev,size=8m,uid=${base + 7},gid=${base + 7},mode=0755`; }, 'workspace-volume'],
    ['a third mount', (s) => { s.HostConfig!.Mounts!.push({ ...s.HostConfig!.Mounts![0]!, Target: '/x' }); }, 'binds-egress-only'],
    ['two workspace volumes', (s) => { s.HostConfig!.Mounts![1] = s.HostConfig!.Mounts![0]!; }, 'binds-egress-only'],
    ['no pty volume under runc', (s) => { s.HostConfig!.Mounts!.pop(); }, 'pty-budget'],
    ['memory over the maximum', (s) => { s.HostConfig!.Memory = s.HostConfig!.MemorySwap = 64 * 1024 ** 3; }, 'resource-maxima'],
    ['swap on', (s) => { s.HostConfig!.MemorySwap = -1; }, 'resource-maxima'],
    ['no cpu limit', (s) => { delete s.HostConfig!.NanoCpus; }, 'resource-maxima'],
    ['tmpfs without a size', (s) => { s.HostConfig!.Tmpfs!['/tmp'] = 'rw,nosuid,nodev'; }, 'tmpfs-size'],
    ['tmpfs elsewhere', (s) => { s.HostConfig!.Tmpfs!['/etc'] = 'size=1m,nosuid,nodev'; }, 'tmpfs-size'],
    ['an unknown runtime', (s) => { s.HostConfig!.Runtime = 'io.containerd.runc.v2-custom'; }, 'runtime-allowlist'],
    ['another deployment\'s queue', (s) => { s.Labels!['corral.queue'] = 'other'; }, 'deployment-labels'],
    ['a self-made ownership label', (s) => { s.Labels!['corral.gate'] = 'x'; }, 'deployment-labels'],
    ['root as user', (s) => { s.User = '0:0'; }, 'sandbox-user'],
    ['sysctls', (s) => { s.HostConfig!.Sysctls = { 'net.ipv4.ip_forward': '1' }; }, 'host-config'],
    ['cgroup parent', (s) => { s.HostConfig!.CgroupParent = '/'; }, 'host-config'],
    ['masked paths cleared', (s) => { s.HostConfig!.MaskedPaths = []; }, 'masked-paths'],
    ['readonly paths cleared', (s) => { (s.HostConfig as Record<string, unknown>).ReadonlyPaths = []; }, 'masked-paths'],
    ['a network to join', (s) => { s.HostConfig!.NetworkMode = 'bridge'; }, 'network-none'],
    ['cgroupns host', (s) => { (s.HostConfig as Record<string, unknown>).CgroupnsMode = 'host'; }, 'no-host-namespaces'],
    ['an unknown HostConfig field', (s) => { (s.HostConfig as Record<string, unknown>).BlkioWeight = 10; }, 'host-config'],
  ];
  test.each(variants)('%s', async (_n, change, rule) => {
    const s = spec();
    change(s);
    await expect(gateDocker().createContainer(createRequest(s))).rejects.toMatchObject({ statusCode: 403, message: expect.stringContaining(`rule ${rule}`) });
  });
  test('the exact spec passes (and is removed)', async () => {
    const c = await gateDocker().createContainer(createRequest(spec()));
    await c.remove({ force: true });
  });
});

test('a real sandbox acquires, execs byte-exact, copies files and is disposed through the gate', async () => {
  const docker = new Docker({ socketPath: sock });
  const provider = new DockerSandboxProvider({ docker, config, egressRoot: join(dir, 'egress') });
  const sb = await provider.acquire({
    runId: `run_gate_${randomBytes(4).toString('hex')}`, workerId: 'gate-test', deadline: new Date(Date.now() + 90_000), files: { 'a.txt': 'seeded\n' },
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: [],
  });
  try {
    const bin = await sb.exec({ argv: ['sh', '-c', 'head -c 65536 /dev/urandom | tee /tmp/r | sha256sum; cat /tmp/r | base64 -w0 | head -c 40'], timeoutMs: 10_000 });
    expect(bin.exitCode).toBe(0);
    const echoed = await sb.exec({ argv: ['sh', '-c', 'cat | od -An -tx1 | tr -d " \\n"'], stdin: Buffer.from([0, 1, 2, 255, 254, 10, 13, 0]), timeoutMs: 10_000 });
    expect(echoed.stdout).toBe('000102fffe0a0d00');
    const big = await sb.exec({ argv: ['sh', '-c', 'seq 1 20000 | sha256sum; seq 1 20000 >&2'], timeoutMs: 10_000, maxOutputBytes: 1 << 20 });
    expect(big.stderr.length).toBe(108894);
    expect(big.stdout.split(' ')[0]).toBe(createHash('sha256').update(big.stderr).digest('hex'));
    await sb.writeFile('b/c.txt', 'written through the gate\n');
    expect((await sb.readFile('b/c.txt')).content).toBe('written through the gate\n');
    expect((await sb.readFile('a.txt')).content).toBe('seeded\n');
    expect((await sb.listFiles('.')).map((e) => e.path).sort()).toEqual(expect.arrayContaining(['a.txt', 'b']));
    const out = join(dir, 'export');
    const ex = await sb.exportWorkspace({ tarPath: `${out}.tar`, patchPath: `${out}.patch` });
    expect(ex.stats.files).toBeGreaterThanOrEqual(2);
    // an exec as root in our own sandbox is refused
    const c = docker.getContainer(sb.id);
    await expect(c.exec({ Cmd: ['id'], User: '0:0', AttachStdout: true })).rejects.toMatchObject({ statusCode: 403, message: expect.stringContaining('rule exec-user') });
    await expect(c.exec({ Cmd: ['id'], User: `${base + 1}:${base + 1}`, Privileged: true })).rejects.toMatchObject({ statusCode: 403 });
    // listing through the gate shows this sandbox and nothing foreign
    const list = await docker.listContainers({ all: true });
    expect(list.map((x) => x.Id)).toContain(sb.id);
    expect(list.every((x) => x.Labels['corral.queue'] === QUEUE)).toBe(true);
  } finally {
    await sb.dispose();
  }
  await expect(engine.getContainer(sb.id).inspect()).rejects.toMatchObject({ statusCode: 404 });
});

test('the worker\'s readiness check sees the gate (and tells a plain engine apart)', async () => {
  await expect(gateReadyCheck(`unix://${sock}`)['docker-gate']!()).resolves.toBe('gate');
  await expect(gateReadyCheck('unix:///var/run/docker.sock')['docker-gate']!()).resolves.toBe('no gate');
  await expect(gateReadyCheck(`unix://${join(dir, 'nothing.sock')}`)['docker-gate']!()).rejects.toThrow();
});

test('a sandbox with egress (its socket directory bind-mounted) is created through the gate', async () => {
  const docker = new Docker({ socketPath: sock });
  // DNS at a closed loopback port: nothing is resolved or reached; the test only looks at the mount.
  const provider = new DockerSandboxProvider({ docker, config, egressRoot: join(dir, 'egress'), egressTestHooks: egressTestHooks({ dnsServers: ['127.0.0.1:9'], exempt: [] }) });
  const sb = await provider.acquire({
    runId: `run_gate_eg_${randomBytes(4).toString('hex')}`, workerId: 'gate-test', deadline: new Date(Date.now() + 90_000), files: {},
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: ['example.test'],
  });
  try {
    const r = await sb.exec({ argv: ['sh', '-c', 'test -S /run/corral/egress.sock && grep -c " /run/corral " /proc/mounts'], timeoutMs: 10_000 });
    expect(r).toMatchObject({ exitCode: 0, stdout: '1\n' });
    const labels = (await engine.getContainer(sb.id).inspect()).Config.Labels;
    expect(labels['corral.egress-dir']?.startsWith(`${join(dir, 'egress')}/`)).toBe(true);
  } finally {
    await sb.dispose();
  }
});

describe('the operator CA through the gate (CORRAL_EGRESS_CA_FILE)', () => {
  let pem: string;
  let caConfig: ReturnType<typeof loadConfig>;
  beforeAll(() => {
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'ca.key'), '-out', join(dir, 'ca.pem'), '-days', '2', '-subj', '/CN=corral gate test CA'], { stdio: 'pipe' });
    caConfig = loadConfig({ ...sandboxTestEnv(), CORRAL_QUEUE: QUEUE, CORRAL_SANDBOX_UID_BASE: String(base), CORRAL_SANDBOX_SLOTS: '4', CORRAL_EGRESS_CA_FILE: join(dir, 'ca.pem') });
  });
  beforeAll(async () => {
    pem = await readFile(join(dir, 'ca.pem'), 'utf8');
  });

  test('sandboxes get the gate-made CA files, read-only, and the second one the system store too', async () => {
    const docker = new Docker({ socketPath: sock });
    const provider = new DockerSandboxProvider({ docker, config: caConfig, egressRoot: join(dir, 'egress'), egressTestHooks: egressTestHooks({ dnsServers: ['127.0.0.1:9'], exempt: [] }) });
    for (const round of [1, 2]) {
      const sb = await provider.acquire({
        runId: `run_gate_ca_${round}_${randomBytes(4).toString('hex')}`, workerId: 'gate-test', deadline: new Date(Date.now() + 90_000), files: {},
        limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, egressAllow: ['example.test'],
      });
      try {
        const op = await sb.exec({ argv: ['cat', '/etc/corral/ca/operator.crt'], timeoutMs: 10_000 });
        expect(op).toMatchObject({ exitCode: 0, stdout: pem });
        const w = await sb.exec({ argv: ['sh', '-c', 'echo x >> /etc/corral/ca/bundle.crt || echo refused; rm -f /etc/corral/ca/operator.crt || echo refused'], timeoutMs: 10_000 });
        expect(w.stdout).toBe('refused\nrefused\n');
        const sys = await sb.exec({ argv: ['sh', '-c', 'grep -c " /etc/ssl/certs/ca-certificates.crt " /proc/mounts; grep -c "BEGIN CERTIFICATE" /etc/ssl/certs/ca-certificates.crt'], timeoutMs: 10_000 });
        // the first sandbox of the image is where its system bundle is read; later ones have it covered
        const [mounted, certs] = sys.stdout.trim().split('\n').map(Number);
        expect(mounted).toBe(round === 1 ? 0 : 1);
        if (round === 2) expect(certs).toBeGreaterThan(1);
        const ed = (await engine.getContainer(sb.id).inspect()).Config.Labels['corral.egress-dir']!;
        const [d, c, f] = await Promise.all([lstat(ed), lstat(join(ed, 'ca')), lstat(join(ed, 'ca', 'bundle.crt'))]);
        // sticky: the worker fills the gate's files but cannot rename or replace them
        expect([d.mode & 0o7777, c.mode & 0o7777, f.mode & 0o7777]).toEqual([0o1771, 0o1775, 0o664]);
        expect(c.uid).toBe(process.getuid!());
        expect(f.uid).toBe(process.getuid!());
      } finally {
        await sb.dispose();
      }
    }
  });

  test.each([
    ['ca/ replaced by a link to /etc', async (ed: string) => { await rm(join(ed, 'ca'), { recursive: true }); await symlink('/etc', join(ed, 'ca')); }],
    ['bundle.crt replaced by a link to /etc/shadow', async (ed: string) => { await rm(join(ed, 'ca', 'bundle.crt')); await symlink('/etc/shadow', join(ed, 'ca', 'bundle.crt')); }],
    ['bundle.crt replaced by a directory', async (ed: string) => { await rm(join(ed, 'ca', 'bundle.crt')); await mkdir(join(ed, 'ca', 'bundle.crt')); }],
  ])('a gate-made directory whose %s is refused at create', async (_n, plant) => {
    const dirs = new GateEgressDirs(sock);
    const ed = await dirs.create();
    try {
      await plant(ed);
      const s = containerSpec({
        runId: 'run_gate_ca_link', workerId: 'w', queue: QUEUE, instance: config.CORRAL_INSTANCE, deadline: new Date(Date.now() + 60_000), now: new Date(),
        limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, image, isolation: 'runc', gvisorRuntime: config.CORRAL_GVISOR_RUNTIME,
        slot: uidSlot({ base, slots: 4 }, 2), egressDir: ed, trust: { system: true },
      });
      await expect(new Docker({ socketPath: sock }).createContainer(createRequest(s))).rejects.toMatchObject({ statusCode: 403, message: expect.stringContaining('rule binds-egress-only') });
    } finally {
      await dirs.remove(ed);
    }
  });
});
