/**
 * Errors keep their cause and their class (issue 40, defect 6): every CorralError takes a `cause`,
 * and re-wording an error (CorralError.wrap) keeps a CorralError's code and turns a Redis connection
 * failure into store_unavailable — never into invalid_input or internal.
 */
import { CancelledError, CorralError, InvalidInputError, ModelError, NotFoundError, SandboxError, StoreUnavailableError, codeOf, isStoreOutage } from '../../src/domain/errors';
import { EnvironmentError } from '../../src/environments/load-environments';
import { PolicyError } from '../../src/policy/policy-error';
import { RestoreFailed } from '../../src/run/effect-guard';

const root = new Error('the root cause');

test('every CorralError class takes a cause and keeps it', () => {
  const made: CorralError[] = [
    new CorralError('internal', 'x', undefined, { cause: root }),
    new InvalidInputError('x', 'field', undefined, { cause: root }),
    new StoreUnavailableError('x', { cause: root }),
    new NotFoundError('x', { cause: root }),
    new SandboxError('sandbox_failed', 'x', { cause: root }),
    new ModelError('x', 500, { cause: root }),
    new CancelledError('x', { cause: root }),
    new PolicyError('x', 'p.yaml', undefined, undefined, { cause: root }),
    new EnvironmentError('x', 'e.yaml', undefined, { cause: root }),
    new RestoreFailed('x', { cause: root }),
  ];
  for (const e of made) expect({ name: e.name, cause: e.cause }).toEqual({ name: e.name, cause: root });
});

test('a CorralError re-wrapped keeps its code, its details and its cause chain', () => {
  for (const inner of [new StoreUnavailableError('redis away'), new SandboxError('sandbox_unavailable', 'engine away', { details: { engine: 'x' } }), new ModelError('bad', 502), new InvalidInputError('bad', 'f')]) {
    const outer = CorralError.wrap(inner, `cannot resume: ${inner.message}`);
    expect(outer).toMatchObject({ code: inner.code, message: `cannot resume: ${inner.message}`, cause: inner });
    expect(outer.details).toEqual(inner.details);
  }
});

test('a Redis connection failure is store_unavailable; anything else foreign takes the fallback', () => {
  const outages = [
    Object.assign(new Error('Reached the max retries per request limit (which is 0). Refer to "maxRetriesPerRequest" option for details.'), { name: 'MaxRetriesPerRequestError' }),
    new Error('Stream isn\'t writeable and enableOfflineQueue options is false'),
    new Error('Connection is closed.'),
    Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }),
    new Error('LOADING Redis is loading the dataset in memory'),
  ];
  for (const e of outages) {
    expect(isStoreOutage(e)).toBe(true);
    expect(CorralError.wrap(e, 'x', 'invalid_input').code).toBe('store_unavailable');
  }
  expect(codeOf(new TypeError('bug'))).toBe('internal');
  expect(codeOf(new SyntaxError('Unexpected token'), 'invalid_input')).toBe('invalid_input');
  expect(codeOf('a string')).toBe('internal');
  expect(codeOf(null)).toBe('internal');
});
