/**
 * The environment catalogue (environments/*.yaml): the shipped files load; every class of bad file
 * stops start-up naming `file:LINE` and what is wrong (YAML, schema, an image off the allowlist, an
 * example that does not hold, a reserved variable, a cache with nothing to cache); and the setup
 * cache: keys separate tenants, environments and lockfiles, entries are evicted least recently used.
 */
import { mkdtempSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { admitSpec } from '../../src/domain/admit-spec';
import { RunSpec } from '../../src/domain/run-spec';
import { EnvironmentError, loadEnvironments, parseEnvironment } from '../../src/environments/load-environments';
import { SetupCache } from '../../src/environments/setup-cache';

const config = loadConfig({ CORRAL_SANDBOX_IMAGES: 'corral/sandbox-node:latest,corral/sandbox-go:latest' });
const GOOD = `version: 1
description: test
image: corral/sandbox-node:latest
setup:
  commands:
    - npm ci
  egress: [registry.npmjs.org]
cache:
  files: [package-lock.json]
examples:
  - { phase: setup, target: registry.npmjs.org, expect: allow }
  - { phase: agent, target: registry.npmjs.org, expect: deny }
`;

function refusal(text: string): EnvironmentError {
  try {
    parseEnvironment(text, 'envs/x.yaml', 'x', config);
  } catch (err) {
    if (err instanceof EnvironmentError) return err;
    throw err;
  }
  throw new Error('the file was accepted');
}

test('the shipped catalogue loads: default (built in), node and python', () => {
  const envs = loadEnvironments(resolve(__dirname, '../../environments'), loadConfig({}));
  expect([...envs.keys()].sort()).toEqual(['default', 'node', 'python']);
  expect(envs.get('python')).toMatchObject({
    image: 'corral/sandbox-python:latest', path: ['/workspace/.venv/bin'], env: { PIP_INDEX_URL: 'https://pypi.org/simple' },
    setup: { egress: ['pypi.org', 'files.pythonhosted.org'] }, egress: [], cache: { files: ['requirements.txt', 'pyproject.toml', 'setup.py', 'setup.cfg'] },
  });
  const node = envs.get('node')!;
  expect(node).toMatchObject({ image: 'corral/sandbox-node:latest', setup: { egress: ['registry.npmjs.org'] }, egress: [], cache: { files: ['package.json', 'package-lock.json'] } });
  expect(envs.get('default')).toMatchObject({ image: 'corral/sandbox:latest', setup: { commands: [] }, file: '(built in)' });
});

test('a good file parses; its digest changes with any change to the definition', () => {
  const a = parseEnvironment(GOOD, 'envs/x.yaml', 'x', config);
  const b = parseEnvironment(GOOD.replace('npm ci', 'npm ci --ignore-scripts'), 'envs/x.yaml', 'x', config);
  expect(a.digest).toMatch(/^[0-9a-f]{64}$/);
  expect(a.digest).not.toBe(b.digest);
  expect(parseEnvironment(GOOD, 'other/x.yaml', 'x', config).digest).toBe(a.digest);
});

test.each([
  ['broken YAML', GOOD.replace('  egress: [registry.npmjs.org]', '  egress: [registry.npmjs.org'), /x\.yaml:\d+: YAML/],
  ['a duplicate key', `${GOOD}image: other\n`, /x\.yaml:\d+: YAML.*[Mm]ap keys must be unique/],
  ['an unknown field', GOOD.replace('description: test', 'description: test\nimagee: x'), /x\.yaml:3: .*imagee/],
  ['a wrong version', GOOD.replace('version: 1', 'version: 2'), /x\.yaml:1: version/],
  ['an image off the allowlist', GOOD.replace('corral/sandbox-node:latest', 'evil/miner:latest'), /x\.yaml:3: image: "evil\/miner:latest" is not one of this server's sandbox images/],
  ['a command YAML reads as a mapping', GOOD.replace('- npm ci', '- echo a: b'), /x\.yaml:6: setup\.commands\.0: YAML read this command as a mapping/],
  ['a reserved variable', GOOD.replace('description: test', 'description: test\nenv:\n  HTTPS_PROXY: http://evil'), /x\.yaml:\d+: env\.HTTPS_PROXY: is set by corral itself/],
  ['PATH from the environment', GOOD.replace('description: test', 'description: test\nenv:\n  PATH: /tmp'), /env\.PATH: is set by corral itself/],
  ['a bad egress entry', GOOD.replace('[registry.npmjs.org]', '["http://registry.npmjs.org/"]'), /x\.yaml:7: setup\.egress\.0/],
  ['a cache key that is not a workspace path', GOOD.replace('[package-lock.json]', '[../etc/passwd]'), /x\.yaml:9: cache\.files\.0/],
  ['a cache without setup commands', GOOD.replace('    - npm ci\n', '').replace('  commands:\n', ''), /x\.yaml:\d+: cache: an environment without setup commands has nothing to cache/],
  ['an example that does not hold (setup)', GOOD.replace('target: registry.npmjs.org, expect: allow', 'target: github.com, expect: allow'), /x\.yaml:11: examples\.0: github\.com is refused in the setup phase, the example expects allow/],
  ['an example that does not hold (agent)', GOOD.replace('{ phase: agent, target: registry.npmjs.org, expect: deny }', '{ phase: agent, target: registry.npmjs.org, expect: allow }'), /x\.yaml:12: examples\.1: .*refused in the agent phase/],
  ['an example port that the entry does not allow', GOOD.replace('target: registry.npmjs.org, expect: allow', 'target: "registry.npmjs.org:22", expect: allow'), /examples\.0: registry\.npmjs\.org:22 is refused/],
  ['a malformed example target', GOOD.replace('target: registry.npmjs.org, expect: allow', 'target: "a b", expect: allow'), /examples\.0\.target/],
  ['too many commands', GOOD.replace('    - npm ci\n', '    - npm ci\n'.repeat(51)), /setup\.commands/],
])('%s stops start-up naming the file and line', (_name, text, why) => {
  const err = refusal(text);
  expect(err.message).toMatch(why);
  expect(err.code).toBe('invalid_input');
});

test('the catalogue: file names must be environment names, and a default.yaml replaces the built-in default', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-envs-'));
  writeFileSync(join(dir, 'default.yaml'), GOOD);
  expect(loadEnvironments(dir, config).get('default')).toMatchObject({ image: 'corral/sandbox-node:latest', file: join(dir, 'default.yaml') });
  writeFileSync(join(dir, 'Bad Name.yaml'), GOOD);
  expect(() => loadEnvironments(dir, config)).toThrow(/Bad Name\.yaml: the file name must be an environment name/);
  const dir2 = mkdtempSync(join(tmpdir(), 'corral-envs-'));
  writeFileSync(join(dir2, 'x.yaml'), GOOD);
  writeFileSync(join(dir2, 'x.yml'), GOOD);
  expect(() => loadEnvironments(dir2, config)).toThrow(/environment "x" is also defined by/);
  expect(loadEnvironments(join(dir2, 'absent'), config).size).toBe(1);
});

test('admission: an unknown environment names the field; the environment\'s limits and egress are the run\'s defaults, the run\'s own win', async () => {
  const environments = new Map([['x', parseEnvironment(GOOD.replace('examples:', 'limits:\n  memoryMb: 700\negress: [api.example.com]\nexamples:').replace('{ phase: agent, target: registry.npmjs.org, expect: deny }', '{ phase: agent, target: api.example.com, expect: allow }'), 'e/x.yaml', 'x', config)]]);
  const ctx = { config, policyNames: ['default'], toolNames: ['bash'], environments };
  await expect(admitSpec(RunSpec.parse({ task: 't', environment: 'nope' }), ctx)).rejects.toMatchObject({ field: 'environment', message: expect.stringMatching(/unknown environment "nope" \(this server has: x\)/) });
  const a = await admitSpec(RunSpec.parse({ task: 't', environment: 'x' }), ctx);
  expect(a).toMatchObject({ limits: { memoryMb: 700 }, egress: ['api.example.com'] });
  const b = await admitSpec(RunSpec.parse({ task: 't', environment: 'x', limits: { memoryMb: 300 }, egress: { allow: [] } }), ctx);
  expect(b).toMatchObject({ limits: { memoryMb: 300 }, egress: [] });
});

describe('setup cache', () => {
  const parts = { tenant: 'a', environment: 'node', digest: 'd1', lockfiles: ['abc  package-lock.json'], workspace: 'w1' };

  test('keys differ by tenant, environment, its definition, each lockfile and the workspace', () => {
    const k = SetupCache.key(parts);
    expect(k).toMatch(/^[0-9a-f]{64}$/);
    for (const other of [
      { ...parts, tenant: 'b' }, { ...parts, environment: 'node2' }, { ...parts, digest: 'd2' },
      { ...parts, lockfiles: ['abd  package-lock.json'] }, { ...parts, lockfiles: ['absent  package-lock.json'] }, { ...parts, workspace: 'w2' },
    ]) expect(SetupCache.key(other)).not.toBe(k);
    // No ambiguity from joining: the parts are a JSON array.
    expect(SetupCache.key({ ...parts, tenant: 'a","node' , environment: '' })).not.toBe(SetupCache.key(parts));
  });

  test('put, get and LRU eviction under the byte cap; scratch files are not entries', () => {
    const dir = mkdtempSync(join(tmpdir(), 'corral-cache-'));
    const cache = new SetupCache(dir, 2500);
    const keys = ['a', 'b', 'c'].map((t) => SetupCache.key({ ...parts, tenant: t }));
    const put = (k: string, ageS: number) => {
      const f = cache.scratch();
      writeFileSync(f, Buffer.alloc(1000));
      expect(cache.put(k, f)).toBe(true);
      const t = new Date(Date.now() - ageS * 1000);
      utimesSync(join(dir, 'setup-cache', `${k}.tar`), t, t);
    };
    put(keys[0]!, 300);
    put(keys[1]!, 200);
    expect(cache.get(keys[0]!)).not.toBeNull(); // used now: b is the least recently used
    put(keys[2]!, 0);
    expect(cache.get(keys[1]!)).toBeNull();
    expect(cache.get(keys[0]!)).not.toBeNull();
    expect(cache.get(keys[2]!)).not.toBeNull();
    expect(cache.get('../../etc/passwd')).toBeNull();
    // An entry larger than the whole cap is not kept.
    const big = cache.scratch();
    writeFileSync(big, Buffer.alloc(3000));
    expect(cache.put(SetupCache.key({ ...parts, tenant: 'big' }), big)).toBe(false);
    const left = readdirSync(join(dir, 'setup-cache'));
    expect(left.reduce((n, f) => n + statSync(join(dir, 'setup-cache', f)).size, 0)).toBeLessThanOrEqual(2500);
  });
});
