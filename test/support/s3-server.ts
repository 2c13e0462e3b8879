/**
 * An S3-compatible object store on loopback for tests and benches: s3rver (someone else's
 * implementation of the S3 API, files under a temporary directory), with one bucket. `env` is what
 * a corral process needs to use it as CORRAL_ARTIFACTS, AWS credentials included (s3rver's fixed
 * S3RVER/S3RVER pair: it checks signatures). `requests` counts what reached it, by method.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { request as httpRequest } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

export interface S3Server {
  endpoint: string;
  bucket: string;
  dir: string;
  /** CORRAL_ARTIFACTS and the AWS variables for a corral process. */
  env(prefix?: string): Record<string, string>;
  /** Requests seen, by method (PUT, GET, POST for multipart, DELETE, HEAD). */
  requests: Record<string, number>;
  /** Stops answering until resume(): a connection is dropped as it comes (and counted in turnedAway). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Connections dropped while paused: a client's tries during an outage, for a test to wait for. */
  readonly turnedAway: number;
  close(): Promise<void>;
}

export const S3_CREDENTIALS = { AWS_ACCESS_KEY_ID: 'S3RVER', AWS_SECRET_ACCESS_KEY: 'S3RVER', AWS_REGION: 'us-east-1' };

/**
 * s3rver listens on its own port; a small counting front on a fixed port forwards to it, so that
 * pause() can close the front (the store "goes away") and resume() bring it back on the same port.
 */
export async function startS3Server(o: { bucket?: string } = {}): Promise<S3Server> {
  const bucket = o.bucket ?? 'corral-test';
  const dir = mkdtempSync(join(tmpdir(), 'corral-s3-'));
  const s3 = new S3rver({ address: '127.0.0.1', port: 0, silent: true, directory: dir, configureBuckets: [{ name: bucket }] });
  const back = await s3.run();
  const requests: Record<string, number> = {};
  let front: Server | undefined;
  let port = 0;
  const listen = () => new Promise<void>((resolve, reject) => {
    front = createServer((req, res) => {
      requests[req.method ?? '?'] = (requests[req.method ?? '?'] ?? 0) + 1;
      const up = httpRequest({ host: '127.0.0.1', port: back.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    front.once('error', reject);
    front.listen(port, '127.0.0.1', () => {
      port = (front!.address() as { port: number }).port;
      resolve();
    });
  });
  await listen();
  const endpoint = `http://127.0.0.1:${port}`;
  const stop = () => new Promise<void>((resolve) => {
    if (!front) return resolve();
    front.close(() => resolve());
    front.closeAllConnections();
    front = undefined;
  });
  let turnedAway = 0;
  let dropper: TcpServer | undefined;
  const undrop = () => new Promise<void>((resolve) => (dropper ? dropper.close(() => resolve()) : resolve())).then(() => { dropper = undefined; });
  return {
    endpoint, bucket, dir, requests,
    env: (prefix = 'corral') => ({ ...S3_CREDENTIALS, CORRAL_ARTIFACTS: `s3://${bucket}/${prefix}?endpoint=${encodeURIComponent(endpoint)}` }),
    get turnedAway() {
      return turnedAway;
    },
    async pause() {
      await stop();
      dropper = createTcpServer((s) => {
        turnedAway += 1;
        s.destroy();
      });
      await new Promise<void>((resolve, reject) => dropper!.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
    },
    async resume() {
      await undrop();
      await listen();
    },
    async close() {
      await undrop();
      await stop();
      await s3.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
