/**
 * `corral environments [--json] [--api URL] [--token T]`: the environments the server loaded, each
 * with its image, its setup phase (commands, egress), its cache keys and the agent's default egress.
 * Exit 0, 1 when the API cannot be reached or refuses.
 */
import { loadConfig } from '../config';
import { ApiClient } from './api-client';
import { parseArgs, UsageError } from './cli-args';
import { terminalSafe } from './terminal-text';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals } = parseArgs(argv, { json: 'flag', api: 'string', token: 'string' });
  if (positionals.length) throw new UsageError(`unexpected argument "${positionals[0]}"`);
  const client = ApiClient.from(opts, loadConfig());
  const { environments } = await client.environments();
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(environments, null, 2)}\n`);
    return 0;
  }
  const list = (l: string[]) => (l.length ? l.map(terminalSafe).join(', ') : 'none');
  const out: string[] = [];
  for (const e of environments) {
    out.push(`${terminalSafe(e.name)} — ${terminalSafe(e.description)}`, `    image: ${terminalSafe(e.image)}`);
    if (e.setup.commands.length) {
      out.push(`    setup (${e.setup.commands.length} command(s), at most ${e.setup.timeoutS} s; egress: ${list(e.setup.egress)}):`);
      for (const c of e.setup.commands) out.push(`      $ ${terminalSafe(c.trim().replace(/\s*\n\s*/g, ' ⏎ '))}`);
      out.push(`    cache: ${e.cache === false ? 'off' : `keyed by ${list(e.cache.files)}`}`);
    } else {
      out.push('    setup: none');
    }
    out.push(`    agent egress by default: ${list(e.egress)}`);
  }
  process.stdout.write(`${out.join('\n')}\n`);
  return 0;
}
