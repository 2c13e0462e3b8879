/** `corral approve RUN CALL [--deny] [--by NAME] [--api URL] [--token T]`: answers a pending approval. */
import { userInfo } from 'node:os';
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, positionals } from './cli-args';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { deny: 'flag', by: 'string', api: 'string', token: 'string' });
  const [runId, callId] = positionals(pos, ['RUN', 'CALL']) as [string, string];
  const client = ApiClient.from(opts, loadConfig());
  await client.approve(runId, callId, !opts.deny, opts.by ?? `cli:${userInfo().username}`);
  process.stdout.write(`${opts.deny ? 'denied' : 'approved'} ${callId} of ${runId}\n`);
  return 0;
}
