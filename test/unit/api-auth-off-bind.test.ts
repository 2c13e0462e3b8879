/**
 * Auth off binds to loopback only (issue 38, break 6): `corral api`/`serve` with no tokens refuses to
 * start on any other address, naming CORRAL_API_HOST, before it connects to anything — unless the
 * operator says so (CORRAL_API_AUTH_OFF_ALLOW_REMOTE=true) or sets tokens.
 */
import { resolve } from 'node:path';
import { loadConfig } from '../../src/config';
import { startCorral } from '../../src/main';

const base = { CORRAL_POLICY_DIR: resolve(__dirname, '../../policies'), REDIS_URL: 'redis://127.0.0.1:1' };

test.each(['0.0.0.0', '::', '10.0.0.7', 'corral.example.com'])('auth off on %s: refused at start, naming CORRAL_API_HOST', async (host) => {
  const config = loadConfig({ ...base, CORRAL_API_HOST: host });
  await expect(startCorral(config, { api: true, worker: false }, () => undefined)).rejects.toMatchObject({
    code: 'invalid_input', field: 'CORRAL_API_HOST', message: expect.stringContaining('loopback address only'),
  });
});

test.each([
  ['a loopback address', { CORRAL_API_HOST: '127.0.0.1' }],
  ['the operator\'s say-so', { CORRAL_API_HOST: '0.0.0.0', CORRAL_API_AUTH_OFF_ALLOW_REMOTE: 'true' }],
  ['tokens', { CORRAL_API_HOST: '0.0.0.0', CORRAL_API_TOKENS: 'acme=acme-token-0123456789' }],
])('with %s it goes on (and fails later only for want of Redis)', async (_what, env) => {
  const config = loadConfig({ ...base, ...env });
  await expect(startCorral(config, { api: true, worker: false }, () => undefined)).rejects.toMatchObject({ message: expect.stringContaining('cannot reach Redis') });
});
