/**
 * Git remotes (workspace.git.url): the normal form, the allowlist's prefixes, refusals of every class
 * (credentials in the URL, other schemes and git's transports, dot segments and escapes, option-like
 * hosts, control characters), the credentials file's errors and the longest-prefix credential.
 */
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admitGitRemote, checkGitCaFile, credentialFor, loadGitCredentials, parseGitUrl } from '../../src/git/git-remote';

const ALLOWED = ['https://github.com/acme/', 'ssh://git@git.example.com/team/', 'git://127.0.0.1:9999/', 'https://gitlab.example.com/one/repo.git'];

test.each([
  ['https://github.com/acme/app.git', 'https://github.com/acme/app.git'],
  ['https://GitHub.com:443/acme/app', 'https://github.com/acme/app'],
  ['git@git.example.com:team/app.git', 'ssh://git@git.example.com/team/app.git'],
  ['ssh://git@git.example.com:22/team/app', 'ssh://git@git.example.com/team/app'],
  ['git://127.0.0.1:9999/x.git', 'git://127.0.0.1:9999/x.git'],
  ['https://gitlab.example.com/one/repo', 'https://gitlab.example.com/one/repo'],
])('%s is admitted as %s', (url, normal) => {
  expect(admitGitRemote(url, ALLOWED).url).toBe(normal);
});

test.each([
  ['https://github.com/other/app.git', /not under one of this server's git remotes/],
  ['https://github.com/acme', /not under/],
  ['https://github.com/acmeevil/app', /not under/],
  ['http://github.com/acme/app', /not under/],
  ['https://github.com:8443/acme/app', /not under/],
  ['ssh://root@git.example.com/team/app', /not under/],
  ['https://gitlab.example.com/one/repo2', /not under/],
  ['https://user:pw@github.com/acme/app', /must not carry a user or password/],
  ['https://token@github.com/acme/app', /must not carry a user or password/],
  ['ssh://git:pw@git.example.com/team/app', /plain login name/],
  ['file:///etc/passwd', /scheme file/],
  ['ext::sh -c id', /spaces/],
  ['ext::sh', /must be an https/],
  ['/srv/repo.git', /must be an https/],
  ['https://github.com/acme/../other/app', /"\." or "\.\." segments/],
  ['https://github.com/acme/%2e%2e/other', /no % escapes/],
  ['https://github.com/acme/app?x=1', /no % escapes or query/],
  ['https://github.com/acme/app#frag', /no % escapes or query/],
  ['ssh://-oProxyCommand=id/x', /not a host name/],
  ['git@-oProxyCommand=id:x', /not a host name/],
  ['https://github.com/acme/a\nb', /control characters/],
  ['https://github.com\\@evil.com/acme/x', /backslashes/],
  ['https://github.com/', /must name a repository/],
])('%s is refused: %s', (url, why) => {
  expect(() => admitGitRemote(url, ALLOWED)).toThrow(why);
  try {
    admitGitRemote(url, ALLOWED);
  } catch (err) {
    expect((err as { field?: string }).field).toBe('workspace.git.url');
  }
});

test('no remotes configured: every git workspace is refused, saying so', () => {
  expect(() => admitGitRemote('https://github.com/acme/app', [])).toThrow(/CORRAL_GIT_REMOTES is empty/);
  expect(parseGitUrl('https://github.com/', { prefix: true })).toMatchObject({ path: '/' });
});

describe('credentials file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-gitcred-'));
  const file = (name: string, body: unknown) => {
    const p = join(dir, name);
    writeFileSync(p, typeof body === 'string' ? body : JSON.stringify(body));
    return p;
  };
  const key = file('id_ed25519', 'not a real key\n');
  chmodSync(key, 0o600);
  const knownHosts = file('known_hosts', '');
  const openKey = file('open_key', 'not a real key\n');
  chmodSync(openKey, 0o644);

  test('the longest matching prefix of the tenant wins; other tenants get none', () => {
    const creds = loadGitCredentials(file('ok.json', {
      acme: [{ url: 'https://github.com/', username: 'a', password: 'wide' }, { url: 'https://github.com/acme/', username: 'b', password: 'narrow' }],
      globex: [{ url: 'ssh://git@git.example.com/', sshKeyFile: key, knownHostsFile: knownHosts }],
    }));
    const r = admitGitRemote('https://github.com/acme/app', ALLOWED);
    expect(credentialFor(creds, 'acme', r)).toMatchObject({ password: 'narrow' });
    expect(credentialFor(creds, 'globex', r)).toBeUndefined();
    expect(credentialFor(creds, 'default', r)).toBeUndefined();
  });

  test.each([
    ['bad.json', '{not json', /bad\.json: /],
    ['shape.json', { acme: [{ url: 'https://x.example/', username: 'a' }] }, /acme\.0: each entry is/],
    ['scheme.json', { acme: [{ url: 'https://x.example/', sshKeyFile: '/k', knownHostsFile: '/kh' }] }, /acme\.0: an ssh key is for an ssh:\/\/ url/],
    ['nokey.json', { acme: [{ url: 'ssh://git@x.example/', sshKeyFile: '/nonexistent/key', knownHostsFile: '/nonexistent/kh' }] }, /acme\.0\.sshKeyFile: \/nonexistent\/key: ENOENT/],
    ['openkey.json', () => ({ acme: [{ url: 'ssh://git@x.example/', sshKeyFile: openKey, knownHostsFile: knownHosts }] }), /acme\.0\.sshKeyFile: .* is readable by others \(mode 644\).*chmod 600/],
    ['nokh.json', () => ({ acme: [{ url: 'ssh://git@x.example/', sshKeyFile: key, knownHostsFile: dir }] }), /acme\.0\.knownHostsFile: .* is not a file/],
    ['userinfo.json', { acme: [{ url: 'https://u:p@x.example/', username: 'a', password: 'SECRETVALUE' }] }, /acme\.0\.url: must not carry/],
  ])('%s stops start-up, naming the entry and never the secret', (name, body, why) => {
    let msg = '';
    try {
      loadGitCredentials(file(name, typeof body === 'function' ? (body as () => unknown)() : body));
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).toMatch(why);
    expect(msg).not.toContain('SECRETVALUE');
  });
});

test('CORRAL_GIT_CA_FILE must be a readable file of PEM certificates', () => {
  const dir = mkdtempSync(join(tmpdir(), 'corral-gitca-'));
  expect(() => checkGitCaFile(join(dir, 'missing.pem'))).toThrow(/CORRAL_GIT_CA_FILE .*missing\.pem: ENOENT/);
  writeFileSync(join(dir, 'key.pem'), '-----BEGIN PRIVATE KEY-----\nabc\n-----END PRIVATE KEY-----\n');
  expect(() => checkGitCaFile(join(dir, 'key.pem'))).toThrow(/holds no PEM certificate/);
  writeFileSync(join(dir, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n');
  expect(() => checkGitCaFile(join(dir, 'ca.pem'))).not.toThrow();
  expect(() => checkGitCaFile(undefined)).not.toThrow();
});
