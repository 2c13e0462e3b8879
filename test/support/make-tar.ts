/** An uncompressed tar built in memory from header fields and bodies, for tests of archive handling. */
import * as tar from 'tar-stream';

export type TarEntry = Partial<tar.Header> & { name: string; body?: string | Buffer };

export async function makeTar(entries: TarEntry[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on('data', (c: unknown) => { chunks.push(c as Buffer); });
  const done = new Promise((r) => pack.on('end', () => r(undefined)));
  for (const { body, ...h } of entries) pack.entry(h as tar.Header, body ?? '');
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}
