/** Tokens → tenants: parsing both sources, refusing weak or shared tokens, and resolving headers. */
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TenantAuth, loadTenantAuth } from '../../src/api/auth';

const A = 'acme-token-0123456789';
const A2 = 'acme-rotated-token-99';
const G = 'globex-token-0123456789';

test('auth is off without tokens: every request is the default tenant, header or not', () => {
  const off = loadTenantAuth({});
  expect(off.enabled).toBe(false);
  expect(off.authenticate(undefined)).toEqual({ ok: true, tenant: 'default', principal: { kind: 'operator', name: 'auth off' } });
  expect(off.authenticate('Bearer anything-at-all')).toEqual({ ok: true, tenant: 'default', principal: { kind: 'operator', name: 'auth off' } });
});

test('CORRAL_API_TOKENS and the file are merged; a tenant may hold several tokens', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-tokens-'));
  const file = join(dir, 'tokens');
  writeFileSync(file, `# tenants\n\nglobex=${G}\n  acme:rotated = ${A2}  \n`);
  const auth = loadTenantAuth({ CORRAL_API_TOKENS: ` acme=${A} `, CORRAL_API_TOKENS_FILE: file });
  expect(auth.enabled).toBe(true);
  expect(auth.tenants()).toEqual(['acme', 'globex']);
  // An unnamed token is named by the first 8 hex digits of its SHA-256; a named one by its name.
  const key = (t: string) => `key-${createHash('sha256').update(t).digest('hex').slice(0, 8)}`;
  expect(auth.authenticate(`Bearer ${A}`)).toEqual({ ok: true, tenant: 'acme', principal: { kind: 'token', tenant: 'acme', token: key(A) } });
  expect(auth.authenticate(`Bearer ${A2}`)).toEqual({ ok: true, tenant: 'acme', principal: { kind: 'token', tenant: 'acme', token: 'rotated' } });
  expect(auth.authenticate(`bearer   ${G}`)).toEqual({ ok: true, tenant: 'globex', principal: { kind: 'token', tenant: 'globex', token: key(G) } });
});

test('token names: one name per token of a tenant, names like tenants', () => {
  expect(() => TenantAuth.fromSources({ tokens: `acme:ci=${A},acme:ci=${A2}` })).toThrow(/tenant "acme" has two tokens named "ci"/);
  expect(() => TenantAuth.fromSources({ tokens: `acme:bad name=${A}` })).toThrow(/the token name "bad name" of tenant "acme"/);
  expect(TenantAuth.fromSources({ tokens: `acme:ci=${A},globex:ci=${G}` }).authenticate(`Bearer ${G}`)).toMatchObject({ principal: { tenant: 'globex', token: 'ci' } });
});

test.each([
  [undefined, 'missing'],
  ['', 'missing'],
  [`Basic ${Buffer.from(`acme:${A}`).toString('base64')}`, 'malformed'],
  ['Bearer', 'malformed'],
  [`Bearer ${A} extra`, 'malformed'],
  [`Bearer ${A}x`, 'invalid'],
  [`Bearer ${A.slice(0, -1)}`, 'invalid'],
  ['Bearer x', 'invalid'],
])('header %p → %s', (header, reason) => {
  const auth = TenantAuth.fromSources({ tokens: `acme=${A},globex=${G}` });
  expect(auth.authenticate(header)).toEqual({ ok: false, reason });
});

test.each([
  ['no "="', `acme${A}`, /expected tenant=token/],
  ['empty tenant', `=${A}`, /expected tenant=token/],
  ['bad tenant name', `a/b=${A}`, /tenant "a\/b" must be/],
  ['short token', 'acme=short', /at least 16 characters/],
  ['token with a space', 'acme=abc def ghi jkl mno pq', /without spaces/],
  ['one token, two tenants', `acme=${A},globex=${A}`, /same token is given to tenants "acme" and "globex"/],
])('refused at start-up: %s (and the message never shows a token)', (_n, tokens, msg) => {
  let err: Error | undefined;
  try {
    TenantAuth.fromSources({ tokens });
  } catch (e) {
    err = e as Error;
  }
  expect(err).toMatchObject({ code: 'invalid_input', field: 'CORRAL_API_TOKENS', message: expect.stringMatching(msg) });
  expect(err!.message).not.toContain(A);
  expect(err!.message).not.toContain('abc def');
});

test('a file entry that is wrong names the file and line; an unreadable file is named', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-tokens-'));
  const file = join(dir, 'tokens');
  writeFileSync(file, `acme=${A}\nglobex=tooshort\n`);
  expect(() => loadTenantAuth({ CORRAL_API_TOKENS_FILE: file })).toThrow(`CORRAL_API_TOKENS_FILE ${file} line 2: the token of tenant "globex" must be at least 16 characters`);
  expect(() => loadTenantAuth({ CORRAL_API_TOKENS_FILE: join(dir, 'missing') })).toThrow(/CORRAL_API_TOKENS_FILE: cannot read .*missing: ENOENT/);
});
