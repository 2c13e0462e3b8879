/** Submits a RunSpec through the API and shows the run with the watch view until it ends (for `corral demo`). */
import type { ApiClient } from './api-client';
import type { LineSink } from './live-output';
import { traceNote } from './trace-note';
import { watchRun, type Watched } from './watch';

export async function submitAndFollow(client: ApiClient, spec: unknown, out: LineSink): Promise<Watched> {
  const created = await client.submit(spec);
  const id = created.id;
  out.write(`submitted ${id} to ${client.baseUrl}${traceNote(created)}\n`);
  return watchRun(client, id, { out, reportHint: false });
}
