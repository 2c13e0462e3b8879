/**
 * `corral artifacts migrate [--dry-run] [--remove]`: after a deployment switched CORRAL_ARTIFACTS from
 * the data dir to an object store, moves the files of the runs this host's workers wrote before
 * (CORRAL_DATA_DIR/runs/RUN_ID/*) into the store under their tenants' keys, exactly as a worker stores
 * a run's files at its end — so every API instance and replay finds them there. Runs are looked up
 * in Redis for their tenant; a directory without a record, or of a run that has not ended, is left
 * alone and listed. A file the store already holds with the same size is not sent again; `--remove`
 * deletes the host's copy of each run once all its files are in the store. Run on each worker host.
 * (Until then, an API that shares the data dir still serves those runs from it: run-files.ts.)
 */
import { existsSync } from 'node:fs';
import { readdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { artifactStoreFor } from '../artifacts';
import type { RunFileName } from '../artifacts/artifact-store';
import { loadConfig } from '../config';
import { isRunId } from '../domain/run-id';
import { RedisConnections } from '../queue/redis-connections';
import { RedisRunStore } from '../queue/redis-run-store';
import { CONTENT_TYPES } from '../worker/run-files';
import { parseArgs, UsageError } from './cli-args';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals } = parseArgs(argv, { 'dry-run': 'flag', remove: 'flag' });
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const config = loadConfig();
  const store = artifactStoreFor(config);
  if (store.kind === 'local') throw new UsageError('CORRAL_ARTIFACTS is local: there is no object store to move run files into (set it to the s3:// store first)', false);
  const runsDir = join(resolve(config.CORRAL_DATA_DIR), 'runs');
  // From the one factory, so a Sentinel REDIS_URL works here too; fails fast while Redis is away.
  const conns = new RedisConnections(config.REDIS_URL, { commandTimeoutMs: config.CORRAL_REDIS_COMMAND_TIMEOUT_MS });
  const redis = conns.open('api', 'artifacts-migrate', { lazy: true });
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const totals = { runs: 0, files: 0, bytes: 0, already: 0, skipped: 0, removed: 0 };
  try {
    await conns.connect(redis, 15_000);
    await store.check();
    const records = new RedisRunStore(redis);
    const dirs = existsSync(runsDir) ? (await readdir(runsDir)).filter(isRunId).sort() : [];
    say(`${dirs.length} run dir(s) under ${runsDir} → ${store.description}${opts['dry-run'] ? ' (dry run: nothing is sent or removed)' : ''}`);
    for (const id of dirs) {
      const run = await records.get(id);
      if (!run) {
        totals.skipped++;
        say(`  ${id}: skipped, no run record in Redis (its tenant is unknown)`);
        continue;
      }
      if (!run.finishedAt) {
        totals.skipped++;
        say(`  ${id}: skipped, the run has not ended (its worker stores its files when it does)`);
        continue;
      }
      let complete = true;
      const sent: string[] = [];
      for (const name of Object.keys(CONTENT_TYPES) as RunFileName[]) {
        const path = join(runsDir, id, name);
        const st = await stat(path).catch(() => null);
        if (!st?.isFile()) continue;
        const key = store.runFileKey(run.tenant, id, name);
        if ((await store.size(key)) === st.size) {
          totals.already++;
          continue;
        }
        if (!opts['dry-run']) {
          try {
            await store.putFile(key, path, CONTENT_TYPES[name]);
          } catch (err) {
            complete = false;
            say(`  ${id}: ${name} could not be stored: ${(err as Error).message}`);
            continue;
          }
        }
        totals.files++;
        totals.bytes += st.size;
        sent.push(name);
      }
      totals.runs++;
      say(`  ${id} (tenant ${run.tenant}): ${sent.length ? `${opts['dry-run'] ? 'would store' : 'stored'} ${sent.join(', ')}` : 'already in the store'}`);
      if (opts.remove && complete && !opts['dry-run']) {
        await rm(join(runsDir, id), { recursive: true, force: true });
        totals.removed++;
      }
    }
    say(`${opts['dry-run'] ? 'would store' : 'stored'} ${totals.files} file(s), ${totals.bytes} bytes, of ${totals.runs} run(s); ${totals.already} already there; ${totals.skipped} run dir(s) skipped${opts.remove ? `; ${totals.removed} run dir(s) removed from this host` : ''}`);
    return 0;
  } finally {
    redis.disconnect();
    conns.close();
    await store.close();
  }
}
