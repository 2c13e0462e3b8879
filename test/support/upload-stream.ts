/**
 * PUT /v1/workspaces of a tar made while it is sent (never whole in memory): the given small files and
 * `parts` files of 10 MB under data/ (deterministic bytes, so a test can know a part's digest).
 */
import { createCipheriv, createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';

export const PART_BYTES = 10 * 1024 * 1024;

/**
 * The bytes of data/part-I.bin: an AES-CTR keystream keyed by I (native code, ~1 GB/s), so that making
 * a part does not hold the test's event loop (which also serves the API under test) for seconds.
 */
export function uploadPart(i: number): Buffer {
  const key = createHash('sha256').update(`part ${i}`).digest().subarray(0, 16);
  return createCipheriv('aes-128-ctr', key, Buffer.alloc(16)).update(Buffer.alloc(PART_BYTES));
}

export async function putStreamedWorkspace(apiUrl: string, files: Record<string, string>, parts: number, headers: Record<string, string> = {}): Promise<{ status: number; body: Record<string, unknown> }> {
  const pack = tar.pack();
  void (async () => {
    for (const [name, body] of Object.entries(files)) pack.entry({ name }, body);
    for (let i = 0; i < parts; i++) {
      const body = uploadPart(i);
      await new Promise<void>((res, rej) => pack.entry({ name: `data/part-${i}.bin`, size: body.length }, body, (err) => (err ? rej(err) : res())));
    }
    pack.finalize();
  })().catch((err: Error) => pack.destroy(err));
  const res = await fetch(`${apiUrl}/v1/workspaces`, {
    method: 'PUT', headers: { 'content-type': 'application/x-tar', ...headers },
    body: Readable.toWeb(Readable.from(pack)) as ReadableStream, duplex: 'half',
  } as RequestInit);
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}
