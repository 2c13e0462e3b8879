/**
 * `corral replay RUN [--api URL]`: re-runs a finished run in a fresh sandbox with the model turns
 * recorded in its log (no model is called) and follows it; the tool calls and the final answer are
 * the recorded ones, the gate decides afresh. Exit 0 when the replay succeeded.
 */
import { loadConfig } from '../config';
import { ApiClient, apiUrl } from './api-client';
import { follow } from './submit-and-follow';

export async function run(argv: string[]): Promise<number> {
  const pos: string[] = [];
  let api: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--api') api = argv[++i];
    else if (!a.startsWith('-')) pos.push(a);
    else {
      process.stderr.write(`corral replay: unknown option "${a}"\nusage: corral replay RUN [--api URL]\n`);
      return 2;
    }
  }
  if (pos.length !== 1) {
    process.stderr.write('usage: corral replay RUN [--api URL]\n');
    return 2;
  }
  const client = new ApiClient(api ?? apiUrl(loadConfig()));
  const out = (l: string) => process.stdout.write(`${l}\n`);
  const r = await client.replay(pos[0]!);
  out(`replaying ${r.replayOf} as ${r.id}`);
  const done = await follow(client, r.id, out);
  return done.status === 'succeeded' ? 0 : 1;
}
