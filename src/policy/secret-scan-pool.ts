/**
 * The SecretMasker: secret-scanner.ts in a worker thread of its own (bundled once per process by
 * esbuild and started with `eval`, as the egress proxy is), so a slow scan never stalls the worker's
 * event loop and other runs. Every scan has a budget (SCAN_BUDGET_MS); the thread checks it itself,
 * and one that does not answer within the budget and a margin is terminated and started again.
 *
 * Fail closed: text the full scan could not finish (time, size, a dead thread) is masked coarsely
 * instead — every long token of key-like characters whose entropy is high, and every PEM private key
 * block — so nothing unscanned passes; the result says so.
 */
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { MaskedSecret, MaskResult, SecretMasker } from '../domain/effects';
import { maskFindings, shannon, type SecretFinding } from './secret-scanner';

export const SCAN_BUDGET_MS = 5000;
/** Longer text is masked coarsely without the full scan (tool output is far smaller: see CORRAL_MAX_OUTPUT_BYTES). */
export const MAX_SCAN_CHARS = 4 * 1024 * 1024;
const START_TIMEOUT_MS = 30_000;

let bundle: Promise<string> | undefined;

function workerBundle(): Promise<string> {
  if (!bundle) {
    const p = (async () => {
      const { build } = await import('esbuild');
      const r = await build({ entryPoints: [join(__dirname, 'secret-scan-worker.ts')], bundle: true, platform: 'node', format: 'cjs', target: 'node22', write: false, logLevel: 'silent' });
      return r.outputFiles[0]!.text;
    })();
    p.catch(() => (bundle = undefined));
    bundle = p;
  }
  return bundle;
}

/**
 * The fallback mask: PEM private keys, and tokens of 20+ key-like characters that mix letters and
 * digits with more than 3 bits of entropy per character, or are 32+ long with more than 4.5 (hashes, keys, tokens;
 * not identifiers like the_quick_brown_fox). Linear: one pass of simple character-class runs.
 */
export function coarseMask(text: string): { text: string; count: number } {
  let count = 0;
  const pem = text.replace(/-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY-----[A-Za-z0-9+/=\s:,-]{0,20000}?(-----END[A-Z0-9 ]{0,40}PRIVATE KEY-----|$)/g, () => {
    count += 1;
    return '[masked secret: private key (coarse)]';
  });
  const out = pem.replace(/[A-Za-z0-9+/=_.~-]{20,}/g, (tok) => {
    const e = shannon(tok);
    if (!((tok.length >= 32 && e > 4.5) || (e > 3 && /[0-9]/.test(tok) && /[A-Za-z]/.test(tok)))) return tok;
    count += 1;
    return '[masked: long high-entropy token (coarse)]';
  });
  return { text: out, count };
}

function summarise(findings: readonly SecretFinding[]): MaskedSecret[] {
  const by = new Map<string, MaskedSecret>();
  for (const f of findings) {
    const m = by.get(f.rule);
    if (m) m.count += 1;
    else by.set(f.rule, { rule: f.rule, count: 1, fingerprint: f.fingerprint });
  }
  return [...by.values()];
}

export class SecretScanPool implements SecretMasker {
  private worker: Worker | undefined;
  private starting: Promise<Worker> | undefined;
  private next = 1;
  private readonly waiting = new Map<number, (m: { findings?: SecretFinding[]; timeout?: string; error?: string }) => void>();

  constructor(private readonly budgetMs = SCAN_BUDGET_MS) {}

  /** Starts the thread (and compiles the rules) ahead of the first scan. */
  async warm(): Promise<void> {
    await this.thread();
  }

  private thread(): Promise<Worker> {
    if (this.worker) return Promise.resolve(this.worker);
    this.starting ??= (async () => {
      const code = await workerBundle();
      const w = new Worker(code, { eval: true, resourceLimits: { maxOldGenerationSizeMb: 256 } });
      w.unref();
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('the secret scanner did not start in time')), START_TIMEOUT_MS);
        w.once('message', () => { clearTimeout(t); resolve(); });
        w.once('error', (e) => { clearTimeout(t); reject(e); });
      });
      w.on('message', (m: { id?: number; findings?: SecretFinding[]; timeout?: string; error?: string }) => {
        if (m.id === undefined) return;
        this.waiting.get(m.id)?.(m);
        this.waiting.delete(m.id);
      });
      const gone = (why: string) => {
        if (this.worker === w) this.worker = undefined;
        for (const [id, f] of this.waiting) {
          f({ error: why });
          this.waiting.delete(id);
        }
      };
      w.on('error', (e) => gone(`the secret scanner failed: ${e.message}`));
      w.on('exit', () => gone('the secret scanner stopped'));
      this.worker = w;
      return w;
    })().finally(() => (this.starting = undefined));
    return this.starting;
  }

  async mask(text: string): Promise<MaskResult> {
    if (text.length === 0) return { text, found: [] };
    if (text.length > MAX_SCAN_CHARS) return this.coarse(text, `the text is longer than ${MAX_SCAN_CHARS} characters`);
    let answer: { findings?: SecretFinding[]; timeout?: string; error?: string };
    try {
      const w = await this.thread();
      const id = this.next++;
      answer = await new Promise((resolve) => {
        const t = setTimeout(() => {
          this.waiting.delete(id);
          // no answer within the budget and a margin: the thread is stuck; a new one is started for the next scan
          void w.terminate();
          resolve({ timeout: `the secret scan did not answer within ${Math.round((this.budgetMs + 2000) / 1000)} s` });
        }, this.budgetMs + 2000);
        t.unref?.();
        this.waiting.set(id, (m) => { clearTimeout(t); resolve(m); });
        w.postMessage({ id, text, budgetMs: this.budgetMs });
      });
    } catch (err) {
      answer = { error: (err as Error).message };
    }
    if (!answer.findings) return this.coarse(text, answer.timeout ?? answer.error ?? 'the scan failed');
    return { text: maskFindings(text, answer.findings), found: summarise(answer.findings) };
  }

  private coarse(text: string, why: string): MaskResult {
    const c = coarseMask(text);
    return { text: c.text, found: c.count ? [{ rule: 'coarse-high-entropy', count: c.count, fingerprint: '' }] : [], coarse: why };
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    await w?.terminate();
  }
}

let shared: SecretScanPool | undefined;

/** One pool per process, for callers that were not handed one (the composition root hands its own). */
export function sharedSecretPool(): SecretScanPool {
  shared ??= new SecretScanPool();
  return shared;
}
