/**
 * The diff thread's program (diff-thread.ts bundles it): for each message, the change of one path
 * (workspace-diff.ts diffFile), posted back with this thread's id.
 */
import { parentPort, threadId } from 'node:worker_threads';
import { diffFile, type FileSide } from './workspace-diff';

type Wire = { data?: Uint8Array; sha256: string; gitId?: string; size: number; mode: number } | null;

const side = (s: Wire): FileSide | null => (s ? { ...(s.data ? { data: Buffer.from(s.data.buffer, s.data.byteOffset, s.data.byteLength) } : {}), sha256: s.sha256, ...(s.gitId ? { gitId: s.gitId } : {}), size: s.size, mode: s.mode } : null);

parentPort!.on('message', (m: { path: string; before: Wire; after: Wire }) => {
  parentPort!.postMessage({ section: diffFile(m.path, side(m.before), side(m.after)), threadId });
});
