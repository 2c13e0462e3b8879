/** Stops the Redis container that global-setup started. */
export default async function globalTeardown(): Promise<void> {
  const c = (globalThis as Record<string, unknown>).__corralRedis as { stop(o?: object): Promise<unknown> } | undefined;
  if (c) await c.stop({ timeout: 1000 });
}
