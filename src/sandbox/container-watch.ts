/**
 * Watches one sandbox container from outside for as long as its run holds it:
 * - `died` resolves as soon as the container stops, whatever stopped it (its memory limit under
 *   gVisor, where hitting it ends the whole sandbox and a running `docker exec` stream never ends; a
 *   kill from outside; PID 1's deadline), with the engine's account of it (State.OOMKilled). An exec
 *   races its stream against it, so a dead sandbox ends the call at once;
 * - the deadline is enforced here too, not only by PID 1's sleep inside (which an engine-level stop
 *   of PID 1 could disarm): at the deadline the container is killed through the engine.
 * One long-polling `POST /containers/{id}/wait?condition=not-running` per sandbox (no polling, no cost
 * per exec). The reaper remains the backstop for sandboxes whose worker died.
 */
import type Docker from 'dockerode';
import type { SandboxLog } from './docker-sandbox';

export interface ContainerDeath {
  /** The engine's status once stopped ("exited", "dead", "removed"). */
  status: string;
  exitCode: number | null;
  /** The engine saw the container's memory cgroup hit its limit. */
  oomKilled: boolean;
  /** `deadline`: this watch killed it at the run's deadline; `died`: something else stopped it. */
  cause: 'deadline' | 'died';
}

/** Node timers take at most 2^31-1 ms; later deadlines are re-armed. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** What an exec needs of a watch: to hear of the death while it runs, and to stop listening after. */
export interface DeathSignal {
  /** Calls `cb` once when the container dies (at once if it already has); returns the unsubscribe. */
  onDeath(cb: (d: ContainerDeath) => void): () => void;
}

export class ContainerWatch implements DeathSignal {
  readonly died: Promise<ContainerDeath>;
  private resolveDied!: (d: ContainerDeath) => void;
  private death: ContainerDeath | undefined;
  private readonly listeners = new Set<(d: ContainerDeath) => void>();
  private readonly ac = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private killedAtDeadline = false;
  private stopped = false;

  constructor(
    private readonly container: Docker.Container,
    private readonly o: { deadline: Date; now: () => Date; log: SandboxLog },
  ) {
    this.died = new Promise((r) => (this.resolveDied = r));
    this.armDeadline();
    void this.waitLoop();
  }

  /** The death, once it happened. */
  get dead(): ContainerDeath | undefined {
    return this.death;
  }

  onDeath(cb: (d: ContainerDeath) => void): () => void {
    if (this.death) {
      const d = this.death;
      queueMicrotask(() => cb(d));
      return () => {};
    }
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Stops watching (the owner is removing the container). */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.listeners.clear();
    this.ac.abort();
  }

  private armDeadline(): void {
    const ms = this.o.deadline.getTime() - this.o.now().getTime();
    if (ms > MAX_TIMER_MS) {
      this.timer = setTimeout(() => this.armDeadline(), MAX_TIMER_MS);
    } else {
      this.timer = setTimeout(() => void this.killAtDeadline(), Math.max(0, ms));
    }
    this.timer.unref();
  }

  private async killAtDeadline(): Promise<void> {
    if (this.stopped || this.death) return;
    this.killedAtDeadline = true;
    this.o.log('sandbox deadline reached: killing the container from outside', { container: this.container.id });
    await this.container.kill({ signal: 'SIGKILL' }).catch((err: { statusCode?: number; message?: string }) => {
      // 409: not running any more (PID 1 ended it first); 404: already removed
      if (err.statusCode !== 409 && err.statusCode !== 404) this.o.log('could not kill the sandbox at its deadline; the reaper will', { container: this.container.id, error: err.message });
    });
  }

  private async waitLoop(): Promise<void> {
    while (!this.stopped && !this.death) {
      try {
        await this.container.wait({ condition: 'not-running', abortSignal: this.ac.signal });
      } catch (err) {
        if (this.stopped) return;
        if ((err as { statusCode?: number }).statusCode !== 404) {
          // the engine restarted or the connection broke: look again in a moment
          await new Promise((r) => setTimeout(r, 1000).unref());
          continue;
        }
      }
      if (this.stopped) return;
      if (!(await this.settle())) await new Promise((r) => setTimeout(r, 200).unref());
    }
  }

  /** Records the death; false when the container is in fact still running (wait again). */
  private async settle(): Promise<boolean> {
    let d: ContainerDeath;
    try {
      let s = (await this.container.inspect()).State;
      if (s.Running) return false;
      // The engine hears of an OOM as its own event, which can arrive after the exit (seen under
      // runsc: exit 137, OOMKilled still false, true a moment later). A SIGKILLed end that this watch
      // did not cause is looked at again for up to three seconds before it is called a kill from outside.
      for (let i = 0; i < 15 && s.ExitCode === 137 && s.OOMKilled !== true && !this.killedAtDeadline && !this.stopped; i++) {
        await new Promise((r) => setTimeout(r, 200).unref());
        s = (await this.container.inspect()).State;
      }
      d = { status: s.Status, exitCode: s.ExitCode ?? null, oomKilled: s.OOMKilled === true, cause: this.killedAtDeadline ? 'deadline' : 'died' };
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) return false;
      d = { status: 'removed', exitCode: null, oomKilled: false, cause: this.killedAtDeadline ? 'deadline' : 'died' };
    }
    this.death = d;
    clearTimeout(this.timer);
    this.resolveDied(d);
    for (const cb of this.listeners) cb(d);
    this.listeners.clear();
    return true;
  }
}

/** One sentence for a death, for errors the run's report shows. */
export function describeDeath(d: ContainerDeath, id: string): string {
  const short = id.slice(0, 12);
  if (d.cause === 'deadline') return `the sandbox ${short} reached its deadline and was killed from outside`;
  if (d.oomKilled) return `the sandbox ${short} died: out of memory (it hit its memory limit; under gVisor that ends the whole sandbox, exit ${d.exitCode ?? '?'})`;
  return `the sandbox ${short} stopped (status ${d.status}, exit ${d.exitCode ?? '?'}): it was killed from outside or its init died`;
}
