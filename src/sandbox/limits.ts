/**
 * Resolves a run's requested limits against the operator's configuration: a missing value takes the
 * configured default, a value above the configured maximum is refused with InvalidInputError (the API
 * turns it into a 400) — never silently capped. Pure; no Docker here, so api/ may import it.
 */
import type { Config } from '../config';
import type { IsolationClass } from '../domain/sandbox';
import { InvalidInputError } from '../domain/errors';
import type { RunLimits } from '../domain/run-spec';

export interface ResolvedLimits {
  memoryMb: number;
  cpus: number;
  pids: number;
  workspaceMb: number;
  execTimeoutS: number;
  /** The class the run asked for; undefined = the server's default (resolved where the engine is known). */
  isolation?: IsolationClass;
}

type LimitsConfig = Pick<
  Config,
  | 'CORRAL_DEFAULT_MEMORY_MB' | 'CORRAL_MAX_MEMORY_MB'
  | 'CORRAL_DEFAULT_CPUS' | 'CORRAL_MAX_CPUS'
  | 'CORRAL_DEFAULT_PIDS' | 'CORRAL_MAX_PIDS'
  | 'CORRAL_DEFAULT_WORKSPACE_MB' | 'CORRAL_MAX_WORKSPACE_MB'
  | 'CORRAL_DEFAULT_EXEC_TIMEOUT_S' | 'CORRAL_MAX_EXEC_TIMEOUT_S'
  | 'CORRAL_ISOLATION_CLASSES'
>;

/** Throws InvalidInputError(message, 'limits.<name>') when a requested limit exceeds its maximum or names a class the server does not permit. */
export function resolveLimits(requested: RunLimits | undefined, config: LimitsConfig): ResolvedLimits {
  const r = requested ?? {};
  const pick = (name: keyof ResolvedLimits, value: number | undefined, def: number, max: number, unit: string): number => {
    const v = value ?? Math.min(def, max);
    if (!Number.isFinite(v) || v <= 0) throw new InvalidInputError(`limits.${name} must be a positive number`, `limits.${name}`);
    if (v > max) {
      throw new InvalidInputError(`limits.${name} is ${v}${unit}, above this server's maximum of ${max}${unit}`, `limits.${name}`, { max, requested: v });
    }
    return v;
  };
  if (r.isolation !== undefined && !config.CORRAL_ISOLATION_CLASSES.includes(r.isolation)) {
    throw new InvalidInputError(
      `limits.isolation "${r.isolation}" is not permitted on this server (it permits: ${config.CORRAL_ISOLATION_CLASSES.join(', ')})`,
      'limits.isolation', { permitted: config.CORRAL_ISOLATION_CLASSES, requested: r.isolation },
    );
  }
  return {
    ...(r.isolation !== undefined ? { isolation: r.isolation } : {}),
    memoryMb: pick('memoryMb', r.memoryMb, config.CORRAL_DEFAULT_MEMORY_MB, config.CORRAL_MAX_MEMORY_MB, ' MB'),
    cpus: pick('cpus', r.cpus, config.CORRAL_DEFAULT_CPUS, config.CORRAL_MAX_CPUS, ' CPUs'),
    pids: pick('pids', r.pids, config.CORRAL_DEFAULT_PIDS, config.CORRAL_MAX_PIDS, ''),
    workspaceMb: pick('workspaceMb', r.workspaceMb, config.CORRAL_DEFAULT_WORKSPACE_MB, config.CORRAL_MAX_WORKSPACE_MB, ' MB'),
    execTimeoutS: pick('execTimeoutS', r.execTimeoutS, config.CORRAL_DEFAULT_EXEC_TIMEOUT_S, config.CORRAL_MAX_EXEC_TIMEOUT_S, ' s'),
  };
}
