/**
 * A stand-in worker for one test: starts a run's egress proxy process, prints its pid as one JSON
 * line on stdout and waits to be killed — so the test can check that a worker that dies takes its
 * proxies with it. argv[2]: the socket directory.
 */
import { loadConfig } from '../../src/config';
import { startEgressProxy } from '../../src/sandbox/egress-proxy-host';

void startEgressProxy({
  runId: 'run_orphan', dir: process.argv[2]!, allow: ['pypi.org'], config: loadConfig({}),
  onAttempt: () => undefined, onSummary: () => undefined, log: () => undefined,
}).then((h) => {
  process.stdout.write(`${JSON.stringify({ pid: h.pid })}\n`);
  setInterval(() => undefined, 60_000);
}, (err: unknown) => { console.error(err); process.exitCode = 1; });
