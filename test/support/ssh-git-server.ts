/**
 * A git server over ssh on loopback, for tests: an ssh2 server (the library dockerode already brings)
 * that accepts one user with one public key and answers `git-upload-pack '/NAME.git'` by running git's
 * own upload-pack on a directory of bare repositories. Nothing else is served: no shell, no other
 * command, no forwarding. It records every authentication attempt and every command asked for.
 *
 * It also writes what the operator would hold: the client's private key (mode 0600) and a known_hosts
 * line for the server's host key — and, for the attack cases, a known_hosts file naming another key.
 */
import { spawn } from 'node:child_process';
import { timingSafeEqual } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Server, utils, type Connection } from 'ssh2';

export interface SshGitServer {
  port: number;
  /** The operator's files: the client's private key, known_hosts with this server's key, and one with another key. */
  keyFile: string;
  knownHostsFile: string;
  wrongKnownHostsFile: string;
  /** A line of the private key's body: must never appear where the agent or the tenant can read. */
  keySecret: string;
  /** `user method ok` per authentication attempt, and each exec's command. */
  seen: string[];
  close(): Promise<void>;
}

export async function startSshGitServer(o: { dir: string; reposDir: string; user: string }): Promise<SshGitServer> {
  const host = utils.generateKeyPairSync('ed25519');
  const other = utils.generateKeyPairSync('ed25519');
  const client = utils.generateKeyPairSync('ed25519');
  const allowed = utils.parseKey(client.public);
  if (allowed instanceof Error) throw allowed;
  mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  const keyFile = join(o.dir, 'corral-git-key');
  writeFileSync(keyFile, client.private, { mode: 0o600 });
  chmodSync(keyFile, 0o600);
  const keySecret = client.private.split('\n').filter((l) => l && !l.startsWith('-----')).sort((a, b) => b.length - a.length)[0]!;
  const seen: string[] = [];
  const conns = new Set<Connection>();

  const server = new Server({ hostKeys: [host.private] }, (conn) => {
    conns.add(conn);
    conn.on('close', () => conns.delete(conn));
    conn.on('error', () => undefined);
    conn.on('authentication', (ctx) => {
      if (ctx.method !== 'publickey') {
        seen.push(`${ctx.username} ${ctx.method} no`);
        return ctx.reject(['publickey']);
      }
      const pub = allowed.getPublicSSH();
      const same = ctx.key.algo === allowed.type && ctx.key.data.length === pub.length && timingSafeEqual(ctx.key.data, pub);
      if (ctx.username !== o.user || !same) {
        seen.push(`${ctx.username} publickey no`);
        return ctx.reject(['publickey']);
      }
      if (!ctx.signature) return ctx.accept(); // the client asks whether this key would do
      const ok = ctx.blob !== undefined && allowed.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true;
      seen.push(`${ctx.username} publickey ${ok ? 'ok' : 'bad-signature'}`);
      return ok ? ctx.accept() : ctx.reject(['publickey']);
    });
    conn.on('ready', () => {
      conn.on('session', (accept) => {
        const session = accept();
        session.on('exec', (acceptExec, reject, info) => {
          seen.push(`exec ${info.command}`);
          const m = /^git-upload-pack '\/?(?:wrong\/)?([A-Za-z0-9._-]+\.git)'$/.exec(info.command);
          if (!m) return reject();
          const stream = acceptExec();
          const child = spawn('git', ['upload-pack', '--strict', join(o.reposDir, m[1]!)], { stdio: ['pipe', 'pipe', 'pipe'], env: { PATH: process.env.PATH ?? '/usr/bin:/bin', GIT_CONFIG_NOSYSTEM: '1', HOME: o.dir } });
          stream.pipe(child.stdin).on('error', () => undefined);
          child.stdout.pipe(stream, { end: false });
          child.stderr.pipe(stream.stderr, { end: false });
          child.on('close', (code) => {
            stream.exit(code ?? 1);
            stream.end();
          });
        });
        // No shell, no pty, no subsystem: refused by not answering them.
      });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const knownHostsFile = join(o.dir, 'known_hosts');
  const wrongKnownHostsFile = join(o.dir, 'known_hosts.wrong');
  const line = (pub: string) => `[127.0.0.1]:${port} ${pub.trim()}\n`;
  writeFileSync(knownHostsFile, line(host.public));
  writeFileSync(wrongKnownHostsFile, line(other.public));
  return {
    port, keyFile, knownHostsFile, wrongKnownHostsFile, keySecret, seen,
    close: () => new Promise((r) => {
      for (const c of conns) c.end();
      server.close(() => r());
    }),
  };
}
