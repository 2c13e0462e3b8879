/**
 * `corral watch RUN`: follows a run over SSE and shows it with the watch view (watch-view.ts); at the
 * end prints the status, reason, report path and final answer. watchRun() is shared by `submit
 * --watch`, `replay` and `demo`. Ctrl-C stops watching (exit 130) and says how to resume or cancel.
 */
import { loadConfig } from '../config';
import { ApiClient, type RunView } from './api-client';
import { parseArgs, positionals } from './cli-args';
import { LiveOutput, type LineSink } from './live-output';
import { WatchView } from './watch-view';

export interface WatchOptions {
  out: LineSink;
  /** Redraw budget bars in place; default: when `out` is a TTY. */
  live?: boolean;
  /** Extra flags for the printed `corral approve` command (e.g. `--api URL`). */
  approveFlags?: string;
  /** Mention `corral report RUN` beside the report's path (false when the API stops with the command, as in the demo). */
  reportHint?: boolean;
  signal?: AbortSignal;
}

export interface Watched {
  id: string;
  status: string;
  reason?: string;
  finalAnswer: string | null;
  reportPath?: string;
}

/** Follows run `id` until it ends, printing the view; returns the run as GET shows it at the end. */
export async function watchRun(client: ApiClient, id: string, opts: WatchOptions): Promise<Watched> {
  const output = new LiveOutput(opts.out, opts.live);
  const view = new WatchView({
    live: output.live,
    approveCommand: (runId, callId) => `corral approve ${runId} ${callId}${opts.approveFlags ?? ''}`,
  });
  const first = await client.get(id);
  if (first.status === 'queued') output.print([`… ${id} is queued, waiting for a worker`]);
  const tick = output.live ? setInterval(() => output.setFooter(view.footer(Date.now())), 1000) : null;
  try {
    await client.follow(id, (e) => {
      const now = Date.now();
      const lines = view.push(e, now);
      output.print(lines, view.footer(now));
    }, { signal: opts.signal, onDelta: (d) => output.partial(view.pushDelta(d)) });
  } finally {
    if (tick) clearInterval(tick);
    output.clearFooter();
  }
  // The stream ends at run.finished; the worker records the end a moment later (after storing the
  // run's files), so the record is read again until it has it (or the stream was cut short).
  let run: RunView = await client.get(id);
  for (let waited = 0; view.finished && !run.finishedAt && waited < 30_000 && !opts.signal?.aborted; waited += 200) {
    await new Promise((r) => setTimeout(r, 200));
    run = await client.get(id);
  }
  const lines: string[] = [];
  if (!view.finished) lines.push(`■ ${run.status}${run.reason ? ` — ${run.reason}` : ''}`);
  lines.push('');
  if (run.reportPath) lines.push(`report: ${run.reportPath}${opts.reportHint === false ? '' : `   (or: corral report ${id})`}`);
  lines.push('final answer:', run.finalAnswer ?? '(none)');
  output.print(lines);
  return { id, status: run.status, reason: run.reason, finalAnswer: run.finalAnswer ?? null, reportPath: run.reportPath };
}

/** Runs `fn` with a signal that Ctrl-C aborts; returns null when it was interrupted. */
export async function interruptible<T>(fn: (signal: AbortSignal) => Promise<T>): Promise<T | null> {
  const ac = new AbortController();
  const onInt = () => ac.abort();
  process.once('SIGINT', onInt);
  try {
    return await fn(ac.signal);
  } catch (err) {
    if (ac.signal.aborted) return null;
    throw err;
  } finally {
    process.removeListener('SIGINT', onInt);
  }
}

/** Watches with Ctrl-C handling; exit code 0 when the run succeeded, 1 when not, 130 when interrupted. */
export async function watchToExit(client: ApiClient, id: string, opts: Omit<WatchOptions, 'signal'>): Promise<number> {
  const r = await interruptible((signal) => watchRun(client, id, { ...opts, signal }));
  if (!r) {
    process.stderr.write(`\ncorral: stopped watching ${id}; the run goes on (resume: corral watch ${id}; stop it: corral cancel ${id})\n`);
    return 130;
  }
  return r.status === 'succeeded' ? 0 : 1;
}

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', plain: 'flag' });
  const [id] = positionals(pos, ['RUN']);
  const client = ApiClient.from(opts, loadConfig());
  return watchToExit(client, id!, {
    out: process.stdout,
    live: opts.plain ? false : undefined,
    approveFlags: opts.api ? ` --api ${opts.api}` : '',
  });
}
