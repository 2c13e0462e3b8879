/**
 * The operator's CA bundle (CORRAL_EGRESS_CA_FILE) in every sandbox with egress, installed by the
 * worker, read-only for the agent. Per run the worker writes two files into the egress directory's
 * `ca/`, bind-mounted read-only at /etc/corral/ca. Without a gate the worker makes them (its own,
 * 0444); with a docker gate the gate made `ca/` and both files (its own, the sticky bits set: the
 * worker fills them but cannot replace them; egress-root.ts), and checks them before each mount:
 *   operator.crt — the operator's certificates (NODE_EXTRA_CA_CERTS: Node adds them to its roots);
 *   bundle.crt   — the image's system bundle followed by the operator's certificates.
 * bundle.crt is also bind-mounted over the image's /etc/ssl/certs/ca-certificates.crt (the system
 * store OpenSSL, curl, git, Python's ssl and Debian's pip and requests read), and SSL_CERT_FILE,
 * REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO and CURL_CA_BUNDLE name it (for tools with bundles
 * of their own: a venv's pip and certifi). The image itself is never written.
 *
 * The image's bundle is read once per image id and worker, from the first such run's created (not yet
 * started) container, whose system store is then not covered yet (its tools still get the variables
 * and /etc/corral/ca); later sandboxes of that image get the bind as well. No extra container: the
 * docker gate admits only sandboxes.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';

export const CA_MOUNT = '/etc/corral/ca';
/** The directory in a run's egress directory that holds the files (bound at CA_MOUNT). */
export const CA_DIR = 'ca';
export const CA_FILES = ['operator.crt', 'bundle.crt'] as const;
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
  /** The system bundle of each image id (null: the image has none to cover). */
  private readonly bundles = new Map<string, Buffer | null>();

  constructor(private readonly docker: Docker, private readonly operatorPem: string, private readonly log: (msg: string, fields?: Record<string, unknown>) => void) {}

  /** The image's id, and its system bundle when it was read before (undefined: not yet known). */
  async lookup(image: string): Promise<{ id: string; bundle: Buffer | null | undefined }> {
    const id = (await this.docker.getImage(image).inspect()).Id;
    return { id, bundle: this.bundles.get(id) };
  }

  /**
   * Reads the image's system bundle from a run's created container whose system store is not covered
   * (its read-only root is the image's), and keeps it for the image's later sandboxes.
   */
  async learn(id: string, container: Docker.Container): Promise<Buffer | null> {
    const b = await readContainerFile(container, SYSTEM_BUNDLE);
    this.bundles.set(id, b);
    if (b === null) this.log('sandbox image has no system CA bundle; the operator CA is in /etc/corral/ca/bundle.crt only', { image: id, path: SYSTEM_BUNDLE });
    return b;
  }

  /** Writes operator.crt and bundle.crt (the image's bundle, then the operator's) into `dir`, read-only. */
  async write(dir: string, system: Buffer | null): Promise<void> {
    const sys = system ? system.toString('utf8') : '';
    // Files the gate made are filled as they are (the mode applies only to a file made here).
    await writeFile(join(dir, 'operator.crt'), this.operatorPem, { mode: 0o444 });
    await writeFile(join(dir, 'bundle.crt'), `${sys}${sys && !sys.endsWith('\n') ? '\n' : ''}${this.operatorPem}`, { mode: 0o444 });
  }
}

/** A regular file of a container (at most MAX_BUNDLE_BYTES), or null when the path is absent or not a regular file. */
async function readContainerFile(c: Docker.Container, path: string): Promise<Buffer | null> {
  let stream: NodeJS.ReadableStream;
  try {
    stream = await c.getArchive({ path });
  } catch (err) {
    if ((err as { statusCode?: number }).statusCode === 404) return null;
    throw err;
  }
  return new Promise<Buffer | null>((resolve, reject) => {
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
}
