/**
 * `corral cancel RUN [--wait] [--api URL] [--token T]`: cancels a queued or running run. A queued run
 * is cancelled at once; a running one is stopped by its worker (sandbox killed and removed), which
 * --wait waits for. Exit 0 when cancelled or cancelling; 1 when the run had already ended.
 */
import { loadConfig } from '../config';
import { ApiClient, ApiError } from './api-client';
import { parseArgs, positionals } from './cli-args';
import { terminalLine } from './terminal-text';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', wait: 'flag' });
  const [id] = positionals(pos, ['RUN']) as [string];
  const client = ApiClient.from(opts, loadConfig());
  let r: { status: string };
  try {
    r = await client.cancel(id);
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) {
      const run = await client.get(id).catch(() => null);
      throw new Error(`${id} already ended${run ? ` (${run.status}${run.reason ? `: ${run.reason}` : ''})` : ''}; nothing to cancel`, { cause: err });
    }
    throw err;
  }
  if (r.status === 'cancelled') process.stdout.write(`cancelled ${id} (it had not started)\n`);
  else process.stdout.write(`cancelling ${id}: its worker stops the sandbox and ends the run${opts.wait ? '' : ` (see it end: corral watch ${id})`}\n`);
  if (!opts.wait || r.status === 'cancelled') return 0;
  for (;;) {
    const run = await client.get(id);
    if (run.finishedAt) {
      process.stdout.write(`${id}: ${run.status}${run.reason ? ` — ${terminalLine(run.reason)}` : ''}\n`);
      return 0;
    }
    await new Promise((res) => setTimeout(res, 250));
  }
}
