/**
 * The Engine API subset the docker gate serves, as data: each route is a method, a path pattern, the
 * query parameters it takes (each checked and rebuilt; any other, in any spelling, refused) and what
 * the gate does. Adding what corral comes to need (a new read of a sandbox, say) is one entry here.
 * Everything not listed is refused with the rule `endpoint-not-allowed`.
 */
import type http from 'node:http';
import { posix } from 'node:path';
import { HOME_DIR, LABELS, WORKSPACE_DIR } from '../sandbox/container-spec';
import { SYSTEM_BUNDLE } from '../sandbox/egress-ca';
import type { DockerGate } from './gate-server';
import { send } from './gate-server';
import { boolParam, checkExecStart, checkQuery, intParam, matchParam, Refusal, type GatePolicy, type QueryParam } from './rules';

/** The oldest Engine API version served (Docker 20.10's): older ones read bodies and defaults differently. */
export const MIN_API_VERSION = [1, 41] as const;

/** A container the gate created for this deployment, with the uid it recorded for it. */
export interface Owned {
  id: string;
  name: string;
  labels: Record<string, string>;
  agentUid: number;
}

export interface RouteContext {
  gate: DockerGate;
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** `/v1.41` or '' (the engine's own version). */
  version: string;
  seg: string[];
  /** The checked query, rebuilt. */
  query: URLSearchParams;
  /** The query as the client sent it (a dockerode body may repeat it). */
  rawQuery: URLSearchParams;
  policy: GatePolicy;
}

interface Route {
  methods: string[];
  /** Path segments; `:id` matches one segment (a container, exec or directory name), `*` the rest. */
  path: string[];
  query: Record<string, QueryParam>;
  required?: string[];
  /** Served on an `Upgrade: tcp` connection (exec start) rather than plain HTTP. */
  upgrade?: boolean;
  /** The second path segment names a container or an exec that must be this deployment's (checked before the query). */
  owner?: 'container' | 'exec';
  /** Other query parameters are left to the handler, which accepts them only as a mirror of the body (dockerode's create). */
  queryMirrorsBody?: boolean;
  handle(ctx: RouteContext, own: Owned | undefined): Promise<void>;
}

const qs = (q: URLSearchParams) => (q.size ? `?${q.toString()}` : '');

/**
 * Paths of a sandbox an archive read may name: the workspace, the agent's home, /tmp, and the image's
 * system CA bundle (one public file, which the worker reads to add the operator's CA: egress-ca.ts).
 */
const ARCHIVE_ROOTS = [WORKSPACE_DIR, HOME_DIR, '/tmp'];
const archivePath: QueryParam = (v, n) => {
  if (v.length > 4096 || !v.startsWith('/') || v.includes('\0') || posix.normalize(v) !== v.replace(/(.)\/$/, '$1')) refuse(`${n} must be a normalised absolute path`);
  if (v === SYSTEM_BUNDLE) return v;
  const p = posix.normalize(v);
  if (!ARCHIVE_ROOTS.some((r) => p === r || p.startsWith(`${r}/`))) refuse(`${n} must lie under ${ARCHIVE_ROOTS.join(', ')}`);
  return v;
};

function refuse(detail: string): never {
  throw new Refusal('query', detail);
}

/** The query's filters with this deployment's labels forced on (and nothing else widened). */
export function forceFilters(raw: string | null, queue: string): string {
  let filters: Record<string, unknown> = {};
  if (raw) {
    try {
      const f = JSON.parse(raw) as unknown;
      if (typeof f === 'object' && f !== null && !Array.isArray(f)) filters = f as Record<string, unknown>;
    } catch {
      throw new Refusal('filters', 'filters must be JSON');
    }
  }
  for (const k of Object.keys(filters)) {
    if (!['label', 'type', 'status', 'name', 'id', 'event', 'container'].includes(k)) throw new Refusal('filters', `the filter ${JSON.stringify(k).slice(0, 40)} is not allowed`);
  }
  const labelsOf = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : typeof v === 'object' && v !== null ? Object.keys(v) : []);
  const labels = new Set([...labelsOf(filters.label), `${LABELS.corral}=1`, `${LABELS.queue}=${queue}`]);
  filters.label = [...labels];
  if (filters.type !== undefined) filters.type = ['container'];
  return JSON.stringify(filters);
}
const filtersParam = (queue: string): QueryParam => (v) => forceFilters(v, queue);


function routes(p: GatePolicy): Route[] {
  const filters = filtersParam(p.queue);
  return [
    { methods: ['GET', 'HEAD'], path: ['_ping'], query: {}, handle: (c) => c.gate.forward(c, `${c.version}/_ping`) },
    { methods: ['GET'], path: ['version'], query: {}, handle: (c) => c.gate.forward(c, `${c.version}/version`) },
    { methods: ['GET'], path: ['info'], query: {}, handle: (c) => c.gate.info(c) },
    { methods: ['GET'], path: ['corral-gate', 'health'], query: {}, handle: (c) => c.gate.health(c) },
    {
      methods: ['POST'], path: ['corral-gate', 'egress-dirs'], query: {},
      handle: async (c) => send(c.res, 201, { dir: await c.gate.egress.create() }),
    },
    {
      methods: ['DELETE'], path: ['corral-gate', 'egress-dirs', ':id'], query: {},
      handle: async (c) => {
        const ok = await c.gate.egress.remove(c.seg[2]!);
        send(c.res, ok ? 204 : 404, ok ? null : { message: `no egress directory ${c.seg[2]}` });
      },
    },
    {
      methods: ['GET'], path: ['images', '*', 'json'], query: {},
      handle: (c) => {
        const name = c.seg.slice(1, -1).join('/');
        if (!p.images.includes(name)) throw new Refusal('image-allowlist', `image inspect only of the sandbox images (got ${name})`);
        return c.gate.forward(c, `${c.version}/images/${name.split('/').map(encodeURIComponent).join('/')}/json`);
      },
    },
    // The name is checked with the body (create-rules.ts: the slot's name), so a body's attack is refused by its own rule.
    { methods: ['POST'], path: ['containers', 'create'], query: { name: matchParam(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/) }, queryMirrorsBody: true, handle: (c) => c.gate.create(c) },
    {
      methods: ['GET'], path: ['containers', 'json'], query: { all: boolParam, limit: intParam(-1, 100_000), size: boolParam, filters },
      handle: (c) => {
        const q = new URLSearchParams(c.query);
        q.set('filters', forceFilters(q.get('filters'), p.queue));
        return c.gate.list(c, `${c.version}/containers/json?${q.toString()}`);
      },
    },
    {
      methods: ['GET'], path: ['events'], query: { since: matchParam(/^\d{1,12}(\.\d{1,9})?$/), until: matchParam(/^\d{1,12}(\.\d{1,9})?$/), filters },
      handle: (c) => {
        const q = new URLSearchParams(c.query);
        q.set('filters', forceFilters(q.get('filters'), p.queue));
        return c.gate.forward(c, `${c.version}/events?${q.toString()}`);
      },
    },
    {
      methods: ['DELETE'], path: ['containers', ':id'], query: { force: boolParam, v: boolParam }, owner: 'container',
      handle: async (c, own) => {
        await c.gate.refuseBody(c.req, c.rawQuery);
        // v=1 always: the sandbox's anonymous workspace volume goes with it
        const q = new URLSearchParams(c.query);
        q.set('v', '1');
        const r = await c.gate.engineJson('DELETE', `${c.version}/containers/${own!.id}${qs(q)}`);
        // The lease and the egress directory go before the answer, so a client that saw the 204 sees them gone.
        if (r.status < 300 || r.status === 404) await c.gate.removed(own!);
        send(c.res, r.status, r.body);
      },
    },
    {
      methods: ['POST'], path: ['containers', ':id', 'start'], query: {}, owner: 'container',
      handle: async (c, own) => {
        // The engine mounts the egress directory now: it must still be the gate's real directory.
        const dir = own!.labels[LABELS.egressDir];
        if (dir) await c.gate.egress.check(dir);
        return c.gate.forward(c, `${c.version}/containers/${own!.id}/start`);
      },
    },
    {
      methods: ['POST'], path: ['containers', ':id', 'wait'], query: { condition: matchParam(/^(not-running|next-exit|removed)$/) }, owner: 'container',
      handle: (c, own) => c.gate.forward(c, `${c.version}/containers/${own!.id}/wait${qs(c.query)}`),
    },
    {
      methods: ['POST'], path: ['containers', ':id', 'kill'], query: { signal: matchParam(/^(SIG)?[A-Z0-9+-]{1,12}$|^\d{1,2}$/) }, owner: 'container',
      handle: (c, own) => c.gate.forward(c, `${c.version}/containers/${own!.id}/kill${qs(c.query)}`),
    },
    {
      methods: ['POST'], path: ['containers', ':id', 'stop'], query: { t: intParam(-1, 3600) }, owner: 'container',
      handle: (c, own) => c.gate.forward(c, `${c.version}/containers/${own!.id}/stop${qs(c.query)}`),
    },
    {
      methods: ['GET'], path: ['containers', ':id', 'json'], query: { size: boolParam }, owner: 'container',
      handle: (c, own) => c.gate.forward(c, `${c.version}/containers/${own!.id}/json${qs(c.query)}`),
    },
    {
      methods: ['GET', 'HEAD'], path: ['containers', ':id', 'archive'], query: { path: archivePath }, required: ['path'], owner: 'container',
      handle: (c, own) => c.gate.forward(c, `${c.version}/containers/${own!.id}/archive${qs(c.query)}`),
    },
    {
      // The effect guard's restore of protected files (issue 37): into /workspace only, a tar checked and packed anew (archive-put.ts).
      methods: ['PUT'], path: ['containers', ':id', 'archive'], query: { path: matchParam(/^\/workspace$/), noOverwriteDirNonDir: boolParam }, required: ['path'], owner: 'container',
      handle: (c, own) => c.gate.archivePut(c, own!),
    },
    { methods: ['POST'], path: ['containers', ':id', 'exec'], query: {}, owner: 'container', handle: (c, own) => c.gate.execCreate(c, own!) },
    {
      methods: ['GET'], path: ['exec', ':id', 'json'], query: {}, owner: 'exec',
      handle: (c) => c.gate.forward(c, `${c.version}/exec/${c.seg[1]}/json`),
    },
    {
      methods: ['POST'], path: ['exec', ':id', 'resize'], query: { h: intParam(0, 10_000), w: intParam(0, 10_000) }, owner: 'exec',
      handle: (c) => c.gate.forward(c, `${c.version}/exec/${c.seg[1]}/resize${qs(c.query)}`),
    },
    {
      // Without Upgrade (a detached start, or a client that lets the engine hijack the plain request).
      methods: ['POST'], path: ['exec', ':id', 'start'], query: {}, owner: 'exec',
      handle: async (c) => {
        const body = checkExecStart(await c.gate.readJson(c.req));
        return c.gate.forward(c, `${c.version}/exec/${c.seg[1]}/start`, body);
      },
    },
    { methods: ['POST'], path: ['exec', ':id', 'start'], query: {}, upgrade: true, owner: 'exec', handle: () => Promise.resolve() },
  ];
}

const ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

function matches(r: Route, seg: string[]): boolean {
  if (r.path.at(-1) === 'json' && r.path[1] === '*') return seg.length >= 3 && seg[0] === r.path[0] && seg.at(-1) === 'json';
  if (r.path.length !== seg.length) return false;
  return r.path.every((x, i) => (x === ':id' ? ID_RE.test(seg[i]!) : x === seg[i]));
}

const cache = new WeakMap<GatePolicy, Route[]>();

/** The route for a request; refuses what no route serves. */
export function matchRoute(method: string, seg: string[], o: { upgrade: boolean; policy: GatePolicy }): Route {
  const policy = o.policy;
  let table = cache.get(policy);
  if (!table) {
    table = routes(policy);
    cache.set(policy, table);
  }
  const route = table.find((r) => r.methods.includes(method) && !!r.upgrade === o.upgrade && matches(r, seg));
  if (!route) {
    throw new Refusal('endpoint-not-allowed', `${method} /${seg.join('/')}${o.upgrade ? ' (upgrade)' : ''} is not in the API subset corral uses`);
  }
  return route;
}

/**
 * Serves a request by its route: the container or exec it names must be this deployment's (that
 * check comes first), then the query is checked and rebuilt, then the route's handler runs.
 */
export async function serveRoute(route: Route, ctx: Omit<RouteContext, 'query'>, rawQuery: URLSearchParams): Promise<{ own: Owned | undefined; query: URLSearchParams }> {
  let own: Owned | undefined;
  if (route.owner === 'container') own = await ctx.gate.ownedContainer(ctx.seg[1]!);
  else if (route.owner === 'exec') await ctx.gate.ownedExec(ctx.seg[1]!);
  const query = checkQuery(rawQuery, route.query, route.required, { keepOthers: route.queryMirrorsBody === true });
  await route.handle({ ...ctx, query }, own);
  return { own, query };
}
