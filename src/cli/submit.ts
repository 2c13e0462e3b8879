/**
 * `corral submit (TASK.md | SPEC.json | --task TEXT) [--workspace DIR] [--allow-domain D]...
 * [--approvals] [--policy NAME] [--budget K=V,...] [--watch|--no-watch] [--api URL] [--token T]`:
 * builds the RunSpec (submit-spec.ts), posts it, prints the run id; with --watch follows the run
 * (watch.ts). Notes about packing go to stderr so that stdout is just the id without --watch.
 * Exit 0 when submitted (with --watch: when the run succeeded), 1 otherwise, 2 on bad usage.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { UsageError } from './cli-args';
import { buildSpec, parseSubmitArgs } from './submit-spec';
import { watchToExit } from './watch';
import { WorkspacePackError } from './workspace-tar';

export async function run(argv: string[]): Promise<number> {
  const o = parseSubmitArgs(argv);
  const client = ApiClient.from(o, loadConfig());
  let spec: Record<string, unknown>;
  try {
    ({ spec } = await buildSpec(o, (line) => process.stderr.write(`corral submit: ${line}\n`)));
  } catch (err) {
    if (err instanceof WorkspacePackError) throw new UsageError(err.message, false);
    throw err;
  }
  const { id } = await client.submit(spec);
  if (!o.watch) {
    process.stdout.write(`${id}\n`);
    return 0;
  }
  process.stdout.write(`submitted ${id} to ${client.baseUrl}\n`);
  return watchToExit(client, id, { out: process.stdout, live: o.plain ? false : undefined, approveFlags: o.api ? ` --api ${o.api}` : '' });
}
