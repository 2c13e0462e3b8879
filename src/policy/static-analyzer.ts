/**
 * The StaticAnalyzer port: the gate's static step (evaluate-static.ts) behind an async boundary, so
 * it can run off the worker's event loop (analysis-pool.ts: worker threads with their own time and
 * memory bound). `inProcessAnalyzer` runs it on the caller's thread — for tests and offline tools
 * whose input is trusted, never for a run's tool calls.
 *
 * `history` (CallHistory, domain/gate.ts) is what the run's earlier calls wrote and linked.
 */
import type { CallHistory } from '../domain/gate';
import { evaluateStatic, type StaticCall, type StaticResult } from './evaluate-static';
import type { Policy } from './policy-schema';

export type { CallHistory, MadeLink } from '../domain/gate';

export interface StaticAnalyzer {
  /** The static decision on one call; never rejects for the call's content (an unanalysable call is `ask`). */
  analyze(policy: string, call: StaticCall, history?: CallHistory): Promise<StaticResult>;
  /** Frees threads; later calls reject. */
  close(): Promise<void>;
}

/** On the caller's thread: for tests and offline tools over trusted input. */
export function inProcessAnalyzer(policies: ReadonlyMap<string, Policy>): StaticAnalyzer {
  return {
    async analyze(name, call, history) {
      const policy = policies.get(name);
      if (!policy) throw new Error(`unknown policy "${name}"`);
      return evaluateStatic(policy, call, history);
    },
    async close() {},
  };
}
