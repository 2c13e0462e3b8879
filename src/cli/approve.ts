/** `corral approve RUN CALL [--deny] [--by NAME] [--api URL]`: answers a pending approval. */
import { userInfo } from 'node:os';
import { loadConfig } from '../config';
import { ApiClient, apiUrl } from './api-client';

const USAGE = 'usage: corral approve RUN CALL [--deny] [--by NAME] [--api URL]\n';

export async function run(argv: string[]): Promise<number> {
  const pos: string[] = [];
  let deny = false;
  let by: string | undefined;
  let api: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--deny') deny = true;
    else if (a === '--by') by = argv[++i];
    else if (a === '--api') api = argv[++i];
    else if (!a.startsWith('-')) pos.push(a);
    else {
      process.stderr.write(`corral approve: unknown option "${a}"\n${USAGE}`);
      return 2;
    }
  }
  const [runId, callId] = pos;
  if (!runId || !callId || pos.length > 2) {
    process.stderr.write(USAGE);
    return 2;
  }
  const client = new ApiClient(api ?? apiUrl(loadConfig()));
  await client.approve(runId, callId, !deny, by ?? `cli:${userInfo().username}`);
  process.stdout.write(`${deny ? 'denied' : 'approved'} ${callId} of ${runId}\n`);
  return 0;
}
