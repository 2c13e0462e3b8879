/**
 * `corral docker-gate --listen unix:///PATH/gate.sock [--image IMG]... [--key-file F] [--socket-mode 0660]`
 * (--listen and --key-file default to CORRAL_DOCKER_GATE_LISTEN and CORRAL_DOCKER_GATE_KEY_FILE)
 * Holds the engine's socket (DOCKER_HOST or /var/run/docker.sock) and serves the checked Engine API
 * subset corral uses on the listen socket (src/docker-gate). Runs until SIGTERM/SIGINT.
 */
import { chmod } from 'node:fs/promises';
import { loadConfig } from '../config';
import { parseArgs, UsageError } from './cli-args';
import { engineSocketPath, leaseDirFromConfig, policyFromConfig, readKey, startGate } from '../docker-gate';
import { hostBudgetReport, readHostLimits } from '../sandbox/host-budget-check';

export async function run(argv: string[]): Promise<number> {
  const { opts: values, positionals: extra } = parseArgs(argv, { listen: 'string', image: 'list', 'key-file': 'string', 'socket-mode': 'string' });
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const config = loadConfig();
  const listen = values.listen ?? config.CORRAL_DOCKER_GATE_LISTEN;
  if (!listen?.startsWith('unix:///')) throw new UsageError('--listen unix:///PATH/gate.sock (or CORRAL_DOCKER_GATE_LISTEN) is required');
  const mode = values['socket-mode'] ?? '0660';
  if (!/^0?[0-7]{3}$/.test(mode)) throw new UsageError(`--socket-mode must be octal like 0660, got "${mode}"`);
  const keyFile = values['key-file'] ?? config.CORRAL_DOCKER_GATE_KEY_FILE;
  const policy = policyFromConfig(config, { ...(values.image.length ? { images: values.image } : {}), ...(keyFile ? { key: readKey(keyFile) } : {}) });
  if (!keyFile) process.stderr.write('corral docker-gate: no --key-file: a fresh ownership key; after a restart the gate will not recognise sandboxes it created before (the engine still ends them at their deadline)\n');
  const path = new URL(listen).pathname;
  const gate = await startGate({ policy, listen: path, engineSocket: engineSocketPath(config.DOCKER_HOST), leaseDir: leaseDirFromConfig(config) });
  await chmod(path, parseInt(mode, 8));
  process.stderr.write(`${JSON.stringify({ msg: 'docker-gate listening', listen: path, images: policy.images, queue: policy.queue, egressRoot: policy.egressRoot, leaseDir: leaseDirFromConfig(config) })}\n`);
  const budgets = hostBudgetReport(readHostLimits(), {
    maxPids: config.CORRAL_MAX_PIDS, maxMemoryMb: config.CORRAL_MAX_MEMORY_MB, maxWorkspaceMb: config.CORRAL_MAX_WORKSPACE_MB,
    slots: config.CORRAL_SANDBOX_SLOTS, gvisor: config.CORRAL_ISOLATION_CLASSES.includes('gvisor'),
  });
  process.stderr.write(`${JSON.stringify({ msg: 'docker-gate host budgets', budgets: budgets.lines, problems: budgets.problems })}\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await gate.close();
  return 0;
}
