/**
 * The sandbox module's public face: the composition root (main.ts, the CLI) calls
 * createSandboxProvider(config); api/ may use resolveLimits; the worker starts the reaper.
 */
import Docker from 'dockerode';
import type { Config } from '../config';
import { DockerSandboxProvider, type DockerSandboxProviderOptions } from './docker-sandbox';

export { DockerSandboxProvider, type DockerSandboxProviderOptions } from './docker-sandbox';
export { resolveLimits, type ResolvedLimits } from './limits';

/** A Docker client for the configured engine (DOCKER_HOST when set, else the local socket). */
export function createDockerClient(config: Config): Docker {
  if (!config.DOCKER_HOST) return new Docker();
  const u = new URL(config.DOCKER_HOST);
  if (u.protocol === 'unix:') return new Docker({ socketPath: u.pathname });
  return new Docker({ host: u.hostname, port: Number(u.port || 2375), protocol: u.protocol === 'https:' ? 'https' : 'http' });
}

export function createSandboxProvider(config: Config, opts: Partial<Omit<DockerSandboxProviderOptions, 'config'>> = {}): DockerSandboxProvider {
  return new DockerSandboxProvider({ docker: opts.docker ?? createDockerClient(config), config, ...opts });
}
export { startReaper, sweepSandboxes, type Reaper, type ReaperOptions, type SweepResult } from './reaper';
export { EgressProxy, type EgressProxyOptions } from './egress-proxy';
