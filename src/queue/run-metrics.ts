/**
 * Run metrics aggregated in Redis, so any API instance can serve /metrics for every worker: workers
 * feed each run's events to an observer, which bumps counters and cumulative histogram buckets in one
 * hash; the API reads the hash. The observer also keeps the run's usage so far (LLM calls, tool
 * calls, tokens, cost) for GET /v1/runs/:id while the run is going.
 *   {p}:metrics              hash: counter and histogram fields (see the names below), all tenants
 *   {p}:tenant:{t}:metrics   hash: the same fields, one tenant's runs only (a tenant's /metrics)
 *   {p}:run:{id}:usage       hash: llmCalls, toolCalls, inputTokens, outputTokens, costUsd (live)
 */
import type { Redis } from 'ioredis';
import type { RunEvent, RunUsage } from '../domain/events';

/** Upper bounds (seconds) of the run duration histogram buckets. */
export const RUN_DURATION_BUCKETS_S = [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200] as const;
/** Upper bounds (seconds) of the sandbox acquire time histogram buckets. */
export const SANDBOX_ACQUIRE_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30] as const;

const USAGE_TTL_S = 14 * 24 * 3600;

export type LiveUsage = Omit<RunUsage, 'wallTimeMs'>;

/** How a tool call was settled: the gate's decision and who made it, or refused before the gate. */
export interface ToolCallLabel {
  decision: 'allow' | 'deny' | 'refused';
  by: 'policy' | 'classifier' | 'approval' | 'none';
}

export class RunMetrics {
  constructor(
    private readonly redis: Redis,
    private readonly prefix = 'corral',
  ) {}

  private get key(): string {
    return `${this.prefix}:metrics`;
  }
  private tenantKey(tenant: string): string {
    return `${this.prefix}:tenant:${tenant}:metrics`;
  }
  private usageKey(runId: string): string {
    return `${this.prefix}:run:${runId}:usage`;
  }

  /**
   * An observer for one run's events (a worker adds it as an event sink). It remembers which calls
   * went through the gate, so a call refused before it (unknown tool, bad arguments) counts as such.
   */
  observer(runId: string): (e: RunEvent) => Promise<void> {
    const gated = new Set<string>();
    let tenantKey: Promise<string> | undefined;
    return async (e) => {
      // The run's tenant, read from its record once: every aggregate goes to both hashes.
      tenantKey ??= this.redis.hget(`${this.prefix}:run:${runId}`, 'tenant').then((t) => this.tenantKey(t ?? 'default'));
      const m = new Both(this.redis.multi(), this.key, await tenantKey);
      switch (e.type) {
        case 'run.started': // a run started again (after its worker died) counts its usage afresh
          m.del(this.usageKey(runId));
          break;
        case 'sandbox.ready':
          histogram(m, this.key, 'sandbox_acquire', SANDBOX_ACQUIRE_BUCKETS_S, e.ms / 1000);
          break;
        case 'model.response':
          m.hincrby(this.key, 'model_calls', 1)
            .hincrby(this.key, 'model_tokens:input', e.usage.inputTokens)
            .hincrby(this.key, 'model_tokens:output', e.usage.outputTokens)
            .hincrbyfloat(this.key, 'cost_usd', e.costUsd)
            .hincrby(this.usageKey(runId), 'llmCalls', 1)
            .hincrby(this.usageKey(runId), 'inputTokens', e.usage.inputTokens)
            .hincrby(this.usageKey(runId), 'outputTokens', e.usage.outputTokens)
            .hincrbyfloat(this.usageKey(runId), 'costUsd', e.costUsd)
            .expire(this.usageKey(runId), USAGE_TTL_S);
          break;
        case 'tool.call':
          m.hincrby(this.usageKey(runId), 'toolCalls', 1).expire(this.usageKey(runId), USAGE_TTL_S);
          break;
        case 'subrun.finished': // a sub-run's use counts toward its parent's budgets
          m.hincrby(this.usageKey(runId), 'llmCalls', e.usage.llmCalls)
            .hincrby(this.usageKey(runId), 'toolCalls', e.usage.toolCalls)
            .hincrby(this.usageKey(runId), 'inputTokens', e.usage.inputTokens)
            .hincrby(this.usageKey(runId), 'outputTokens', e.usage.outputTokens)
            .hincrbyfloat(this.usageKey(runId), 'costUsd', e.usage.costUsd)
            .expire(this.usageKey(runId), USAGE_TTL_S);
          break;
        case 'policy.decision': {
          gated.add(e.callId);
          const v = e.verdict;
          const by = v.approval ? 'approval' : v.classifier ? 'classifier' : 'policy';
          m.hincrby(this.key, `tool_calls:${v.decision}:${by}`, 1);
          break;
        }
        case 'tool.result':
          if (!gated.delete(e.callId) && !e.ok) m.hincrby(this.key, 'tool_calls:refused:none', 1);
          break;
        case 'run.finished':
          m.hincrby(this.key, `runs_finished:${e.outcome}`, 1);
          histogram(m, this.key, `run_duration:${e.outcome}`, RUN_DURATION_BUCKETS_S, e.usage.wallTimeMs / 1000);
          break;
        default:
          return;
      }
      await m.exec();
    };
  }

  /**
   * Adds a process's span export counts since its last report (every tenant's: traces are the
   * operators' view): exported, and dropped because the export queue was full or an export failed.
   */
  async addTraceCounts(d: { exported: number; droppedQueueFull: number; droppedExportFailed: number }): Promise<void> {
    if (d.exported === 0 && d.droppedQueueFull === 0 && d.droppedExportFailed === 0) return;
    await this.redis.multi()
      .hincrby(this.key, 'trace_spans:exported', d.exported)
      .hincrby(this.key, 'trace_spans:dropped:queue_full', d.droppedQueueFull)
      .hincrby(this.key, 'trace_spans:dropped:export_failed', d.droppedExportFailed)
      .exec();
  }

  /** Every counter and histogram field, of all tenants or of one (the API renders them as Prometheus text). */
  async read(tenant?: string): Promise<Record<string, number>> {
    const h = await this.redis.hgetall(tenant === undefined ? this.key : this.tenantKey(tenant));
    return Object.fromEntries(Object.entries(h).map(([k, v]) => [k, Number(v)]));
  }

  /** A run's usage so far, as its worker has counted it (null before its first model call or tool call). */
  async liveUsage(runId: string): Promise<LiveUsage | null> {
    const h = await this.redis.hgetall(this.usageKey(runId));
    if (!Object.keys(h).length) return null;
    const n = (k: string) => Number(h[k] ?? 0);
    return { llmCalls: n('llmCalls'), toolCalls: n('toolCalls'), inputTokens: n('inputTokens'), outputTokens: n('outputTokens'), costUsd: n('costUsd') };
  }
}

/** Cumulative buckets: a value lands in every bucket whose bound it does not exceed, and in +Inf. */
function histogram(m: Both, key: string, name: string, bounds: readonly number[], value: number): void {
  for (const le of bounds) if (value <= le) m.hincrby(key, `${name}:bucket:${le}`, 1);
  m.hincrby(key, `${name}:bucket:+Inf`, 1).hincrby(key, `${name}:count`, 1).hincrbyfloat(key, `${name}:sum`, value);
}

/** A MULTI in which every increment of the all-tenants hash also goes to the run's tenant's hash. */
class Both {
  constructor(
    private readonly m: ReturnType<Redis['multi']>,
    private readonly all: string,
    private readonly tenant: string,
  ) {}
  hincrby(key: string, field: string, n: number): this {
    this.m.hincrby(key, field, n);
    if (key === this.all) this.m.hincrby(this.tenant, field, n);
    return this;
  }
  hincrbyfloat(key: string, field: string, n: number): this {
    this.m.hincrbyfloat(key, field, n);
    if (key === this.all) this.m.hincrbyfloat(this.tenant, field, n);
    return this;
  }
  del(key: string): this {
    this.m.del(key);
    return this;
  }
  expire(key: string, s: number): this {
    this.m.expire(key, s);
    return this;
  }
  exec(): Promise<unknown> {
    return this.m.exec();
  }
}
