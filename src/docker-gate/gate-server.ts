/**
 * The docker gate: an HTTP server (Node's own parser) on a unix socket that alone talks to the engine
 * and serves only the Engine API subset corral uses (routes.ts lists it). Nothing the client sends
 * reaches the engine as sent: each request is rebuilt from checked parts — method, path segments, a
 * query rebuilt from its table, and a JSON body rebuilt from the fields the rules checked (rules.ts,
 * create-rules.ts); no client body bytes are ever relayed. Hijacked exec streams are piped byte for
 * byte only after the engine answered 101. Every refusal is a 403 `{"message": "docker-gate refused
 * (rule …): …"}` and a log line.
 *
 * Beside the engine the gate owns what a create needs on the host: the egress directories (egress-root.ts),
 * the host's uid-slot leases (src/sandbox/host-leases.ts) and each slot's pty volume (pty-volume.ts).
 */
import http from 'node:http';
import type { Duplex } from 'node:stream';
import { LABELS } from '../sandbox/container-spec';
import { HostLeases } from '../sandbox/host-leases';
import { isPtyVolume, ptyVolumeCreateBody, ptyVolumeName } from '../sandbox/pty-volume';
import { rebuildArchivePut } from './archive-put';
import { EgressRoot } from './egress-root';
import { isObject, parseGoJson, type JValue } from './go-json';
import { checkCreate, checkExec, checkExecStart, checkQuery, GATE_LABEL, owned, ownershipTag, queryMirrorsBody, recordedUid, Refusal, type GatePolicy } from './rules';
import { matchRoute, MIN_API_VERSION, serveRoute, type Owned, type RouteContext } from './routes';

export type GateLog = (msg: string, fields?: Record<string, unknown>) => void;

export interface GateOptions {
  policy: GatePolicy;
  /** The engine's unix socket. */
  engineSocket: string;
  /** The host's uid-slot lease directory (shared by every allocator on the host). */
  leaseDir: string;
  log?: GateLog;
  /** How often orphaned leases and egress directories are swept (ms; 0 = only at start). */
  sweepMs?: number;
}

const MAX_JSON_BODY = 1024 * 1024;
/** Archive uploads checked at once (each holds its packed tar: at most ARCHIVE_PUT_LIMITS.maxBytes and headers). */
const ARCHIVE_PUTS = 2;
const MAX_SMALL_BODY = 64 * 1024;
const MAX_LIST_RESPONSE = 16 * 1024 * 1024;
const CACHE_MAX = 10_000;
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
const FULL_ID = /^[0-9a-f]{64}$/;

export class HttpError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export class DockerGate {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  private readonly ownedIds = new Map<string, Owned>();
  private readonly execs = new Map<string, string>();
  private readonly log: GateLog;
  private engineIdP: Promise<string> | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  readonly egress: EgressRoot;
  readonly leases: HostLeases | undefined;
  private leasesP: Promise<HostLeases> | undefined;
  readonly server: http.Server;
  refusals = 0;
  private putsInFlight = 0;
  private readonly putWaiters: Array<() => void> = [];
  /** The upload each container waits behind (one at a time per container: each pauses it). */
  private readonly putLocks = new Map<string, Promise<void>>();

  constructor(private readonly o: GateOptions) {
    this.log = o.log ?? ((msg, fields) => process.stderr.write(`${JSON.stringify({ time: new Date().toISOString(), msg, ...fields })}\n`));
    this.egress = new EgressRoot(o.policy.egressRoot, { queue: o.policy.queue, engine: () => this.engineId() });
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

  async listen(path: string): Promise<void> {
    await this.egress.ready();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(path, () => resolve());
    });
    void this.sweep();
    if (this.o.sweepMs !== 0) {
      this.sweepTimer = setInterval(() => void this.sweep(), this.o.sweepMs ?? 60_000);
      this.sweepTimer.unref();
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
    this.agent.destroy();
  }

  /** The engine's ID (GET /info): what leases and egress markers name as their engine. */
  engineId(): Promise<string> {
    this.engineIdP ??= this.engineJson('GET', '/info').then((r) => {
      const id = (r.body as { ID?: unknown } | null)?.ID;
      if (r.status !== 200 || typeof id !== 'string' || !id) throw new HttpError(503, 'the engine did not say its ID');
      return `engine:${id}`;
    });
    this.engineIdP.catch(() => (this.engineIdP = undefined));
    return this.engineIdP;
  }

  private hostLeases(): Promise<HostLeases> {
    this.leasesP ??= this.engineId().then(async (id) => {
      const { ensureSecureDir } = await import('../sandbox/secure-dir');
      await ensureSecureDir(this.o.leaseDir, 0o755);
      return new HostLeases(this.o.leaseDir, id);
    });
    this.leasesP.catch(() => (this.leasesP = undefined));
    return this.leasesP;
  }

  /** Releases leases and removes egress directories whose container is gone from this engine. */
  async sweep(): Promise<void> {
    try {
      const r = await this.engineJson('GET', `/containers/json?all=1&filters=${encodeURIComponent(JSON.stringify({ label: [LABELS.corral] }))}`);
      if (r.status !== 200 || !Array.isArray(r.body)) return;
      const list = r.body as Array<{ Names?: string[]; Labels?: Record<string, string> }>;
      const names = new Set(list.flatMap((c) => (c.Names ?? []).map((n) => n.replace(/^\//, ''))));
      const dirs = new Set(list.map((c) => c.Labels?.[LABELS.egressDir]).filter((d): d is string => !!d));
      const released = await (await this.hostLeases()).sweep(names);
      const removed = await this.egress.sweep(dirs);
      if (released.length || removed.length) this.log('docker-gate swept', { releasedLeases: released, removedEgressDirs: removed });
    } catch (err) {
      this.log('docker-gate sweep failed', { error: (err as Error).message });
    }
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
    const v = /^\/v(\d{1,2})\.(\d{1,3})(?=\/)/.exec(path);
    const version = v ? v[0] : '';
    // Older API versions change what the engine reads (a HostConfig in a start body below 1.24, host
    // cgroup and IPC namespaces by default below 1.41): only this version and newer are served.
    if (v && (Number(v[1]) < MIN_API_VERSION[0] || (Number(v[1]) === MIN_API_VERSION[0] && Number(v[2]) < MIN_API_VERSION[1]))) {
      throw new Refusal('api-version', `API version ${version.slice(2)} is older than ${MIN_API_VERSION.join('.')}, the oldest the gate serves`);
    }
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
    const { version, seg, query } = this.route(req);
    const route = matchRoute(req.method ?? 'GET', seg, { upgrade: false, policy: this.o.policy });
    await serveRoute(route, { gate: this, req, res, version, seg, policy: this.o.policy, rawQuery: query }, query);
  }

  // ---- what routes.ts calls ----

  /** A container of this deployment created through the gate (by its labels and ownership tag), or a Refusal. */
  async ownedContainer(idOrName: string): Promise<Owned> {
    if (!ID_RE.test(idOrName)) throw new Refusal('path', 'not a container id or name');
    const hit = FULL_ID.test(idOrName) ? this.ownedIds.get(idOrName) : undefined;
    if (hit) return hit;
    const r = await this.engineJson('GET', `/containers/${encodeURIComponent(idOrName)}/json`);
    if (r.status === 404) throw new HttpError(404, `No such container: ${idOrName}`);
    if (r.status !== 200) throw new HttpError(r.status, `inspect failed: ${JSON.stringify(r.body).slice(0, 200)}`);
    const info = r.body as { Id: string; Name: string; Config?: { Labels?: Record<string, string> } };
    const labels = info.Config?.Labels ?? {};
    if (!owned(info.Name, labels, this.o.policy)) throw new Refusal('container-not-ours', `container ${idOrName} is not one of this deployment's sandboxes (labels ${LABELS.corral}, ${LABELS.queue}=${this.o.policy.queue} and the gate's ${GATE_LABEL})`);
    const own: Owned = { id: info.Id, name: info.Name.replace(/^\//, ''), labels, agentUid: recordedUid(info.Name, labels)! };
    this.remember(this.ownedIds, info.Id, own);
    return own;
  }

  async ownedExec(execId: string): Promise<void> {
    if (!ID_RE.test(execId)) throw new Refusal('path', 'not an exec id');
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

  forget(id: string): void {
    this.ownedIds.delete(id);
  }

  /** POST /containers/create: checked, the host's side prepared (egress dir, pty volume, uid lease), rebuilt, forwarded. */
  async create(ctx: RouteContext): Promise<void> {
    const body = await readJson(ctx.req, MAX_JSON_BODY);
    const name = ctx.query.get('name');
    // A query beyond the name passes only as dockerode's copy of the body; it is never forwarded.
    const others = [...ctx.rawQuery.keys()].some((k) => k !== 'name');
    if (others && !queryMirrorsBody(ctx.rawQuery, body)) throw new Refusal('query', 'a create\'s query may hold only the name (or be an exact copy of the body, as dockerode sends it)');
    const c = checkCreate(body, name, this.o.policy);
    if (c.egressDir) await this.egress.check(c.egressDir);
    if (c.ptyVolume) await this.ensurePtyVolume(c.agentUid);
    const leases = await this.hostLeases();
    const lease = await leases.takeSlot(c.agentUid, c.name);
    if (!lease.ok) {
      throw new HttpError(409, `Conflict: uid slot ${c.agentUid} is leased on this host by ${lease.holder ? `${lease.holder.name} on ${lease.holder.engine}` : 'an unreadable lease'} (host leases: ${leases.dir})`);
    }
    const labels = c.body.Labels as Record<string, string>;
    labels[GATE_LABEL] = ownershipTag(this.o.policy.key, c.name, c.runId);
    let r: { status: number; body: unknown };
    try {
      r = await this.engineJson('POST', `${ctx.version}/containers/create?${new URLSearchParams({ name: c.name }).toString()}`, c.body);
    } catch (err) {
      if (lease.fresh) await leases.releaseSlot(c.agentUid, c.name);
      throw err;
    }
    // 409: a container of that name exists on this engine, and the lease is rightly its.
    if (r.status !== 201 && r.status !== 409 && lease.fresh) await leases.releaseSlot(c.agentUid, c.name);
    if (r.status === 201) {
      const id = String((r.body as { Id?: string }).Id ?? '');
      if (FULL_ID.test(id)) this.remember(this.ownedIds, id, { id, name: c.name, labels, agentUid: c.agentUid });
    }
    send(ctx.res, r.status, r.body);
  }

  /** The slot's pty volume: made by the gate when missing; an existing one must be exactly that. */
  private async ensurePtyVolume(agentUid: number): Promise<void> {
    const want = ptyVolumeCreateBody(agentUid);
    let r = await this.engineJson('GET', `/volumes/${encodeURIComponent(want.Name)}`);
    if (r.status === 404) {
      await this.engineJson('POST', '/volumes/create', want);
      r = await this.engineJson('GET', `/volumes/${encodeURIComponent(want.Name)}`);
    }
    if (r.status !== 200) throw new HttpError(502, `the pty volume ${want.Name}: ${JSON.stringify(r.body).slice(0, 200)}`);
    if (!isPtyVolume(r.body as Record<string, unknown>, agentUid)) {
      // A volume of that name with other options (the engine makes one without options when a create
      // names a missing volume): the slot is leased to this create, so one no container uses is stale
      // and replaced; one in use (the engine answers 409) is refused.
      const gone = await this.engineJson('DELETE', `/volumes/${encodeURIComponent(want.Name)}`);
      if (gone.status === 204 || gone.status === 404) {
        await this.engineJson('POST', '/volumes/create', want);
        r = await this.engineJson('GET', `/volumes/${encodeURIComponent(want.Name)}`);
      }
      if (r.status !== 200 || !isPtyVolume(r.body as Record<string, unknown>, agentUid)) throw new Refusal('pty-budget', `the volume ${want.Name} exists with other options than a sandbox's pty volume, and is in use`);
    }
  }

  async execCreate(ctx: RouteContext, own: Owned): Promise<void> {
    const body = checkExec(await readJson(ctx.req, MAX_JSON_BODY), own.agentUid);
    const r = await this.engineJson('POST', `${ctx.version}/containers/${own.id}/exec`, body);
    if (r.status === 201) {
      const id = String((r.body as { Id?: string }).Id ?? '');
      if (ID_RE.test(id)) this.remember(this.execs, id, own.id);
    }
    send(ctx.res, r.status, r.body);
  }

  /**
   * PUT /containers/{id}/archive (path=/workspace only: routes.ts): the tar is checked entry by entry
   * and packed anew (archive-put.ts), then sent; the engine sees nothing of a refused one. At most
   * ARCHIVE_PUTS at once, so the gate holds at most that many packed tars. The container is paused
   * while the engine extracts (one upload per container at a time), so no process in the sandbox can
   * put a link where the tar's directory entries made the engine replace one (archive-put.ts); a
   * sandbox that is not running gets none.
   */
  async archivePut(ctx: RouteContext, own: Owned): Promise<void> {
    if (own.labels[LABELS.isolation] !== 'runc') throw new Refusal('archive-put', 'uploads go only into a runc sandbox\'s workspace volume (a gVisor workspace is a tmpfs in its own kernel)');
    const type = String(ctx.req.headers['content-type'] ?? '');
    if (!/^application\/(x-)?tar\s*$/i.test(type)) throw new Refusal('archive-put', `the body must be an uncompressed tar (application/x-tar), got ${JSON.stringify(type).slice(0, 60)}`);
    if (ctx.req.headers['content-encoding'] !== undefined) throw new Refusal('archive-put', 'no Content-Encoding: the body must be a plain uncompressed tar');
    while (this.putsInFlight >= ARCHIVE_PUTS) await new Promise<void>((r) => this.putWaiters.push(r));
    this.putsInFlight++;
    let tar: Buffer;
    try {
      tar = await rebuildArchivePut(ctx.req, own.agentUid);
    } catch (err) {
      // the rest of a refused body is not read: answer, then close the connection
      ctx.res.setHeader('Connection', 'close');
      ctx.res.once('finish', () => ctx.req.socket.destroy());
      throw err;
    } finally {
      this.putsInFlight--;
      this.putWaiters.shift()?.();
    }
    const prev = this.putLocks.get(own.id) ?? Promise.resolve();
    let release!: () => void;
    const turn = prev.then(() => new Promise<void>((r) => (release = r)));
    this.putLocks.set(own.id, turn);
    await prev;
    try {
      const r = await this.whilePaused(own, () => this.engineJson('PUT', `${ctx.version}/containers/${own.id}/archive?${ctx.query.toString()}`, undefined, tar));
      send(ctx.res, r.status, r.body);
    } finally {
      release();
      if (this.putLocks.get(own.id) === turn) this.putLocks.delete(own.id);
    }
  }

  /** Runs `fn` with `own` paused (the engine's freezer: no process of it runs), and unpauses it after, whatever `fn` did. */
  private async whilePaused<T>(own: Owned, fn: () => Promise<T>): Promise<T> {
    const p = await this.engineJson('POST', `/containers/${own.id}/pause`);
    if (p.status === 404) throw new HttpError(404, `No such container: ${own.id}`);
    if (p.status !== 204) throw new Refusal('archive-put', `uploads go only into a running sandbox, paused for the upload; the engine answered the pause ${p.status}: ${JSON.stringify(p.body).slice(0, 200)}`);
    try {
      return await fn();
    } finally {
      const u = await this.engineJson('POST', `/containers/${own.id}/unpause`).catch((err: Error) => ({ status: 0, body: err.message }));
      if (u.status !== 204) this.log('docker-gate could not unpause a sandbox after an upload', { level: 'error', container: own.name, status: u.status, answer: JSON.stringify(u.body).slice(0, 200) });
    }
  }

  /** After the engine removed a container: its pty volume, then its uid lease and its egress directory go too. */
  async removed(own: Owned): Promise<void> {
    this.forget(own.id);
    // Before the lease: once the slot is free another container may mount the volume (then it stays: in use).
    await this.engineJson('DELETE', `/volumes/${encodeURIComponent(ptyVolumeName(own.agentUid))}`).catch(() => undefined);
    await (await this.hostLeases()).releaseSlot(own.agentUid, own.name).catch(() => undefined);
    const dir = own.labels[LABELS.egressDir];
    if (dir) await this.egress.remove(dir.slice(dir.lastIndexOf('/') + 1)).catch(() => undefined);
  }

  async list(ctx: RouteContext, path: string): Promise<void> {
    const r = await this.engineJson('GET', path);
    if (r.status !== 200 || !Array.isArray(r.body)) return send(ctx.res, r.status, r.body);
    const mine = (r.body as Array<{ Names?: string[]; Labels?: Record<string, string> }>).filter((c) => owned(c.Names?.[0] ?? '', c.Labels, this.o.policy));
    send(ctx.res, 200, mine);
  }

  async info(ctx: RouteContext): Promise<void> {
    const r = await this.engineJson('GET', `${ctx.version}/info`);
    if (r.status !== 200) return send(ctx.res, r.status, r.body);
    const i = r.body as Record<string, unknown>;
    const keep = ['Runtimes', 'DefaultRuntime', 'ServerVersion', 'OSType', 'Architecture', 'NCPU', 'MemTotal', 'CgroupVersion', 'SecurityOptions'];
    send(ctx.res, 200, Object.fromEntries(keep.filter((k) => k in i).map((k) => [k, i[k]])));
  }

  async health(ctx: RouteContext): Promise<void> {
    const r = await this.engineJson('GET', '/_ping').catch((err: Error) => ({ status: 0, body: err.message }));
    send(ctx.res, r.status === 200 ? 200 : 503, { gate: 'ok', engine: r.status === 200 ? 'ok' : `unreachable: ${String(r.body).slice(0, 200)}`, refusals: this.refusals });
  }

  engineJson(method: string, path: string, body?: unknown, tar?: Buffer): Promise<{ status: number; body: unknown }> {
    return new Promise((resolve, reject) => {
      const data = tar ?? (body === undefined ? undefined : Buffer.from(JSON.stringify(body)));
      const up = http.request({
        socketPath: this.o.engineSocket, agent: this.agent, method, path,
        headers: { Host: 'docker', ...(data ? { 'Content-Type': tar ? 'application/x-tar' : 'application/json', 'Content-Length': data.length } : {}) },
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

  /**
   * Forwards a request to the engine at `path` (a rebuilt path and query) with no body or a JSON body
   * the gate built, and streams the answer back; a request that came with a body where none is taken
   * is refused (no client bytes reach the engine).
   */
  async forward(ctx: RouteContext, path: string, body?: unknown): Promise<void> {
    if (body === undefined) await refuseBody(ctx.req, ctx.rawQuery);
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    await new Promise<void>((resolve, reject) => {
      const headers: http.OutgoingHttpHeaders = { Host: 'docker', ...(data ? { 'Content-Type': 'application/json', 'Content-Length': data.length } : {}) };
      const up = http.request({ socketPath: this.o.engineSocket, agent: this.agent, method: ctx.req.method, path, headers }, (r) => {
        const out: http.OutgoingHttpHeaders = {};
        for (const [k, v] of Object.entries(r.headers)) if (!['connection', 'keep-alive', 'transfer-encoding'].includes(k) && v !== undefined) out[k] = v;
        ctx.res.writeHead(r.statusCode ?? 502, out);
        // A streamed answer (wait, events) gets its headers at once; a sized one goes in one write.
        if (r.headers['content-length'] === undefined) ctx.res.flushHeaders();
        r.pipe(ctx.res);
        r.once('end', () => resolve());
        r.once('error', reject);
      });
      up.once('error', reject);
      ctx.res.once('close', () => {
        if (!ctx.res.writableFinished) up.destroy();
        resolve();
      });
      up.end(data);
    });
  }

  /** POST /exec/{id}/start with `Upgrade: tcp`: checked, rebuilt, then piped both ways once the engine answered 101. */
  private async upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const { version, seg, query } = this.route(req);
    matchRoute(req.method ?? 'GET', seg, { upgrade: true, policy: this.o.policy });
    await this.ownedExec(seg[1]!);
    checkQuery(query, {});
    const len = Number(req.headers['content-length'] ?? 0);
    if (!Number.isInteger(len) || len < 0 || len > MAX_SMALL_BODY || req.headers['transfer-encoding'] !== undefined) throw new Refusal('body-size', 'exec start needs a Content-Length body of at most 64 KiB');
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
    const body = Buffer.from(JSON.stringify(checkExecStart(parseBody(pending.subarray(0, len)))));
    const rest = pending.subarray(len);
    await new Promise<void>((resolve, reject) => {
      const up = http.request({
        socketPath: this.o.engineSocket, agent: false, method: 'POST', path: `${version}/exec/${seg[1]}/start`,
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

  /** Refuses a request that carries a body where the endpoint takes none. */
  refuseBody(req: http.IncomingMessage, rawQuery: URLSearchParams): Promise<void> {
    return refuseBody(req, rawQuery);
  }

  /** A JSON body read whole (bounded) and parsed as the engine's decoder sees it. */
  readJson(req: http.IncomingMessage): Promise<JValue> {
    return readJson(req, MAX_JSON_BODY);
  }
}

export function send(res: http.ServerResponse, status: number, body: unknown): void {
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

/**
 * Refuses a request that carries a body where the endpoint takes none. A body is never forwarded;
 * what passes is nothing, or a JSON object that only repeats the query (dockerode sends its options as
 * both: `{"signal":"SIGKILL"}` beside `?signal=SIGKILL`), so nothing a body says goes unchecked.
 */
async function refuseBody(req: http.IncomingMessage, rawQuery: URLSearchParams): Promise<void> {
  const len = req.headers['content-length'];
  if (req.headers['transfer-encoding'] === undefined && (len === undefined || len === '0')) return;
  const buf = await readBody(req, MAX_SMALL_BODY);
  const t = buf.toString('utf8').trim();
  if (t === '' || t === 'null') return;
  const refused = () => new Refusal('body-not-allowed', 'this endpoint takes no request body (at most a JSON object repeating its query)');
  if (!/^application\/json\s*(;|$)/i.test(String(req.headers['content-type'] ?? ''))) throw refused();
  let v: JValue;
  try {
    v = parseGoJson(t);
  } catch {
    throw refused();
  }
  if (!isObject(v)) throw refused();
  const seen = new Set<string>();
  for (const [k, x] of v.entries) {
    if (seen.has(k) || !rawQuery.has(k) || (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean') || rawQuery.get(k) !== String(x)) throw refused();
    seen.add(k);
  }
}

function parseBody(buf: Buffer): JValue {
  try {
    return parseGoJson(buf.length ? buf.toString('utf8') : '{}');
  } catch (err) {
    throw new Refusal('json', `the body is not JSON as the engine reads it: ${(err as Error).message}`);
  }
}

async function readJson(req: http.IncomingMessage, max: number): Promise<JValue> {
  const type = String(req.headers['content-type'] ?? '');
  if (!/^application\/json\s*(;|$)/i.test(type)) throw new Refusal('json', `the body must be application/json (got ${JSON.stringify(type).slice(0, 60)})`);
  return parseBody(await readBody(req, max));
}
