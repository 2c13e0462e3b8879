/** What buildApp needs: ports and stores made by the composition root (main.ts), never clients it makes itself. */
import type { Queue } from 'bullmq';
import type { ArtifactStore } from '../artifacts/artifact-store';
import type { Config } from '../config';
import type { Environment } from '../domain/environment';
import type { IdempotencyStore } from '../queue/idempotency';
import type { RunMetrics } from '../queue/run-metrics';
import type { HttpCounts } from './http-counts';
import type { RunStore } from '../queue/run-store';
import type { RunTree } from '../queue/run-tree';
import type { TenantQuota } from '../queue/tenant-quota';
import type { RunTemplate } from '../domain/run-template';
import type { ScheduleStore } from '../queue/schedule-store';
import type { WorkspaceUploads } from '../workspaces/workspace-uploads';
import type { TenantAuth } from './auth';

export interface ApiDeps {
  config: Config;
  store: RunStore;
  queue: Queue;
  quota: TenantQuota;
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
  /** Where the API logs (every 5xx with its cause); default: JSON lines on stderr. */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Shown in the OpenAPI document. */
  version?: string;
}
