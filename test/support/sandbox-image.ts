/**
 * The sandbox image and runtime tests run against: CORRAL_SANDBOX_IMAGE when set (a branch's own
 * build, e.g. corral/sandbox:artifacts) and CORRAL_SANDBOX_RUNTIME when set (e.g. runsc), else the
 * config defaults. Spread into the config of every test that starts sandboxes, since tests build
 * their configs from explicit objects, not from the environment.
 */
export function sandboxImageEnv(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of ['CORRAL_SANDBOX_IMAGE', 'CORRAL_SANDBOX_RUNTIME'] as const) {
    const v = process.env[k];
    if (v) out[k] = v;
  }
  return out;
}
