/**
 * The docker gate's egress root: the host directory under which it makes every run's egress socket
 * directory. The worker cannot write the root (it belongs to the gate; secure-dir.ts checks the whole
 * path from `/`), so a directory the gate made there cannot be swapped for a link, or renamed away,
 * between the gate's check and the engine's mount at container start. Each directory is the gate's,
 * group-writable for the worker's egress proxy (the gate's group is the worker's), and traversable by
 * the sandbox's uid; a marker beside it (`<dir>.engine`) names the gate's engine and deployment, so the
 * gate removes only its own and sweeps those whose container is gone.
 */
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, normalize } from 'node:path';
import { engineMarkerOf } from '../sandbox/egress-dirs';
import { ensureSecureDir, secureDirProblem } from '../sandbox/secure-dir';
import { EGRESS_DIR_NAME } from './create-rules';
import { CA_DIR, CA_FILES } from '../sandbox/egress-ca';
import { refuse } from './shape';

interface Marker {
  gate: string;
  queue: string;
}

export class EgressRoot {
  readonly root: string;

  constructor(root: string, private readonly o: { queue: string; engine: () => Promise<string>; now?: () => number }) {
    this.root = normalize(root).replace(/(.)\/+$/, '$1');
  }

  /** Makes the root (0711) if missing; throws when it, or a directory above it, is not safe. */
  ready(): Promise<void> {
    return ensureSecureDir(this.root, 0o711);
  }

  private async marker(dir: string): Promise<Marker | null> {
    try {
      const m = JSON.parse(await readFile(engineMarkerOf(dir), 'utf8')) as Partial<Marker>;
      return typeof m.gate === 'string' && typeof m.queue === 'string' ? { gate: m.gate, queue: m.queue } : null;
    } catch {
      return null;
    }
  }

  /**
   * A fresh directory for one run: 01771, the gate's group (the worker's proxy makes its socket in it).
   * In it the gate makes `ca/` (01775) with `operator.crt` and `bundle.crt` (0664), empty: the worker
   * writes the operator CA's content (egress-ca.ts) but, the sticky bits set, cannot rename, remove
   * or replace any of them (with a link, say), so the CA binds mount only the gate's own entries.
   */
  async create(): Promise<string> {
    const problem = await secureDirProblem(this.root);
    if (problem) refuse('egress-root', `the egress root ${this.root} is not safe: ${problem}`);
    const dir = await mkdtemp(join(this.root, 'r-'));
    try {
      await mkdir(join(dir, CA_DIR));
      for (const f of CA_FILES) {
        await writeFile(join(dir, CA_DIR, f), '', { flag: 'wx' });
        await chmod(join(dir, CA_DIR, f), 0o664);
      }
      await chmod(join(dir, CA_DIR), 0o1775);
      await chmod(dir, 0o1771);
      const marker: Marker = { gate: await this.o.engine(), queue: this.o.queue };
      await writeFile(engineMarkerOf(dir), JSON.stringify(marker), { mode: 0o644, flag: 'wx' });
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
    return dir;
  }

  /**
   * Refuses unless `dir` is, right now, a real directory (not a link) directly in the root, and the
   * root is safe: then nobody but the gate or root can change what the engine will mount there.
   */
  async check(dir: string): Promise<void> {
    if (dirname(dir) !== this.root || !EGRESS_DIR_NAME.test(dir.slice(this.root.length + 1))) refuse('binds-egress-only', `${dir} is not directly in the egress root ${this.root}`);
    const problem = await secureDirProblem(this.root);
    if (problem) refuse('egress-root', `the egress root ${this.root} is not safe: ${problem}`);
    const st = await lstat(dir).catch(() => undefined);
    if (!st) refuse('binds-egress-only', `the egress directory ${dir} does not exist`);
    if (st.isSymbolicLink() || !st.isDirectory()) refuse('binds-egress-only', `the egress directory ${dir} is ${st.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}`);
    // The operator CA's bind sources: the gate's own entries, none a link, none replaced (the directory
    // itself may have been handed to the egress proxy's user by a root worker: egress-proxy-host.ts).
    const gateUid = process.getuid?.() ?? st.uid;
    for (const [path, dirWanted] of [[join(dir, CA_DIR), true], ...CA_FILES.map((f) => [join(dir, CA_DIR, f), false] as const)] as const) {
      const e = await lstat(path).catch(() => undefined);
      if (!e) continue;
      const ok = !e.isSymbolicLink() && (dirWanted ? e.isDirectory() : e.isFile()) && e.uid === gateUid;
      if (!ok) refuse('binds-egress-only', `${path} is not the ${dirWanted ? 'directory' : 'file'} the gate made (a link, another type or another owner)`);
    }
  }

  /** Removes one of this deployment's directories by name; false when there is none. */
  async remove(name: string): Promise<boolean> {
    if (!EGRESS_DIR_NAME.test(name)) refuse('egress-dir', `${JSON.stringify(name).slice(0, 80)} is not an egress directory's name`);
    const dir = join(this.root, name);
    const m = await this.marker(dir);
    if (!m) return false;
    if (m.queue !== this.o.queue || m.gate !== await this.o.engine()) refuse('egress-dir', `${dir} belongs to another deployment or engine`);
    await this.removeDir(dir);
    return true;
  }

  private async removeDir(dir: string): Promise<void> {
    const st = await lstat(dir).catch(() => undefined);
    // rm never follows links inside; the directory itself must not be one either.
    if (st?.isSymbolicLink()) await rm(dir, { force: true });
    else await rm(dir, { recursive: true, force: true });
    await rm(engineMarkerOf(dir), { force: true });
  }

  /** Removes this engine's directories that no container on it mounts (`live`), once older than `graceMs`. */
  async sweep(live: Set<string>, graceMs = 60_000): Promise<string[]> {
    const removed: string[] = [];
    const engine = await this.o.engine();
    const now = (this.o.now ?? Date.now)();
    for (const n of await readdir(this.root).catch(() => [] as string[])) {
      if (!EGRESS_DIR_NAME.test(n)) continue;
      const dir = join(this.root, n);
      if (live.has(dir)) continue;
      const m = await this.marker(dir);
      if (!m || m.gate !== engine) continue;
      const st = await stat(engineMarkerOf(dir)).catch(() => undefined);
      if (!st || now - st.mtimeMs < graceMs) continue;
      await this.removeDir(dir);
      removed.push(dir);
    }
    return removed;
  }
}
