/**
 * `corral templates [--json] [--api URL] [--token T]`: the run templates the server loaded, each with
 * its description, its parameters (defaults, patterns) and an example `corral submit --template`
 * line. Exit 0, 1 when the API cannot be reached or refuses.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, UsageError } from './cli-args';
import { terminalSafe } from './terminal-text';

const shellWord = (s: string): string => (/^[A-Za-z0-9._/:=@%+-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals } = parseArgs(argv, { json: 'flag', api: 'string', token: 'string' });
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const client = ApiClient.from(opts, loadConfig());
  const { templates } = await client.templates();
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(templates, null, 2)}\n`);
    return 0;
  }
  if (!templates.length) {
    process.stdout.write('this server has no templates (put NAME.md files in its CORRAL_TEMPLATES_DIR)\n');
    return 0;
  }
  const out: string[] = [];
  for (const t of templates) {
    out.push(`${terminalSafe(t.name)} — ${terminalSafe(t.description)}`);
    for (const p of t.params) {
      out.push(`    ${terminalSafe(p.name)}: ${terminalSafe(p.description)}${p.default !== undefined ? ` (default: ${terminalSafe(p.default)})` : ' (required)'}`);
    }
    const ex = t.examples.find((e) => Object.keys(e).length) ?? t.examples[0] ?? {};
    out.push(`    e.g. corral submit --template ${shellWord(t.name)}${Object.entries(ex).map(([k, v]) => ` --set ${shellWord(`${k}=${v}`)}`).join('')} --dry-run`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}
