/**
 * `corral approve RUN CALL [--deny] [--note TEXT] [--api URL] [--token T]`: answers a pending
 * approval. Who answered is recorded as the token authenticated (tenant/token-name); `--note` (or the
 * older `--by`) is free text beside it, `cli:USER` when neither is given.
 */
import { userInfo } from 'node:os';
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, positionals, UsageError } from './cli-args';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { deny: 'flag', note: 'string', by: 'string', api: 'string', token: 'string' });
  const [runId, callId] = positionals(pos, ['RUN', 'CALL']) as [string, string];
  if (opts.note !== undefined && opts.by !== undefined) throw new UsageError('give --note (or the older --by), not both');
  const client = ApiClient.from(opts, loadConfig());
  const r = await client.approve(runId, callId, !opts.deny, opts.note ?? opts.by ?? `cli:${userInfo().username}`);
  process.stdout.write(`${opts.deny ? 'denied' : 'approved'} ${callId} of ${runId} as ${r.by}\n`);
  return 0;
}
