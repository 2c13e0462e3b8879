/**
 * The benchmark's Redis: REDIS_URL when set, else a throw-away container of corral/redis:7 published
 * on a random loopback port (removed by close()).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { sleep } from './stats';

const run = promisify(execFile);

export interface BenchRedis {
  url: string;
  /** The URL of another logical database of the same server (for a stage that audits every key). */
  db(n: number): string;
  ownContainer: boolean;
  close(): Promise<void>;
}

export async function benchRedis(image = process.env.CORRAL_REDIS_IMAGE ?? 'corral/redis:7'): Promise<BenchRedis> {
  const db = (base: string) => (n: number) => {
    const u = new URL(base);
    u.pathname = `/${n}`;
    return u.toString();
  };
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, db: db(process.env.REDIS_URL), ownContainer: false, close: async () => undefined };
  const { stdout } = await run('docker', ['run', '-d', '--rm', '--label', 'corral.bench=redis', '-p', '127.0.0.1::6379', image]);
  const id = stdout.trim();
  const close = async () => {
    await run('docker', ['rm', '-f', id]).catch(() => undefined);
  };
  try {
    const port = (await run('docker', ['port', id, '6379/tcp'])).stdout.trim().split('\n')[0]!.split(':').pop();
    const url = `redis://127.0.0.1:${port}`;
    const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    probe.on('error', () => undefined);
    const end = Date.now() + 15_000;
    for (;;) {
      try {
        if (probe.status !== 'ready') await probe.connect();
        await probe.ping();
        break;
      } catch (err) {
        if (Date.now() > end) throw err;
        probe.disconnect();
        await sleep(100);
      }
    }
    probe.disconnect();
    return { url, db: db(url), ownContainer: true, close };
  } catch (err) {
    await close();
    throw err;
  }
}
