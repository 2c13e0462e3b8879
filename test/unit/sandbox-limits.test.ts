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
  expect(resolveLimits({ memoryMb: 4096, cpus: 2, pids: 1024, workspaceMb: 2048, execTimeoutS: 1800 }, config)).toEqual({
    memoryMb: 4096, cpus: 2, pids: 1024, workspaceMb: 2048, execTimeoutS: 1800,
  });
});

test.each([
  ['memoryMb', { memoryMb: 4097 }],
  ['cpus', { cpus: 2.5 }],
  ['pids', { pids: 1025 }],
  ['workspaceMb', { workspaceMb: 4096 }],
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
