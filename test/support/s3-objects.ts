/** Lists an s3rver bucket's keys under a prefix through the S3 API itself (ListObjectsV2), as a client of the store sees them. */
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3_CREDENTIALS, type S3Server } from './s3-server';

export async function listObjects(s3: S3Server, prefix: string): Promise<string[]> {
  const client = new S3Client({
    endpoint: s3.endpoint, region: S3_CREDENTIALS.AWS_REGION, forcePathStyle: true,
    credentials: { accessKeyId: S3_CREDENTIALS.AWS_ACCESS_KEY_ID, secretAccessKey: S3_CREDENTIALS.AWS_SECRET_ACCESS_KEY },
  });
  try {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const r = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: prefix, ...(token ? { ContinuationToken: token } : {}) }));
      for (const o of r.Contents ?? []) if (o.Key) keys.push(o.Key);
      token = r.IsTruncated ? r.NextContinuationToken : undefined;
    } while (token);
    return keys;
  } finally {
    client.destroy();
  }
}
