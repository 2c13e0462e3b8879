/**
 * Evaluation of the static layer against the labelled set (test/fixtures/policy/labelled.jsonl):
 * false-allow rate on cases that must not be allowed, false-deny rate (not "allow") on benign
 * developer work, and the misclassified cases. Used by `corral policy eval` and the unit tests.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { evaluateStatic, type StaticResult } from './evaluate-static';
import type { Policy } from './policy-schema';

export const LabelledCaseSchema = z.strictObject({
  id: z.string().min(1),
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()),
  task: z.string(),
  /** allow: benign work that must stay easy; not_allow: ask or deny both fine; ask/deny: exact. */
  expected: z.enum(['allow', 'not_allow', 'ask', 'deny']),
  source: z.string().min(1),
});
export type LabelledCase = z.infer<typeof LabelledCaseSchema>;

export function loadLabelledSet(file: string): LabelledCase[] {
  return readFileSync(file, 'utf8').split('\n').map((l, i) => [l.trim(), i + 1] as const).filter(([l]) => l && !l.startsWith('//')).map(([l, n]) => {
    const r = LabelledCaseSchema.safeParse(JSON.parse(l));
    if (!r.success) throw new Error(`${file}:${n}: ${r.error.issues.map((x) => `${x.path.join('.')}: ${x.message}`).join('; ')}`);
    return r.data;
  });
}

export interface EvalReport {
  total: number;
  mustNotAllow: number;
  falseAllows: number;
  falseAllowRate: number;
  benign: number;
  falseDenies: number;
  falseDenyRate: number;
  /** Benign cases that were denied outright (not just asked). */
  hardDenies: number;
  /** Exact-expectation cases (ask/deny) that got another non-allow decision. */
  exactMismatches: number;
  misclassified: Array<{ id: string; expected: string; got: StaticResult; command: string }>;
}

export function evaluateLabelled(policy: Policy, cases: LabelledCase[]): EvalReport {
  const r: EvalReport = { total: cases.length, mustNotAllow: 0, falseAllows: 0, falseAllowRate: 0, benign: 0, falseDenies: 0, falseDenyRate: 0, hardDenies: 0, exactMismatches: 0, misclassified: [] };
  for (const c of cases) {
    const got = evaluateStatic(policy, { tool: c.tool, args: c.args });
    const command = c.tool === 'bash' ? String(c.args.command) : `${c.tool} ${JSON.stringify(c.args)}`;
    let wrong = false;
    if (c.expected === 'allow') {
      r.benign++;
      if (got.decision !== 'allow') { r.falseDenies++; wrong = true; }
      if (got.decision === 'deny') r.hardDenies++;
    } else {
      r.mustNotAllow++;
      if (got.decision === 'allow') { r.falseAllows++; wrong = true; }
      else if (c.expected !== 'not_allow' && got.decision !== c.expected) { r.exactMismatches++; wrong = true; }
    }
    if (wrong) r.misclassified.push({ id: c.id, expected: c.expected, got, command });
  }
  r.falseAllowRate = r.mustNotAllow ? r.falseAllows / r.mustNotAllow : 0;
  r.falseDenyRate = r.benign ? r.falseDenies / r.benign : 0;
  return r;
}
