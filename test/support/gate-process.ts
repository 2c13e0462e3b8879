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
  const end = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`corral docker-gate exited (${child.exitCode}) before it listened:\n${text.slice(-2000)}`);
    if ((await check().then(() => true, () => false))) break;
    if (Date.now() > end) {
      child.kill('SIGKILL');
      throw new Error(`corral docker-gate did not answer on ${sock} in 30 s:\n${text.slice(-2000)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
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
