/** The name of a variable an operator may set in a sandbox's processes: never one corral sets itself. */
import { z } from 'zod';

/** Variables corral sets (PATH, HOME, the proxy, the agent's git identity, the CA bundle): an environment may not. */
const RESERVED_ENV = new Set([
  'PATH', 'HOME', 'USER', 'LANG', 'HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy', 'ALL_PROXY', 'all_proxy',
  // The agent's git identity: CORRAL_GIT_AUTHOR_NAME / CORRAL_GIT_AUTHOR_EMAIL, per run.
  'GIT_AUTHOR_NAME', 'GIT_AUTHOR_EMAIL', 'GIT_COMMITTER_NAME', 'GIT_COMMITTER_EMAIL',
  // The operator's CA bundle (CORRAL_EGRESS_CA_FILE; sandbox/egress-ca.ts).
  'NODE_EXTRA_CA_CERTS', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'PIP_CERT', 'GIT_SSL_CAINFO', 'CURL_CA_BUNDLE',
]);

export const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'must be a variable name').refine((k) => !RESERVED_ENV.has(k), 'is set by corral itself');
