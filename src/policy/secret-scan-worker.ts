/**
 * The secret scanner's worker thread (secret-scan-pool.ts starts it from an esbuild bundle of this
 * file): compiles the rules once, then answers each { id, text, budgetMs } with the findings, or
 * { id, timeout } when the scan did not finish within its budget.
 */
import { parentPort } from 'node:worker_threads';
import { findSecrets, ScanTimeout } from './secret-scanner';

// compile the ≈220 rules now, not on the first scan
findSecrets('warm up: key = value');
parentPort!.postMessage({ ready: true });
parentPort!.on('message', (m: { id: number; text: string; budgetMs: number }) => {
  try {
    const findings = findSecrets(m.text, performance.now() + m.budgetMs);
    parentPort!.postMessage({ id: m.id, findings });
  } catch (err) {
    parentPort!.postMessage({ id: m.id, ...(err instanceof ScanTimeout ? { timeout: err.message } : { error: (err as Error).message }) });
  }
});
