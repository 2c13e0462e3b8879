/**
 * The worker's /readyz check of the docker gate: when DOCKER_HOST is a unix socket, GET
 * /corral-gate/health on it must answer 200 (the gate and its engine are up). A 404 means DOCKER_HOST
 * is an engine itself (no gate in between): that passes, as the `docker` check covers it.
 */
import http from 'node:http';

export function gateReadyCheck(dockerHost: string | undefined): Record<string, () => Promise<unknown>> {
  if (!dockerHost?.startsWith('unix://')) return {};
  const socketPath = new URL(dockerHost).pathname;
  return {
    'docker-gate': () => new Promise((resolve, reject) => {
      const req = http.get({ socketPath, path: '/corral-gate/health', timeout: 2000 }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (d: Buffer) => parts.length < 16 && parts.push(d));
        res.once('end', () => {
          if (res.statusCode === 200 || res.statusCode === 404) resolve(res.statusCode === 200 ? 'gate' : 'no gate');
          else reject(new Error(`the docker gate answers ${res.statusCode}: ${Buffer.concat(parts).toString('utf8').slice(0, 200)}`));
        });
      });
      req.once('timeout', () => req.destroy(new Error('the docker gate did not answer within 2 s')));
      req.once('error', reject);
    }),
  };
}
