/** Submits a RunSpec through the API, prints progress until the run ends, then its answer and report. */
import type { ApiClient } from './api-client';
import { renderEvent } from './render-event';

export interface Finished {
  id: string;
  status: string;
  finalAnswer?: string | null;
  reason?: string;
  reportPath?: string;
}

export async function submitAndFollow(client: ApiClient, spec: unknown, out: (line: string) => void): Promise<Finished> {
  const { id } = await client.submit(spec);
  out(`submitted ${id} to ${client.baseUrl} (follow: GET /v1/runs/${id}/events)`);
  return follow(client, id, out);
}

/** Prints a run's progress until it ends, then its status, report path and final answer. */
export async function follow(client: ApiClient, id: string, out: (line: string) => void): Promise<Finished> {
  await client.follow(id, (e) => {
    const line = renderEvent(e);
    if (line) out(line);
  });
  const run = await client.get(id);
  out('');
  out(`status: ${run.status}${run.reason ? ` — ${run.reason}` : ''}`);
  if (run.reportPath) out(`report: ${run.reportPath}`);
  out(`final answer:\n${run.finalAnswer ?? '(none)'}`);
  return { id, status: run.status, finalAnswer: run.finalAnswer ?? null, reason: run.reason, reportPath: run.reportPath };
}
