/**
 * The docker gate: an HTTP server (Node's own parser) on a unix socket that alone talks to the engine
 * and forwards only the Engine API subset corral uses, each request checked (rules.ts). Requests are
 * rebuilt from validated parts (method, path segments, query) rather than forwarded as bytes; bodies
 * are bounded; hijacked exec streams are piped byte for byte after the engine answered 101. Every
 * refusal is a 403 `{"message": "docker-gate refused (rule …): …"}` and a log line.
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { LABELS } from '../sandbox/container-spec';
import { checkCreate, checkExec, GATE_LABEL, owned, ownershipTag, Refusal, type GatePolicy } from './rules';

export type GateLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface GateOptions {
  policy: GatePolicy;
  /** The engine's unix socket. */
  engineSocket: string;
  log?: GateLog;
}

const MAX_JSON_BODY = 1024 * 1024;
const MAX_SMALL_BODY = 64 * 1024;
const MAX_ARCHIVE_BODY = 512 * 1024 * 1024;
const MAX_LIST_RESPONSE = 16 * 1024 * 1024;
const CACHE_MAX = 10_000;
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const FULL_ID = /^[0-9a-f]{64}$/;
const CONTAINER_OPS = new Map<string, string[]>([
  ['start', ['POST']], ['wait', ['POST']], ['kill', ['POST']], ['stop', ['POST']], ['json', ['GET']],
  ['archive', ['GET', 'PUT', 'HEAD']], ['exec', ['POST']],
]);

class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

interface Owned { id: string; labels: Record<string, string> }

export class DockerGate {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private readonly ownedIds = new Map<string, Owned>();
  private readonly execs = new Map<string, string>();
  private readonly log: GateLog;
  readonly server: http.Server;
  refusals = 0;

  constructor(private readonly o: GateOptions) {
    this.log = o.log ?? ((msg, fields) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg, ...fields })}\n`));
    this.server = http.createServer({ maxHeaderSize: 16 * 1024 }, (req, res) => {
      this.handle(req, res).catch((err: unknown) => this.fail(req, res, err));
    });
    this.server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      this.upgrade(req, socket, head).catch((err: unknown) => {
        const { status, message } = this.describe(req, err);
        if (!socket.destroyed) socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n${JSON.stringify({ message })}\n`);
      });
    });
  }

  listen(path: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(path, () => resolve());
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
    this.agent.destroy();
  }

  private describe(req: http.IncomingMessage, err: unknown): { status: number; message: string } {
    if (err instanceof Refusal) {
      this.refusals++;
      this.log('docker-gate refused', { rule: err.rule, method: req.method, path: req.url?.slice(0, 300), detail: err.message });
      return { status: 403, message: err.message };
    }
    if (err instanceof HttpError) return { status: err.status, message: err.message };
    this.log('docker-gate error', { method: req.method, path: req.url?.slice(0, 300), error: (err as Error).message });
    return { status: 502, message: `docker-gate: the engine request failed: ${(err as Error).message}` };
  }

  private fail(req: http.IncomingMessage, res: http.ServerResponse, err: unknown): void {
    const { status, message } = this.describe(req, err);
    req.resume();
    if (res.headersSent) {
      res.destroy();
      return;
    }
    res.writeHead(status, { 'Content-Type': 'application/json' }).end(`${JSON.stringify({ message })}\n`);
  }

  /** Splits `/v1.43/containers/x/json` into the version prefix and the decoded segments. */
  private route(req: http.IncomingMessage): { version: string; seg: string[]; query: URLSearchParams } {
    const u = new URL(req.url ?? '/', 'http://gate');
    let path = u.pathname;
    const v = /^\/v\d{1,2}\.\d{1,3}(?=\/)/.exec(path);
    const version = v ? v[0] : '';
    path = path.slice(version.length);
    let seg: string[];
    try {
      seg = path.split('/').slice(1).map((s) => decodeURIComponent(s));
    } catch {
      throw new Refusal('path', 'the path is not valid percent-encoding');
    }
    return { version, seg, query: u.searchParams };
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const m = req.method ?? 'GET';
    const { version, seg, query } = this.route(req);
    const q = query.toString();
    const qs = q ? `?${q}` : '';
    const [a, b, c] = seg;
    if (seg.length === 1 && a === '_ping' && (m === 'GET' || m === 'HEAD')) return this.forward(req, res, `${version}/_ping`, 'none');
    if (seg.length === 1 && a === 'version' && m === 'GET') return this.forward(req, res, `${version}/version`, 'none');
    if (seg.length === 2 && a === 'corral-gate' && b === 'health' && m === 'GET') return this.health(res);
    if (seg.length === 1 && a === 'info' && m === 'GET') return this.info(res, version);
    if (a === 'images' && seg.at(-1) === 'json' && m === 'GET' && seg.length >= 3) {
      const name = seg.slice(1, -1).join('/');
      if (!this.o.policy.images.includes(name)) throw new Refusal('image-allowlist', `image inspect only of the sandbox images (got ${name})`);
      return this.forward(req, res, `${version}/images/${name.split('/').map(encodeURIComponent).join('/')}/json`, 'none');
    }
    if (a === 'containers' && seg.length === 2 && b === 'create' && m === 'POST') return this.create(req, res, version, query);
    if (a === 'containers' && seg.length === 2 && b === 'json' && m === 'GET') return this.list(res, version, query);
    if (a === 'events' && seg.length === 1 && m === 'GET') return this.forward(req, res, `${version}/events?${forceFilters(query, this.o.policy.queue).toString()}`, 'none');
    if (a === 'containers' && b !== undefined && ID_RE.test(b)) {
      if (seg.length === 2 && m === 'DELETE') {
        const own = await this.ownedContainer(b);
        await this.forward(req, res, `${version}/containers/${own.id}${qs}`, 'small');
        if (res.statusCode < 300) this.ownedIds.delete(own.id);
        return;
      }
      if (seg.length === 3 && c !== undefined && CONTAINER_OPS.get(c)?.includes(m)) {
        const own = await this.ownedContainer(b);
        if (c === 'exec') return this.execCreate(req, res, version, own);
        return this.forward(req, res, `${version}/containers/${own.id}/${c}${qs}`, c === 'archive' ? 'archive' : 'small');
      }
    }
    if (a === 'exec' && b !== undefined && ID_RE.test(b) && seg.length === 3) {
      const ok = (c === 'json' && m === 'GET') || (c === 'resize' && m === 'POST') || (c === 'start' && m === 'POST');
      if (ok) {
        await this.ownedExec(b);
        return this.forward(req, res, `${version}/exec/${b}/${c}${qs}`, 'small');
      }
    }
    throw new Refusal('endpoint-not-allowed', `${m} ${'/' + seg.join('/')} is not in the API subset corral uses`);
  }

  /** A container of this deployment created through the gate (by its labels and ownership tag), or a Refusal. */
  private async ownedContainer(idOrName: string): Promise<Owned> {
    const hit = FULL_ID.test(idOrName) ? this.ownedIds.get(idOrName) : undefined;
    if (hit) return hit;
    const r = await this.engineJson('GET', `/containers/${encodeURIComponent(idOrName)}/json`);
    if (r.status === 404) throw new HttpError(404, `No such container: ${idOrName}`);
    if (r.status !== 200) throw new HttpError(r.status, `inspect failed: ${JSON.stringify(r.body).slice(0, 200)}`);
    const info = r.body as { Id: string; Name: string; Config?: { Labels?: Record<string, string> } };
    const labels = info.Config?.Labels ?? {};
    if (!owned(info.Name, labels, this.o.policy)) throw new Refusal('container-not-ours', `container ${idOrName} is not one of this deployment's sandboxes (labels ${LABELS.corral}, ${LABELS.queue}=${this.o.policy.queue} and the gate's ${GATE_LABEL})`);
    const own = { id: info.Id, labels };
    this.remember(this.ownedIds, info.Id, own);
    return own;
  }

  private async ownedExec(execId: string): Promise<void> {
    let container = this.execs.get(execId);
    if (!container) {
      const r = await this.engineJson('GET', `/exec/${encodeURIComponent(execId)}/json`);
      if (r.status === 404) throw new HttpError(404, `No such exec instance: ${execId}`);
      container = String((r.body as { ContainerID?: string }).ContainerID ?? '');
      if (!ID_RE.test(container)) throw new Refusal('container-not-ours', 'the exec belongs to no container');
    }
    await this.ownedContainer(container);
  }

  private remember<V>(map: Map<string, V>, k: string, v: V): void {
    map.set(k, v);
    if (map.size > CACHE_MAX) map.delete(map.keys().next().value as string);
  }

  private async create(req: http.IncomingMessage, res: http.ServerResponse, version: string, query: URLSearchParams): Promise<void> {
    const body = await readJson(req, MAX_JSON_BODY);
    // dockerode sends the name in the query and in the body; the engine reads the query's.
    const inBody = (body as { name?: unknown } | null)?.name;
    const name = query.get('name') ?? (typeof inBody === 'string' ? inBody : null);
    if (inBody !== undefined && inBody !== name) throw new Refusal('container-name', 'the name in the body and in the query differ');
    if (inBody !== undefined) delete (body as { name?: unknown }).name;
    const { runId } = checkCreate(body, name, this.o.policy);
    const b = body as { Labels: Record<string, string> };
    b.Labels[GATE_LABEL] = ownershipTag(this.o.policy.key, name!, runId);
    const q = new URLSearchParams({ name: name! });
    const r = await this.engineJson('POST', `${version}/containers/create?${q.toString()}`, b);
    if (r.status === 201) {
      const id = String((r.body as { Id?: string }).Id ?? '');
      if (FULL_ID.test(id)) this.remember(this.ownedIds, id, { id, labels: b.Labels });
    }
    send(res, r.status, r.body);
  }

  private async execCreate(req: http.IncomingMessage, res: http.ServerResponse, version: string, own: Owned): Promise<void> {
    const body = await readJson(req, MAX_JSON_BODY);
    checkExec(body, own.labels);
    const r = await this.engineJson('POST', `${version}/containers/${own.id}/exec`, body);
    if (r.status === 201) {
      const id = String((r.body as { Id?: string }).Id ?? '');
      if (ID_RE.test(id)) this.remember(this.execs, id, own.id);
    }
    send(res, r.status, r.body);
  }

  private async list(res: http.ServerResponse, version: string, query: URLSearchParams): Promise<void> {
    const r = await this.engineJson('GET', `${version}/containers/json?${forceFilters(query, this.o.policy.queue).toString()}`);
    if (r.status !== 200 || !Array.isArray(r.body)) return send(res, r.status, r.body);
    const mine = (r.body as Array<{ Names?: string[]; Labels?: Record<string, string> }>).filter((c) => owned(c.Names?.[0] ?? '', c.Labels, this.o.policy));
    send(res, 200, mine);
  }

  private async info(res: http.ServerResponse, version: string): Promise<void> {
    const r = await this.engineJson('GET', `${version}/info`);
    if (r.status !== 200) return send(res, r.status, r.body);
    const i = r.body as Record<string, unknown>;
    const keep = ['Runtimes', 'DefaultRuntime', 'ServerVersion', 'OSType', 'Architecture', 'NCPU', 'MemTotal', 'CgroupVersion', 'SecurityOptions'];
    send(res, 200, Object.fromEntries(keep.filter((k) => k in i).map((k) => [k, i[k]])));
  }

  private async health(res: http.ServerResponse): Promise<void> {
    const r = await this.engineJson('GET', '/_ping').catch((err: Error) => ({ status: 0, body: err.message }));
    send(res, r.status === 200 ? 200 : 503, { gate: 'ok', engine: r.status === 200 ? 'ok' : `unreachable: ${String(r.body).slice(0, 200)}`, refusals: this.refusals });
  }

  private engineJson(method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
    return new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
      const up = http.request({
        socketPath: this.o.engineSocket, agent: this.agent, method, path,
        headers: { Host: 'docker', ...(data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {}) },
      }, (r) => {
        readBody(r, MAX_LIST_RESPONSE).then((buf) => {
          let parsed: unknown = buf.toString('utf8');
          try {
            parsed = buf.length ? JSON.parse(buf.toString('utf8')) : null;
          } catch { /* plain text */ }
          resolve({ status: r.statusCode ?? 502, body: parsed });
        }, reject);
      });
      up.once('error', reject);
      up.end(data);
    });
  }

  /** Streams the request (bounded) to the engine at `path` and the answer back. */
  private forward(req: http.IncomingMessage, res: http.ServerResponse, path: string, bodyKind: 'none' | 'small' | 'archive'): Promise<void> {
    return new Promise((resolve, reject) => {
      const headers: http.OutgoingHttpHeaders = { Host: 'docker' };
      for (const h of ['content-type', 'content-length', 'transfer-encoding']) if (req.headers[h] !== undefined) headers[h] = req.headers[h];
      if (bodyKind === 'none') {
        delete headers['content-length'];
        delete headers['transfer-encoding'];
      }
      const up = http.request({ socketPath: this.o.engineSocket, agent: this.agent, method: req.method, path, headers }, (r) => {
        const out: http.OutgoingHttpHeaders = {};
        for (const [k, v] of Object.entries(r.headers)) if (!['connection', 'keep-alive', 'transfer-encoding'].includes(k) && v !== undefined) out[k] = v;
        res.writeHead(r.statusCode ?? 502, out);
        // A streamed answer (wait, events) gets its headers at once; a sized one goes in one write.
        if (r.headers['content-length'] === undefined) res.flushHeaders();
        r.pipe(res);
        r.once('end', () => resolve());
        r.once('error', reject);
      });
      up.once('error', reject);
      res.once('close', () => {
        if (!res.writableFinished) up.destroy();
        resolve();
      });
      if (bodyKind === 'none') {
        req.resume();
        up.end();
        return;
      }
      const cap = bodyKind === 'archive' ? MAX_ARCHIVE_BODY : MAX_SMALL_BODY;
      let n = 0;
      req.on('data', (chunk: Buffer) => {
        n += chunk.length;
        if (n > cap) {
          up.destroy();
          reject(new Refusal('body-size', `the request body exceeds ${cap} bytes`));
          return;
        }
        if (!up.write(chunk)) {
          req.pause();
          up.once('drain', () => req.resume());
        }
      });
      req.once('end', () => up.end());
    });
  }

  /** POST /exec/{id}/start with `Upgrade: tcp`: checked, then piped both ways once the engine answered 101. */
  private async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const { version, seg, query } = this.route(req);
    if (req.method !== 'POST' || seg.length !== 3 || seg[0] !== 'exec' || seg[2] !== 'start' || !ID_RE.test(seg[1] ?? '')) {
      throw new Refusal('endpoint-not-allowed', `${req.method} /${seg.join('/')} (upgrade) is not in the API subset corral uses; only exec start is hijacked`);
    }
    const len = Number(req.headers['content-length'] ?? 0);
    if (!Number.isInteger(len) || len < 0 || len > MAX_SMALL_BODY || req.headers['transfer-encoding'] !== undefined) throw new Refusal('body-size', 'exec start needs a Content-Length body of at most 64 KiB');
    await this.ownedExec(seg[1]!);
    // The request body (Content-Length bytes) comes first; what follows is the exec's stdin.
    let pending = head;
    while (pending.length < len) {
      const more = await new Promise<Buffer | null>((resolve) => {
        socket.once('data', (d: Buffer) => resolve(d));
        socket.once('end', () => resolve(null));
      });
      socket.removeAllListeners('end');
      if (!more) throw new HttpError(400, 'the connection ended inside the request body');
      pending = Buffer.concat([pending, more]);
    }
    socket.pause();
    const body = pending.subarray(0, len);
    const rest = pending.subarray(len);
    const q = query.toString();
    await new Promise<void>((resolve, reject) => {
      const up = http.request({
        socketPath: this.o.engineSocket, agent: false, method: 'POST', path: `${version}/exec/${seg[1]}/start${q ? `?${q}` : ''}`,
        headers: { Host: 'docker', 'Content-Type': 'application/json', 'Content-Length': body.length, Connection: 'Upgrade', Upgrade: 'tcp' },
      });
      up.once('error', reject);
      up.once('response', (r) => {
        // Not hijacked (e.g. the exec is gone): the answer, and the connection ends.
        readBody(r, MAX_SMALL_BODY).then((buf) => {
          socket.end(`HTTP/1.1 ${r.statusCode} ${r.statusMessage}\r\nContent-Type: ${r.headers['content-type'] ?? 'text/plain'}\r\nContent-Length: ${buf.length}\r\nConnection: close\r\n\r\n${buf.toString('utf8')}`);
          resolve();
        }, reject);
      });
      up.once('upgrade', (r, engine, engineHead) => {
        const lines = [`HTTP/1.1 101 ${r.statusMessage ?? 'UPGRADED'}`];
        for (let i = 0; i < r.rawHeaders.length; i += 2) lines.push(`${r.rawHeaders[i]}: ${r.rawHeaders[i + 1]}`);
        socket.write(`${lines.join('\r\n')}\r\n\r\n`);
        if (engineHead.length) socket.write(engineHead);
        if (rest.length) engine.write(rest);
        engine.pipe(socket);
        socket.pipe(engine);
        socket.resume();
        const done = () => {
          engine.destroy();
          socket.destroy();
        };
        engine.once('error', done);
        socket.once('error', done);
        engine.once('close', () => socket.end());
        socket.once('close', () => engine.destroy());
        resolve();
      });
      up.end(body);
    });
  }
}

/** The query's filters with this deployment's labels forced on (and nothing else widened). */
export function forceFilters(query: URLSearchParams, queue: string): URLSearchParams {
  let filters: Record<string, unknown> = {};
  const raw = query.get('filters');
  if (raw) {
    try {
      const f = JSON.parse(raw) as unknown;
      if (typeof f === 'object' && f !== null && !Array.isArray(f)) filters = f as Record<string, unknown>;
    } catch {
      throw new Refusal('filters', 'filters must be JSON');
    }
  }
  const labelsOf = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : typeof v === 'object' && v !== null ? Object.keys(v) : []);
  const labels = new Set([...labelsOf(filters.label), `${LABELS.corral}=1`, `${LABELS.queue}=${queue}`]);
  filters.label = [...labels];
  if (query.has('type') || filters.type !== undefined) filters.type = ['container'];
  const out = new URLSearchParams();
  for (const [k, v] of query) if (k !== 'filters') out.append(k, v);
  out.set('filters', JSON.stringify(filters));
  return out;
}

function send(res: http.ServerResponse, status: number, body: unknown): void {
  const data = body === null || body === undefined ? '' : typeof body === 'string' ? body : JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) }).end(data);
}

function readBody(s: NodeJS.ReadableStream, max: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let n = 0;
    s.on('data', (d: Buffer) => {
      n += d.length;
      if (n > max) {
        (s as unknown as { destroy(): void }).destroy();
        reject(new Refusal('body-size', `the body exceeds ${max} bytes`));
        return;
      }
      parts.push(d);
    });
    s.once('end', () => resolve(Buffer.concat(parts)));
    s.once('error', reject);
  });
}

async function readJson(req: http.IncomingMessage, max: number): Promise<unknown> {
  const buf = await readBody(req, max);
  try {
    return JSON.parse(buf.toString('utf8'));
  } catch {
    throw new Refusal('create-body', 'the body is not JSON');
  }
}
