/**
 * `corral submit [--api URL] [--no-follow] (SPEC.json | --task TEXT [--approvals])`: submits a run to a
 * running API and follows it to the end. Exit 0 when the run succeeded, 1 when it did not, 2 on bad usage.
 */
import { readFileSync } from 'node:fs';
import { loadConfig } from '../config';
import { ApiClient, apiUrl } from './api-client';
import { submitAndFollow } from './submit-and-follow';

const USAGE = 'usage: corral submit [--api URL] [--no-follow] (SPEC.json | --task TEXT [--approvals])\n';

export async function run(argv: string[]): Promise<number> {
  let api: string | undefined;
  let follow = true;
  let task: string | undefined;
  let approvals = false;
  let file: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--api') api = argv[++i];
    else if (a === '--no-follow') follow = false;
    else if (a === '--task') task = argv[++i];
    else if (a === '--approvals') approvals = true;
    else if (!a.startsWith('-') && !file) file = a;
    else {
      process.stderr.write(`corral submit: unexpected argument "${a}"\n${USAGE}`);
      return 2;
    }
  }
  if (!!file === !!task) {
    process.stderr.write(`corral submit: give either a spec file or --task\n${USAGE}`);
    return 2;
  }
  let spec: unknown;
  if (file) {
    try {
      spec = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      process.stderr.write(`corral submit: cannot read ${file}: ${(err as Error).message}\n`);
      return 2;
    }
  } else {
    spec = { task, approvals };
  }
  const client = new ApiClient(api ?? apiUrl(loadConfig()));
  const out = (l: string) => process.stdout.write(`${l}\n`);
  if (!follow) {
    const { id } = await client.submit(spec);
    out(id);
    return 0;
  }
  const r = await submitAndFollow(client, spec, out);
  return r.status === 'succeeded' ? 0 : 1;
}
