/**
 * The sandbox image tests run against: CORRAL_SANDBOX_IMAGE when set (a branch's own build, e.g.
 * corral/sandbox:artifacts), else the config default. Spread into the config of every test that
 * starts sandboxes, since tests build their configs from explicit objects, not the environment.
 */
export function sandboxImageEnv(): Record<string, string> {
  const image = process.env.CORRAL_SANDBOX_IMAGE;
  return image ? { CORRAL_SANDBOX_IMAGE: image } : {};
}
