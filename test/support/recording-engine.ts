/**
 * A byte recorder between the docker gate and the real engine: a unix socket that relays every
 * connection to /var/run/docker.sock and keeps what went towards the engine (capped). A test of the
 * gate asserts with it that an attack's body never reached the engine at all, and that what did
 * reach it was the gate's rebuilt request (canonical field spellings only).
 */
import { mkdtempSync, rmSync, chmodSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface RecordingEngine {
  socket: string;
  /** Everything sent to the engine since the last clear(), as latin1 text. */
  seen(): string;
  clear(): void;
  close(): Promise<void>;
}

const CAP = 64 * 1024 * 1024;

export async function startRecordingEngine(engine = '/var/run/docker.sock'): Promise<RecordingEngine> {
  const dir = mkdtempSync(join(tmpdir(), 'cg-rec-'));
  chmodSync(dir, 0o755);
  const socket = join(dir, 'engine.sock');
  let chunks: Buffer[] = [];
  let size = 0;
  const open = new Set<Socket>();
  const server: Server = createServer((client) => {
    const up = connect(engine);
    open.add(client);
    open.add(up);
    client.on('data', (d: Buffer) => {
      if (size < CAP) {
        chunks.push(d);
        size += d.length;
      }
    });
    client.pipe(up);
    up.pipe(client);
    const done = () => {
      client.destroy();
      up.destroy();
      open.delete(client);
      open.delete(up);
    };
    client.once('error', done);
    up.once('error', done);
    client.once('close', done);
    up.once('close', done);
  });
  await new Promise<void>((r) => server.listen(socket, () => r()));
  return {
    socket,
    seen: () => Buffer.concat(chunks).toString('latin1'),
    clear: () => {
      chunks = [];
      size = 0;
    },
    close: async () => {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
