/**
 * The warm pool: a worker keeps `size` started sandboxes of its default class (the configured default
 * limits, no network) so that a run of that class gets one at once. A pooled sandbox is used by exactly
 * one run and then removed like any other — never reused. Pool containers carry the usual labels with a
 * `pool_…` run id and a deadline `ttlMs` after their creation; a run takes one only if the container's
 * deadline leaves it the run's whole wall time. The reaper treats another worker's pool containers as
 * active until their deadline, and this worker's as active while the pool or a run holds them.
 */
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { Config } from '../config';
import type { IsolationClass } from '../domain/sandbox';
import { containerSpec } from './container-spec';
import type { SandboxLog } from './docker-sandbox';
import type { ResolvedLimits } from './limits';
import type { SandboxEngine } from './sandbox-engine';
import { createInFreeSlot, type UidSlot } from './uid-slots';

/** The class of sandbox a pool serves: the default limits and the default isolation class. */
export type PoolClass = Omit<ResolvedLimits, 'execTimeoutS' | 'isolation'> & { isolation: IsolationClass };

export const POOL_PREFIX = 'pool_';

export interface WarmPoolOptions {
  engine: SandboxEngine;
  config: Config;
  workerId: string;
  size: number;
  ttlMs: number;
  /** The sandbox class the pool serves. */
  limits: PoolClass;
  log: SandboxLog;
  now: () => Date;
}

interface Pooled {
  poolId: string;
  container: Docker.Container;
  /** The uid slot the container holds (by its name). */
  slot: UidSlot;
  deadline: number;
}

export class WarmPool {
  private readonly idle: Pooled[] = [];
  /** Pool ids handed to runs and not yet released (their run disposes the container). */
  private readonly claimed = new Set<string>();
  private filling = 0;
  private stopped = false;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: WarmPoolOptions) {}

  /** Starts filling the pool; resolves when it is full the first time (or filling failed once). */
  async start(): Promise<void> {
    await this.fill();
  }

  /** Whether a pool container belongs to this worker and is still held (idle or claimed by a run). */
  owns(poolId: string): boolean {
    return this.claimed.has(poolId) || this.idle.some((p) => p.poolId === poolId);
  }

  /** Counts for logs and the benchmark. */
  stats(): { idle: number; claimed: number; filling: number } {
    return { idle: this.idle.length, claimed: this.claimed.size, filling: this.filling };
  }

  /**
   * A ready container for a run of the pool's class whose deadline fits, or null (the caller creates
   * one cold). The caller owns it from here and must call release(poolId) once it is removed.
   */
  take(limits: PoolClass, egress: boolean, runDeadline: Date): Pooled | null {
    if (this.stopped || egress || !sameLimits(limits, this.o.limits)) return null;
    const i = this.idle.findIndex((p) => p.deadline >= runDeadline.getTime());
    if (i < 0) return null;
    const [p] = this.idle.splice(i, 1);
    this.claimed.add(p!.poolId);
    void this.fill();
    return p!;
  }

  release(poolId: string): void {
    this.claimed.delete(poolId);
  }

  /** Removes the idle containers and stops refilling; claimed ones stay with their runs. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    const idle = this.idle.splice(0);
    await Promise.all(idle.map((p) => this.o.engine.remove(p.container, p.slot).catch(() => undefined)));
  }

  private async fill(): Promise<void> {
    while (!this.stopped && this.idle.length + this.filling < this.o.size) {
      this.filling += 1;
      try {
        const p = await this.create();
        if (this.stopped) await this.o.engine.remove(p.container, p.slot).catch(() => undefined);
        else this.idle.push(p);
      } catch (err) {
        this.o.log('warm pool: could not start a sandbox; retrying in 5 s', { error: (err as Error).message });
        clearTimeout(this.retryTimer);
        this.retryTimer = setTimeout(() => void this.fill(), 5000);
        this.retryTimer.unref();
        return;
      } finally {
        this.filling -= 1;
      }
    }
  }

  private async create(): Promise<Pooled> {
    const poolId = `${POOL_PREFIX}${randomBytes(6).toString('hex')}`;
    const now = this.o.now();
    const deadline = new Date(now.getTime() + this.o.ttlMs);
    const c = this.o.config;
    const { container, slot } = await createInFreeSlot(this.o.engine.docker, { base: c.CORRAL_SANDBOX_UID_BASE, slots: c.CORRAL_SANDBOX_SLOTS }, (s) =>
      this.o.engine.create(containerSpec({
        runId: poolId, workerId: this.o.workerId, queue: c.CORRAL_QUEUE, instance: c.CORRAL_INSTANCE, deadline, now,
        limits: this.o.limits, image: c.CORRAL_SANDBOX_IMAGE, isolation: this.o.limits.isolation,
        gvisorRuntime: c.CORRAL_GVISOR_RUNTIME, slot: s,
      })));
    try {
      await container.start();
    } catch (err) {
      await this.o.engine.remove(container, slot).catch(() => undefined);
      throw err;
    }
    return { poolId, container, slot, deadline: deadline.getTime() };
  }
}

function sameLimits(a: PoolClass, b: PoolClass): boolean {
  return a.memoryMb === b.memoryMb && a.cpus === b.cpus && a.pids === b.pids && a.workspaceMb === b.workspaceMb && a.isolation === b.isolation;
}
