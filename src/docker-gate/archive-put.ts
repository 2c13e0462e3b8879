/**
 * PUT /containers/{id}/archive, as the docker gate serves it: only into /workspace of a runc sandbox
 * the gate created, and only a tar that puts back what the effect guard restores
 * (src/sandbox/protected-restore.ts): regular files, directories and symbolic links that stay in the
 * workspace, each owned by that container's agent uid, no mode wider than 0o1777. Refused (rule
 * `archive-put`), naming the entry: an owner other than the agent's (in the ustar field or a PAX
 * record), a setuid or setgid bit, a hard link, a device, a FIFO or any other type, an absolute name,
 * a `.` or `..` segment, the workspace itself, a name twice, a link that leaves the workspace or that a
 * later entry goes through, an entry whose parent directories are not entries before it, a PAX record
 * other than the ones below (no xattrs: no file capabilities, no ACLs), a compressed or malformed tar,
 * more than ARCHIVE_PUT_LIMITS bytes or entries, an empty one.
 *
 * Links the sandbox itself holds: the engine extracts as root, chrooted into the container's root
 * filesystem, and follows a link it meets in a parent (a link `d -> /etc` in the workspace made `d/x`
 * land in the read-only root's /etc, measured on Engine 20.10). A directory entry for a path makes the
 * engine replace whatever non-directory is there (such a link) with a real directory, so requiring
 * every parent as an earlier entry — as protected-restore.ts writes them — leaves nothing to follow;
 * the gate pauses the container for the upload so no process swaps a link back in between.
 *
 * Nothing of the client's tar reaches the engine: the gate parses it (tar-stream) and packs a new tar
 * from the checked fields — name, type, mode, content, link target — with the owner set from the uid
 * the gate recorded for the container, in PAX records (a sandbox uid does not fit ustar's 6 octal
 * digits). So a header the gate's parser reads one way and the engine's (Go's archive/tar) another
 * never gets there. The engine receives the tar only after the last entry passed.
 */
import type { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { checkLinkTarget, SeedLinks } from '../sandbox/archive';
import { Refusal, refuse } from './shape';

export const ARCHIVE_PUT_LIMITS = {
  /** Bytes of the client's tar (a restore carries at most 32 MiB of kept content: protected-snapshot.ts). */
  maxBytes: 40 * 1024 * 1024,
  maxEntries: 10_000,
};

/** PAX records a writer may use to say what the entry's ustar fields say; every other key is refused. */
const PAX_KEYS = new Set(['uid', 'gid', 'path', 'linkpath', 'size', 'mtime', 'atime', 'ctime']);
const MAX_NAME_BYTES = 4096;
const MAX_SEGMENT_BYTES = 255;
/** mtime as ustar's 11 octal digits hold it. */
const MAX_MTIME_S = 8 ** 11 - 1;

const paxOf = (h: tar.Header): Record<string, string> => (h.pax ?? {}) as Record<string, string>;
const show = (s: string) => JSON.stringify(s.length > 120 ? `${s.slice(0, 120)}…` : s);

function bad(detail: string): never {
  refuse('archive-put', detail);
}

/** The owner an entry gives, as Go's archive/tar reads it: a PAX record wins over the ustar field. */
function ownerOf(h: tar.Header, key: 'uid' | 'gid'): number {
  const pax = paxOf(h)[key];
  if (pax === undefined) return h[key] ?? NaN;
  return /^\d{1,12}$/.test(pax) ? Number(pax) : NaN;
}

/** The workspace path of one entry, or a refusal naming it. */
function checkEntry(h: tar.Header, agentUid: number): { path: string; kind: 'file' | 'dir' | 'symlink' } {
  const name = h.name;
  const kind = h.type === 'file' ? 'file' : h.type === 'directory' ? 'dir' : h.type === 'symlink' ? 'symlink' : null;
  if (!kind) bad(`${show(name)} is a ${h.type === 'link' ? 'hard link' : (h.type ?? 'entry of unknown type')}: only regular files, directories and symbolic links are put into a workspace`);
  for (const k of Object.keys(paxOf(h))) if (!PAX_KEYS.has(k)) bad(`${show(name)} carries the PAX record ${show(k)} (no extended attributes, capabilities or ACLs)`);
  for (const k of ['uid', 'gid'] as const) {
    if (ownerOf(h, k) !== agentUid) bad(`${show(name)} is owned by ${k} ${paxOf(h)[k] ?? String(h[k])}: entries must belong to the sandbox's agent ${agentUid}`);
  }
  const mode = h.mode ?? 0;
  if ((mode & ~0o1777) !== 0) bad(`${show(name)} has mode 0${mode.toString(8)}: no setuid, setgid or other bits beyond 01777`);
  const bytes = Buffer.byteLength(name);
  if (bytes > MAX_NAME_BYTES) bad(`a name of ${bytes} bytes (${show(name)}); at most ${MAX_NAME_BYTES}`);
  const rel = kind === 'dir' && name.endsWith('/') ? name.slice(0, -1) : name;
  if (rel === '' || rel.startsWith('/')) bad(`${show(name)} is ${rel === '' ? 'the workspace itself' : 'an absolute name'}: names are relative to /workspace`);
  if (rel.includes('\0')) bad(`${show(name)} holds a NUL`);
  for (const seg of rel.split('/')) {
    if (seg === '' || seg === '.' || seg === '..') bad(`${show(name)} has an empty, "." or ".." segment: names are plain relative paths`);
    if (Buffer.byteLength(seg) > MAX_SEGMENT_BYTES) bad(`${show(name)} has a segment over ${MAX_SEGMENT_BYTES} bytes`);
  }
  if (kind === 'symlink') {
    const problem = checkLinkTarget(rel, h.linkname ?? '');
    if (problem) bad(`the symbolic link ${show(name)} is refused: ${problem}`);
  }
  return { path: rel, kind };
}

async function collect(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(c as Buffer);
  return Buffer.concat(parts);
}

/**
 * Reads the client's tar from `src` and returns the tar the engine gets (uncompressed, every entry
 * owned by `agentUid`), or throws a Refusal. Bounded by `limits` while it reads; after a refusal `src`
 * is left paused, unread (the caller closes the connection once it answered).
 */
export async function rebuildArchivePut(src: Readable, agentUid: number, limits = ARCHIVE_PUT_LIMITS): Promise<Buffer> {
  const extract = tar.extract();
  let bytes = 0;
  const stop = () => {
    src.unpipe(extract);
    src.pause();
  };
  src.on('data', (c: Buffer) => {
    bytes += c.length;
    if (bytes <= limits.maxBytes) return;
    // no more is read: the caller answers and closes the connection
    stop();
    extract.destroy(new Refusal('archive-put', `the archive is larger than ${limits.maxBytes} bytes`));
  });
  src.once('error', (err) => extract.destroy(err));
  src.pipe(extract);
  const pack = tar.pack();
  const out: Buffer[] = [];
  pack.on('data', (c: unknown) => void out.push(c as Buffer));
  const packed = new Promise<void>((resolve, reject) => {
    pack.once('end', resolve);
    pack.once('error', reject);
  });
  const links = new SeedLinks();
  const names = new Set<string>();
  const dirs = new Set<string>();
  let entries = 0;
  try {
    for await (const entry of extract) {
      const h = entry.header;
      if (++entries > limits.maxEntries) bad(`more than ${limits.maxEntries} entries`);
      const { path, kind } = checkEntry(h, agentUid);
      if (names.has(path)) bad(`${show(path)} is named twice`);
      names.add(path);
      try {
        links.check(path, kind);
      } catch (err) {
        bad((err as Error).message.replace(/^archive entry refused: /, ''));
      }
      // The engine follows links the sandbox holds when it writes beneath a path; a directory entry for
      // each parent makes it replace such a link with a real directory first (the gate keeps the
      // sandbox paused meanwhile, so nothing can swap one back: gate-server.ts).
      for (let at = path.indexOf('/'); at > 0; at = path.indexOf('/', at + 1)) {
        const parent = path.slice(0, at);
        if (!dirs.has(parent)) bad(`${show(path)} comes without a directory entry for its parent ${show(`${parent}/`)} before it: every parent is named first, so nothing is written through a link the sandbox holds`);
      }
      if (kind === 'dir') dirs.add(path);
      const s = h.mtime instanceof Date ? Math.floor(h.mtime.getTime() / 1000) : 0;
      const mtime = new Date(Math.min(Math.max(Number.isFinite(s) ? s : 0, 0), MAX_MTIME_S) * 1000);
      const owner = { uid: 0, gid: 0, pax: { uid: String(agentUid), gid: String(agentUid) } };
      const mode = (h.mode ?? 0) & 0o1777;
      if (kind === 'file') {
        const data = await collect(entry);
        pack.entry({ name: path, type: 'file', mode, size: data.length, mtime, ...owner }, data);
        continue;
      }
      entry.resume();
      if (kind === 'dir') pack.entry({ name: `${path}/`, type: 'directory', mode, mtime, ...owner });
      else pack.entry({ name: path, type: 'symlink', linkname: h.linkname!, mode: 0o777, mtime, ...owner });
    }
  } catch (err) {
    stop();
    extract.destroy();
    pack.destroy();
    if (err instanceof Refusal) throw err;
    throw new Refusal('archive-put', `the body is not an uncompressed tar the gate can read: ${(err as Error).message}`);
  }
  if (entries === 0) bad('the archive holds no entry');
  pack.finalize();
  await packed;
  return Buffer.concat(out);
}
