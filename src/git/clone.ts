/**
 * The worker's clone of a git workspace (the trusted side): `git init`, `fetch --depth N origin REF`,
 * a detached checkout of what was fetched, then the checkout (its .git included) packed into a tar
 * file that seeds the sandbox like an upload. The sandbox never sees a credential: the remote URL in
 * .git/config has none, and the password reaches git only through GIT_ASKPASS in git's own
 * environment (an ssh key through GIT_SSH_COMMAND, with the operator's known_hosts).
 *
 * Git here parses what a remote sent, so it runs hardened: no system or global config, no hooks, no
 * redirects (a redirect could leave the allowed remote), only the remote's own protocol, objects
 * fsck'd, symlinks checked out as plain files, no submodules; bounded in time (CORRAL_GIT_TIMEOUT_S)
 * and in disk (its directory is measured every second: past twice the run's workspace size it is
 * killed), and its error output is cut and scrubbed of the secret before it is shown.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { chmod, mkdir, readdir, lstat, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CorralError } from '../domain/errors';
import { planWorkspace, streamWorkspace } from '../cli/workspace-tar';
import type { GitCredential, GitRemote } from './git-remote';

export interface CloneRequest {
  remote: GitRemote;
  ref?: string;
  depth: number;
  credential?: GitCredential;
  /** A fresh directory of the run's (removed by the caller). */
  dir: string;
  maxBytes: number;
  maxEntries: number;
  timeoutMs: number;
  signal?: AbortSignal;
  /** CORRAL_GIT_CA_FILE: the CA bundle for https remotes (else the system's). */
  caFile?: string;
}

export interface Cloned {
  tarPath: string;
  commit: string;
  files: number;
  bytes: number;
  ms: number;
}

const ASKPASS = '#!/bin/sh\ncase "$1" in\n  Username*) printf "%s\\n" "$CORRAL_GIT_USERNAME" ;;\n  *) printf "%s\\n" "$CORRAL_GIT_PASSWORD" ;;\nesac\n';

export async function cloneWorkspace(req: CloneRequest): Promise<Cloned> {
  const t0 = Date.now();
  const home = join(req.dir, 'home');
  const repo = join(req.dir, 'repo');
  await mkdir(home, { recursive: true, mode: 0o700 });
  await mkdir(repo, { recursive: true, mode: 0o700 });
  const cred = req.credential;
  const secret = cred && 'password' in cred ? cred.password : undefined;
  const env: Record<string, string> = {
    PATH: '/usr/local/bin:/usr/bin:/bin', HOME: home, LANG: 'C', LC_ALL: 'C',
    GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false', SSH_ASKPASS: '/bin/false',
  };
  if (cred && 'password' in cred) {
    const askpass = join(home, 'askpass');
    await writeFile(askpass, ASKPASS, { mode: 0o700 });
    await chmod(askpass, 0o700);
    Object.assign(env, { GIT_ASKPASS: askpass, CORRAL_GIT_USERNAME: cred.username, CORRAL_GIT_PASSWORD: cred.password });
  }
  if (req.remote.scheme === 'https' && req.caFile) env.GIT_SSL_CAINFO = req.caFile;
  if (req.remote.scheme === 'ssh') {
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    // No config, no agent, no forwarding, no proxy, host keys checked and never learned or updated
    // (the operator's known_hosts is read, never written); a key only when the tenant has one.
    const base = 'ssh -F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=yes -o UpdateHostKeys=no -o HashKnownHosts=no'
      + ' -o ForwardAgent=no -o ForwardX11=no -o ClearAllForwardings=yes -o PermitLocalCommand=no -o ProxyCommand=none -o IdentityAgent=none'
      + ' -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o ConnectTimeout=30';
    env.GIT_SSH_COMMAND = cred && 'sshKeyFile' in cred
      ? `${base} -o IdentitiesOnly=yes -o UserKnownHostsFile=${q(cred.knownHostsFile)} -o GlobalKnownHostsFile=/dev/null -i ${q(cred.sshKeyFile)}`
      : `${base} -o UserKnownHostsFile=/dev/null -o GlobalKnownHostsFile=/etc/ssh/ssh_known_hosts`;
  }
  const hardening = [
    '-c', 'protocol.allow=never', '-c', `protocol.${req.remote.scheme}.allow=always`,
    '-c', 'http.followRedirects=false', '-c', 'core.hooksPath=/dev/null', '-c', 'core.symlinks=false',
    '-c', 'core.fsmonitor=false', '-c', 'transfer.fsckObjects=true', '-c', 'submodule.recurse=false',
    '-c', 'credential.helper=', '-c', 'init.defaultBranch=main', '-c', 'advice.detachedHead=false',
  ];
  const deadline = t0 + req.timeoutMs;
  const git = (args: string[]) => runGit([...hardening, '-C', repo, ...args], env, deadline, req, secret);
  await git(['init', '-q']);
  await git(['remote', 'add', 'origin', req.remote.url]);
  await git(['fetch', '-q', '--no-tags', '--no-recurse-submodules', `--depth=${req.depth}`, 'origin', req.ref ?? 'HEAD']);
  await git(['checkout', '-q', '--detach', 'FETCH_HEAD']);
  const commit = (await git(['rev-parse', 'HEAD'])).trim();
  if (!/^[0-9a-f]{40,64}$/.test(commit)) throw new CorralError('invalid_input', `the clone of ${req.remote.url} has no commit (${commit.slice(0, 80)})`);

  const plan = await planWorkspace(repo, { maxEntries: req.maxEntries });
  if (plan.bytes > req.maxBytes) {
    throw new CorralError('limit_exceeded', `the checkout of ${req.remote.url} holds ${Math.round(plan.bytes / 1048576)} MiB of files, more than the run's workspace (${Math.round(req.maxBytes / 1048576)} MiB): raise limits.workspaceMb or use a smaller depth`);
  }
  const tarPath = join(req.dir, 'workspace.tar');
  await pipeline(streamWorkspace(plan), createWriteStream(tarPath, { mode: 0o600 }));
  await rm(home, { recursive: true, force: true });
  return { tarPath, commit, files: plan.files, bytes: plan.bytes, ms: Date.now() - t0 };
}

/** Runs git; resolves its stdout (capped), or throws with its stderr's end, the secret scrubbed. */
function runGit(args: string[], env: Record<string, string>, deadline: number, req: CloneRequest, secret: string | undefined): Promise<string> {
  return new Promise((resolve, reject) => {
    const left = deadline - Date.now();
    if (left <= 0) return reject(new CorralError('limit_exceeded', `cloning ${req.remote.url} took longer than ${Math.round(req.timeoutMs / 1000)} s (CORRAL_GIT_TIMEOUT_S)`));
    const child = spawn('git', args, { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    let err = '';
    let why: string | undefined;
    child.stdout.on('data', (c: Buffer) => { if (out.length < 65536) out += c.toString('utf8'); });
    child.stderr.on('data', (c: Buffer) => { err = (err + c.toString('utf8')).slice(-4000); });
    const kill = (reason: string) => {
      why ??= reason;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    };
    const timer = setTimeout(() => kill(`cloning ${req.remote.url} took longer than ${Math.round(req.timeoutMs / 1000)} s (CORRAL_GIT_TIMEOUT_S)`), left);
    const disk = setInterval(() => {
      void dirBytes(req.dir, req.maxBytes * 2 + 1).then((n) => {
        if (n > req.maxBytes * 2) kill(`the clone of ${req.remote.url} passed ${Math.round((req.maxBytes * 2) / 1048576)} MiB on disk (twice the run's workspace size)`);
      }, () => undefined);
    }, 1000);
    const onAbort = () => kill('the run was cancelled while cloning');
    req.signal?.addEventListener('abort', onAbort, { once: true });
    child.on('error', (e) => reject(new CorralError('internal', `git could not be started: ${e.message}`, undefined, { cause: e })));
    child.on('close', (code) => {
      clearTimeout(timer);
      clearInterval(disk);
      req.signal?.removeEventListener('abort', onAbort);
      if (why) return reject(new CorralError(why.includes('cancelled') ? 'cancelled' : 'limit_exceeded', why));
      if (code === 0) return resolve(out);
      let msg = err.trim().split('\n').slice(-6).join('\n');
      if (secret) msg = msg.split(secret).join('***');
      reject(new CorralError('invalid_input', `git ${args.find((a) => ['init', 'remote', 'fetch', 'checkout', 'rev-parse'].includes(a)) ?? ''} of ${req.remote.url} failed (exit ${code}): ${msg.slice(0, 1500)}`));
    });
  });
}

/** Bytes under `dir` (files' sizes), stopping once past `stopAt`. */
async function dirBytes(dir: string, stopAt: number): Promise<number> {
  let total = 0;
  const stack = [dir];
  while (stack.length && total <= stopAt) {
    const d = stack.pop()!;
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const p = join(d, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile()) total += (await lstat(p).catch(() => ({ size: 0 }))).size;
    }
  }
  return total;
}
