/** What buildApp needs: ports and stores made by the composition root (main.ts), never clients it makes itself. */
import type { Queue } from 'bullmq';
import type { ArtifactStore } from '../artifacts/artifact-store';
import type { Config } from '../config';
import type { Environment } from '../domain/environment';
import type { IdempotencyStore } from '../queue/idempotency';
import type { RunMetrics } from '../queue/run-metrics';
import type { HttpCounts } from './http-counts';
import type { RunStore } from '../queue/run-store';
import type { HeldSlots } from '../queue/held-slots';
import type { RunTree } from '../queue/run-tree';
import type { RedisUploadQuota } from '../queue/upload-quota';
import type { TenantQuota } from '../queue/tenant-quota';
import type { RunTemplate } from '../domain/run-template';
import type { ScheduleStore } from '../queue/schedule-store';
import type { WorkspaceUploads } from '../workspaces/workspace-uploads';
import type { TenantAuth } from './auth';
import type { LogVerifyKey } from './log-verify';
import type { SubmitTracing } from '../domain/run-trace';

export interface ApiDeps {
  config: Config;
  store: RunStore;
  queue: Queue;
  quota: TenantQuota;
  /** Resources held a while (live streams, uploads in flight): per-tenant and service-wide caps, counted in Redis. */
  held: Pick<HeldSlots, 'take' | 'held' | 'refusals' | 'countRefusal'>;
  idempotency: IdempotencyStore;
  metrics: RunMetrics;
  /** Sub-runs: GET shows a run's children, cancel reaches the runs below it. */
  tree?: RunTree;
  newRunId: () => string;
  clock: () => number;
  /** Names of the loaded policies; a run naming another is refused with 400. */
  policyNames: readonly string[];
  /** The environment catalogue (CORRAL_ENVIRONMENT_DIR); absent: only the built-in `default`. */
  environments?: ReadonlyMap<string, Environment>;
  /** The run templates (CORRAL_TEMPLATES_DIR); each one's examples are admitted when the app becomes ready. */
  templates?: readonly RunTemplate[];
  /** Where run files are read from (the worker's store); absent: the data dir (config.CORRAL_DATA_DIR). */
  artifacts?: ArtifactStore;
  /** The upload quotas' state, for /metrics (the quotas themselves are charged by `uploads`). */
  uploadQuota?: Pick<RedisUploadQuota, 'state'>;
  /** Uploaded workspaces (PUT /v1/workspaces); absent: that route is not served. */
  uploads?: WorkspaceUploads;
  /** Schedules (POST /v1/schedules …); absent: those routes are not served. */
  schedules?: ScheduleStore;
  /** Bearer tokens → tenants; absent or without tokens: auth off, everything is the default tenant. */
  auth?: TenantAuth;
  /** GET /readyz runs each of these (name → resolves when that dependency answers), e.g. redis, docker. */
  readyChecks?: Record<string, () => Promise<unknown>>;
  /** This process's HTTP answers by route and status class; absent: buildApp makes one. */
  httpCounts?: HttpCounts;
  /** Tenants whose tokens see every tenant in /metrics (CORRAL_OPERATOR_TENANTS). */
  operatorTenants?: readonly string[];
  /** The longest an SSE stream waits on Redis (XREAD BLOCK) before it checks the run again (default 5000). */
  ssePollMs?: number;
  /** Milliseconds between SSE heartbeat comments (default 15 000). */
  sseHeartbeatMs?: number;
  /** Bytes an SSE client may leave unread in its socket's buffer before the stream waits for it (default 64 KiB) … */
  sseMaxBufferedBytes?: number;
  /** … and how long it may take to drain them before it is disconnected to resume later (default 30 000). */
  sseSlowReaderMs?: number;
  /** The window over which a request body's minimum rate is checked (default 10 000; tests shorten it). */
  bodyWindowMs?: number;
  /** Where the API logs (every 5xx with its cause); default: JSON lines on stderr. */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Shown in the OpenAPI document. */
  version?: string;
  /** Traces submissions (a span per POST /v1/runs, whose context the job carries); absent: a caller's traceparent still reaches the run. */
  tracing?: SubmitTracing;
  /** Checks the signatures of run logs' seals (GET /v1/runs/:id/verify); absent: signatures are reported unchecked. */
  logVerifyKey?: LogVerifyKey;
}
