/**
 * The environment catalogue over HTTP (environments/*.yaml, loaded at start-up): what a RunSpec's
 * `environment` may name. Operator configuration, the same for every tenant; no file paths.
 *
 *   GET /v1/environments   { environments: [{ name, description, image, setup, cache, limits, egress, env }] }
 */
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { builtInDefault, describeEnvironment } from '../domain/environment';
import type { ApiDeps } from './api-deps';
import { route, type RouteDoc } from './openapi';

const EnvironmentSummary = z.object({
  name: z.string(),
  description: z.string(),
  image: z.string(),
  setup: z.object({
    commands: z.array(z.string()).meta({ description: 'run in order before the first model call; the first that fails ends the run setup_failed' }),
    egress: z.array(z.string()).meta({ description: 'where the setup phase may connect; closed before the agent starts' }),
    timeoutS: z.number(),
  }),
  cache: z.union([z.literal(false), z.object({ files: z.array(z.string()).meta({ description: 'the lockfiles whose content keys the cache (with the tenant and the environment)' }) })]),
  limits: z.record(z.string(), z.unknown()).meta({ description: 'defaults for runs in this environment; a run\'s own limits win' }),
  egress: z.array(z.string()).meta({ description: 'the agent\'s egress when the run names none' }),
  env: z.array(z.string()).meta({ description: 'names of the variables it sets in the sandbox' }),
});
const EnvironmentList = z.object({ environments: z.array(EnvironmentSummary) });

export function registerEnvironmentRoutes(app: FastifyInstance, deps: ApiDeps, docs: RouteDoc[]): void {
  const envs = deps.environments ?? new Map([['default', builtInDefault(deps.config)]]);
  route(app, docs, {
    method: 'GET', url: '/v1/environments', tag: 'environments', redis: false, summary: 'The environments a run may name (CORRAL_ENVIRONMENT_DIR)',
    responses: { 200: { description: 'every environment, by name', schema: EnvironmentList } },
  }, async () => ({ environments: [...envs.values()].sort((a, b) => a.name.localeCompare(b.name)).map(describeEnvironment) }));
}
