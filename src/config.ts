/**
 * The one configuration schema. Parsed once from the environment (main.ts / cli); everything else
 * receives the parsed Config. No other file reads process.env.
 */
import { z } from 'zod';
import { describeZodIssues, InvalidInputError } from './domain/errors';
import type { IsolationClass } from './domain/sandbox';
import { parseArtifactsUrl } from './artifacts/artifacts-url';
import { parseRedisUrl } from './domain/redis-url';
import { ROUTING_RULES, type RoutingRule } from './domain/run-spec';
import { NO_SITE, parseInternalHosts, parseNoProxy, parseUpstreamProxy, type EgressSite, type InternalHost } from './domain/egress-site';
import { readFileSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';

const int = (def: number) => z.coerce.number().int().positive().default(def);
const num = (def: number) => z.coerce.number().positive().default(def);
const bool = (def: boolean) =>
  z.enum(['true', 'false', '1', '0']).default(def ? 'true' : 'false').transform((v) => v === 'true' || v === '1');
const httpUrl = z.string().url().refine((u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL');
const otlpProtocol = z.enum(['http/protobuf', 'http/json', 'grpc']);
/** "key=value,key2=value2" (OTEL_*_HEADERS, OTEL_RESOURCE_ATTRIBUTES): values percent-decoded. */
const keyValues = z.string().transform((s, ctx) => {
  const out: Record<string, string> = {};
  for (const part of s.split(',')) {
    if (part.trim() === '') continue;
    const eq = part.indexOf('=');
    const key = eq > 0 ? part.slice(0, eq).trim() : '';
    if (!key) {
      ctx.addIssue({ code: 'custom', message: `"${part.trim().slice(0, 40)}" is not key=value` });
      return z.NEVER;
    }
    try {
      out[key] = decodeURIComponent(part.slice(eq + 1).trim());
    } catch {
      ctx.addIssue({ code: 'custom', message: `the value of ${key} is not percent-encoded text` });
      return z.NEVER;
    }
  }
  return out;
});

export const ConfigSchema = z.object({
  /**
   * Redis for the queue, run state and event streams: redis[s]://[USER:PASSWORD@]HOST[:PORT][/DB], or
   * Sentinel: redis[s]+sentinel://[USER:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER_NAME[?db=N&…]
   * (src/domain/redis-url.ts lists the options). Checked at start-up; never logged with its passwords.
   */
  REDIS_URL: z.string().default('redis://127.0.0.1:6379'),
  /**
   * The writes that matter — a run's record and job before the API answers 201, a worker's claim of a
   * run before it starts, a run's end — are confirmed by this many replicas (Redis WAIT) before corral
   * relies on them, so a failover cannot take back what corral said happened. Default: 1 with a
   * Sentinel REDIS_URL, 0 (no WAIT) with one Redis.
   */
  CORRAL_REDIS_DURABLE_REPLICAS: z.coerce.number().int().min(0).max(16).optional(),
  /** How long one WAIT for those replicas may take (ms); the API answers 503 when they do not confirm in time. */
  CORRAL_REDIS_DURABLE_TIMEOUT_MS: int(1000),
  /**
   * How long a worker keeps retrying a claim or an end that no replica confirmed (seconds; a failover
   * with no replica left lasts until one is back). Past it the worker goes on with the primary's word
   * and logs it.
   */
  CORRAL_REDIS_DURABLE_WAIT_S: int(60),
  /** The API's bound on one Redis command (ms): a primary that hangs (paused, partitioned) is a 503, not a hung request. */
  CORRAL_REDIS_COMMAND_TIMEOUT_MS: int(5000),
  /** BullMQ queue name. */
  CORRAL_QUEUE: z.string().regex(/^[A-Za-z0-9_-]+$/).default('runs'),
  /** Where run logs, reports and artifacts are written. */
  CORRAL_DATA_DIR: z.string().default('./data'),
  /**
   * Where run files and uploaded workspaces are kept: "local" (default: the data dir, one host) or
   * s3://BUCKET/PREFIX?endpoint=URL&region=NAME (any S3-compatible store; credentials from the AWS
   * environment, never here). See src/artifacts/artifacts-url.ts.
   */
  CORRAL_ARTIFACTS: z.string().optional(),
  /** The region an s3:// CORRAL_ARTIFACTS without region= uses (the AWS SDK's own variable; default us-east-1). */
  AWS_REGION: z.string().optional(),
  CORRAL_API_HOST: z.string().default('127.0.0.1'),
  CORRAL_API_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  /** Where `corral submit` / `corral approve` find the API; default: http://CORRAL_API_HOST:CORRAL_API_PORT. */
  CORRAL_API_URL: z.string().url().optional(),
  /** Bearer token the `corral` CLI sends to the API (`--token` overrides it); never logged. */
  CORRAL_API_TOKEN: z.string().optional(),
  /** API auth: "tenant=token,tenant2=token2"; with this and the file unset, auth is off (everything is tenant "default"). */
  CORRAL_API_TOKENS: z.string().optional(),
  /** API auth from a file: one tenant=token per line, # comments (merged with CORRAL_API_TOKENS). */
  CORRAL_API_TOKENS_FILE: z.string().optional(),
  /** Tenants whose tokens see every tenant's numbers in /metrics (comma-separated); others see their own. */
  CORRAL_OPERATOR_TENANTS: z.string().default('').transform((v, ctx) => {
    const names = v.split(',').map((n) => n.trim()).filter(Boolean);
    const bad = names.find((n) => !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/.test(n));
    if (bad !== undefined) ctx.addIssue({ code: 'custom', message: `"${bad}" is not a tenant name (letters, digits, _ . -; at most 64)` });
    return names;
  }),
  /** Largest request body the API reads (a workspace tar travels base64 in the body): larger is a 413. */
  CORRAL_API_MAX_BODY_BYTES: int(16 * 1024 * 1024),
  /** The longest a client may take to send a whole request, body included (a workspace upload trickled byte by byte holds a connection and a temporary file until then): past it the API answers 408 and closes the connection. */
  CORRAL_API_REQUEST_TIMEOUT_S: int(600),
  /** The longest a client may take to send a request's headers (a connection that never finishes them is closed with 408). */
  CORRAL_API_HEADERS_TIMEOUT_S: int(10),
  /**
   * A request body must keep arriving at this rate at least (bytes per second, measured over each
   * 10 s after the headers): a client that trickles is answered 408 and disconnected, whatever
   * CORRAL_API_REQUEST_TIMEOUT_S says.
   */
  CORRAL_API_MIN_BODY_BYTES_PER_S: int(16 * 1024),
  /** Live event streams (SSE) one tenant may hold open at once, over every API process; more is a 429. */
  CORRAL_TENANT_MAX_STREAMS: int(20),
  /** Live event streams the whole service holds at once (every tenant, every API process); more is a 429. */
  CORRAL_API_MAX_STREAMS: int(500),
  /** Workspace uploads (PUT /v1/workspaces) one tenant may have in flight at once; more is a 429. */
  CORRAL_TENANT_MAX_UPLOADS: int(4),
  /** Workspace uploads in flight on the whole service at once; more is a 429. */
  CORRAL_API_MAX_UPLOADS: int(32),
  /** Per tenant: upload bytes received in any hour (a leaky bucket; each upload counts at least 1 MiB); more is a 429 with retry-after. */
  CORRAL_TENANT_UPLOAD_MB_PER_HOUR: int(2048),
  /** Per tenant: bytes of uploaded workspaces kept at once (each counts at least 1 MiB, until it expires or is deleted); more is a 429 (413 when one upload alone is larger). */
  CORRAL_TENANT_UPLOAD_STORED_MB: int(2048),
  /** The whole service: bytes of uploaded workspaces kept at once, every tenant together. */
  CORRAL_API_UPLOAD_STORED_MB: int(20 * 1024),
  /**
   * Host names (comma-separated) the API answers to besides localhost, 127.0.0.1 and [::1]: any
   * other Host header is a 421 when auth is off (DNS rebinding), or whenever this list is set.
   */
  CORRAL_API_ALLOWED_HOSTS: z.string().default('').transform((s, ctx) => {
    const names = [...new Set(s.split(',').map((x) => x.trim().toLowerCase()).filter(Boolean))];
    const bad = names.find((n) => !/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*)$/.test(n));
    if (bad !== undefined) ctx.addIssue({ code: 'custom', message: `"${bad}" is not a host name (no port, no scheme)` });
    return names;
  }),
  /** With auth off the API listens on a loopback address only; true lets it listen elsewhere (anyone who reaches it can run tasks). */
  CORRAL_API_AUTH_OFF_ALLOW_REMOTE: bool(false),
  /** Bytes of request bodies (JSON: read whole before parsing) one API process buffers at once, and a quarter of it per tenant; more is a 429. */
  CORRAL_API_MAX_BUFFERED_MB: int(64),
  /** The API refuses new requests (503) while its V8 heap is above this share of its limit (percent), instead of dying. */
  CORRAL_API_HEAP_REFUSE_PERCENT: z.coerce.number().int().min(10).max(100).default(85),
  /** Per tenant: runs queued, running or awaiting approval at once; more is a 429. */
  CORRAL_TENANT_MAX_ACTIVE_RUNS: int(10),
  /** Per tenant: runs submitted in any 60 s; more is a 429 with retry-after. */
  CORRAL_TENANT_SUBMITS_PER_MIN: int(60),
  /** Per tenant: schedules at once; more is a 409. */
  CORRAL_TENANT_MAX_SCHEDULES: int(20),
  /** Two firings of one schedule are at least this far apart (a 6-field cron with seconds is allowed when this is below 60). */
  CORRAL_SCHEDULE_MIN_INTERVAL_S: int(60),
  /** How long an Idempotency-Key is remembered (seconds). */
  CORRAL_IDEMPOTENCY_TTL_S: int(24 * 3600),
  /** PUT /v1/workspaces (capped at CORRAL_MAX_WORKSPACE_MB of content): the most entries an uploaded tar may hold, and how long it is kept after its last PUT (seconds). */
  CORRAL_WORKSPACE_MAX_ENTRIES: int(100_000),
  CORRAL_WORKSPACE_TTL_S: int(24 * 3600),
  /**
   * How long a worker's host keeps a finished run's files (its directory under the data dir: tars,
   * logs, report); the run-files sweeper (hourly) removes them after this, or once the run store has
   * forgotten the run (14 days), whichever is first. With an object store, also the run's objects.
   */
  CORRAL_RUN_FILES_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(14),
  /** Runs one worker executes at once (= sandbox slots on this host). */
  CORRAL_CONCURRENCY: int(2),
  /** Identifies this worker in container labels and logs; default: hostname-pid. */
  CORRAL_WORKER_ID: z.string().optional(),
  /**
   * A name for this instance of corral, put on every container it creates (label corral.instance), so
   * what one instance made can be found and removed without touching another's: .ci/run gives each CI
   * run its own and removes only those containers. Unset (or empty): no such label.
   */
  CORRAL_INSTANCE: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'letters, digits, _ . - (at most 63, starting with a letter or digit)').optional()
    .or(z.literal('').transform(() => undefined)),

  /** LLM: any OpenAI-compatible endpoint. Without a key the CLI demo replays a recorded transcript. */
  OPENAI_API_KEY: z.string().optional(),
  OPENAI_BASE_URL: z.string().url().optional(),
  CORRAL_MODEL: z.string().default('gpt-4.1-mini'),
  /** Path of a recorded transcript (examples/*.replay.json): every run replays it instead of calling a model. */
  CORRAL_REPLAY: z.string().optional(),
  /** Model for the risk classifier; defaults to CORRAL_MODEL. */
  CORRAL_CLASSIFIER_MODEL: z.string().optional(),
  CORRAL_MODEL_TIMEOUT_MS: int(120_000),
  /** Ask the model for streamed answers (openai `stream: true`): their text goes out live as model.delta on the run's event stream. */
  CORRAL_MODEL_STREAM: bool(true),
  /** Per run: live deltas published at most (the Redis event stream keeps room for them beside the events). */
  CORRAL_STREAM_MAX_DELTAS: int(2000),
  /**
   * Model routing for runs that name neither `model` nor `routing`: each turn goes to the strong or
   * the cheap model (both, or neither, must be set) by the rules in CORRAL_ROUTING_STRONG_ON.
   */
  CORRAL_ROUTING_STRONG_MODEL: z.string().min(1).max(200).optional(),
  CORRAL_ROUTING_CHEAP_MODEL: z.string().min(1).max(200).optional(),
  /** Comma-separated routing rules that send a turn to the strong model (domain/run-spec.ts ROUTING_RULES). */
  CORRAL_ROUTING_STRONG_ON: z
    .string()
    .optional()
    .transform((s, ctx) => {
      if (s === undefined) return undefined;
      const list = [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))];
      const bad = list.filter((x) => !(ROUTING_RULES as readonly string[]).includes(x));
      if (bad.length) {
        ctx.addIssue({ code: 'custom', message: `unknown rule(s) ${bad.join(', ')} (known: ${ROUTING_RULES.join(', ')})` });
        return z.NEVER;
      }
      return list as RoutingRule[];
    }),
  /** Sub-runs (the delegate tool): how deep a tree may go (a top-level run is depth 0; 0 turns delegation off) … */
  CORRAL_SUBRUN_MAX_DEPTH: z.coerce.number().int().min(0).max(8).default(2),
  /** … how many sub-runs one run may start over its whole life … */
  CORRAL_SUBRUN_MAX_CHILDREN: z.coerce.number().int().min(1).max(64).default(4),
  /** … and how many bytes of a sub-run's patch its result sheet carries back. */
  CORRAL_SUBRUN_PATCH_MAX_BYTES: int(64 * 1024),
  /** USD per million tokens, for the cost budget. */
  CORRAL_PRICE_INPUT_PER_MTOK: num(0.4),
  CORRAL_PRICE_OUTPUT_PER_MTOK: num(1.6),
  /** Per-model prices (USD per million tokens), JSON: {"gpt-4.1":{"input":2,"output":8}}; other models use the two above. */
  CORRAL_MODEL_PRICES: z
    .string()
    .default('{}')
    .transform((s, ctx) => {
      try {
        return JSON.parse(s) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
        return z.NEVER;
      }
    })
    .pipe(z.record(z.string(), z.object({ input: z.number().min(0), output: z.number().min(0) }).strict())),

  /**
   * web_search: a search service the operator configures, called by the worker (never from the
   * sandbox, so its key never enters one): `searxng` (GET URL/search?format=json), `brave` (the Brave
   * Search API's web endpoint, key in X-Subscription-Token) or `json` (POST {query, count} to URL,
   * answer {results:[{title,url,snippet}]}, key as a bearer token). Unset: the tool is not offered.
   */
  CORRAL_WEB_SEARCH: z.enum(['searxng', 'brave', 'json']).optional(),
  CORRAL_WEB_SEARCH_URL: z.string().url().refine((u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol), 'must be an http(s) URL').refine((u) => !URL.canParse(u) || (!new URL(u).username && !new URL(u).password), 'must not carry a user name or password (use CORRAL_WEB_SEARCH_KEY)').optional(),
  /** The search service's key; sent only to CORRAL_WEB_SEARCH_URL, never logged. */
  CORRAL_WEB_SEARCH_KEY: z.string().min(1).optional(),
  /** One search's time limit. */
  CORRAL_WEB_SEARCH_TIMEOUT_MS: int(10_000),

  /** Sandbox. */
  DOCKER_HOST: z.string().optional(),
  CORRAL_SANDBOX_IMAGE: z.string().default('corral/sandbox:latest'),
  /**
   * Git workspaces (workspace.git): the remotes a run may clone from, as URL prefixes
   * (comma-separated, e.g. "https://github.com/acme/,ssh://git@git.example.com/"); none: git
   * workspaces are refused. The worker clones; the sandbox never sees a credential.
   */
  CORRAL_GIT_REMOTES: z.string().default('').transform((s) => [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))]),
  /** Per-tenant git credentials (a JSON file: tenant → [{url, username, password} | {url, sshKeyFile, knownHostsFile}]). */
  CORRAL_GIT_CREDENTIALS_FILE: z.string().optional(),
  /** The CA certificates (PEM) git trusts for https remotes, in place of the system's: for a git server with a private CA. */
  CORRAL_GIT_CA_FILE: z.string().optional(),
  /** A clone's whole time (seconds). */
  CORRAL_GIT_TIMEOUT_S: int(300),
  /**
   * A worker writes its health here (JSON: the /readyz checks, every CORRAL_HEALTH_INTERVAL_S) for a
   * container health check; unset: no file. compose.yaml sets it for the workers.
   */
  CORRAL_HEALTH_FILE: z.string().min(1).optional(),
  CORRAL_HEALTH_INTERVAL_S: z.coerce.number().int().min(1).max(3600).default(5),
  /**
   * The agent's git identity in every sandbox process (GIT_AUTHOR_* and GIT_COMMITTER_*), so a run
   * commits without touching .git/config. `{run}` and `{tenant}` are replaced by the run's id and tenant.
   */
  CORRAL_GIT_AUTHOR_NAME: z.string().min(1).max(200).regex(/^[^<>\n\r\0]+$/, 'must be a plain name (no <, >, line breaks)').default('corral-agent'),
  CORRAL_GIT_AUTHOR_EMAIL: z.string().min(3).max(200).regex(/^[^<>\s\0]+@[^<>\s\0]+$/, 'must look like an e-mail address (user@host; {run} and {tenant} are replaced)').default('{run}@corral.invalid'),
  /** Further images environments may name (comma-separated); the docker gate lets the worker create containers of these only. */
  CORRAL_SANDBOX_IMAGES: z
    .string()
    .default('corral/sandbox-node:latest,corral/sandbox-python:latest')
    .transform((s) => [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))]),
  /** Disk kept for cached setup results (environments with `cache`), per worker host; least recently used go first. */
  CORRAL_SETUP_CACHE_MB: z.coerce.number().int().min(0).default(2048),
  /**
   * The isolation class of runs that do not ask for one (limits.isolation): `runc` (namespaces and
   * corral's seccomp profile on the host kernel), `gvisor` (gVisor's runsc: a user-space kernel between
   * the sandbox and the host's; `runsc` is accepted for it), or `auto`: gvisor when the engine has the
   * gVisor runtime registered, else runc. The default is runc: see the README's security section for
   * what Debian's runsc release breaks (ls, stat) and costs.
   */
  CORRAL_SANDBOX_RUNTIME: z
    .enum(['auto', 'runc', 'gvisor', 'runsc'])
    .default('runc')
    .transform((v) => (v === 'runsc' ? 'gvisor' : v)),
  /** Isolation classes a run may ask for (comma-separated); asking for another is a 400 naming limits.isolation. */
  CORRAL_ISOLATION_CLASSES: z
    .string()
    .default('runc,gvisor')
    .transform((s, ctx) => {
      const list = [...new Set(s.split(',').map((x) => x.trim()).filter(Boolean))];
      const bad = list.filter((x) => x !== 'runc' && x !== 'gvisor');
      if (list.length === 0 || bad.length > 0) {
        ctx.addIssue({ code: 'custom', message: `must list runc and/or gvisor, comma-separated${bad.length ? ` (unknown: ${bad.join(', ')})` : ''}` });
        return z.NEVER;
      }
      return list as IsolationClass[];
    }),
  /** The engine's runtime name for gVisor (its key under "runtimes" in /etc/docker/daemon.json). */
  CORRAL_GVISOR_RUNTIME: z.string().regex(/^[A-Za-z0-9._-]+$/).default('runsc'),
  /**
   * Every concurrent sandbox on a host runs as uids of its own: slot n has its PID 1 as uid
   * BASE+2n and the agent as BASE+2n+1 (n < CORRAL_SANDBOX_SLOTS). The slot is leased by the
   * container's name on its engine and by a lease in CORRAL_HOST_LEASE_DIR on its host, so every
   * worker and engine of a host shares the range safely. Pick a range no host user or subordinate-uid
   * range uses; the sandbox image names these uids (sandbox.Dockerfile).
   */
  CORRAL_SANDBOX_UID_BASE: z.coerce.number().int().min(1000).max(2 ** 31 - 2 ** 20).default(2_000_000),
  CORRAL_SANDBOX_SLOTS: z.coerce.number().int().min(1).max(65_536).default(500),
  /**
   * Parent of the per-run egress socket directories (bind-mounted into sandboxes, so it must be an
   * absolute path the Docker daemon sees: a worker in a container mounts it at the same path as on
   * the host); default: $TMPDIR/corral-egress.
   */
  CORRAL_EGRESS_DIR: z.string().startsWith('/', 'must be an absolute path').optional(),
  /**
   * The host's uid-slot leases (src/sandbox/host-leases.ts): one directory for every deployment, engine
   * and docker gate of a host, writable only by whoever allocates slots (the gate, or a worker holding
   * the engine itself); default: $TMPDIR/corral-leases.
   */
  CORRAL_HOST_LEASE_DIR: z.string().startsWith('/', 'must be an absolute path').optional(),
  /** false: allowlist entries with a wildcard (`*.suffix`) are refused at submit and by the worker. */
  CORRAL_EGRESS_WILDCARDS: bool(true),
  /** Per run, through its egress proxy: connections open at once (each is 2 of the proxy's file descriptors). */
  CORRAL_EGRESS_MAX_CONNECTIONS: int(256),
  /** Per run: new connections per second (sustained; bursts up to 4× that). */
  CORRAL_EGRESS_CONNECTIONS_PER_S: int(50),
  /** Per run: plain-HTTP requests per second (bursts up to 4× that). */
  CORRAL_EGRESS_REQUESTS_PER_S: int(100),
  /** Per run: bytes from the sandbox to upstreams, and from upstreams to the sandbox. */
  CORRAL_EGRESS_MAX_BYTES_OUT: int(1024 * 1024 * 1024),
  CORRAL_EGRESS_MAX_BYTES_IN: int(4 * 1024 * 1024 * 1024),
  /** Per run, under wildcard entries: name resolutions per second (bursts up to 4× that) … */
  CORRAL_EGRESS_WILDCARD_RESOLVES_PER_S: int(5),
  /** … and distinct names resolved in all (more is refused; the count is in the report). */
  CORRAL_EGRESS_WILDCARD_MAX_NAMES: int(200),
  /** A tunnel or request with no bytes either way for this long is closed; a request's headers must arrive within a tenth of it (at most 10 s). */
  CORRAL_EGRESS_IDLE_TIMEOUT_S: int(300),
  /** The egress proxy process (one per run with an allowlist): V8 heap cap in MB. */
  CORRAL_EGRESS_PROXY_HEAP_MB: int(64),
  /** uid:gid the proxy process runs as when the worker runs as root (another uid cannot switch). */
  CORRAL_EGRESS_PROXY_USER: z.string().regex(/^\d+:\d+$/, 'must be uid:gid, e.g. 65534:65534').refine((s) => !s.startsWith('0:') && !s.endsWith(':0'), 'must not be root (uid or gid 0)').default('65534:65534'),
  /**
   * An HTTP proxy every run's egress proxy chains allowed connections through (a site whose way out is
   * an egress gateway): http://[user:pass@]host:port. CONNECT for HTTPS, absolute-form requests for
   * plain HTTP, with Proxy-Authorization when credentials are given. The credentials stay in the
   * worker and the proxy process; never in a sandbox, an event or a log line.
   */
  CORRAL_EGRESS_UPSTREAM_PROXY: z.string().optional().superRefine((v, ctx) => {
    if (v === undefined || v === '') return;
    const r = parseUpstreamProxy(v);
    if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: r });
  }),
  /** With an upstream proxy: the connections that go direct instead (curl's NO_PROXY syntax: names, .suffixes, *, CIDRs). */
  CORRAL_EGRESS_NO_PROXY: z.string().default('').superRefine((v, ctx) => {
    const r = parseNoProxy(v);
    if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: r });
  }),
  /**
   * Internal hosts by name: `registry.corp=10.1.2.0/24,mirror.corp=10.9.9.9`. Only these names may
   * resolve to private or special-purpose addresses, and only into the ranges given; a run still needs
   * the name on its allowlist. The file holds the same entries, one or more a line, `#` comments.
   */
  CORRAL_EGRESS_INTERNAL_HOSTS: z.string().default('').superRefine((v, ctx) => {
    const r = parseInternalHosts(v);
    if (typeof r === 'string') ctx.addIssue({ code: 'custom', message: r });
  }),
  CORRAL_EGRESS_INTERNAL_HOSTS_FILE: z.string().optional(),
  /**
   * A PEM bundle of the site's CA certificates (a TLS-intercepting proxy, an internal registry's CA):
   * added to every sandbox's trust stores (the system bundle, NODE_EXTRA_CA_CERTS, SSL_CERT_FILE,
   * REQUESTS_CA_BUNDLE, PIP_CERT, GIT_SSL_CAINFO, CURL_CA_BUNDLE), read-only for the agent.
   */
  CORRAL_EGRESS_CA_FILE: z.string().optional(),
  /** Per run: events kept in the JSONL log, the Redis stream and the report; past either cap a `log.truncated` marker, then only the run's end. */
  CORRAL_LOG_MAX_EVENTS: int(20_000),
  CORRAL_LOG_MAX_BYTES: int(16 * 1024 * 1024),
  CORRAL_DEFAULT_MEMORY_MB: int(512),
  CORRAL_MAX_MEMORY_MB: int(4096),
  CORRAL_DEFAULT_CPUS: num(1),
  CORRAL_MAX_CPUS: num(2),
  CORRAL_DEFAULT_PIDS: int(256),
  CORRAL_MAX_PIDS: int(1024),
  CORRAL_DEFAULT_WORKSPACE_MB: int(256),
  CORRAL_MAX_WORKSPACE_MB: int(512),
  CORRAL_DEFAULT_EXEC_TIMEOUT_S: int(120),
  CORRAL_MAX_EXEC_TIMEOUT_S: int(1800),
  /** The most a run may ask for in its budgets; more is refused (400), never lowered. */
  CORRAL_MAX_BUDGET_LLM_CALLS: int(200),
  CORRAL_MAX_BUDGET_TOOL_CALLS: int(1000),
  CORRAL_MAX_BUDGET_TOKENS: int(20_000_000),
  CORRAL_MAX_BUDGET_WALL_S: int(7200),
  CORRAL_MAX_BUDGET_COST_USD: num(20),
  /**
   * Workspace export (workspace.tar and workspace.patch): a file whose apparent size (sparse files
   * count in full) is over the per-file cap is left out and listed; so are files once the total
   * (at most the run's workspace size) is reached, and entries past the entry cap.
   */
  CORRAL_EXPORT_MAX_FILE_MB: int(256),
  CORRAL_EXPORT_MAX_TOTAL_MB: int(2048),
  CORRAL_EXPORT_MAX_ENTRIES: int(100_000),
  /** The whole export's deadline inside the sandbox. */
  CORRAL_EXPORT_TIMEOUT_S: int(300),
  /** Bytes of each stream a tool result keeps (head + tail). */
  CORRAL_MAX_OUTPUT_BYTES: int(16_384),
  /**
   * The effect check after every tool call (run/effect-guard.ts): the protected files are read
   * through the engine and compared. A workspace up to CORRAL_EFFECT_FULL_MB and
   * CORRAL_EFFECT_FULL_ENTRIES is read whole each time; a larger one only at the protected set's
   * root-level names and git's directory.
   */
  CORRAL_EFFECT_CHECK: bool(true),
  CORRAL_EFFECT_FULL_MB: int(64),
  CORRAL_EFFECT_FULL_ENTRIES: int(10_000),
  /**
   * MCP servers (environments' `mcp`; src/mcp/): the largest message a server may send, the most it
   * may write in all (stdout and stderr) before it is stopped, the tools taken from one server, the
   * characters of a tool description and the size of an input schema kept, and the size of the
   * arguments corral sends.
   */
  CORRAL_MCP_MAX_MESSAGE_KB: int(4096),
  CORRAL_MCP_MAX_TOTAL_MB: int(64),
  CORRAL_MCP_MAX_TOOLS: int(64),
  CORRAL_MCP_MAX_DESCRIPTION_CHARS: int(1024),
  CORRAL_MCP_MAX_SCHEMA_KB: int(32),
  CORRAL_MCP_MAX_ARGS_KB: int(64),
  /** Compact a run's conversation (the model summarises its middle) when it passes this many estimated tokens. */
  CORRAL_COMPACT_AT_TOKENS: int(60_000),
  /**
   * A worker's lock on a running job; a job whose lock lapses (its worker died) is stalled. BullMQ
   * renews it every quarter to half of this, so a Redis outage or failover of up to half of it costs
   * no run: keep it above twice the longest failover (README "Redis that fails over").
   */
  CORRAL_JOB_LOCK_MS: int(30_000),
  /** A run whose worker finds the Docker engine down waits and is tried again this many times (backoff doubling)… */
  CORRAL_DOCKER_RETRIES: z.coerce.number().int().min(0).default(6),
  /** …starting from this delay. */
  CORRAL_DOCKER_BACKOFF_MS: int(2000),
  /** How often workers look for stalled jobs (a worker that died holding a run). */
  CORRAL_STALLED_INTERVAL_MS: int(30_000),
  /** true: a run whose worker died is started again once, from a clean workspace; false: it fails as stalled. */
  CORRAL_RETRY_STALLED: bool(false),
  /**
   * `corral serve` runs the API and the worker as two child processes under a supervisor (a crash or
   * an exhausted heap of one leaves the other running; each is started again); false: one process.
   */
  CORRAL_SERVE_SPLIT: bool(true),
  /**
   * The V8 heap cap (MB) of a corral process: bin/corral starts Node with it, and `corral serve` starts
   * each of its two roles with it. Bounds a worker's memory (an uncapped heap grows toward the host's).
   */
  CORRAL_NODE_HEAP_MB: z.coerce.number().int().min(64).max(65_536).default(192),
  /** `corral docker-gate`: the socket it serves on, unix:///PATH (its --listen overrides this). */
  CORRAL_DOCKER_GATE_LISTEN: z.string().regex(/^unix:\/\/\/./, 'must be unix:///PATH/gate.sock').optional(),
  /** `corral docker-gate`: the file holding its ownership key (its --key-file overrides this); none: a fresh key. */
  CORRAL_DOCKER_GATE_KEY_FILE: z.string().min(1).optional(),
  /** On SIGTERM, how long running runs may take to finish before they are cancelled (reason "shutdown"). */
  CORRAL_SHUTDOWN_GRACE_S: z.coerce.number().int().min(0).default(30),
  /** Started sandboxes each worker keeps ready for runs of the default class (default limits, no network); 0 = off. */
  CORRAL_WARM_POOL: z.coerce.number().int().min(0).max(64).default(0),
  /** A pooled sandbox's lifetime; a run takes one only if that leaves it the run's whole wall time. */
  CORRAL_WARM_POOL_TTL_S: int(3600),
  /** Seconds between reaper sweeps. */
  CORRAL_REAP_INTERVAL_S: int(60),
  /** The reaper leaves containers younger than this alone (unless past their deadline): they may be starting. */
  CORRAL_REAP_GRACE_S: z.coerce.number().int().min(0).default(30),

  /** Policy. */
  CORRAL_POLICY_DIR: z.string().default('./policies'),
  /** Run templates (NAME.md with front matter and {{param}} placeholders); a missing directory is an empty library. */
  CORRAL_TEMPLATES_DIR: z.string().default('./templates'),
  /** The environment catalogue (NAME.yaml); `default` exists without a file. */
  CORRAL_ENVIRONMENT_DIR: z.string().default('./environments'),
  /**
   * The gate's static analyser runs in this many worker threads (off the worker's event loop); a call
   * whose analysis takes longer than the timeout, or more heap than the cap, is not analysed (`ask`)
   * and its thread is replaced.
   */
  CORRAL_POLICY_THREADS: z.coerce.number().int().min(1).max(16).default(2),
  CORRAL_POLICY_ANALYSIS_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
  CORRAL_POLICY_ANALYSIS_HEAP_MB: z.coerce.number().int().min(16).max(1024).default(96),
  CORRAL_CLASSIFIER: bool(true),
  CORRAL_CLASSIFIER_TIMEOUT_MS: int(20_000),
  CORRAL_RISK_DENY_AT: z.coerce.number().min(0).max(3).default(2.5),
  CORRAL_RISK_ALLOW_BELOW: z.coerce.number().min(0).max(3).default(1),
  CORRAL_AUTHORIZED_ALLOW_AT: z.coerce.number().min(0).max(1).default(0.5),
  /** How long an approval may wait before it counts as a deny. */
  CORRAL_APPROVAL_TIMEOUT_S: int(900),
  /**
   * Runs of one tenant that may wait for a human at once (parked: their sandbox kept, their worker
   * slot given to other runs); past it a call that needs approval is refused with the reason.
   */
  CORRAL_MAX_PARKED_PER_TENANT: int(4),

  /**
   * Traces (OpenTelemetry, OTLP over HTTP), configured by the standard OTEL_* variables and read
   * here only (tracingSettings below). Off unless an endpoint is set.
   */
  OTEL_SDK_DISABLED: bool(false),
  /** `otlp` (the default) or `none`; no other exporter is built in. */
  OTEL_TRACES_EXPORTER: z.string().default('otlp').transform((s, ctx) => {
    const list = s.split(',').map((x) => x.trim()).filter(Boolean);
    const bad = list.filter((x) => x !== 'otlp' && x !== 'none');
    if (bad.length) ctx.addIssue({ code: 'custom', message: `unsupported exporter(s) ${bad.join(', ')}: corral exports traces with otlp (or none)` });
    return list.includes('otlp') ? 'otlp' as const : 'none' as const;
  }),
  /** The collector's base URL: traces go to ENDPOINT/v1/traces. */
  OTEL_EXPORTER_OTLP_ENDPOINT: httpUrl.optional(),
  /** The traces URL as is (wins over OTEL_EXPORTER_OTLP_ENDPOINT). */
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: httpUrl.optional(),
  OTEL_EXPORTER_OTLP_PROTOCOL: otlpProtocol.optional(),
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: otlpProtocol.optional(),
  /** Headers sent with every export ("key=value,key2=value2", values percent-encoded): often a collector's credential, never logged. */
  OTEL_EXPORTER_OTLP_HEADERS: keyValues.optional(),
  OTEL_EXPORTER_OTLP_TRACES_HEADERS: keyValues.optional(),
  /** One export's time limit (ms). */
  OTEL_EXPORTER_OTLP_TIMEOUT: z.coerce.number().int().positive().optional(),
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: z.coerce.number().int().positive().optional(),
  OTEL_EXPORTER_OTLP_COMPRESSION: z.enum(['gzip', 'none']).optional(),
  OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: z.enum(['gzip', 'none']).optional(),
  OTEL_SERVICE_NAME: z.string().min(1).max(200).default('corral'),
  /** Resource attributes ("key=value,…") on every span of this process (deployment.environment=prod …). */
  OTEL_RESOURCE_ATTRIBUTES: keyValues.optional(),
  OTEL_TRACES_SAMPLER: z.enum(['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio']).default('parentbased_always_on'),
  /** The ratio of the *traceidratio samplers, 0..1 (default 1). */
  OTEL_TRACES_SAMPLER_ARG: z.coerce.number().min(0).max(1).optional(),
  /**
   * The export queue: spans wait at most OTEL_BSP_MAX_QUEUE_SIZE in memory (more are dropped and
   * counted in /metrics, corral_trace_spans_dropped_total), go out in batches of at most
   * OTEL_BSP_MAX_EXPORT_BATCH_SIZE every OTEL_BSP_SCHEDULE_DELAY ms, each export bounded by
   * OTEL_BSP_EXPORT_TIMEOUT ms. A collector that is down or slow never holds a run.
   */
  OTEL_BSP_MAX_QUEUE_SIZE: int(2048),
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: int(512),
  OTEL_BSP_SCHEDULE_DELAY: int(5000),
  OTEL_BSP_EXPORT_TIMEOUT: int(30_000),
  /** A link to a run's trace in the operator's viewer: {traceId} is replaced (https://jaeger.example/trace/{traceId}). */
  CORRAL_TRACE_URL_TEMPLATE: z.string().max(2000)
    .refine((t) => t.includes('{traceId}'), 'must contain {traceId}')
    .refine((t) => /^https?:\/\//.test(t) && URL.canParse(t.replaceAll('{traceId}', '0'.repeat(32))), 'must be an http(s) URL with {traceId} in it')
    .optional(),
  /** true: the run's span carries the task text (corral.task, cut to 4 KiB); off by default (task text can hold anything). */
  CORRAL_TRACE_TASK_TEXT: bool(false),

  /**
   * Tamper-evident logs: each run log's final hash is signed with this Ed25519 private key (PEM,
   * PKCS#8: openssl genpkey -algorithm ed25519); checked when the worker starts. Unset: unsigned.
   */
  CORRAL_LOG_SIGNING_KEY_FILE: z.string().min(1).optional(),
  /** The public key (PEM) GET /v1/runs/:id/verify checks signatures with; default: the signing key's public half, when this process has it. */
  CORRAL_LOG_VERIFY_KEY_FILE: z.string().min(1).optional(),
});

export type Config = z.infer<typeof ConfigSchema>;

/** What the tracer of a process needs, from the OTEL_* variables; null when traces are off. */
export interface TracingSettings {
  /** The full URL spans are POSTed to. */
  url: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  timeoutMs: number;
  compression: 'gzip' | 'none';
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: { kind: Config['OTEL_TRACES_SAMPLER']; ratio: number };
  queue: { maxQueueSize: number; maxExportBatchSize: number; scheduledDelayMillis: number; exportTimeoutMillis: number };
  taskText: boolean;
  urlTemplate?: string;
}

export function tracingSettings(c: Config): TracingSettings | null {
  if (c.OTEL_SDK_DISABLED || c.OTEL_TRACES_EXPORTER === 'none') return null;
  const url = c.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? (c.OTEL_EXPORTER_OTLP_ENDPOINT ? `${c.OTEL_EXPORTER_OTLP_ENDPOINT.replace(/\/+$/, '')}/v1/traces` : undefined);
  if (!url) return null;
  const protocol = c.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? c.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf';
  return {
    url, protocol: protocol === 'grpc' ? 'http/protobuf' : protocol,
    headers: { ...c.OTEL_EXPORTER_OTLP_HEADERS, ...c.OTEL_EXPORTER_OTLP_TRACES_HEADERS },
    timeoutMs: c.OTEL_EXPORTER_OTLP_TRACES_TIMEOUT ?? c.OTEL_EXPORTER_OTLP_TIMEOUT ?? 10_000,
    compression: c.OTEL_EXPORTER_OTLP_TRACES_COMPRESSION ?? c.OTEL_EXPORTER_OTLP_COMPRESSION ?? 'none',
    serviceName: c.OTEL_SERVICE_NAME,
    resourceAttributes: c.OTEL_RESOURCE_ATTRIBUTES ?? {},
    sampler: { kind: c.OTEL_TRACES_SAMPLER, ratio: c.OTEL_TRACES_SAMPLER_ARG ?? 1 },
    queue: {
      maxQueueSize: c.OTEL_BSP_MAX_QUEUE_SIZE, maxExportBatchSize: Math.min(c.OTEL_BSP_MAX_EXPORT_BATCH_SIZE, c.OTEL_BSP_MAX_QUEUE_SIZE),
      scheduledDelayMillis: c.OTEL_BSP_SCHEDULE_DELAY, exportTimeoutMillis: c.OTEL_BSP_EXPORT_TIMEOUT,
    },
    taskText: c.CORRAL_TRACE_TASK_TEXT,
    ...(c.CORRAL_TRACE_URL_TEMPLATE ? { urlTemplate: c.CORRAL_TRACE_URL_TEMPLATE } : {}),
  };
}

/** After the grace period, how long cancelled runs have to clean up (sandbox removal, records). */
export const SHUTDOWN_CLEANUP_MS = 10_000;
/** The longest a stop takes, whatever Redis and Docker do: the grace period, the clean-up, the other steps. */
export const shutdownBudgetMs = (config: Pick<Config, 'CORRAL_SHUTDOWN_GRACE_S'>): number => config.CORRAL_SHUTDOWN_GRACE_S * 1000 + SHUTDOWN_CLEANUP_MS + 5000;

/**
 * The environment a child process of corral starts with: this process's own, with `overrides` (a role
 * under `corral serve`, the service under `corral demo`). The one other place process.env is read.
 */
export function childEnvironment(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return { ...process.env, ...overrides };
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const r = ConfigSchema.safeParse(env);
  if (!r.success) {
    const { message, field } = describeZodIssues(r.error.issues);
    throw new InvalidInputError(`configuration: ${message}`, field);
  }
  const c = r.data;
  if ((c.CORRAL_ROUTING_STRONG_MODEL === undefined) !== (c.CORRAL_ROUTING_CHEAP_MODEL === undefined)) {
    throw new InvalidInputError('configuration: CORRAL_ROUTING_STRONG_MODEL and CORRAL_ROUTING_CHEAP_MODEL go together: set both (model routing) or neither', 'CORRAL_ROUTING_STRONG_MODEL');
  }
  if (c.CORRAL_ROUTING_STRONG_MODEL !== undefined && c.CORRAL_ROUTING_STRONG_MODEL === c.CORRAL_ROUTING_CHEAP_MODEL) {
    throw new InvalidInputError('configuration: CORRAL_ROUTING_CHEAP_MODEL must differ from CORRAL_ROUTING_STRONG_MODEL', 'CORRAL_ROUTING_CHEAP_MODEL');
  }
  parseArtifactsUrl(c.CORRAL_ARTIFACTS); // a bad store URL stops start-up, saying what is wrong
  for (const k of ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', 'OTEL_EXPORTER_OTLP_PROTOCOL'] as const) {
    if (c[k] === 'grpc' && (k === 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' || c.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL === undefined)) {
      throw new InvalidInputError(`configuration: ${k}=grpc: corral exports traces over OTLP/HTTP only; use http/protobuf (the default) or http/json, and the collector's HTTP port (4318)`, k);
    }
  }
  try {
    parseRedisUrl(c.REDIS_URL);
  } catch (err) {
    throw new InvalidInputError(`configuration: ${(err as Error).message}`, 'REDIS_URL');
  }
  if (c.CORRAL_REDIS_DURABLE_TIMEOUT_MS >= c.CORRAL_REDIS_COMMAND_TIMEOUT_MS) {
    throw new InvalidInputError(`configuration: CORRAL_REDIS_DURABLE_TIMEOUT_MS (${c.CORRAL_REDIS_DURABLE_TIMEOUT_MS}) must be below CORRAL_REDIS_COMMAND_TIMEOUT_MS (${c.CORRAL_REDIS_COMMAND_TIMEOUT_MS}): the API's WAIT would time out as a command first`, 'CORRAL_REDIS_DURABLE_TIMEOUT_MS');
  }
  if ((c.CORRAL_WEB_SEARCH === undefined) !== (c.CORRAL_WEB_SEARCH_URL === undefined)) {
    throw new InvalidInputError('configuration: CORRAL_WEB_SEARCH and CORRAL_WEB_SEARCH_URL go together: set both (web_search) or neither', 'CORRAL_WEB_SEARCH');
  }
  if (c.CORRAL_WEB_SEARCH === 'brave' && c.CORRAL_WEB_SEARCH_KEY === undefined) {
    throw new InvalidInputError('configuration: CORRAL_WEB_SEARCH=brave needs CORRAL_WEB_SEARCH_KEY (the API\'s subscription token)', 'CORRAL_WEB_SEARCH_KEY');
  }
  if (c.CORRAL_SANDBOX_RUNTIME !== 'auto' && !c.CORRAL_ISOLATION_CLASSES.includes(c.CORRAL_SANDBOX_RUNTIME)) {
    throw new InvalidInputError(
      `configuration: CORRAL_SANDBOX_RUNTIME: the default class "${c.CORRAL_SANDBOX_RUNTIME}" is not in CORRAL_ISOLATION_CLASSES (${c.CORRAL_ISOLATION_CLASSES.join(',')})`,
      'CORRAL_SANDBOX_RUNTIME',
    );
  }
  egressSiteOf(c); // a bad upstream, internal-hosts file or CA bundle stops start-up, saying what is wrong
  return c;
}

/** The operator's egress site settings, with the CA bundle, read and checked (files are read here). */
export interface EgressSiteConfig extends EgressSite {
  /** The operator's CA certificates as PEM (each checked to parse), or null. */
  caPem: string | null;
}

/** Reads and checks CORRAL_EGRESS_UPSTREAM_PROXY, _NO_PROXY, _INTERNAL_HOSTS(_FILE) and _CA_FILE. Throws InvalidInputError naming the variable. */
export function egressSiteOf(c: Config): EgressSiteConfig {
  const bad = (field: string, message: string) => new InvalidInputError(`configuration: ${field}: ${message}`, field);
  const upstream = c.CORRAL_EGRESS_UPSTREAM_PROXY ? parseUpstreamProxy(c.CORRAL_EGRESS_UPSTREAM_PROXY) : null;
  if (typeof upstream === 'string') throw bad('CORRAL_EGRESS_UPSTREAM_PROXY', upstream);
  const noProxy = parseNoProxy(c.CORRAL_EGRESS_NO_PROXY);
  if (typeof noProxy === 'string') throw bad('CORRAL_EGRESS_NO_PROXY', noProxy);
  let text = c.CORRAL_EGRESS_INTERNAL_HOSTS;
  if (c.CORRAL_EGRESS_INTERNAL_HOSTS_FILE) {
    try {
      text += `\n${readFileSync(c.CORRAL_EGRESS_INTERNAL_HOSTS_FILE, 'utf8')}`;
    } catch (err) {
      throw bad('CORRAL_EGRESS_INTERNAL_HOSTS_FILE', `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  const internal: InternalHost[] | string = parseInternalHosts(text);
  if (typeof internal === 'string') throw bad(c.CORRAL_EGRESS_INTERNAL_HOSTS_FILE ? 'CORRAL_EGRESS_INTERNAL_HOSTS_FILE' : 'CORRAL_EGRESS_INTERNAL_HOSTS', internal);
  let caPem: string | null = null;
  if (c.CORRAL_EGRESS_CA_FILE) {
    let raw: string;
    try {
      raw = readFileSync(c.CORRAL_EGRESS_CA_FILE, 'utf8');
    } catch (err) {
      throw bad('CORRAL_EGRESS_CA_FILE', `cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
    if (raw.length > 4 * 1024 * 1024) throw bad('CORRAL_EGRESS_CA_FILE', 'is larger than 4 MiB');
    const blocks = raw.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
    if (blocks.length === 0) throw bad('CORRAL_EGRESS_CA_FILE', 'holds no PEM certificate (-----BEGIN CERTIFICATE-----)');
    for (const [i, b] of blocks.entries()) {
      let cert: X509Certificate;
      try {
        cert = new X509Certificate(b);
      } catch (err) {
        throw bad('CORRAL_EGRESS_CA_FILE', `certificate ${i + 1} does not parse (${(err as Error).message})`);
      }
      if (!cert.ca) throw bad('CORRAL_EGRESS_CA_FILE', `certificate ${i + 1} (${cert.subject.replace(/\n/g, ', ')}) is not a CA certificate`);
    }
    caPem = `${blocks.join('\n')}\n`;
  }
  if (!upstream && noProxy.length === 0 && internal.length === 0 && caPem === null) return { ...NO_SITE, caPem: null };
  return { upstream, noProxy, internal, caPem };
}
