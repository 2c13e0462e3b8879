/**
 * The sandbox settings integration tests and benchmarks take from the environment, so a helper can
 * run them against an image or gVisor registration of its own: CORRAL_SANDBOX_IMAGE and
 * CORRAL_GVISOR_RUNTIME (and CORRAL_SANDBOX_RUNTIME, for suites not split by class) pass through to the
 * config the tests build (they otherwise use defaults).
 *
 * CORRAL_INSTANCE (set by .ci/run, one per CI run) passes through too, and the containers tests start
 * themselves carry it as well (instanceLabels): the CI run's clean-up removes exactly those.
 */
import type { IsolationClass } from '../../src/domain/sandbox';
import { LABELS } from '../../src/sandbox/container-spec';

export function sandboxTestEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const k of ['CORRAL_SANDBOX_IMAGE', 'CORRAL_GVISOR_RUNTIME', 'CORRAL_SANDBOX_RUNTIME', 'CORRAL_INSTANCE'] as const) {
    const v = process.env[k];
    if (v) env[k] = v;
  }
  return env;
}

/**
 * The environment images a suite's environment files name: CORRAL_SANDBOX_NODE_IMAGE and
 * CORRAL_SANDBOX_PYTHON_IMAGE when a helper built its own (images/sandbox-node/build.sh, the
 * sandbox-python Dockerfile), else the ones .ci/bootstrap builds.
 */
export function environmentImages(): { node: string; python: string } {
  return {
    node: process.env.CORRAL_SANDBOX_NODE_IMAGE || 'corral/sandbox-node:latest',
    python: process.env.CORRAL_SANDBOX_PYTHON_IMAGE || 'corral/sandbox-python:latest',
  };
}

/** Config env for a suite that runs under one isolation class: that class is the default and permitted. */
export function isolationEnv(isolation: IsolationClass): Record<string, string> {
  return { ...sandboxTestEnv(), CORRAL_SANDBOX_RUNTIME: isolation };
}

export const ISOLATION_CLASSES: readonly IsolationClass[] = ['runc', 'gvisor'];

/** The instance label for a container a test starts itself ({} when no CORRAL_INSTANCE is set). */
export function instanceLabels(): Record<string, string> {
  const v = process.env.CORRAL_INSTANCE;
  return v ? { [LABELS.instance]: v } : {};
}

/** The same as `docker run` flags. */
export function instanceLabelArgs(): string[] {
  return Object.entries(instanceLabels()).flatMap(([k, v]) => ['--label', `${k}=${v}`]);
}
