/**
 * `corral serve` as a supervisor of two child processes — `corral api` and `corral worker` — so
 * that what kills one does not kill the other: an API whose heap a tenant exhausts (or that
 * crashes) dies alone and is started again while the worker's runs go on; a worker that dies
 * takes only its runs (recorded worker_lost as for any dead worker) and is started again. Each child
 * has its own V8 heap cap (this process's --max-old-space-size: CORRAL_NODE_HEAP_MB in bin/corral).
 *
 * Start: both children are started; `started` is logged once both said so (over the IPC channel).
 * A child that ends before it ever started (bad configuration, a port in use) ends the whole serve
 * with its exit code. After that, a child that ends is restarted after a pause that doubles from 1 s
 * to 30 s while it keeps dying, and resets once it has run a minute.
 * Stop (SIGINT/SIGTERM): no more restarts; both children get SIGTERM and drain as they do alone
 * (CORRAL_SHUTDOWN_GRACE_S); a second signal is passed on (they stop at once); past their budget
 * they are killed. The exit code is 0 when both ended with 0. The children are in a process group
 * of their own (a terminal's Ctrl-C reaches them once, through here) and stop by themselves when
 * this process is gone (their IPC channel closes).
 *
 * This file imports nothing of the service (the supervisor's RSS, ~90 MB here, is Node and the tsx
 * loader; it holds no run, no request, no Redis connection).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { childEnvironment, type Config } from '../config';

type Role = 'api' | 'worker';
type Log = (msg: string, fields?: Record<string, unknown>) => void;

/** What a child tells its supervisor over IPC once it runs. */
export interface StartedMessage {
  corral: 'started';
  url?: string;
  workerId?: string;
}

const FIRST_PAUSE_MS = 1000;
const MAX_PAUSE_MS = 30_000;
/** A child that ran this long starts over from the first pause when it next dies. */
const HEALTHY_MS = 60_000;

interface Child {
  role: Role;
  proc?: ChildProcess;
  startedAt: number;
  started: boolean;
  everStarted: boolean;
  pauseMs: number;
  exit?: { code: number | null; signal: NodeJS.Signals | null };
}

export async function supervise(config: Config, budgetMs: number, log: Log): Promise<number> {
  const children: Record<Role, Child> = {
    api: { role: 'api', startedAt: 0, started: false, everStarted: false, pauseMs: FIRST_PAUSE_MS },
    worker: { role: 'worker', startedAt: 0, started: false, everStarted: false, pauseMs: FIRST_PAUSE_MS },
  };
  let stopping = false;
  /** Both children have run at once (`started` was logged). */
  let running = false;
  let url: string | undefined;
  let resolveDone!: (code: number) => void;
  const done = new Promise<number>((r) => (resolveDone = r));
  const timers = new Set<NodeJS.Timeout>();

  const alive = (c: Child) => !!c.proc && c.proc.exitCode === null && c.proc.signalCode === null;
  const finishIfAllEnded = () => {
    if (Object.values(children).some(alive)) return;
    const codes = Object.values(children).map((c) => (c.exit?.code ?? (c.exit?.signal ? 1 : 0)));
    resolveDone(codes.every((c) => c === 0) ? 0 : Math.max(1, ...codes));
  };

  const start = (c: Child) => {
    c.started = false;
    c.startedAt = Date.now();
    // The same Node, the same flags (tsx loader), the same entry point: `corral api|worker`, each with
    // the configured heap cap (CORRAL_NODE_HEAP_MB) whatever this process was started with.
    const flags = [...process.execArgv.filter((a) => !a.startsWith('--max-old-space-size')), `--max-old-space-size=${config.CORRAL_NODE_HEAP_MB}`];
    const proc = spawn(process.execPath, [...flags, process.argv[1]!, c.role], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: true, env: childEnvironment(),
    });
    c.proc = proc;
    proc.on('message', (m: unknown) => {
      if ((m as StartedMessage)?.corral !== 'started') return;
      c.started = true;
      c.everStarted = true;
      if (c.role === 'api') url = (m as StartedMessage).url;
      if (stopping || !children.api.started || !children.worker.started) return;
      const pids = { api: children.api.proc?.pid, worker: children.worker.proc?.pid };
      if (!running) log('started', { role: 'serve', url, pids, queue: config.CORRAL_QUEUE });
      else log(`the ${c.role} process runs again`, { role: c.role, pids });
      running = true;
    });
    proc.on('error', (err) => log('could not start a child process', { level: 'error', role: c.role, error: err.message }));
    proc.on('exit', (code, signal) => {
      c.exit = { code, signal };
      if (stopping) return finishIfAllEnded();
      if (!c.everStarted) {
        // It never ran (its own error line says why): nothing to supervise.
        log('a child process ended before it started; stopping', { level: 'error', role: c.role, code, signal });
        stopping = true;
        for (const other of Object.values(children)) if (alive(other)) other.proc!.kill('SIGTERM');
        return finishIfAllEnded();
      }
      if (Date.now() - c.startedAt >= HEALTHY_MS) c.pauseMs = FIRST_PAUSE_MS;
      log(`the ${c.role} process ended; starting it again`, { level: 'error', role: c.role, code, signal, inS: c.pauseMs / 1000, otherRunsOn: true });
      const t = setTimeout(() => {
        timers.delete(t);
        if (!stopping) start(c);
      }, c.pauseMs);
      timers.add(t);
      c.pauseMs = Math.min(MAX_PAUSE_MS, c.pauseMs * 2);
    });
  };

  const stop = (sig: NodeJS.Signals) => {
    if (stopping) {
      log('second signal: passed on to the children', { signal: sig });
      for (const c of Object.values(children)) if (alive(c)) c.proc!.kill(sig);
      return;
    }
    stopping = true;
    log('stopping', { signal: sig, graceS: config.CORRAL_SHUTDOWN_GRACE_S });
    for (const t of timers) clearTimeout(t);
    for (const c of Object.values(children)) if (alive(c)) c.proc!.kill('SIGTERM');
    // Past their own budget (and a little), children that still run are killed.
    setTimeout(() => {
      for (const c of Object.values(children)) {
        if (!alive(c)) continue;
        log('a child did not stop within its budget; killed', { level: 'warn', role: c.role });
        c.proc!.kill('SIGKILL');
      }
    }, budgetMs + 5000).unref();
    finishIfAllEnded();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  start(children.api);
  start(children.worker);
  const code = await done;
  log('stopped', { code });
  return code;
}
