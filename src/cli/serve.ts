/**
 * `corral serve` (API + worker), `corral api`, `corral worker`: run the service in the foreground
 * until SIGINT/SIGTERM, then drain: stop taking jobs, let running runs go on for the grace period
 * (CORRAL_SHUTDOWN_GRACE_S), cancel the rest and let them clean up, close. Every step is bounded, so the
 * process exits within shutdownBudgetMs whatever Redis and Docker are doing (1 if it had to cut the
 * clean-up short, or on a second signal; 0 otherwise).
 *
 * `corral serve` supervises `corral api` and `corral worker` as two child processes (supervise.ts),
 * so one's failure is not the other's; CORRAL_SERVE_SPLIT=false runs both in this one process.
 * A role started by a supervisor (an IPC channel is open) tells it when it runs and stops by
 * itself when the supervisor is gone.
 */
import { loadConfig, shutdownBudgetMs } from '../config';
import { redactRedisUrl } from '../domain/redis-url';
import { supervise, type StartedMessage } from './supervise';

/** One JSON line on stderr (the supervisor's own; the roles use main.ts's jsonLog). */
const lineLog = (component: string) => (msg: string, fields?: Record<string, unknown>) => process.stderr.write(`${JSON.stringify({ ts: new Date().toISOString(), component, msg, ...fields })}\n`);

export async function run(argv: string[]): Promise<number> {
  const [role, ...rest] = argv;
  if (rest.length) {
    process.stderr.write(`corral ${role}: unexpected arguments: ${rest.join(' ')} (configure with environment variables; see README)\n`);
    return 2;
  }
  const config = loadConfig();
  if (role === 'serve' && config.CORRAL_SERVE_SPLIT) return supervise(config, shutdownBudgetMs(config), lineLog('serve'));

  const { jsonLog, startCorral } = await import('../main');
  const log = jsonLog(role ?? 'serve');
  const supervised = typeof process.send === 'function';
  // Signals (and the supervisor going away) are heard from the start: a stop asked for while the
  // service is still starting takes effect as soon as it has started.
  let stopAsked: (why: string) => void = () => undefined;
  const stopped = new Promise<string>((resolve) => (stopAsked = resolve));
  const stop = (why: string) => {
    log('stopping', { signal: why, graceS: config.CORRAL_SHUTDOWN_GRACE_S });
    // A second signal, or a stop that outlives its budget (a step that neither ends nor fails), ends
    // the process anyway: a stopped service never lingers.
    const force = (reason: string) => {
      log('stopped before the clean-up finished', { why: reason, level: 'warn' });
      // eslint-disable-next-line no-restricted-properties -- this is a role's entry point (as main.ts is): a stop that cannot finish ends its own process
      process.exit(1);
    };
    process.once('SIGINT', () => force('a second signal'));
    process.once('SIGTERM', () => force('a second signal'));
    setTimeout(() => force(`the stop took longer than ${shutdownBudgetMs(config) / 1000} s`), shutdownBudgetMs(config)).unref();
    stopAsked(why);
  };
  process.once('SIGINT', () => stop('SIGINT'));
  process.once('SIGTERM', () => stop('SIGTERM'));
  if (supervised) process.once('disconnect', () => stop('the supervisor is gone'));

  const corral = await startCorral(config, { api: role !== 'worker', worker: role !== 'api' }, log);
  log('started', {
    role, workerId: corral.workerId, url: corral.url, queue: config.CORRAL_QUEUE, redis: redactRedisUrl(config.REDIS_URL),
    ...(corral.worker ? { model: corral.modelDescription, concurrency: config.CORRAL_CONCURRENCY, dataDir: config.CORRAL_DATA_DIR } : {}),
  });
  if (supervised && process.connected) process.send!({ corral: 'started', ...(corral.url ? { url: corral.url } : {}), workerId: corral.workerId } satisfies StartedMessage);
  await stopped;
  await corral.close();
  log('stopped');
  // Everything is closed; a handle some library left open (a reconnecting client) must not keep a
  // stopped service alive, so the process ends here (stderr is written synchronously to pipes and files).
  // eslint-disable-next-line no-restricted-properties -- this is a role's entry point (as main.ts is)
  process.exit(0);
}
