/**
 * Configuration has one source (issue 40, defect 9): no file under src/ but config.ts reads
 * process.env, lint enforces it for the CLI too, and what `corral docker-gate` and bin/corral took from
 * the environment is in the schema — checked, bounded and refused with the variable's name. The
 * gate is started for real by bin/corral from its environment alone (the real Docker engine behind it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { eventually } from '../support/eventually';

const ROOT = resolve(__dirname, '../..');
const CORRAL = join(ROOT, 'bin/corral');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [relative(ROOT, p)] : [];
  });
}

test('no file under src/ but config.ts reads process.env', () => {
  const readers = sources(join(ROOT, 'src')).filter((f) => /process\s*\.\s*env\b|process\s*\[\s*['"]env/.test(readFileSync(join(ROOT, f), 'utf8')));
  expect(readers).toEqual(['src/config.ts']);
});

test('lint refuses process.env in the CLI (no exemption for src/cli/)', () => {
  // A new CLI file that reads the environment itself, linted with the project's rules (without type
  // information: the file is not in the program, and the rule needs none).
  const r = spawnSync(join(ROOT, 'node_modules/.bin/eslint'), [
    '--stdin', '--stdin-filename', 'src/cli/new-command.ts', '--parser-options', 'project:null', '--rule', '@typescript-eslint/no-floating-promises: off', '--format', 'json',
  ], { cwd: ROOT, input: 'export const sneaky = process.env.CORRAL_ANYTHING;\n', encoding: 'utf8' });
  const [result] = JSON.parse(r.stdout) as Array<{ messages: Array<{ ruleId: string | null; message: string }> }>;
  expect(result!.messages.filter((m) => m.ruleId === 'no-restricted-properties').map((m) => m.message)).toEqual([expect.stringContaining('read configuration through src/config.ts')]);
});

test('the gate\'s and the launcher\'s variables are in the schema, checked', () => {
  expect(loadConfig({ CORRAL_DOCKER_GATE_LISTEN: 'unix:///run/g.sock', CORRAL_DOCKER_GATE_KEY_FILE: '/k', CORRAL_NODE_HEAP_MB: '256' })).toMatchObject({ CORRAL_DOCKER_GATE_LISTEN: 'unix:///run/g.sock', CORRAL_DOCKER_GATE_KEY_FILE: '/k', CORRAL_NODE_HEAP_MB: 256 });
  expect(loadConfig({}).CORRAL_NODE_HEAP_MB).toBe(192);
  for (const [name, value] of [['CORRAL_DOCKER_GATE_LISTEN', 'tcp://127.0.0.1:2375'], ['CORRAL_DOCKER_GATE_LISTEN', '/run/g.sock'], ['CORRAL_DOCKER_GATE_KEY_FILE', ''], ['CORRAL_NODE_HEAP_MB', 'lots'], ['CORRAL_NODE_HEAP_MB', '8'], ['CORRAL_NODE_HEAP_MB', '1e9']] as const) {
    expect(() => loadConfig({ [name]: value })).toThrow(expect.objectContaining({ code: 'invalid_input', message: expect.stringContaining(name) }));
  }
});

test('bin/corral refuses a heap size that is not a number, naming the variable', () => {
  for (const bad of ['lots', '192; rm -rf /', '-1', '']) {
    const r = spawnSync(CORRAL, ['--help'], { env: { PATH: process.env.PATH!, CORRAL_NODE_HEAP_MB: bad }, encoding: 'utf8' });
    if (bad === '') {
      expect(r.status).toBe(0); // unset or empty: the default
      continue;
    }
    expect({ bad, status: r.status }).toEqual({ bad, status: 2 });
    expect(r.stderr).toContain('CORRAL_NODE_HEAP_MB');
  }
  const wrongGate = spawnSync(CORRAL, ['docker-gate'], { env: { PATH: process.env.PATH!, CORRAL_DOCKER_GATE_LISTEN: 'tcp://127.0.0.1:2375' }, encoding: 'utf8' });
  expect(wrongGate.status).not.toBe(0);
  expect(wrongGate.stderr).toContain('CORRAL_DOCKER_GATE_LISTEN');
});

test('corral docker-gate takes its socket from CORRAL_DOCKER_GATE_LISTEN, and stops on SIGTERM', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-gate-env-'));
  const sock = join(dir, 'gate.sock');
  const child = spawn(CORRAL, ['docker-gate'], { env: { PATH: process.env.PATH!, CORRAL_DOCKER_GATE_LISTEN: `unix://${sock}`, ...(process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {}) }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  try {
    await eventually(() => stderr.includes('docker-gate listening') && existsSync(sock), { what: `the gate to listen on ${sock} (stderr: ${stderr})` });
    expect(stderr).toContain(`"listen":"${sock}"`);
  } finally {
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    rmSync(dir, { recursive: true, force: true });
  }
});
