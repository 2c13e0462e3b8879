/**
 * Evaluation of the static layer against labelled sets (test/fixtures/policy/*.jsonl), per class:
 * false allows on calls that must not be allowed (every static allow is final, so each is a final
 * false allow), must-deny calls that were denied, denies of ordinary work, final allows of ordinary
 * work and classifier calls per 100 ordinary calls (its asks). Used by `corral policy eval` and the
 * unit tests.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { evaluateStatic, type StaticResult } from './evaluate-static';
import type { Policy } from './policy-schema';

export const LabelledCaseSchema = z.strictObject({
  id: z.string().min(1),
  tool: z.string().min(1),
  args: z.record(z.string(), z.unknown()),
  task: z.string(),
  /** allow: ordinary work that must stay easy; not_allow: ask or deny both fine; deny/ask: exact. */
  expected: z.enum(['allow', 'not_allow', 'ask', 'deny']),
  source: z.string().min(1),
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

export function evaluateLabelled(policy: Policy, cases: LabelledCase[]): EvalReport {
  const all = empty();
  const byClass = new Map<string, ClassReport>();
  const misclassified: EvalReport['misclassified'] = [];
  for (const c of cases) {
    const cls = classOf(c);
    const k = byClass.get(cls) ?? empty();
    byClass.set(cls, k);
    const got = evaluateStatic(policy, { tool: c.tool, args: c.args });
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
  return { ...all, total: cases.length, byClass, misclassified };
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
