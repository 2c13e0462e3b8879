/**
 * The artifact store on one host's disk: the data dir itself. A run's files stay where the worker
 * wrote them ({data dir}/runs/{run id}/{name}); the API serves them from there. This is the embedded
 * default, for one host (or hosts that share the data dir).
 */
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, rm, stat, writeFile, access } from 'node:fs/promises';
import { constants } from 'node:fs';
import { dirname, relative, resolve, sep } from 'node:path';
import { keySegment, type ArtifactStore, type RunFileName, type StoredObject } from './artifact-store';

export class LocalArtifactStore implements ArtifactStore {
  readonly kind = 'local' as const;
  readonly description: string;
  private readonly root: string;

  constructor(dataDir: string) {
    this.root = resolve(dataDir);
    this.description = `local files under ${this.root}`;
  }

  /** Run ids are unique across tenants (the server makes them): today's layout, without the tenant. */
  runFileKey(_tenant: string, runId: string, name: RunFileName): string {
    return `runs/${runId}/${name}`;
  }

  uploadKey(tenant: string, id: string, ext: 'tar' | 'json'): string {
    return `workspaces/${keySegment(tenant)}/${id}.${ext}`;
  }

  locationOf(key: string): string {
    return this.pathOf(key);
  }

  /** The file of a key, which never leaves the root. */
  pathOf(key: string): string {
    const p = resolve(this.root, key);
    const rel = relative(this.root, p);
    if (rel === '' || rel.startsWith('..') || rel.split(sep).includes('..')) throw new Error(`artifact key ${JSON.stringify(key)} leaves the store`);
    return p;
  }

  async putFile(key: string, path: string): Promise<{ bytes: number }> {
    const dest = this.pathOf(key);
    if (resolve(path) !== dest) {
      await mkdir(dirname(dest), { recursive: true });
      await copyFile(path, dest);
    }
    return { bytes: (await stat(dest)).size };
  }

  async putBytes(key: string, body: Buffer | string): Promise<void> {
    const dest = this.pathOf(key);
    await mkdir(dirname(dest), { recursive: true });
    await writeFile(dest, body);
  }

  async get(key: string): Promise<StoredObject | null> {
    const path = this.pathOf(key);
    const st = await stat(path).catch(() => null);
    if (!st?.isFile()) return null;
    return { body: createReadStream(path), bytes: st.size };
  }

  async size(key: string): Promise<number | null> {
    const st = await stat(this.pathOf(key)).catch(() => null);
    return st?.isFile() ? st.size : null;
  }

  async delete(keys: readonly string[]): Promise<void> {
    for (const k of keys) await rm(this.pathOf(k), { force: true });
  }

  async check(): Promise<void> {
    await mkdir(this.root, { recursive: true });
    await access(this.root, constants.W_OK);
  }

  async close(): Promise<void> {}
}
