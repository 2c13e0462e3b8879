/**
 * CORRAL_ARTIFACTS: where run files go. Unset or `local` → the data dir. `s3://BUCKET/PREFIX?…` →
 * an S3-compatible object store, with query options `endpoint` (http(s) URL of MinIO, Ceph RGW, …;
 * unset: AWS), `region` (default: the AWS environment's, else us-east-1) and `pathStyle`
 * (true|false; default true with an endpoint). Credentials are never in the URL: the standard AWS
 * environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a role) provides them.
 */
import { InvalidInputError } from '../domain/errors';

export interface S3Location {
  bucket: string;
  /** '' or a prefix ending in '/'. */
  prefix: string;
  endpoint?: string;
  region?: string;
  pathStyle: boolean;
}

export type ArtifactsTarget = { kind: 'local' } | ({ kind: 's3' } & S3Location);

const BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const OPTIONS = new Set(['endpoint', 'region', 'pathStyle']);

export function parseArtifactsUrl(value: string | undefined): ArtifactsTarget {
  const v = (value ?? '').trim();
  if (v === '' || v === 'local') return { kind: 'local' };
  const bad = (why: string) => new InvalidInputError(`CORRAL_ARTIFACTS: ${why} (expected "local" or s3://BUCKET/PREFIX?endpoint=URL&region=NAME)`, 'CORRAL_ARTIFACTS');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw bad(`"${v.slice(0, 200)}" is not a URL`);
  }
  if (u.protocol !== 's3:') throw bad(`scheme "${u.protocol.replace(/:$/, '')}" is not supported`);
  if (u.username || u.password) throw bad('credentials do not go in the URL; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or a profile or role)');
  const bucket = u.hostname;
  if (!BUCKET.test(bucket) || bucket.includes('..')) throw bad(`"${bucket}" is not a bucket name (3-63 lower-case letters, digits, dots, hyphens)`);
  if (u.port) throw bad('a port goes in the endpoint option, not after the bucket');
  const segments = decodeURIComponent(u.pathname).split('/').filter(Boolean);
  if (segments.some((s) => s === '.' || s === '..')) throw bad('the prefix may not hold "." or ".." segments');
  for (const k of u.searchParams.keys()) if (!OPTIONS.has(k)) throw bad(`unknown option "${k}" (endpoint, region, pathStyle)`);
  const endpoint = u.searchParams.get('endpoint') ?? undefined;
  if (endpoint !== undefined) {
    let e: URL;
    try {
      e = new URL(endpoint);
    } catch {
      throw bad(`endpoint "${endpoint.slice(0, 200)}" is not a URL`);
    }
    if (e.protocol !== 'http:' && e.protocol !== 'https:') throw bad(`endpoint "${endpoint.slice(0, 200)}" is not http(s)`);
    if (e.username || e.password) throw bad('credentials do not go in the endpoint; use the AWS environment');
  }
  const region = u.searchParams.get('region') ?? undefined;
  if (region !== undefined && !/^[a-z0-9-]{1,40}$/.test(region)) throw bad(`region "${region.slice(0, 60)}" is not a region name`);
  const ps = u.searchParams.get('pathStyle');
  if (ps !== null && ps !== 'true' && ps !== 'false') throw bad(`pathStyle is "${ps.slice(0, 20)}", not true or false`);
  return {
    kind: 's3', bucket, prefix: segments.length ? `${segments.join('/')}/` : '',
    ...(endpoint ? { endpoint } : {}), ...(region ? { region } : {}),
    pathStyle: ps === null ? endpoint !== undefined : ps === 'true',
  };
}
