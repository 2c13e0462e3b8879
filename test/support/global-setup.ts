/**
 * Integration-test setup: one real Redis (a container from the locally built corral/redis image,
 * through testcontainers without its reaper, which cannot be pulled here). Docker must answer: a
 * missing engine fails the run, it never skips tests.
 */
import { GenericContainer, Wait } from 'testcontainers';
import { instanceLabels } from './sandbox-env';

export default async function globalSetup(): Promise<void> {
  process.env.TESTCONTAINERS_RYUK_DISABLED = 'true';
  // This machine has /.dockerenv, so testcontainers would look for the Docker host's address by running
  // an alpine:3.14 container — a registry pull (an outside address) that can hang. The engine is local.
  process.env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
  if (process.env.CORRAL_TEST_REDIS_URL) {
    process.env.REDIS_URL = process.env.CORRAL_TEST_REDIS_URL;
    return;
  }
  const image = process.env.CORRAL_REDIS_IMAGE ?? 'corral/redis:7';
  let container;
  try {
    container = await new GenericContainer(image)
      .withExposedPorts(6379)
      .withLabels({ 'corral.test': 'redis', ...instanceLabels() })
      .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
      .start();
  } catch (err) {
    throw new Error(
      `integration tests need a Docker engine and the ${image} image (run .ci/bootstrap): ${(err as Error).message}`,
      { cause: err },
    );
  }
  process.env.REDIS_URL = `redis://${container.getHost()}:${container.getMappedPort(6379)}`;
  (globalThis as Record<string, unknown>).__corralRedis = container;
}
