/**
 * Where a run's egress socket directory comes from. The directory is bind-mounted into the sandbox,
 * and the engine resolves a bind source when the container starts, following links: whoever can
 * replace it (or a directory above it) between a check and that moment can make the engine mount any
 * host path. So the directory must lie in a root the worker cannot write, made by someone who can.
 * - With a docker gate (DOCKER_HOST is one): the gate owns the egress root and makes each directory
 *   (POST /corral-gate/egress-dirs), group-writable for the worker's proxy, and removes it.
 * - With the engine itself (the worker holds the engine, so it is trusted as root anyway): the worker
 *   makes it under its egress root, as before.
 * AutoEgressDirs asks the engine's socket once which of the two it is.
 */
import http from 'node:http';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface EgressDirs {
  /** A fresh empty directory for one run's egress socket. */
  create(): Promise<string>;
  /** Removes it (and its engine marker); never throws for one already gone. */
  remove(dir: string): Promise<void>;
}

/** The file beside an egress directory naming its engine (not inside it: the directory is the sandbox's mount). */
export const engineMarkerOf = (dir: string) => `${dir}.engine`;

/** The worker's own directories (no gate: the worker holds the engine). */
export class LocalEgressDirs implements EgressDirs {
  constructor(readonly root: string, private readonly engineKey: string) {}

  async create(): Promise<string> {
    await mkdir(this.root, { recursive: true, mode: 0o711 });
    const dir = await mkdtemp(join(this.root, 'r-'));
    try {
      // Which engine's sandbox this directory serves: another engine's reaper on this host leaves it alone.
      await writeFile(engineMarkerOf(dir), this.engineKey, { mode: 0o644 });
      await chmod(dir, 0o755);
    } catch (err) {
      await this.remove(dir);
      throw err;
    }
    return dir;
  }

  async remove(dir: string): Promise<void> {
    await rm(dir, { recursive: true, force: true });
    await rm(engineMarkerOf(dir), { force: true });
  }
}

function gateRequest(socketPath: string, method: string, path: string, timeoutMs = 15_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method, path, timeout: timeoutMs, headers: { Host: 'docker' } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => {
        if (body.length < 64 * 1024) body += d;
      });
      res.once('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.once('error', reject);
    });
    req.once('timeout', () => req.destroy(new Error(`the docker gate did not answer ${method} ${path} within ${timeoutMs} ms`)));
    req.once('error', reject);
    req.end();
  });
}

/** Directories the docker gate makes and removes. */
export class GateEgressDirs implements EgressDirs {
  constructor(private readonly socketPath: string) {}

  async create(): Promise<string> {
    const r = await gateRequest(this.socketPath, 'POST', '/corral-gate/egress-dirs');
    let dir: unknown;
    try {
      dir = (JSON.parse(r.body) as { dir?: unknown }).dir;
    } catch { /* below */ }
    if (r.status !== 201 || typeof dir !== 'string') throw new Error(`the docker gate made no egress directory (${r.status}): ${r.body.slice(0, 300)}`);
    return dir;
  }

  async remove(dir: string): Promise<void> {
    const name = dir.slice(dir.lastIndexOf('/') + 1);
    const r = await gateRequest(this.socketPath, 'DELETE', `/corral-gate/egress-dirs/${encodeURIComponent(name)}`);
    if (r.status !== 204 && r.status !== 404) throw new Error(`the docker gate did not remove ${dir} (${r.status}): ${r.body.slice(0, 300)}`);
  }
}

/** Whether the unix socket at `socketPath` is a docker gate (it answers /corral-gate/health) rather than an engine. */
export async function isDockerGate(socketPath: string): Promise<boolean> {
  const r = await gateRequest(socketPath, 'GET', '/corral-gate/health', 5000);
  return r.status === 200 || (r.status === 503 && r.body.includes('"gate"'));
}

/** The gate's directories when DOCKER_HOST is a gate, else the worker's own (asked once, on first use). */
export class AutoEgressDirs implements EgressDirs {
  private chosen: Promise<EgressDirs> | undefined;

  /** `socketPath`: the engine's unix socket (undefined: a TCP engine, never a gate). */
  constructor(private readonly socketPath: string | undefined, private readonly local: LocalEgressDirs) {}

  private pick(): Promise<EgressDirs> {
    const socketPath = this.socketPath;
    if (!socketPath) return Promise.resolve(this.local);
    this.chosen ??= isDockerGate(socketPath).then((gate) => (gate ? new GateEgressDirs(socketPath) : this.local));
    this.chosen.catch(() => (this.chosen = undefined));
    return this.chosen;
  }

  async create(): Promise<string> {
    return (await this.pick()).create();
  }

  async remove(dir: string): Promise<void> {
    return (await this.pick()).remove(dir);
  }
}
