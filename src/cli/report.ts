/**
 * `corral report RUN [-o FILE] [--api URL] [--token T]`: prints (or saves) a finished run's report.md.
 * Printed, control and bidi characters that a task, a model or a command put in it are shown as
 * escapes (terminal-text.ts); `-o FILE` writes the report byte for byte.
 */
import { writeFile } from 'node:fs/promises';
import { loadConfig } from '../config';
import { ApiClient, ApiError } from './api-client';
import { parseArgs, positionals } from './cli-args';
import { terminalSafe } from './terminal-text';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', output: 'string' }, { o: 'output' });
  const [id] = positionals(pos, ['RUN']) as [string];
  const client = ApiClient.from(opts, loadConfig());
  let text: string;
  try {
    text = await client.report(id);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && /no report yet/.test(err.message)) {
      throw new Error(`${err.message}; wait for the run to end (corral watch ${id})`, { cause: err });
    }
    throw err;
  }
  if (opts.output) {
    await writeFile(opts.output, text);
    process.stdout.write(`wrote the report of ${id} to ${opts.output}\n`);
  } else {
    const safe = terminalSafe(text);
    process.stdout.write(safe.endsWith('\n') ? safe : `${safe}\n`);
  }
  return 0;
}
