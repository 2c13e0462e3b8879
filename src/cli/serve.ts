/**
 * `corral serve` (API + worker), `corral api`, `corral worker`: run the service in the foreground
 * until SIGINT/SIGTERM, then drain: stop taking jobs, let running runs go on for the grace period
 * (CORRAL_SHUTDOWN_GRACE_S), cancel the rest and let them clean up, close. Every step is bounded, so the
 * process exits within shutdownBudgetMs whatever Redis and Docker are doing (1 if it had to cut the
 * clean-up short, or on a second signal; 0 otherwise).
 */
import { loadConfig } from '../config';
import { jsonLog, shutdownBudgetMs, startCorral } from '../main';

export async function run(argv: string[]): Promise<number> {
  const [role, ...rest] = argv;
  if (rest.length) {
    process.stderr.write(`corral ${role}: unexpected arguments: ${rest.join(' ')} (configure with environment variables; see README)\n`);
    return 2;
  }
  const config = loadConfig();
  const log = jsonLog(role ?? 'serve');
  const corral = await startCorral(config, { api: role !== 'worker', worker: role !== 'api' }, log);
  log('started', {
    role, workerId: corral.workerId, url: corral.url, queue: config.CORRAL_QUEUE, redis: config.REDIS_URL,
    ...(corral.worker ? { model: corral.modelDescription, concurrency: config.CORRAL_CONCURRENCY, dataDir: config.CORRAL_DATA_DIR } : {}),
  });
  await new Promise<void>((resolve) => {
    const stop = (sig: string) => {
      log('stopping', { signal: sig, graceS: config.CORRAL_SHUTDOWN_GRACE_S });
      // A second signal, or a stop that outlives its budget (a step that neither ends nor fails), ends
      // the process anyway: a stopped service never lingers.
      const force = (why: string) => {
        log('stopped before the clean-up finished', { why, level: 'warn' });
        process.exit(1);
      };
      process.once('SIGINT', () => force('a second signal'));
      process.once('SIGTERM', () => force('a second signal'));
      setTimeout(() => force(`the stop took longer than ${shutdownBudgetMs(config) / 1000} s`), shutdownBudgetMs(config)).unref();
      resolve();
    };
    process.once('SIGINT', () => stop('SIGINT'));
    process.once('SIGTERM', () => stop('SIGTERM'));
  });
  await corral.close();
  log('stopped');
  // Everything is closed; a handle some library left open (a reconnecting client) must not keep a
  // stopped service alive, so the process ends here (stderr is written synchronously to pipes and files).
  process.exit(0);
}
