/**
 * The benchmark's Redis: REDIS_URL when set, else a throw-away container of corral/redis:7 published
 * on a random loopback port (removed by close()).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { redisUrlWithDb } from '../src/domain/redis-url';
import { RedisConnections } from '../src/queue/redis-connections';
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
  const db = (base: string) => (n: number) => redisUrlWithDb(base, n);
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, db: db(process.env.REDIS_URL), ownContainer: false, close: async () => undefined };
  const { stdout } = await run('docker', ['run', '-d', '--rm', '--label', 'corral.bench=redis', '-p', '127.0.0.1::6379', image]);
  const id = stdout.trim();
  const close = async () => {
    await run('docker', ['rm', '-f', id]).catch(() => undefined);
  };
  try {
    const port = (await run('docker', ['port', id, '6379/tcp'])).stdout.trim().split('\n')[0]!.split(':').pop();
    const url = `redis://127.0.0.1:${port}`;
    const conns = new RedisConnections(url);
    const end = Date.now() + 15_000;
    for (;;) {
      const probe = conns.open('api', 'bench-probe', { lazy: true });
      probe.on('error', () => undefined);
      try {
        await conns.connect(probe, 2000);
        break;
      } catch (err) {
        if (Date.now() > end) throw err;
        await sleep(100);
      } finally {
        probe.disconnect();
      }
    }
    return { url, db: db(url), ownContainer: true, close };
  } catch (err) {
    await close();
    throw err;
  }
}
