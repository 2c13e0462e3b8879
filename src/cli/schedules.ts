/**
 * `corral schedules [list] | add --cron PATTERN --template NAME [--set K=V]... [--timezone TZ] [--name N]
 * | rm ID  [--json] [--api URL] [--token T]`: the tenant's schedules (template runs on a cron pattern,
 * unattended). `list` shows each with its next firing, runs made and the last problem; `add` prints the
 * new schedule's id; `rm` deletes one. Exit 0, 1 when the API refuses (its reason on stderr), 2 on bad
 * usage.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, UsageError } from './cli-args';
import { parseSets } from './submit-spec';
import { terminalSafe } from './terminal-text';

interface ScheduleView { id: string; name?: string; cron: string; timezone: string; template: string; params: Record<string, string>; next?: string; runs: number; lastRun?: { id: string; at: string }; lastError?: { message: string; at: string } }

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals } = parseArgs(argv, { cron: 'string', template: 'string', set: 'list', timezone: 'string', name: 'string', json: 'flag', api: 'string', token: 'string' });
  const [sub = 'list', ...rest] = positionals;
  const client = ApiClient.from(opts, loadConfig());
  const print = (v: unknown) => process.stdout.write(`${JSON.stringify(v, null, 2)}\n`);
  if (sub === 'add') {
    if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
    if (opts.cron === undefined || opts.template === undefined) throw new UsageError('add needs --cron PATTERN and --template NAME (e.g. --cron "0 6 * * 1" --template dependency-report)');
    const s = await client.request<ScheduleView>('POST', '/v1/schedules', {
      cron: opts.cron, template: opts.template, params: parseSets(opts.set),
      ...(opts.timezone !== undefined ? { timezone: opts.timezone } : {}), ...(opts.name !== undefined ? { name: opts.name } : {}),
    });
    if (opts.json) print(s);
    else process.stdout.write(`${s.id}\n`);
    return 0;
  }
  if (opts.cron !== undefined || opts.template !== undefined || opts.set.length || opts.timezone !== undefined || opts.name !== undefined) throw new UsageError(`--cron, --template, --set, --timezone and --name only apply to \`corral schedules add\``);
  if (sub === 'rm') {
    if (rest.length !== 1) throw new UsageError('rm needs one schedule id (corral schedules list shows them)');
    await client.request('DELETE', `/v1/schedules/${encodeURIComponent(rest[0]!)}`);
    process.stdout.write(`deleted ${rest[0]}\n`);
    return 0;
  }
  if (sub !== 'list') throw new UsageError(`unknown subcommand "${sub}" (list, add, rm)`);
  if (rest.length) throw new UsageError(`unexpected argument "${rest[0]}"`);
  const { schedules } = await client.request<{ schedules: ScheduleView[] }>('GET', '/v1/schedules');
  if (opts.json) {
    print(schedules);
    return 0;
  }
  if (!schedules.length) {
    process.stdout.write('no schedules (add one: corral schedules add --cron "0 6 * * 1" --template NAME)\n');
    return 0;
  }
  const lines = schedules.map((s) => {
    const params = Object.entries(s.params).map(([k, v]) => `${k}=${v}`).join(' ');
    return [
      `${s.id}  ${terminalSafe(s.name ?? s.template)}`,
      `    ${terminalSafe(s.cron)} (${terminalSafe(s.timezone)}) → ${terminalSafe(s.template)}${params ? ` ${terminalSafe(params)}` : ''}`,
      `    next ${s.next ?? '?'} · ${s.runs} run(s)${s.lastRun ? ` · last ${s.lastRun.id} at ${s.lastRun.at}` : ''}`,
      ...(s.lastError ? [`    last firing made no run (${s.lastError.at}): ${terminalSafe(s.lastError.message)}`] : []),
    ].join('\n');
  });
  process.stdout.write(`${lines.join('\n')}\n`);
  return 0;
}
