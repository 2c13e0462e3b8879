/**
 * The secret scanner: gitleaks' rules on re2js find the usual provider tokens and generic
 * high-entropy assignments, leave ordinary output alone, mask without keeping the secret, stay linear
 * on inputs built to make backtracking engines explode, and fail closed (a coarse mask) when a scan
 * cannot finish. The pool runs in a real worker thread.
 */
import { findSecrets, maskFindings, RULE_COUNT, ScanTimeout, shannon } from '../../src/policy/secret-scanner';
import { coarseMask, SecretScanPool } from '../../src/policy/secret-scan-pool';

// Test tokens assembled at run time, so no scanner flags this file. They are not real credentials.
const j = (...p: string[]) => p.join('');
const AWS = j('AKIA', 'Z3MHQWRT', 'YUIOPASD');
const GH = j('ghp_', 'R8sK2mQ9vX4tL7nW1pZ6', 'cY3bH5jD0fG8aE2u');
const SLACK = j('xoxb-', '123456789012-1234567890123-', 'AbCdEfGhIjKlMnOpQrStUvWx');
const STRIPE = j('sk_live_', '4eC39HqLyjWDarjtT1zdp7dc');
const PEM = `-----BEGIN RSA PRIVATE KEY-----\n${j('MIIEowIBAAKCAQEA7V2k0Qf3ZwJ3Xw7m7Hk2r2p9gP3XjZbQm0N8kzJ4Q1mYbC9qV5X2v4yQ0k3L8n9P6r', 'T2sW1uV0xY7zA5bC3dE4fG6hI8jK9lM0nO1pQ2rS3tU4vW5xY6zA7bC8dE9fG0hI1jK2lM3nO4pQ5rS6tU')}\n-----END RSA PRIVATE KEY-----`;
const GENERIC = j('api_secret = "', 'Zq8xV2nL4kP9wR7tY3mB6cF1', '"');

describe('the rules', () => {
  test('gitleaks\' rule set is loaded', () => {
    expect(RULE_COUNT).toBeGreaterThan(200);
  });

  test.each([
    ['an AWS access key id', `export AWS_ACCESS_KEY_ID=${AWS}`, 'aws-access-token', AWS],
    ['a GitHub token', `token: ${GH}`, 'github-pat', GH],
    ['a Slack bot token', `SLACK=${SLACK}`, 'slack-bot-token', SLACK],
    ['a Stripe live key', `stripe.api_key = "${STRIPE}"`, 'stripe-access-token', STRIPE],
    ['a private key', PEM, 'private-key', 'PRIVATE KEY'],
    ['a generic secret assignment', GENERIC, 'generic-api-key', 'Zq8xV2nL4kP9wR7tY3mB6cF1'],
  ])('%s is found and masked', (_what, text, rule, secret) => {
    const f = findSecrets(text);
    expect(f.map((x) => x.rule)).toContain(rule);
    const masked = maskFindings(text, f);
    expect(masked).not.toContain(secret.replace('PRIVATE KEY', 'MIIEowIBAAKCAQEA'));
    expect(masked).toContain(`[masked secret: ${rule}]`);
    for (const x of f) expect(x.fingerprint).toMatch(/^[0-9a-f]{12}$/);
  });

  test.each([
    'commit 4f7a3c2b1e9d8f7a6b5c4d3e2f1a0b9c8d7e6f5a\nAuthor: A <a@b.c>',
    '===== 12 passed, 1 skipped in 0.52s =====',
    'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855',
    'password = os.environ["DB_PASSWORD"]',
    'api_key = "${API_KEY}"',
    'from django.conf import settings\nSECRET_KEY = get_random_secret_key()',
  ])('ordinary output is left alone: %j', (text) => {
    expect(findSecrets(text)).toEqual([]);
  });

  test('entropy is Shannon\'s in bits per character', () => {
    expect(shannon('aaaa')).toBe(0);
    expect(shannon('abcd')).toBe(2);
  });
});

describe('time', () => {
  test('inputs built for backtracking engines stay linear (re2js)', () => {
    const inputs = [
      `${'api_key='.repeat(20_000)}x`,
      `curl ${'-u '.repeat(20_000)}`,
      `${'a'.repeat(100_000)}!`,
      `${'key = "'.repeat(10_000)}`,
      `-----BEGIN PRIVATE KEY-----${'A'.repeat(200_000)}`,
    ];
    for (const text of inputs) {
      // a deadline far beyond what a linear scan of these sizes needs; a backtracking engine would hit it
      expect(() => findSecrets(text, performance.now() + 60_000)).not.toThrow();
    }
  });

  test('a scan past its deadline throws, so the caller never passes the text on as it is', () => {
    expect(() => findSecrets(`token ${GH} key api secret `.repeat(2000), performance.now() - 1)).toThrow(ScanTimeout);
  });

  test('the coarse mask takes high-entropy tokens and PEM keys, not words', () => {
    const c = coarseMask(`ok ${AWS} and ${GH}\n${PEM}\nthe_quick_brown_fox_jumps`);
    expect(c.text).not.toContain(AWS);
    expect(c.text).not.toContain(GH);
    expect(c.text).not.toContain('MIIEowIBAAKCAQEA');
    expect(c.text).toContain('the_quick_brown_fox_jumps');
  });
});

describe('the pool (a worker thread)', () => {
  let pool: SecretScanPool;
  afterEach(async () => {
    await pool?.close();
  });

  test('masks in the thread and reports what it found, never the secret', async () => {
    pool = new SecretScanPool();
    const r = await pool.mask(`line 1\nAWS_ACCESS_KEY_ID=${AWS}\n${GH}\nline 4`);
    expect(r.text).toBe('line 1\nAWS_ACCESS_KEY_ID=[masked secret: aws-access-token]\n[masked secret: github-pat]\nline 4');
    expect(r.found.map((f) => f.rule).sort()).toEqual(['aws-access-token', 'github-pat']);
    expect(JSON.stringify(r.found)).not.toContain(AWS);
    expect(r.coarse).toBeUndefined();
  });

  test('a scan that cannot finish in its budget fails closed with the coarse mask', async () => {
    pool = new SecretScanPool(0);
    const r = await pool.mask(`some output ${GH} ${'token api key secret '.repeat(50)}`);
    expect(r.coarse).toMatch(/did not finish|did not answer/);
    expect(r.text).not.toContain(GH);
  });
});
