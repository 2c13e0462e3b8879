/**
 * `corral docker-gate` as its own process, as compose.yaml deploys it, for suites whose workers are
 * child processes: the gate holds the engine's socket (this process's DOCKER_HOST or the default)
 * with the deployment's config (`env`, so its policy matches the workers'), and the workers get
 * `dockerHost` (its socket) as their DOCKER_HOST. refused() lists every request it refused: a suite
 * checks it is empty, which proves the gate's subset is enough for what the workers did.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gateReadyCheck } from '../../src/docker-gate/readiness';
import { eventually } from './eventually';

const ROOT = resolve(__dirname, '../..');

export interface GateProcess {
  dockerHost: string;
  child: ChildProcess;
  refused(): Array<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function startGateProcess(env: Record<string, string>): Promise<GateProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'corral-gate-'));
  chmodSync(dir, 0o755);
  const sock = join(dir, 'gate.sock');
  const dockerHost = `unix://${sock}`;
  const { DOCKER_HOST: _ignored, ...gateEnv } = env;
  const child = spawn(join(ROOT, 'bin/corral'), ['docker-gate', '--listen', dockerHost, '--key-file', join(dir, 'key')], {
    env: { ...process.env, ...gateEnv }, stdio: ['ignore', 'ignore', 'pipe'],
  });
  let text = '';
  child.stderr!.on('data', (d: Buffer) => {
    if (text.length < 1 << 20) text += d.toString();
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const check = gateReadyCheck(dockerHost)['docker-gate']!;
  const ready = await eventually(async () => (child.exitCode !== null ? 'exited' : (await check().then(() => 'ready', () => null))), { what: `corral docker-gate to answer on ${sock}` })
    .catch((err: Error) => {
      child.kill('SIGKILL');
      throw new Error(`${err.message}:\n${text.slice(-2000)}`, { cause: err });
    });
  if (ready === 'exited') throw new Error(`corral docker-gate exited (${child.exitCode}) before it listened:\n${text.slice(-2000)}`);
  return {
    dockerHost, child,
    refused: () => text.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => r.msg === 'docker-gate refused'),
    async close() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(t);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
