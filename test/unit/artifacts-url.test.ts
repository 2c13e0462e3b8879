import { parseArtifactsUrl } from '../../src/artifacts/artifacts-url';
import { loadConfig } from '../../src/config';

test('local and s3 targets, with their options', () => {
  expect(parseArtifactsUrl(undefined)).toEqual({ kind: 'local' });
  expect(parseArtifactsUrl('local')).toEqual({ kind: 'local' });
  expect(parseArtifactsUrl('s3://corral-runs')).toEqual({ kind: 's3', bucket: 'corral-runs', prefix: '', pathStyle: false });
  expect(parseArtifactsUrl('s3://corral-runs/prod/eu/?region=eu-west-1')).toEqual({ kind: 's3', bucket: 'corral-runs', prefix: 'prod/eu/', region: 'eu-west-1', pathStyle: false });
  expect(parseArtifactsUrl('s3://b.example/p?endpoint=http://127.0.0.1:9000')).toEqual({ kind: 's3', bucket: 'b.example', prefix: 'p/', endpoint: 'http://127.0.0.1:9000', pathStyle: true });
  // Dot segments are resolved by the URL parser: a prefix never climbs out of itself.
  expect(parseArtifactsUrl('s3://bucket/a/../b')).toMatchObject({ prefix: 'b/' });
  expect(parseArtifactsUrl('s3://bucket/a/%2E%2E/%2e%2e/b')).toMatchObject({ prefix: 'b/' });
  expect(parseArtifactsUrl('s3://bkt/p?endpoint=https://rgw.internal&pathStyle=false')).toMatchObject({ pathStyle: false, endpoint: 'https://rgw.internal' });
});

test.each([
  ['ftp://bucket/x', /scheme "ftp" is not supported/],
  ['s3://AKIA:secret@bucket/x', /credentials do not go in the URL/],
  ['s3://bucket/x?endpoint=http://k:s@127.0.0.1:9000', /credentials do not go in the endpoint/],
  ['s3://Bad_Bucket/x', /"bad_bucket" is not a bucket name|is not a bucket name/],
  ['s3://ab/x', /is not a bucket name/],
  ['s3://bucket:9000/x', /a port goes in the endpoint option/],
  ['s3://bucket/x?endpont=http://127.0.0.1', /unknown option "endpont"/],
  ['s3://bucket/x?endpoint=file:///etc', /is not http\(s\)/],
  ['s3://bucket/x?endpoint=nope', /is not a URL/],
  ['s3://bucket/x?region=EU WEST', /is not a region name/],
  ['s3://bucket/x?pathStyle=yes', /pathStyle is "yes", not true or false/],
  ['not a url', /is not a URL/],
])('%s is refused, saying why', (url, why) => {
  expect(() => parseArtifactsUrl(url)).toThrow(why);
});

test('a bad CORRAL_ARTIFACTS stops the configuration, naming the variable, and never echoes a secret', () => {
  let err: Error | undefined;
  try {
    loadConfig({ CORRAL_ARTIFACTS: 's3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/x' });
  } catch (e) {
    err = e as Error;
  }
  expect(err?.message).toMatch(/^CORRAL_ARTIFACTS: credentials do not go in the URL/);
  expect(err?.message).not.toContain('wJalrXUtnFEMI');
  expect((err as { field?: string }).field).toBe('CORRAL_ARTIFACTS');
});
