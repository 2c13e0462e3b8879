/**
 * The artifact store in an S3-compatible object store (AWS S3, MinIO, Ceph RGW, …) through the AWS
 * SDK. Files go up streamed from disk with @aws-sdk/lib-storage (multipart past one part, a few parts
 * in flight: never a whole tar in memory); reads are streamed GETs. Keys:
 * {prefix}tenants/{tenant}/runs/{run id}/{name} and {prefix}tenants/{tenant}/workspaces/{id}.tar|json.
 * Credentials come from the SDK's standard chain (the AWS environment), never from corral's config,
 * and appear in no log. Checksums are computed only where the API requires them, so servers without
 * the newer flexible-checksum support (older MinIO, Ceph, s3rver) read the bodies as sent.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { DeleteObjectsCommand, GetObjectCommand, HeadBucketCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { StoreUnavailableError } from '../domain/errors';
import type { S3Location } from './artifacts-url';
import { keySegment, type ArtifactStore, type RunFileName, type StoredObject } from './artifact-store';

const PART_BYTES = 8 * 1024 * 1024;
const PARTS_IN_FLIGHT = 2;
const PUT_ATTEMPTS = 3;
/** The SDK's own console output is off: errors reach our log through the messages below. */
const QUIET = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

function isMissing(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === 'NoSuchKey' || e?.name === 'NotFound' || e?.$metadata?.httpStatusCode === 404;
}

/** An SDK error as one line: its name, status and message (never the request's headers). */
function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; $metadata?: { httpStatusCode?: number } };
  return `${e?.name ?? 'Error'}${e?.$metadata?.httpStatusCode ? ` (HTTP ${e.$metadata.httpStatusCode})` : ''}: ${String(e?.message ?? err).slice(0, 300)}`;
}

export class S3ArtifactStore implements ArtifactStore {
  readonly kind = 's3' as const;
  readonly description: string;
  private readonly client: S3Client;

  constructor(private readonly loc: S3Location, o: { timeoutMs?: number; defaultRegion?: string } = {}) {
    this.description = `s3://${loc.bucket}/${loc.prefix}${loc.endpoint ? ` at ${new URL(loc.endpoint).origin}` : ''}`;
    this.client = new S3Client({
      ...(loc.endpoint ? { endpoint: loc.endpoint } : {}),
      region: loc.region ?? o.defaultRegion ?? 'us-east-1',
      forcePathStyle: loc.pathStyle,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      maxAttempts: 3,
      logger: QUIET,
      requestHandler: { connectionTimeout: 5_000, requestTimeout: o.timeoutMs ?? 60_000 },
    });
  }

  runFileKey(tenant: string, runId: string, name: RunFileName): string {
    return `${this.loc.prefix}tenants/${keySegment(tenant)}/runs/${runId}/${name}`;
  }

  uploadKey(tenant: string, id: string, ext: 'tar' | 'json'): string {
    return `${this.loc.prefix}tenants/${keySegment(tenant)}/workspaces/${id}.${ext}`;
  }

  locationOf(key: string): string {
    return `s3://${this.loc.bucket}/${key}`;
  }

  async putFile(key: string, path: string, contentType: string): Promise<{ bytes: number }> {
    const bytes = (await stat(path)).size;
    // A streamed body is not retried by the SDK: each try here opens the file again.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.putFileOnce(key, path, bytes, contentType);
        return { bytes };
      } catch (err) {
        const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        const final = attempt >= PUT_ATTEMPTS || (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429);
        if (final) throw new StoreUnavailableError(`artifact store: could not put ${key} (${bytes} bytes) into ${this.description}${attempt > 1 ? ` after ${attempt} tries` : ''}: ${describe(err)}`, { cause: err });
        await new Promise((r) => setTimeout(r, 250 * 2 ** (attempt - 1)));
      }
    }
  }

  private async putFileOnce(key: string, path: string, bytes: number, contentType: string): Promise<void> {
    if (bytes <= PART_BYTES) {
      // One PUT with a known length; lib-storage would do the same, after buffering the part.
      await this.client.send(new PutObjectCommand({ Bucket: this.loc.bucket, Key: key, Body: createReadStream(path), ContentLength: bytes, ContentType: contentType }));
      return;
    }
    await new Upload({
      client: this.client, partSize: PART_BYTES, queueSize: PARTS_IN_FLIGHT, leavePartsOnError: false,
      params: { Bucket: this.loc.bucket, Key: key, Body: createReadStream(path), ContentType: contentType },
    }).done();
  }

  async putBytes(key: string, body: Buffer | string, contentType: string): Promise<void> {
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.loc.bucket, Key: key, Body: body, ContentType: contentType }));
    } catch (err) {
      throw new StoreUnavailableError(`artifact store: could not put ${key} into ${this.description}: ${describe(err)}`, { cause: err });
    }
  }

  async get(key: string): Promise<StoredObject | null> {
    try {
      const r = await this.client.send(new GetObjectCommand({ Bucket: this.loc.bucket, Key: key }));
      return { body: r.Body as Readable, bytes: r.ContentLength ?? 0 };
    } catch (err) {
      if (isMissing(err)) return null;
      throw new StoreUnavailableError(`artifact store: could not get ${key} from ${this.description}: ${describe(err)}`, { cause: err });
    }
  }

  async size(key: string): Promise<number | null> {
    try {
      const r = await this.client.send(new HeadObjectCommand({ Bucket: this.loc.bucket, Key: key }));
      return r.ContentLength ?? 0;
    } catch (err) {
      if (isMissing(err)) return null;
      throw new StoreUnavailableError(`artifact store: could not look up ${key} in ${this.description}: ${describe(err)}`, { cause: err });
    }
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      try {
        await this.client.send(new DeleteObjectsCommand({ Bucket: this.loc.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
      } catch (err) {
        throw new StoreUnavailableError(`artifact store: could not delete ${batch.length} object(s) from ${this.description}: ${describe(err)}`, { cause: err });
      }
    }
  }

  async check(): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.loc.bucket }));
    } catch (err) {
      throw new StoreUnavailableError(`artifact store ${this.description} is not reachable: ${describe(err)}`, { cause: err });
    }
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
