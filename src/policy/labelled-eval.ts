/**
 * Evaluation of the static layer against labelled sets (test/fixtures/policy/*.jsonl), per class:
 * false allows on calls that must not be allowed (every static allow is final, so each is a final
 * false allow), must-deny calls that were denied, denies of ordinary work, final allows of ordinary
 * work and classifier calls per 100 ordinary calls (its asks). Used by `corral policy eval` and the
 * unit tests.
 *
 * Cases that share a `run` are one run's calls in file order: each is judged with the history of the
 * ones before it (the files they wrote, the links they made), as the gate judges a run's calls.
 * `expected: context` marks a call replayed only for that history (a trajectory's editor writes),
 * not counted.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import type { CallHistory } from '../domain/gate';
import { evaluateStatic, type StaticCall, type StaticResult } from './evaluate-static';
import type { Policy } from './policy-schema';
import { emptyHistory, extendHistory } from '../domain/call-history';

export const LabelledCaseSchema = z.strictObject({
  id: z.string().min(1),
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()),
  task: z.string(),
  /** allow: ordinary work that must stay easy; not_allow: ask or deny both fine; deny/ask: exact. */
  expected: z.enum(['allow', 'not_allow', 'ask', 'deny', 'context']),
  source: z.string().min(1),
  /** Cases with the same run are one run's calls, in file order (see the module header). */
  run: z.string().min(1).optional(),
  /** The attack or work class (c01-functions, ord-python…); defaults to the id's prefix. */
  class: z.string().min(1).optional(),
  /** Why a label differs from what its author first wrote. */
  note: z.string().optional(),
});
export type LabelledCase = z.infer<typeof LabelledCaseSchema>;

/** Every labelled set of the project: the .jsonl files of test/fixtures/policy, in name order. */
export function defaultLabelledSets(root = '.'): string[] {
  const dir = join(root, 'test', 'fixtures', 'policy');
  return readdirSync(dir).filter((f) => f.endsWith('.jsonl')).sort().map((f) => join(dir, f));
}

export function loadLabelledSet(file: string): LabelledCase[] {
  return readFileSync(file, 'utf8').split('\n').map((l, i) => [l.trim(), i + 1] as const).filter(([l]) => l && !l.startsWith('//')).map(([l, n]) => {
    const r = LabelledCaseSchema.safeParse(JSON.parse(l));
    if (!r.success) throw new Error(`${file}:${n}: ${r.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`);
    return r.data;
  });
}

export interface ClassReport {
  cases: number;
  mustNotAllow: number;
  falseAllows: number;
  mustDeny: number;
  denied: number;
  ordinary: number;
  ordinaryDenied: number;
  ordinaryAllowed: number;
  ordinaryAsked: number;
}

export interface EvalReport extends ClassReport {
  total: number;
  byClass: Map<string, ClassReport>;
  misclassified: Array<{ id: string; cls: string; expected: string; got: StaticResult; command: string }>;
}

const empty = (): ClassReport => ({ cases: 0, mustNotAllow: 0, falseAllows: 0, mustDeny: 0, denied: 0, ordinary: 0, ordinaryDenied: 0, ordinaryAllowed: 0, ordinaryAsked: 0 });

export function classOf(c: LabelledCase): string {
  return c.class ?? (c.expected === 'allow' ? 'legacy-ordinary' : 'legacy-attacks');
}

/** Judges one call; the default runs the static layer on this thread. */
export type LabelledAnalyze = (call: StaticCall, history: CallHistory | undefined) => Promise<StaticResult> | StaticResult;

/** Runs at most `concurrency` runs (or single cases) at once; within a run, calls go in order. */
export async function evaluateLabelled(policy: Policy, cases: LabelledCase[], analyze?: LabelledAnalyze, concurrency = 1): Promise<EvalReport> {
  const judge: LabelledAnalyze = analyze ?? ((call, history) => evaluateStatic(policy, call, history));
  const got = new Map<LabelledCase, StaticResult>();
  const groups = new Map<string, LabelledCase[]>();
  cases.forEach((c, i) => {
    const key = c.run ? `run:${c.run}` : `case:${i}`;
    groups.set(key, [...(groups.get(key) ?? []), c]);
  });
  const queue = [...groups.values()];
  const worker = async () => {
    for (let g = queue.shift(); g; g = queue.shift()) {
      let history = emptyHistory();
      for (const c of g) {
        const r = await judge({ tool: c.tool, args: c.args }, c.run ? history : undefined);
        got.set(c, r);
        if (c.run) history = extendHistory(history, r.adds);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, concurrency) }, worker));
  return report(cases, got);
}

function report(cases: LabelledCase[], results: Map<LabelledCase, StaticResult>): EvalReport {
  const all = empty();
  const byClass = new Map<string, ClassReport>();
  const misclassified: EvalReport['misclassified'] = [];
  let total = 0;
  for (const c of cases) {
    if (c.expected === 'context') continue;
    total++;
    const cls = classOf(c);
    const k = byClass.get(cls) ?? empty();
    byClass.set(cls, k);
    const got = results.get(c)!;
    const command = c.tool === 'bash' ? String(c.args.command) : `${c.tool} ${JSON.stringify(c.args)}`;
    for (const r of [all, k]) {
      r.cases++;
      if (c.expected === 'allow') {
        r.ordinary++;
        if (got.decision === 'allow') r.ordinaryAllowed++;
        else if (got.decision === 'deny') r.ordinaryDenied++;
        else r.ordinaryAsked++;
      } else {
        r.mustNotAllow++;
        if (got.decision === 'allow') r.falseAllows++;
        if (c.expected === 'deny') { r.mustDeny++; if (got.decision === 'deny') r.denied++; }
      }
    }
    const wrong = c.expected === 'allow'
      ? got.decision !== 'allow'
      : got.decision === 'allow' || (c.expected === 'deny' && got.decision !== 'deny') || (c.expected === 'ask' && got.decision !== 'ask');
    if (wrong) misclassified.push({ id: c.id, cls, expected: c.expected, got, command });
  }
  return { ...all, total, byClass, misclassified };
}

const pct = (n: number, d: number) => (d ? `${((n / d) * 100).toFixed(1)}%` : '—');

export function formatEvalReport(r: EvalReport): string {
  const lines: string[] = [];
  const row = (name: string, k: ClassReport) => {
    const parts = [name.padEnd(22), String(k.cases).padStart(5)];
    parts.push(k.mustNotAllow ? `false allows ${String(k.falseAllows).padStart(3)}/${k.mustNotAllow} (${pct(k.falseAllows, k.mustNotAllow)})` : ''.padEnd(28));
    parts.push(k.mustDeny ? `denied ${k.denied}/${k.mustDeny} (${pct(k.denied, k.mustDeny)})` : '');
    if (k.ordinary) parts.push(`ordinary: final allows ${k.ordinaryAllowed}/${k.ordinary} (${pct(k.ordinaryAllowed, k.ordinary)}), denies ${k.ordinaryDenied}, classifier calls per 100 ${((k.ordinaryAsked / k.ordinary) * 100).toFixed(1)}`);
    lines.push(parts.join('  ').trimEnd());
  };
  lines.push('class                  cases  (every static allow is final: false allows = final false allows)');
  for (const [name, k] of [...r.byClass.entries()].sort(([a], [b]) => a.localeCompare(b))) row(name, k);
  row('ALL', r);
  if (r.misclassified.length) {
    lines.push('', 'misclassified:');
    for (const m of r.misclassified) lines.push(`  ${m.id} [${m.cls}]: expected ${m.expected}, got ${m.got.decision} (${m.got.rule ?? 'no rule'}: ${m.got.reason}) — ${m.command.length > 200 ? m.command.slice(0, 200) + '…' : m.command}`);
  }
  return lines.join('\n') + '\n';
}
