/**
 * The entry of an analysis worker thread (bundled by analysis-pool.ts, never imported): it receives
 * the loaded policies once, then answers `{id, policy, call, history}` with `{id, result}` — the
 * static decision from evaluate-static.ts. Whatever it is sent stays inside this thread: a call that
 * loops or allocates without end is the pool's to stop (it terminates the thread).
 */
import { parentPort } from 'node:worker_threads';
import { evaluateStatic, type StaticCall } from './evaluate-static';
import type { Policy } from './policy-schema';
import type { CallHistory } from './static-analyzer';

type Message =
  | { type: 'init'; policies: Policy[] }
  | { type: 'analyze'; id: number; policy: string; call: StaticCall; history?: CallHistory };

const policies = new Map<string, Policy>();
const port = parentPort!;

port.on('message', (m: Message) => {
  if (m.type === 'init') {
    for (const p of m.policies) policies.set(p.name, p);
    port.postMessage({ type: 'ready' });
    return;
  }
  if (m.type === 'analyze') {
    const policy = policies.get(m.policy);
    if (!policy) { port.postMessage({ type: 'result', id: m.id, error: `unknown policy "${m.policy}"` }); return; }
    port.postMessage({ type: 'result', id: m.id, result: evaluateStatic(policy, m.call, m.history) });
  }
});
