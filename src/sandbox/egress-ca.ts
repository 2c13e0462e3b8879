/**
 * The operator's CA bundle (CORRAL_EGRESS_CA_FILE) in every sandbox with egress, installed by the
 * worker, read-only for the agent. Per run the worker writes two files into a directory of its own
 * (root-owned, 0444) that is bind-mounted read-only at /etc/corral/ca:
 *   operator.crt — the operator's certificates (NODE_EXTRA_CA_CERTS: Node adds them to its roots);
 *   bundle.crt   — the image's system bundle followed by the operator's certificates.
 * bundle.crt is also bind-mounted over the image's /etc/ssl/certs/ca-certificates.crt (the system
 * store OpenSSL, curl, git, Python's ssl and Debian's pip and requests read), and SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO and CURL_CA_BUNDLE name it (for tools with bundles
 * of their own: a venv's pip and certifi). The image itself is never written.
 *
 * The image's bundle is read once per image id and worker, from a created (never started) container
 * of that image, and cached.
 */
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';

export const CA_MOUNT = '/etc/corral/ca';
export const SYSTEM_BUNDLE = '/etc/ssl/certs/ca-certificates.crt';
const MAX_BUNDLE_BYTES = 8 * 1024 * 1024;

/** The variables that point a sandbox's tools at the combined bundle. */
export function caEnv(): Record<string, string> {
  const bundle = `${CA_MOUNT}/bundle.crt`;
  return {
    NODE_EXTRA_CA_CERTS: `${CA_MOUNT}/operator.crt`,
    SSL_CERT_FILE: bundle, REQUESTS_CA_BUNDLE: bundle, PIP_CERT: bundle, GIT_SSL_CAINFO: bundle, CURL_CA_BUNDLE: bundle,
  };
}

/** The names caEnv sets (an environment file may not set them). */
export const CA_ENV_NAMES: readonly string[] = Object.keys(caEnv());

export class SandboxTrust {
  private readonly bundles = new Map<string, Promise<Buffer | null>>();

  constructor(private readonly docker: Docker, private readonly operatorPem: string, private readonly log: (msg: string, fields?: Record<string, unknown>) => void) {}

  /**
   * Writes operator.crt and bundle.crt into `dir` (which the caller bind-mounts at CA_MOUNT). Returns
   * whether the image has a system bundle to cover (bind bundle.crt over SYSTEM_BUNDLE then).
   */
  async prepare(image: string, dir: string, probeLabels: Record<string, string>): Promise<{ system: boolean }> {
    const system = await this.imageBundle(image, probeLabels);
    const sys = system ? system.toString('utf8') : '';
    await writeFile(join(dir, 'operator.crt'), this.operatorPem, { mode: 0o444 });
    await writeFile(join(dir, 'bundle.crt'), `${sys}${sys && !sys.endsWith('\n') ? '\n' : ''}${this.operatorPem}`, { mode: 0o444 });
    return { system: system !== null };
  }

  private imageBundle(image: string, probeLabels: Record<string, string>): Promise<Buffer | null> {
    return (async () => {
      const id = (await this.docker.getImage(image).inspect()).Id;
      let p = this.bundles.get(id);
      if (!p) {
        p = readImageFile(this.docker, image, SYSTEM_BUNDLE, probeLabels);
        this.bundles.set(id, p);
        p.catch(() => this.bundles.delete(id));
      }
      const b = await p;
      if (b === null) this.log('sandbox image has no system CA bundle; the operator CA is in /etc/corral/ca/bundle.crt only', { image, path: SYSTEM_BUNDLE });
      return b;
    })();
  }
}

/** A regular file of an image (at most MAX_BUNDLE_BYTES), or null when the path is absent or not a regular file. */
async function readImageFile(docker: Docker, image: string, path: string, labels: Record<string, string>): Promise<Buffer | null> {
  const c = await docker.createContainer({
    name: `corral-ca-probe-${randomBytes(6).toString('hex')}`,
    Image: image, Cmd: ['true'], Entrypoint: [], NetworkDisabled: true,
    // Labelled as corral's, with a short deadline (the caller's labels): a reaper removes it if this worker dies first.
    Labels: labels,
    HostConfig: { NetworkMode: 'none', LogConfig: { Type: 'none', Config: {} } },
  });
  try {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await c.getArchive({ path });
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return null;
      throw err;
    }
    return await new Promise<Buffer | null>((resolve, reject) => {
      const ex = tar.extract();
      let out: Buffer | null = null;
      ex.on('entry', (h, s, next) => {
        if (out !== null || h.type !== 'file' || (h.size ?? 0) > MAX_BUNDLE_BYTES) {
          s.resume();
          s.on('end', next);
          return;
        }
        const parts: Buffer[] = [];
        s.on('data', (d: unknown) => { parts.push(d as Buffer); });
        s.on('end', () => {
          out = Buffer.concat(parts);
          next();
        });
      });
      ex.on('finish', () => resolve(out));
      ex.on('error', reject);
      stream.on('error', reject);
      stream.pipe(ex);
    });
  } finally {
    await c.remove({ force: true }).catch(() => undefined);
  }
}
