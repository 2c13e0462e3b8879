/** resolveLimits: defaults, maxima as errors (the API's 400), never a silent cap. */
import { loadConfig } from '../../src/config';
import { InvalidInputError } from '../../src/domain/errors';
import { resolveLimits } from '../../src/sandbox/limits';

const config = loadConfig({});

test('defaults fill missing limits', () => {
  expect(resolveLimits({}, config)).toEqual({ memoryMb: 512, cpus: 1, pids: 256, workspaceMb: 256, execTimeoutS: 120 });
  expect(resolveLimits(undefined, config).memoryMb).toBe(512);
});

test('requested values within the maxima are kept', () => {
  expect(resolveLimits({ memoryMb: 4096, cpus: 2, pids: 1024, workspaceMb: 512, execTimeoutS: 1800 }, config)).toEqual({
    memoryMb: 4096, cpus: 2, pids: 1024, workspaceMb: 512, execTimeoutS: 1800,
  });
});

test.each([
  ['memoryMb', { memoryMb: 4097 }],
  ['cpus', { cpus: 2.5 }],
  ['pids', { pids: 1025 }],
  ['workspaceMb', { workspaceMb: 513 }],
  ['execTimeoutS', { execTimeoutS: 1801 }],
])('%s above the maximum is an InvalidInputError naming the field', (field, req) => {
  let err: unknown;
  try {
    resolveLimits(req, config);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(InvalidInputError);
  expect((err as InvalidInputError).field).toBe(`limits.${field}`);
  expect((err as Error).message).toMatch(/maximum/);
});

test('isolation: absent = the server default (resolved against the engine later); a class the server does not permit is refused', () => {
  expect(resolveLimits({}, config).isolation).toBeUndefined();
  expect(resolveLimits({ isolation: 'gvisor' }, config).isolation).toBe('gvisor');
  const onlyGvisor = loadConfig({ CORRAL_ISOLATION_CLASSES: 'gvisor', CORRAL_SANDBOX_RUNTIME: 'gvisor' });
  expect(() => resolveLimits({ isolation: 'runc' }, onlyGvisor)).toThrow(expect.objectContaining({ field: 'limits.isolation', message: expect.stringMatching(/"runc" is not permitted on this server \(it permits: gvisor\)/) }));
});

test('isolation config: bad classes and a default outside the permitted ones stop start-up naming the variable', () => {
  expect(() => loadConfig({ CORRAL_ISOLATION_CLASSES: 'runc,kata' })).toThrow(/CORRAL_ISOLATION_CLASSES: must list runc and\/or gvisor, comma-separated \(unknown: kata\)/);
  expect(() => loadConfig({ CORRAL_ISOLATION_CLASSES: 'gvisor', CORRAL_SANDBOX_RUNTIME: 'runc' })).toThrow(/CORRAL_SANDBOX_RUNTIME: the default class "runc" is not in CORRAL_ISOLATION_CLASSES/);
  expect(loadConfig({ CORRAL_SANDBOX_RUNTIME: 'runsc' }).CORRAL_SANDBOX_RUNTIME).toBe('gvisor');
  expect(loadConfig({}).CORRAL_SANDBOX_RUNTIME).toBe('runc');
  expect(loadConfig({ CORRAL_SANDBOX_RUNTIME: 'auto' }).CORRAL_SANDBOX_RUNTIME).toBe('auto');
});
