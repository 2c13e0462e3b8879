/**
 * The sandbox settings integration tests and benchmarks take from the environment, so a helper can
 * run them against an image or gVisor registration of its own: CORRAL_SANDBOX_IMAGE and
 * CORRAL_GVISOR_RUNTIME (and CORRAL_SANDBOX_RUNTIME, for suites not split by class) pass through to the
 * config the tests build (they otherwise use defaults).
 */
import type { IsolationClass } from '../../src/domain/sandbox';

export function sandboxTestEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['CORRAL_SANDBOX_IMAGE', 'CORRAL_GVISOR_RUNTIME', 'CORRAL_SANDBOX_RUNTIME'] as const) {
    const v = process.env[k];
    if (v) env[k] = v;
  }
  return env;
}

/** Config env for a suite that runs under one isolation class: that class is the default and permitted. */
export function isolationEnv(isolation: IsolationClass): Record<string, string> {
  return { ...sandboxTestEnv(), CORRAL_SANDBOX_RUNTIME: isolation };
}

export const ISOLATION_CLASSES: readonly IsolationClass[] = ['runc', 'gvisor'];
