/**
 * The static analyser off the worker's event loop: a small pool of worker threads, each with its own
 * V8 heap cap (`resourceLimits`) and a per-call time limit. A tool call's command is text the model
 * wrote, and parsing and judging it can be made expensive on purpose (deep nesting, huge expansions,
 * globs built to backtrack); here such a call costs one thread, never the worker:
 *
 *   - past `timeoutMs` of analysis the thread is terminated and replaced, and the call is `ask`;
 *   - a thread that runs out of heap (or dies any other way) is replaced, and its call is `ask`;
 *   - calls wait in a bounded queue while every thread is busy; past the bound they are `ask` at once;
 *   - threads that cannot even start (a broken bundle) make every call `ask`, never a hang.
 *
 * The thread's code is src/policy/analysis-thread.ts bundled once per process by esbuild and started
 * from memory (`eval`), so it needs no TypeScript loader and works the same under tsx and jest.
 * Policies are sent to each thread once when it starts (plain data: structured clone keeps RegExps
 * and Maps).
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { StaticCall, StaticResult } from './evaluate-static';
import type { Policy } from './policy-schema';
import type { CallHistory, StaticAnalyzer } from './static-analyzer';

export interface AnalysisPoolOptions {
  policies: ReadonlyMap<string, Policy>;
  /** Threads (each one call at a time). */
  threads: number;
  /** Analysis time one call may take before its thread is terminated and the call asks. */
  timeoutMs: number;
  /** Old-generation heap of each thread, MB. */
  heapMb: number;
  /** Calls that may wait for a thread; more are `ask` at once. */
  maxQueued?: number;
  log?: (msg: string, fields?: Record<string, unknown>) => void;
}

export interface AnalysisPoolStats {
  threads: number;
  busy: number;
  queued: number;
  /** Threads replaced after a timeout, an out-of-memory or a crash. */
  replaced: number;
  timeouts: number;
  outOfMemory: number;
  crashed: number;
}

interface Job {
  id: number;
  policy: string;
  call: StaticCall;
  history?: CallHistory;
  resolve: (r: StaticResult) => void;
  reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job: Job | null;
  timer: NodeJS.Timeout | null;
  /** Set once the slot was given up (terminated or died): its later events are ignored. */
  gone: boolean;
}

let bundle: Promise<string> | undefined;

/** The analysis thread as one CommonJS program (built once per process). */
export function analysisThreadBundle(): Promise<string> {
  if (!bundle) {
    const p = (async () => {
      const { build } = await import('esbuild');
      const r = await build({ entryPoints: [join(__dirname, 'analysis-thread.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node22', write: false, logLevel: 'silent' });
      return r.outputFiles[0]!.text;
    })();
    p.catch(() => (bundle = undefined));
    bundle = p;
  }
  return bundle;
}

const MAX_START_FAILURES = 5;

function asking(rule: string, reason: string): StaticResult {
  return { decision: 'ask', rule, risk: 'high', reason };
}

export class AnalysisPool implements StaticAnalyzer {
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private startFailures = 0;
  private broken: string | undefined;
  private readonly counts = { replaced: 0, timeouts: 0, outOfMemory: 0, crashed: 0 };
  private readonly maxQueued: number;

  private constructor(private readonly opts: AnalysisPoolOptions, private readonly code: string) {
    this.maxQueued = opts.maxQueued ?? 1_000;
  }

  /** Builds the thread bundle and starts the threads (resolves once they can take calls). */
  static async start(opts: AnalysisPoolOptions): Promise<AnalysisPool> {
    if (!Number.isInteger(opts.threads) || opts.threads < 1) throw new RangeError('threads must be a positive integer');
    const pool = new AnalysisPool(opts, await analysisThreadBundle());
    const ready = Array.from({ length: opts.threads }, () => pool.spawn());
    await Promise.all(ready);
    return pool;
  }

  stats(): AnalysisPoolStats {
    return { threads: this.slots.length, busy: this.slots.filter((s) => s.job).length, queued: this.queue.length, ...this.counts };
  }

  analyze(policy: string, call: StaticCall, history?: CallHistory): Promise<StaticResult> {
    if (this.closed) return Promise.reject(new Error('the analysis pool is closed'));
    if (this.broken) return Promise.resolve(asking('gate:analysis-unavailable', `the gate's analyser is unavailable (${this.broken}), so this call needs review`));
    if (this.queue.length >= this.maxQueued) {
      return Promise.resolve(asking('gate:analysis-busy', `the gate has ${this.queue.length} calls waiting for analysis, so this one is not analysed and needs review`));
    }
    return new Promise<StaticResult>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, policy, call, ...(history ? { history } : {}), resolve, reject });
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const closedError = () => new Error('the analysis pool is closed');
    for (const j of this.queue.splice(0)) j.reject(closedError());
    for (const s of this.slots) s.job?.reject(closedError());
    await Promise.all(this.slots.splice(0).map((s) => this.retire(s)));
  }

  /** Starts one thread; resolves when it has the policies (or when it failed to start). */
  private spawn(): Promise<void> {
    const worker = new Worker(this.code, {
      eval: true,
      resourceLimits: { maxOldGenerationSizeMb: this.opts.heapMb, maxYoungGenerationSizeMb: Math.max(4, Math.floor(this.opts.heapMb / 8)), stackSizeMb: 4 },
    });
    // referenced while it starts or works (a pending start or call keeps the process up), not while idle
    const slot: Slot = { worker, ready: false, job: null, timer: null, gone: false };
    this.slots.push(slot);
    return new Promise<void>((resolveReady) => {
      worker.on('message', (m: { type: string; id?: number; result?: StaticResult; error?: string }) => {
        if (slot.gone) return;
        if (m.type === 'ready') {
          slot.ready = true;
          worker.unref();
          this.startFailures = 0;
          resolveReady();
          this.dispatch();
          return;
        }
        if (m.type === 'result' && slot.job && m.id === slot.job.id) {
          const job = slot.job;
          this.idle(slot);
          if (m.error) job.reject(new Error(m.error));
          else job.resolve(m.result!);
          this.dispatch();
        }
      });
      const died = (why: 'memory' | 'crash', detail: string) => {
        if (slot.gone) return;
        const job = slot.job;
        this.replace(slot, job ? why : 'crash');
        if (!slot.ready) { resolveReady(); this.noteStartFailure(detail); }
        if (job) {
          job.resolve(why === 'memory'
            ? asking('gate:analysis-memory', `the gate's analyser ran out of memory on this call (${this.opts.heapMb} MB), so it needs review`)
            : asking('gate:analysis-crashed', `the gate's analyser failed on this call (${detail.slice(0, 200)}), so it needs review`));
        }
      };
      worker.on('error', (err: Error & { code?: string }) => died(err.code === 'ERR_WORKER_OUT_OF_MEMORY' ? 'memory' : 'crash', err.message));
      worker.on('exit', (code) => died('crash', `its thread exited with code ${code}`));
      worker.postMessage({ type: 'init', policies: [...this.opts.policies.values()] });
    });
  }

  private noteStartFailure(detail: string): void {
    this.startFailures++;
    if (this.startFailures >= MAX_START_FAILURES) {
      this.broken = `its threads do not start: ${detail.slice(0, 200)}`;
      this.opts.log?.('policy analysis threads do not start; every call asks', { level: 'error', error: detail });
      for (const j of this.queue.splice(0)) j.resolve(asking('gate:analysis-unavailable', `the gate's analyser is unavailable (${this.broken}), so this call needs review`));
    }
  }

  private idle(slot: Slot): void {
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
    slot.worker.unref();
  }

  /** Gives up a thread and starts another in its place (unless the pool is closed or broken). */
  private replace(slot: Slot, why: 'timeout' | 'memory' | 'crash'): void {
    this.counts.replaced++;
    if (why === 'timeout') this.counts.timeouts++;
    else if (why === 'memory') this.counts.outOfMemory++;
    else this.counts.crashed++;
    if (slot.job) this.opts.log?.('policy analysis thread replaced', { level: 'warn', why, tool: slot.job.call.tool });
    void this.retire(slot);
    const i = this.slots.indexOf(slot);
    if (i >= 0) this.slots.splice(i, 1);
    if (!this.closed && !this.broken) void this.spawn();
  }

  private async retire(slot: Slot): Promise<void> {
    slot.gone = true;
    if (slot.timer) clearTimeout(slot.timer);
    slot.timer = null;
    slot.job = null;
    await slot.worker.terminate().catch(() => undefined);
  }

  private dispatch(): void {
    for (const slot of this.slots) {
      if (this.queue.length === 0) return;
      if (!slot.ready || slot.job || slot.gone) continue;
      const job = this.queue.shift()!;
      slot.job = job;
      slot.worker.ref();
      slot.timer = setTimeout(() => {
        if (slot.job !== job) return;
        this.replace(slot, 'timeout');
        job.resolve(asking('gate:analysis-timeout', `the gate could not finish analysing this call within ${this.opts.timeoutMs} ms (it may be built to be expensive), so it needs review`));
        this.dispatch();
      }, this.opts.timeoutMs);
      slot.worker.postMessage({ type: 'analyze', id: job.id, policy: job.policy, call: job.call, ...(job.history ? { history: job.history } : {}) });
    }
  }
}
