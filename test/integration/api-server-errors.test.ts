/**
 * A 5xx shows only a reference (issue 40, defect 4): an object store that is away is a 503 with
 * Retry-After whose body names neither the bucket nor the endpoint; a Docker engine that is away is a
 * 503 too; a run file this API cannot read names no server path or worker. The detail goes to the
 * server log under the answer's reference. Real Redis, a real S3-compatible server (s3rver on
 * loopback) that the test takes away, the real AWS SDK.
 */
import Fastify from 'fastify';
import { sendError } from '../../src/api/http-errors';
import { artifactStoreFor } from '../../src/artifacts';
import { loadConfig } from '../../src/config';
import { SandboxError, StoreUnavailableError } from '../../src/domain/errors';
import { startApiFixture, type ApiFixture } from '../support/api-fixture';
import { S3_CREDENTIALS, startS3Server, type S3Server } from '../support/s3-server';

interface ErrorBody { error: { code: string; message: string; reference?: string } }

let s3: S3Server;
const saved: Record<string, string | undefined> = {};
beforeAll(async () => {
  s3 = await startS3Server({ bucket: 'tenant-secret-bucket' });
  for (const [k, v] of Object.entries(S3_CREDENTIALS)) {
    saved[k] = process.env[k];
    process.env[k] = v; // the SDK's standard chain, as a deployed process's
  }
});
afterAll(async () => {
  await s3?.close();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

describe('with the object store', () => {
  let f: ApiFixture;
  const logged: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
  beforeAll(async () => {
    const artifacts = artifactStoreFor(loadConfig({ CORRAL_ARTIFACTS: s3.env('errs').CORRAL_ARTIFACTS!, AWS_REGION: 'us-east-1' }));
    f = await startApiFixture({ deps: { artifacts, log: (msg, fields) => logged.push({ msg, ...(fields ? { fields } : {}) }) } });
  });
  afterAll(async () => {
    await f?.close();
  });

  test('an object store that is away: 503 with Retry-After and a reference, no bucket or endpoint; the log has them', async () => {
    const created = await f.call('POST', '/v1/runs', { body: { task: 'x' } });
    const id = created.json<{ id: string }>().id;
    await f.store.update(id, { status: 'succeeded', outcome: 'succeeded', reason: 'done', finishedAt: new Date().toISOString(), logPath: `s3://tenant-secret-bucket/errs/acme/${id}/events.jsonl` });
    await s3.pause();
    const r = await f.call('GET', `/v1/runs/${id}/logs`).finally(() => s3.resume());
    expect(r.status).toBe(503);
    expect(r.headers['retry-after']).toBe('5');
    const body = r.json<ErrorBody>();
    expect(body.error).toMatchObject({ code: 'unavailable', reference: expect.any(String), message: expect.stringMatching(/^a store this server depends on \(Redis or the object store\) is unavailable; try again shortly \(reference \S+\)$/) });
    const text = JSON.stringify(body);
    for (const secret of ['tenant-secret-bucket', new URL(s3.endpoint).host, String(new URL(s3.endpoint).port), 's3://', 'errs/acme']) expect(text).not.toContain(secret);
    const entry = logged.find((l) => l.msg === 'API request failed' && l.fields?.reference === body.error.reference);
    expect(entry?.fields).toMatchObject({ status: 503, error: expect.stringContaining('tenant-secret-bucket') });
  });

  test('a run file in neither the store nor this API\'s data dir: a 404 naming no path, worker or bucket; the log has them', async () => {
    const created = await f.call('POST', '/v1/runs', { body: { task: 'y' } });
    const id = created.json<{ id: string }>().id;
    await f.store.update(id, { status: 'succeeded', outcome: 'succeeded', reason: 'done', finishedAt: new Date().toISOString(), workerId: 'worker-host-7', reportPath: `/srv/private/corral/runs/${id}/report.md` });
    const r = await f.call('GET', `/v1/runs/${id}/report`);
    expect(r.status).toBe(404);
    const text = JSON.stringify(r.body);
    for (const secret of ['/srv/private', 'worker-host-7', f.config.CORRAL_DATA_DIR, 'tenant-secret-bucket']) expect(text).not.toContain(secret);
    const reference = /\(reference (\S+)\)/.exec(r.json<ErrorBody>().error.message)?.[1];
    expect(reference).toBeDefined();
    expect(logged.find((l) => l.fields?.reference === reference)?.fields).toMatchObject({ runId: id, detail: expect.stringMatching(/\/srv\/private.*worker-host-7.*tenant-secret-bucket/s) });
  });
});

test('every dependency that is away is a 503 with Retry-After; any other 5xx a 500; both only a reference', async () => {
  const app = Fastify({ logger: false });
  app.setErrorHandler((err, _req, reply) => sendError(reply, err));
  app.get('/docker', async () => {
    throw new SandboxError('sandbox_unavailable', 'the Docker engine at unix:///var/run/secret-docker.sock does not answer');
  });
  app.get('/store', async () => {
    throw new StoreUnavailableError('artifact store: could not get k from s3://tenant-secret-bucket at http://10.1.2.3:9000');
  });
  app.get('/redis', async () => {
    throw Object.assign(new Error('connect ECONNREFUSED 10.9.9.9:6379'), { code: 'ECONNREFUSED' });
  });
  app.get('/failed', async () => {
    throw new SandboxError('sandbox_failed', 'container abc123 on host secret-host exited 137');
  });
  try {
    for (const [url, status, code] of [['/docker', 503, 'unavailable'], ['/store', 503, 'unavailable'], ['/redis', 503, 'unavailable'], ['/failed', 500, 'internal']] as const) {
      const r = await app.inject({ method: 'GET', url });
      expect({ url, status: r.statusCode, code: r.json<ErrorBody>().error.code }).toEqual({ url, status, code });
      if (status === 503) expect(r.headers['retry-after']).toBe('5');
      expect(r.json<ErrorBody>().error.message).toMatch(/\(reference \S+\)/);
      expect(r.body).not.toMatch(/secret|10\.\d|abc123|ECONNREFUSED/);
    }
  } finally {
    await app.close();
  }
});
