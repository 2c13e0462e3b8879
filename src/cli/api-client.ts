/**
 * The CLI's client of the REST API (plain fetch): submit, get, approve, cancel, report, replay, and
 * follow a run's events over SSE (resuming after a dropped connection). Sends the bearer token when
 * one is configured. Failures are ApiUnreachableError (no answer) or ApiError (an HTTP error, with the
 * server's code and message), each with a one-line message that says what to do.
 */
import type { Config } from '../config';
import type { LiveDelta, RunEvent } from '../domain/events';
import { Readable } from 'node:stream';
import { UsageError } from './cli-args';
import type { UploadedWorkspace } from './submit-spec';
import { WorkspacePackError } from './workspace-tar';

export function apiUrl(config: Config): string {
  return (config.CORRAL_API_URL ?? `http://${config.CORRAL_API_HOST}:${config.CORRAL_API_PORT}`).replace(/\/$/, '');
}

/** The API did not answer at all (nothing listening, DNS, TLS). */
export class ApiUnreachableError extends Error {
  override readonly name = 'ApiUnreachableError';
}

/** The API answered with an HTTP error. */
export class ApiError extends Error {
  override readonly name = 'ApiError';
  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly field?: string,
    /** The answer's Retry-After (seconds), when it had one. */
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

export interface RunView extends Record<string, unknown> {
  id: string;
  status: string;
  finishedAt?: string;
  finalAnswer?: string | null;
  reason?: string;
  reportPath?: string;
  pendingApprovals?: Array<{ callId: string; tool: string; args?: unknown; reason?: string }>;
}

export interface FollowOptions {
  signal?: AbortSignal;
  /** Stream id to resume after ("0": from the first event). */
  after?: string;
  /** Pause before reconnecting after the stream dropped (ms). */
  retryMs?: number;
  /** Receives the live deltas of a streaming model answer (not part of the run's history). */
  onDelta?: (d: LiveDelta) => void;
  /**
   * How long to keep reconnecting without receiving anything (ms): a dropped connection, an API that
   * restarts, or a 503 while its Redis fails over. Default 60 s.
   */
  reconnectForMs?: number;
}

/** Answers worth waiting out: the API is up but its Redis is away or failing over, or a proxy in front of it is. */
const TRANSIENT = new Set([502, 503, 504]);

function reasonOf(err: unknown): string {
  const e = err as Error & { cause?: Error & { code?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message;
}

/** Adds what to do next to the server's message, by HTTP status. */
function hintFor(status: number, retryAfter: string | null): string {
  if (status === 401 || status === 403) return '; set CORRAL_API_TOKEN or pass --token with a valid token';
  if (status === 413) return '; send less (for --workspace: --exclude what the task does not need)';
  if (status === 429) return `; try again${retryAfter ? ` in ${retryAfter} s` : ' later'}`;
  if (status >= 500) return "; see the corral server's log";
  return '';
}

export class ApiClient {
  readonly baseUrl: string;
  private readonly token?: string;

  constructor(baseUrl: string, opts: { token?: string } = {}) {
    this.baseUrl = baseUrl.replace(/\/$/, '');
    this.token = opts.token || undefined;
  }

  /** The client for `--api` / `--token` when given, else the configuration. */
  static from(opts: { api?: string | undefined; token?: string | undefined }, config: Config): ApiClient {
    if (opts.api !== undefined && !/^https?:\/\/[^/]/.test(opts.api)) {
      throw new UsageError(`--api ${opts.api}: give the API's URL, such as http://127.0.0.1:8080`);
    }
    return new ApiClient(opts.api ?? apiUrl(config), { token: opts.token ?? config.CORRAL_API_TOKEN });
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    return { ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...extra };
  }

  private async send(method: string, path: string, init: { body?: unknown; accept?: string; signal?: AbortSignal } = {}): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers: this.headers({
          accept: init.accept ?? 'application/json',
          ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
        }),
        body: init.body === undefined ? undefined : JSON.stringify(init.body),
        signal: init.signal,
      });
    } catch (err) {
      if (init.signal?.aborted) throw err;
      throw new ApiUnreachableError(
        `cannot reach the corral API at ${this.baseUrl} (${reasonOf(err)}); is \`corral serve\` running? set CORRAL_API_URL or --api`,
        { cause: err },
      );
    }
    if (!res.ok) throw await this.errorOf(res);
    return res;
  }

  private async errorOf(res: Response): Promise<ApiError> {
    const text = await res.text().catch(() => '');
    let e: { code?: string; message?: string; field?: string } | undefined;
    try {
      e = (JSON.parse(text) as { error?: typeof e }).error;
    } catch {
      e = undefined;
    }
    const said = e?.message ?? (text.trim().replace(/\s+/g, ' ').slice(0, 200) || res.statusText);
    const msg = `${said} (HTTP ${res.status}${e?.code ? ` ${e.code}` : ''} from ${this.baseUrl})${hintFor(res.status, res.headers.get('retry-after'))}`;
    const retryAfter = Number(res.headers.get('retry-after') ?? NaN);
    return new ApiError(msg, res.status, e?.code ?? 'http_error', e?.field, Number.isFinite(retryAfter) ? retryAfter : undefined);
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.send(method, path, { body });
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ApiError(`${method} ${path} answered with something other than JSON (is ${this.baseUrl} a corral API?)`, res.status, 'bad_response');
    }
  }

  /** Streams a workspace tar to PUT /v1/workspaces; its answer names the upload a spec's workspace.id can use. */
  async uploadWorkspace(tarStream: Readable): Promise<UploadedWorkspace> {
    let res: Response;
    // The tar stream's own failure (a file vanished or changed size while it was read) is the reason
    // when there is one, not the network error fetch reports for it.
    let packing: unknown;
    tarStream.once('error', (err) => (packing = err));
    try {
      res = await fetch(`${this.baseUrl}/v1/workspaces`, {
        method: 'PUT',
        headers: this.headers({ accept: 'application/json', 'content-type': 'application/x-tar' }),
        body: Readable.toWeb(tarStream) as ReadableStream<Uint8Array>,
        duplex: 'half',
      } as RequestInit & { duplex: 'half' });
    } catch (err) {
      if (packing instanceof WorkspacePackError) throw packing;
      throw new ApiUnreachableError(`cannot upload the workspace to ${this.baseUrl} (${reasonOf(err)}); is \`corral serve\` running? set CORRAL_API_URL or --api`, { cause: err });
    } finally {
      tarStream.destroy();
    }
    if (!res.ok) throw await this.errorOf(res);
    return (await res.json()) as UploadedWorkspace;
  }

  /** The kept upload with this id (GET /v1/workspaces/:id refreshes its TTL), or null when the server does not keep it. */
  async findWorkspace(id: string): Promise<{ id: string; expiresAt: string } | null> {
    try {
      return await this.json('GET', `/v1/workspaces/${encodeURIComponent(id)}`);
    } catch (err) {
      // 404: not kept. An older server without the route answers 404 too: the tar is then sent, as before.
      if (err instanceof ApiError && err.status === 404) return null;
      throw err;
    }
  }

  submit(spec: unknown): Promise<{ id: string; status: string; traceId?: string; traceUrl?: string }> {
    return this.json('POST', '/v1/runs', spec);
  }

  /** The plan the server would run for this spec (POST /v1/runs/plan); nothing is queued. */
  plan(spec: unknown): Promise<Record<string, unknown>> {
    return this.json('POST', '/v1/runs/plan', spec);
  }

  /** A run from a server template: body { params, workspace? }; with dryRun the plan instead (POST …/plan). */
  submitTemplate(name: string, body: unknown, dryRun = false): Promise<{ id: string; status: string } & Record<string, unknown>> {
    return this.json('POST', `/v1/templates/${encodeURIComponent(name)}/${dryRun ? 'plan' : 'runs'}`, body);
  }

  /** Any JSON route (schedules …): the parsed answer, or ApiError with the server's reason. */
  request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    return this.json(method, path, body);
  }

  templates(): Promise<{ templates: Array<{ name: string; description: string; params: Array<{ name: string; description: string; default?: string; pattern?: string }>; examples: Array<Record<string, string>> }> }> {
    return this.json('GET', '/v1/templates');
  }

  environments(): Promise<{ environments: Array<{ name: string; description: string; image: string; setup: { commands: string[]; egress: string[]; timeoutS: number }; cache: false | { files: string[] }; egress: string[] }> }> {
    return this.json('GET', '/v1/environments');
  }

  replay(id: string): Promise<{ id: string; status: string; replayOf: string }> {
    return this.json('POST', `/v1/runs/${encodeURIComponent(id)}/replay`);
  }

  get(id: string): Promise<RunView> {
    return this.json('GET', `/v1/runs/${encodeURIComponent(id)}`);
  }

  /** Answers a pending approval; the answer says who the server recorded (the token's principal). */
  approve(id: string, callId: string, approve: boolean, note?: string): Promise<{ by: string; note?: string }> {
    return this.json('POST', `/v1/runs/${encodeURIComponent(id)}/approvals/${encodeURIComponent(callId)}`, { decision: approve ? 'approve' : 'deny', ...(note ? { note } : {}) });
  }

  /** status "cancelled" when it had not started, "cancelling" when a worker is stopping it. */
  cancel(id: string): Promise<{ id: string; status: string }> {
    return this.json('POST', `/v1/runs/${encodeURIComponent(id)}/cancel`);
  }

  /**
   * One of a run's files as a stream (GET `path`, e.g. /v1/runs/ID/artifacts/patch): its body and
   * length; ApiError (404 with the server's reason) when there is none.
   */
  async download(path: string): Promise<{ body: ReadableStream<Uint8Array>; bytes: number | null; type: string | null }> {
    const res = await this.send('GET', path, { accept: '*/*' });
    if (!res.body) throw new ApiError(`GET ${path} answered without a body`, res.status, 'bad_response');
    const length = res.headers.get('content-length');
    return { body: res.body, bytes: length === null ? null : Number(length), type: res.headers.get('content-type') };
  }

  /** The run's report.md. */
  async report(id: string): Promise<string> {
    const res = await this.send('GET', `/v1/runs/${encodeURIComponent(id)}/report`, { accept: 'text/markdown, */*' });
    return res.text();
  }

  health(): Promise<unknown> {
    return this.json('GET', '/healthz');
  }

  /**
   * Calls onEvent for each event of the run, from the start (or `after`), until run.finished. When the
   * stream ends early (the connection dropped, the server restarted, its Redis failed over: 503) it
   * reconnects after the last event seen, for up to `reconnectForMs` without news; a run that ended
   * without a run.finished event (cancelled while queued, a malformed job) ends it. An event seen
   * twice (a failover made the worker append it again: same seq, same time) is passed on once.
   */
  async follow(id: string, onEvent: (e: RunEvent) => void, opts: FollowOptions = {}): Promise<void> {
    let cursor = opts.after ?? '0';
    let failures = 0;
    let lastNews = Date.now();
    const seen = new Set<string>();
    let streamed = false;
    for (;;) {
      let waitMs: number | undefined;
      try {
        const res = await this.send('GET', `/v1/runs/${encodeURIComponent(id)}/events?after=${encodeURIComponent(cursor)}`, { accept: 'text/event-stream', signal: opts.signal });
        if (!res.body) throw new ApiError(`GET /v1/runs/${id}/events answered without a body`, res.status, 'bad_response');
        streamed = true;
        for await (const msg of sseMessages(res.body)) {
          failures = 0;
          lastNews = Date.now();
          if (msg.id) cursor = msg.id;
          if (!msg.data) continue;
          if (msg.event === 'model.delta') {
            opts.onDelta?.(JSON.parse(msg.data) as LiveDelta);
            continue;
          }
          const event = JSON.parse(msg.data) as RunEvent;
          const key = `${event.seq}@${event.ts}`;
          if (seen.has(key)) continue;
          seen.add(key);
          onEvent(event);
          if (event.type === 'run.finished') return;
        }
        if ((await this.get(id)).finishedAt) return;
      } catch (err) {
        if (opts.signal?.aborted) throw err;
        // A reconnect refused for the stream cap (429) is waited out too: the slot of the stream that
        // just dropped may still count until the server's release, or its lease, frees it.
        const capped = err instanceof ApiError && err.status === 429 && streamed;
        if (err instanceof ApiError && !TRANSIENT.has(err.status) && !capped) throw err;
        if (Date.now() - lastNews > (opts.reconnectForMs ?? 60_000)) throw err;
        if (err instanceof ApiError) waitMs = Math.min((err.retryAfterS ?? 1) * 1000, capped ? 10_000 : 2000);
        failures += 1;
      }
      await new Promise((r) => setTimeout(r, opts.retryMs ?? waitMs ?? Math.min(500 * Math.max(1, failures), 2000)));
    }
  }
}

export interface SseMessage {
  id?: string;
  event?: string;
  data: string;
}

/** Splits an SSE byte stream into messages (id, event, data lines joined by newlines). */
export async function* sseMessages(body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>): AsyncGenerator<SseMessage> {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    // Line ends may be CRLF, LF or CR; a CR at the end of a chunk waits for the next one.
    const held = buf.endsWith('\r') ? '\r' : '';
    buf = buf.slice(0, buf.length - held.length).replace(/\r\n?/g, '\n');
    let idx;
    while ((idx = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, idx);
      buf = buf.slice(idx + 2);
      const msg = parseBlock(block);
      if (msg) yield msg;
    }
    buf += held;
  }
}

function parseBlock(block: string): SseMessage | null {
  const msg: SseMessage = { data: '' };
  const data: string[] = [];
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'data') data.push(value);
    else if (field === 'id') msg.id = value;
    else if (field === 'event') msg.event = value;
  }
  msg.data = data.join('\n');
  return msg.data || msg.id ? msg : null;
}
