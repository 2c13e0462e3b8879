/**
 * The CLI's client of the REST API (plain fetch): submit, get, approve, and follow a run's events
 * over SSE. API errors become Errors carrying the server's code and message.
 */
import type { Config } from '../config';
import { CorralError, type ErrorCode } from '../domain/errors';
import type { RunEvent } from '../domain/events';

export function apiUrl(config: Config): string {
  return (config.CORRAL_API_URL ?? `http://${config.CORRAL_API_HOST}:${config.CORRAL_API_PORT}`).replace(/\/$/, '');
}

export class ApiClient {
  constructor(readonly baseUrl: string) {}

  private async call<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new CorralError('sandbox_unavailable', `cannot reach the corral API at ${this.baseUrl} (${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message}); is \`corral serve\` running?`);
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const e = (json as { error?: { code?: ErrorCode; message?: string; field?: string } } | undefined)?.error;
      throw new CorralError(e?.code ?? 'internal', `${method} ${path}: HTTP ${res.status}: ${e?.message ?? text.slice(0, 300)}`, e?.field ? { field: e.field } : undefined);
    }
    return json as T;
  }

  submit(spec: unknown): Promise<{ id: string; status: string }> {
    return this.call('POST', '/v1/runs', spec);
  }

  replay(id: string): Promise<{ id: string; status: string; replayOf: string }> {
    return this.call('POST', `/v1/runs/${encodeURIComponent(id)}/replay`);
  }

  get(id: string): Promise<Record<string, unknown> & { status: string; finishedAt?: string; finalAnswer?: string | null; reason?: string; reportPath?: string }> {
    return this.call('GET', `/v1/runs/${encodeURIComponent(id)}`);
  }

  approve(id: string, callId: string, approve: boolean, by: string): Promise<unknown> {
    return this.call('POST', `/v1/runs/${encodeURIComponent(id)}/approvals/${encodeURIComponent(callId)}`, { decision: approve ? 'approve' : 'deny', by });
  }

  health(): Promise<unknown> {
    return this.call('GET', '/healthz');
  }

  /** Calls onEvent for each event of the run until run.finished (or the stream ends). */
  async follow(id: string, onEvent: (e: RunEvent) => void): Promise<void> {
    const res = await fetch(`${this.baseUrl}/v1/runs/${encodeURIComponent(id)}/events`, { headers: { accept: 'text/event-stream' } });
    if (!res.ok || !res.body) throw new CorralError('internal', `following run ${id}: HTTP ${res.status}`);
    const decoder = new TextDecoder();
    let buf = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, { stream: true });
      let idx;
      while ((idx = buf.indexOf('\n\n')) >= 0) {
        const msg = buf.slice(0, idx);
        buf = buf.slice(idx + 2);
        const data = msg.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
        if (data) onEvent(JSON.parse(data) as RunEvent);
      }
    }
  }
}
