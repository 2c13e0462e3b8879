/** `corral report RUN [-o FILE] [--api URL] [--token T]`: prints (or saves) a finished run's report.md. */
import { writeFile } from 'node:fs/promises';
import { loadConfig } from '../config';
import { ApiClient, ApiError } from './api-client';
import { parseArgs, positionals } from './cli-args';

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
    process.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  }
  return 0;
}
