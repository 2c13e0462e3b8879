/**
 * `corral replay RUN [--api URL] [--token T]`: re-runs a finished run in a fresh sandbox with the model
 * turns recorded in its log (no model is called) and follows it like `corral watch`; the tool calls
 * and the final answer are the recorded ones, the gate decides afresh. Exit 0 when the replay succeeded.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, positionals } from './cli-args';
import { watchToExit } from './watch';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', plain: 'flag' });
  const [id] = positionals(pos, ['RUN']) as [string];
  const client = ApiClient.from(opts, loadConfig());
  const r = await client.replay(id);
  process.stdout.write(`replaying ${r.replayOf} as ${r.id}\n`);
  return watchToExit(client, r.id, { out: process.stdout, live: opts.plain ? false : undefined, approveFlags: opts.api ? ` --api ${opts.api}` : '' });
}
