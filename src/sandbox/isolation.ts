/**
 * Which isolation class a sandbox gets, against what the engine offers. The engine's runtimes come from
 * `GET /info` (asked once, and again when gVisor is wanted but was missing, since an operator may
 * register it and SIGHUP dockerd meanwhile). `auto` means gvisor where the engine has it and the
 * operator permits it, else runc. A class the engine lacks is sandbox_unavailable, naming what to do.
 *
 * gVisor's registration matters: runsc needs `--network=none` (corral's sandboxes have no network
 * namespace for it to use) and `--host-uds=open` (the egress relay connects to a host unix socket);
 * a registration without the latter is logged once at first use.
 */
import type Docker from 'dockerode';
import type { Config } from '../config';
import { SandboxError } from '../domain/errors';
import type { IsolationClass } from '../domain/sandbox';
import type { SandboxLog } from './docker-sandbox';

/** What .ci/bootstrap registers in /etc/docker/daemon.json (and prints for an engine it did not start). */
export const GVISOR_RUNTIME_ARGS = ['--platform=ptrace', '--network=none', '--host-uds=open'];

type RuntimeInfo = Record<string, { path?: string; runtimeArgs?: string[] } | undefined>;

export class IsolationResolver {
  private runtimes: Promise<RuntimeInfo> | undefined;
  private warned = false;

  constructor(
    private readonly docker: Docker,
    private readonly config: Pick<Config, 'CORRAL_SANDBOX_RUNTIME' | 'CORRAL_ISOLATION_CLASSES' | 'CORRAL_GVISOR_RUNTIME'>,
    private readonly log: SandboxLog,
  ) {}

  /** The class for a run: what it asked for (already checked against the permitted classes), else the default. */
  async resolve(requested?: IsolationClass): Promise<IsolationClass> {
    const cls = requested ?? (await this.defaultClass());
    if (cls === 'gvisor' && !(await this.hasGvisor(true))) {
      throw new SandboxError(
        'sandbox_unavailable',
        `gVisor was asked for, but the Docker engine has no "${this.config.CORRAL_GVISOR_RUNTIME}" runtime: install runsc and register it ` +
          `(.ci/bootstrap does, or add {"runtimes":{"${this.config.CORRAL_GVISOR_RUNTIME}":{"path":"/usr/bin/runsc","runtimeArgs":${JSON.stringify(GVISOR_RUNTIME_ARGS)}}}} ` +
          'to /etc/docker/daemon.json and send dockerd SIGHUP)',
      );
    }
    return cls;
  }

  /** The class of runs that do not ask: the configured one, or for `auto` gvisor when installed and permitted. */
  async defaultClass(): Promise<IsolationClass> {
    const c = this.config.CORRAL_SANDBOX_RUNTIME;
    if (c !== 'auto') return c;
    const permitted = this.config.CORRAL_ISOLATION_CLASSES;
    if (!permitted.includes('runc')) return 'gvisor';
    if (!permitted.includes('gvisor')) return 'runc';
    return (await this.hasGvisor(false)) ? 'gvisor' : 'runc';
  }

  private async hasGvisor(refreshIfMissing: boolean): Promise<boolean> {
    let info = await this.info();
    if (!info[this.config.CORRAL_GVISOR_RUNTIME] && refreshIfMissing) {
      this.runtimes = undefined;
      info = await this.info();
    }
    const rt = info[this.config.CORRAL_GVISOR_RUNTIME];
    if (rt && !this.warned) {
      this.warned = true;
      const args = rt.runtimeArgs ?? [];
      if (!args.includes('--host-uds=open')) {
        this.log(`gVisor runtime "${this.config.CORRAL_GVISOR_RUNTIME}" is registered without --host-uds=open: runs with egress cannot reach their proxy under gVisor`, { runtimeArgs: args, recommended: GVISOR_RUNTIME_ARGS });
      }
    }
    return rt !== undefined;
  }

  private info(): Promise<RuntimeInfo> {
    this.runtimes ??= this.docker.info().then(
      (i: { Runtimes?: RuntimeInfo }) => i.Runtimes ?? {},
      (err: Error) => {
        this.runtimes = undefined;
        throw new SandboxError('sandbox_unavailable', `the Docker engine does not answer: ${err.message}`, { cause: err });
      },
    );
    return this.runtimes;
  }
}
