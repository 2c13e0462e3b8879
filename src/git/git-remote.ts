/**
 * Git remotes a run may clone from (workspace.git.url): parsed into one normal form, checked against
 * the operator's CORRAL_GIT_REMOTES (URL prefixes), and matched to the tenant's credentials
 * (CORRAL_GIT_CREDENTIALS_FILE). A URL never carries a secret: a password (or an https user) in
 * it is refused — credentials are the operator's configuration, handed to git by the worker only.
 */
import { readFileSync, statSync } from 'node:fs';
import { z } from 'zod';
import { CorralError, InvalidInputError } from '../domain/errors';

export type GitScheme = 'https' | 'http' | 'git' | 'ssh';

export interface GitRemote {
  scheme: GitScheme;
  /** ssh only: the login name (`git` in git@host:path). */
  user?: string;
  host: string;
  port: number;
  /** Starts with "/". */
  path: string;
  /** What git is given: `scheme://[user@]host[:port]/path`. */
  url: string;
}

const DEFAULT_PORTS: Record<GitScheme, number> = { https: 443, http: 80, git: 9418, ssh: 22 };
const HOST = /^(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$|^\d{1,3}(?:\.\d{1,3}){3}$/;
const PATH = /^\/[A-Za-z0-9._~/+-]*$/;

/** The normal form of a clone URL (or, with `prefix`, of a remote prefix: its path may be "/"), or a reason it is refused. */
export function parseGitUrl(text: string, o: { prefix?: boolean } = {}): GitRemote | { error: string } {
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  if (/[\s\0-\x1f\x7f\\]/.test(text)) return { error: 'must not contain spaces, control characters or backslashes' };
  // scp-like: user@host:path (no scheme, a colon before any slash).
  const scp = /^([A-Za-z0-9._-]+)@([^:/]+):(?!\/\/)(.+)$/.exec(text);
  const raw = scp ? `ssh://${scp[1]}@${scp[2]}/${scp[3]!.replace(/^\/+/, '')}` : text;
  const m = /^([a-z]+):\/\/(?:([^@/]*)@)?(\[[^\]]*\]|[^:/]*)(?::(\d{1,5}))?(\/.*)?$/.exec(raw);
  if (!m) return { error: 'must be an https://, http://, git:// or ssh:// URL (or user@host:path)' };
  const scheme = m[1] as GitScheme;
  if (!(scheme in DEFAULT_PORTS)) return { error: `the scheme ${m[1]}:// is not one corral clones over (https, http, git, ssh)` };
  const userinfo = m[2];
  if (userinfo !== undefined) {
    if (scheme !== 'ssh') return { error: 'must not carry a user or password: credentials come from the operator\'s configuration (CORRAL_GIT_CREDENTIALS_FILE)' };
    if (!/^[A-Za-z0-9._-]{1,64}$/.test(userinfo)) return { error: 'an ssh user must be a plain login name (no password)' };
  }
  const host = m[3]!.toLowerCase();
  if (!HOST.test(host)) return { error: `${JSON.stringify(host.slice(0, 100))} is not a host name` };
  const port = m[4] !== undefined ? Number(m[4]) : DEFAULT_PORTS[scheme];
  if (!(port >= 1 && port <= 65535)) return { error: 'the port must be 1-65535' };
  const path = m[5] ?? (o.prefix ? '/' : '');
  if (!PATH.test(path) || (path === '/' && !o.prefix)) return { error: 'the path must name a repository (letters, digits and . _ ~ / + -; no % escapes or query)' };
  if (path.split('/').some((seg) => seg === '.' || seg === '..')) return { error: 'the path must not contain "." or ".." segments' };
  const hostPart = `${host}${port === DEFAULT_PORTS[scheme] ? '' : `:${port}`}`;
  return { scheme, ...(userinfo ? { user: userinfo } : {}), host, port, path, url: `${scheme}://${userinfo ? `${userinfo}@` : ''}${hostPart}${path}` };
}

/** Whether `remote` is under `prefix` (same scheme, user, host and port; path under the prefix's). */
export function remoteUnder(remote: GitRemote, prefix: GitRemote): boolean {
  if (remote.scheme !== prefix.scheme || remote.host !== prefix.host || remote.port !== prefix.port) return false;
  if ((prefix.user ?? remote.user) !== remote.user) return false;
  const p = prefix.path;
  const strip = (s: string) => s.replace(/\.git$/, '');
  return p.endsWith('/') ? remote.path.startsWith(p) : strip(remote.path) === strip(p);
}

/** The remote of a spec, checked against CORRAL_GIT_REMOTES; InvalidInputError naming workspace.git.url. */
export function admitGitRemote(url: string, allowed: readonly string[]): GitRemote {
  const field = 'workspace.git.url';
  const r = parseGitUrl(url);
  if ('error' in r) throw new InvalidInputError(`${field}: ${r.error}`, field);
  if (allowed.length === 0) throw new InvalidInputError(`${field}: this server clones no git remotes (CORRAL_GIT_REMOTES is empty)`, field);
  const prefixes = allowed.map((a) => parseGitUrl(a, { prefix: true })).filter((p): p is GitRemote => !('error' in p));
  if (!prefixes.some((p) => remoteUnder(r, p))) {
    throw new InvalidInputError(`${field}: ${r.url} is not under one of this server's git remotes (CORRAL_GIT_REMOTES: ${allowed.join(', ')})`, field);
  }
  return r;
}

const Credential = z.union([
  z.strictObject({ url: z.string().min(1), username: z.string().min(1).max(256), password: z.string().min(1).max(4096) }),
  z.strictObject({ url: z.string().min(1), sshKeyFile: z.string().min(1), knownHostsFile: z.string().min(1) }),
]);
const CredentialsFile = z.record(z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/), z.array(Credential).max(100));
export type GitCredential = z.infer<typeof Credential> & { prefix: GitRemote };

/** Loads CORRAL_GIT_CREDENTIALS_FILE; a bad file stops start-up naming the tenant and entry (never a secret). */
export function loadGitCredentials(file: string | undefined): Map<string, GitCredential[]> {
  const out = new Map<string, GitCredential[]>();
  if (!file) return out;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${(err as Error).message.split('\n')[0]}`, undefined, { cause: err });
  }
  const parsed = CredentialsFile.safeParse(json);
  if (!parsed.success) {
    const i = parsed.error.issues[0]!;
    throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${i.path.join('.')}: ${i.code === 'invalid_union' ? 'each entry is {url, username, password} or {url, sshKeyFile, knownHostsFile}' : i.message}`);
  }
  for (const [tenant, list] of Object.entries(parsed.data)) {
    out.set(tenant, list.map((c, i) => {
      const prefix = parseGitUrl(c.url, { prefix: true });
      if ('error' in prefix) throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${tenant}.${i}.url: ${prefix.error}`);
      const ssh = 'sshKeyFile' in c;
      if (ssh !== (prefix.scheme === 'ssh')) throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${tenant}.${i}: ${ssh ? 'an ssh key is for an ssh:// url' : 'a username and password are for an https:// or http:// url'}`);
      if ('sshKeyFile' in c) {
        // Checked now, not at the first clone: ssh refuses a key others can read, and a missing file is a typo.
        for (const [field, path] of [['sshKeyFile', c.sshKeyFile], ['knownHostsFile', c.knownHostsFile]] as const) {
          const st = (() => {
            try {
              return statSync(path);
            } catch (err) {
              throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${tenant}.${i}.${field}: ${path}: ${(err as NodeJS.ErrnoException).code ?? 'cannot be read'}`, undefined, { cause: err });
            }
          })();
          if (!st.isFile()) throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${tenant}.${i}.${field}: ${path} is not a file`);
          if (field === 'sshKeyFile' && (st.mode & 0o077) !== 0) {
            throw new CorralError('invalid_input', `CORRAL_GIT_CREDENTIALS_FILE ${file}: ${tenant}.${i}.sshKeyFile: ${path} is readable by others (mode ${(st.mode & 0o777).toString(8)}); ssh refuses such a key: chmod 600 it`);
          }
        }
      }
      return { ...c, prefix };
    }));
  }
  return out;
}

/** The tenant's credential for a remote: the entry with the longest matching prefix, if any. */
export function credentialFor(creds: ReadonlyMap<string, GitCredential[]>, tenant: string, remote: GitRemote): GitCredential | undefined {
  return (creds.get(tenant) ?? []).filter((c) => remoteUnder(remote, c.prefix)).sort((a, b) => b.prefix.path.length - a.prefix.path.length)[0];
}

/** CORRAL_GIT_CA_FILE, checked at start-up: a readable file of PEM certificates. */
export function checkGitCaFile(file: string | undefined): void {
  if (!file) return;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new CorralError('invalid_input', `CORRAL_GIT_CA_FILE ${file}: ${(err as NodeJS.ErrnoException).code ?? 'cannot be read'}`, undefined, { cause: err });
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new CorralError('invalid_input', `CORRAL_GIT_CA_FILE ${file}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
}
