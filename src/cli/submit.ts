/**
 * `corral submit (TASK.md | SPEC.json | --task TEXT | --template NAME [--set K=V]...) [--workspace DIR]
 * [--allow-domain D]... [--approvals] [--policy NAME] [--environment NAME] [--budget K=V,...] [--dry-run] [--watch|--no-watch]
 * [--api URL] [--token T]`: builds the RunSpec (submit-spec.ts) — or, with --template, the template's
 * parameters — posts it, prints the run id; with --watch follows the run (watch.ts); with --dry-run
 * prints the plan the server resolved instead (nothing is queued). Notes about packing go to stderr so
 * that stdout is just the id without --watch.
 * Exit 0 when submitted (with --watch: when the run succeeded; with --dry-run: when it would be
 * accepted), 1 otherwise (the server's reasons on stderr), 2 on bad usage.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { UsageError } from './cli-args';
import { planText } from './plan-text';
import { buildSpec, parseSubmitArgs, type WorkspaceSummary } from './submit-spec';
import { traceNote } from './trace-note';
import { watchToExit } from './watch';
import { WorkspacePackError } from './workspace-tar';

export async function run(argv: string[]): Promise<number> {
  const o = parseSubmitArgs(argv);
  if (o.dryRun && o.watch) throw new UsageError('--dry-run and --watch contradict each other (a dry run queues nothing)');
  const client = ApiClient.from(o, loadConfig());
  let spec: Record<string, unknown>;
  let workspace: WorkspaceSummary | undefined;
  try {
    ({ spec, workspace } = await buildSpec(o, (line) => process.stderr.write(`corral submit: ${line}\n`), { put: (tar) => client.uploadWorkspace(tar), find: (id) => client.findWorkspace(id) }));
  } catch (err) {
    if (err instanceof WorkspacePackError) throw new UsageError(err.message, false);
    throw err;
  }
  const template = 'template' in o.source ? o.source.template : undefined;
  if (o.dryRun) {
    const plan = template !== undefined ? await client.submitTemplate(template, spec, true) : await client.plan(spec);
    process.stdout.write(planText(plan, workspace));
    return 0;
  }
  const created = template !== undefined ? await client.submitTemplate(template, spec) : await client.submit(spec);
  const id = created.id;
  if (!o.watch) {
    process.stdout.write(`${id}\n`);
    return 0;
  }
  process.stdout.write(`submitted ${id} to ${client.baseUrl}${traceNote(created)}\n`);
  return watchToExit(client, id, { out: process.stdout, live: o.plain ? false : undefined, approveFlags: o.api ? ` --api ${o.api}` : '' });
}

