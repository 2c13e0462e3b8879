/**
 * The sandbox module's public face.
 *
 * Wiring (main.ts / worker):
 *   const docker = createDockerClient(config);
 *   const sandboxes = createSandboxProvider(config, { docker, log });        // SandboxProvider
 *   const reaper = startReaper(config, { docker, isActive: (runId, workerId) => ..., log });
 *   await reaper.first;  ...  reaper.stop() on shutdown
 * Per run (worker):
 *   const limits = resolveLimits(spec.limits, config);                        // api/ calls it too → 400
 *   const sb = await sandboxes.acquire({ runId, workerId, deadline, files: spec.workspace.files,
 *     limits, egressAllow: spec.egress.allow, onEgress: (a) => emit(...), signal });
 *   try { ... sb.exec({ argv, timeoutMs: limits.execTimeoutS * 1000, signal }) ... sb.exportWorkspace({ tarPath, patchPath }) }
 *   finally { await sb.dispose(); }
 * When egressAllow is non-empty, acquire() starts the run's egress proxy process (egress-proxy-host.ts);
 * onEgress gets the first attempts of each kind, onEgressSummary the counted repeats, the proxy's
 * start/failure/stop and the totals; sb.noteToolCall(id) attributes later connections to that call.
 */
import Docker from 'dockerode';
import type { Config } from '../config';
import { DockerSandboxProvider, type DockerSandboxProviderOptions } from './docker-sandbox';

export { DockerSandboxProvider, engineKeyOf, type DockerSandboxProviderOptions } from './docker-sandbox';
export { resolveLimits, type ResolvedLimits } from './limits';

/** A Docker client for the configured engine (DOCKER_HOST when set, else the local socket). */
export function createDockerClient(config: Config): Docker {
  if (!config.DOCKER_HOST) return new Docker();
  const u = new URL(config.DOCKER_HOST);
  if (u.protocol === 'unix:') return new Docker({ socketPath: u.pathname });
  return new Docker({ host: u.hostname, port: Number(u.port || 2375), protocol: u.protocol === 'https:' ? 'https' : 'http' });
}

export function createSandboxProvider(config: Config, opts: Partial<Omit<DockerSandboxProviderOptions, 'config'>> = {}): DockerSandboxProvider {
  return new DockerSandboxProvider({
    docker: opts.docker ?? createDockerClient(config), config,
    ...(config.CORRAL_EGRESS_DIR ? { egressRoot: config.CORRAL_EGRESS_DIR } : {}),
    ...opts,
  });
}
export { startReaper, sweepSandboxes, type Reaper, type ReaperOptions, type SweepResult } from './reaper';
export { EgressProxy, type EgressProxyOptions } from './egress-proxy';
export { POOL_PREFIX } from './warm-pool';
export { ipLiteral, isForbiddenAddress } from './egress-address';
