/**
 * The export's line diffs off the worker's event loop. A line diff of two 1 MiB files can take its
 * whole budget (DIFF_TIMEOUT_MS, a second), and 20 of them in one export blocked every other run of
 * the worker for 21 s (issue 35). So each diff whose two sides are text and differ runs in a worker
 * thread (one per worker process, serving every export in turn) — and so does a binary change's git
 * binary patch (deflate and base85 of up to 1 MiB, git-binary-patch.ts) — bounded:
 * - the `diff` package's own time budget per file (as before), and a watchdog past it: a thread that
 *   does not answer in time is terminated and that file's section is made here without the line diff
 *   (one hunk replacing the whole text, or the binary patch: binaryDiff);
 * - the thread's heap (resourceLimits): a thread that runs out dies, that file's section is made the same way,
 *   and the next diff gets a fresh thread;
 * - one diff at a time, so an export never uses more than one core for diffs.
 * The thread's code is this module's sibling diff-thread-main.ts bundled by esbuild once per process
 * (as the egress proxy is), so it runs the same under tsx, jest and a build.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { binaryDiff, type DiffSection, type FileSide } from './workspace-diff';

/** Past this a diff is given up (the diff package's own budget is one second). */
const WATCHDOG_MS = 5000;
const HEAP_MB = 256;

type Side = Omit<FileSide, 'load'> | null;
interface Job { path: string; before: Side; after: Side; resolve: (s: DiffSection | null) => void }

let bundle: Promise<string> | undefined;

function threadCode(): Promise<string> {
  if (!bundle) {
    const p = (async () => {
      const { build } = await import('esbuild');
      const r = await build({ entryPoints: [join(__dirname, 'diff-thread-main.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node22', write: false, logLevel: 'silent' });
      return r.outputFiles[0]!.text;
    })();
    p.catch(() => (bundle = undefined));
    bundle = p;
  }
  return bundle;
}

const strip = (s: FileSide | null): Side => (s ? { ...(s.data ? { data: s.data } : {}), sha256: s.sha256, ...(s.gitId ? { gitId: s.gitId } : {}), size: s.size, mode: s.mode } : null);

export interface DiffThreadStats {
  /** Diffs computed in the thread. */
  inThread: number;
  /** Given up (timeout, the thread's death): a whole-file hunk or binary patch made here instead (binaryDiff). */
  givenUp: number;
  /** The thread's id of the last diff (never the main thread's 0). */
  threadId: number;
}

export class DiffThread {
  private worker: Worker | undefined;
  private readonly queue: Job[] = [];
  private busy = false;
  readonly stats: DiffThreadStats = { inThread: 0, givenUp: 0, threadId: 0 };

  /** The change of one path, computed in the thread; a diff that fails there is reported as differing. */
  diff(path: string, before: FileSide | null, after: FileSide | null): Promise<DiffSection | null> {
    return new Promise((resolve) => {
      this.queue.push({ path, before: strip(before), after: strip(after), resolve });
      void this.next();
    });
  }

  private async spawn(): Promise<Worker> {
    if (this.worker) return this.worker;
    const w = new Worker(await threadCode(), { eval: true, resourceLimits: { maxOldGenerationSizeMb: HEAP_MB, maxYoungGenerationSizeMb: 32 } });
    w.unref();
    this.worker = w;
    w.once('exit', () => {
      if (this.worker === w) this.worker = undefined;
    });
    return w;
  }

  private async next(): Promise<void> {
    if (this.busy) return;
    const job = this.queue.shift();
    if (!job) return;
    this.busy = true;
    try {
      job.resolve(await this.run(job));
    } finally {
      this.busy = false;
      void this.next();
    }
  }

  private async run(job: Job): Promise<DiffSection | null> {
    let w: Worker;
    try {
      w = await this.spawn();
    } catch {
      this.stats.givenUp++;
      return binaryDiff(job.path, job.before, job.after);
    }
    return new Promise((resolve) => {
      let settled = false;
      const done = (s: DiffSection | null, ok: boolean) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        w.off('message', onMessage);
        w.off('error', onError);
        w.off('exit', onExit);
        if (ok) this.stats.inThread++;
        else this.stats.givenUp++;
        resolve(s);
      };
      const giveUp = () => done(binaryDiff(job.path, job.before, job.after), false);
      const onMessage = (m: { section: DiffSection | null; threadId: number }) => {
        this.stats.threadId = m.threadId;
        done(m.section, true);
      };
      const onError = () => giveUp();
      const onExit = () => giveUp();
      const timer = setTimeout(() => {
        void w.terminate();
        giveUp();
      }, WATCHDOG_MS);
      w.on('message', onMessage);
      w.once('error', onError);
      w.once('exit', onExit);
      w.postMessage({ path: job.path, before: job.before, after: job.after });
    });
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
    this.worker = undefined;
  }
}

let shared: DiffThread | undefined;

/** The worker process's one diff thread. */
export function diffThread(): DiffThread {
  shared ??= new DiffThread();
  return shared;
}
