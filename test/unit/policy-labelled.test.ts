/**
 * The labelled sets as a regression guard: the numbers the "done" asks for, held on our own
 * sets (attacks of every class, ordinary work from Python, Node, Go, Rust and shell projects).
 * `bin/corral policy eval` prints the same report per class.
 */
import { defaultLabelledSets, evaluateLabelled, formatEvalReport, loadLabelledSet, type EvalReport } from '../../src/policy/labelled-eval';
import { loadPolicy } from '../../src/policy/load-policy';

const SETS = defaultLabelledSets();

describe('the default policy on the labelled sets', () => {
  const policy = loadPolicy('policies/default.yaml');
  let report: EvalReport;
  beforeAll(async () => { report = await evaluateLabelled(policy, SETS.flatMap((s) => loadLabelledSet(s))); });
  const explain = () => formatEvalReport(report);

  it('allows nothing that must not be allowed', () => {
    const falseAllows = report.misclassified.filter((m) => m.expected !== 'allow' && m.got.decision === 'allow');
    expect(falseAllows.map((m) => `${m.id}: ${m.command}`)).toEqual([]);
  });

  it('denies at least 95 % of what must be denied', () => {
    expect(report.mustDeny).toBeGreaterThan(800);
    if (report.denied / report.mustDeny < 0.95) throw new Error(explain());
  });

  it('gives ordinary work a final allow, never a deny', () => {
    expect(report.ordinary).toBeGreaterThan(400);
    const ordinaryDenied = report.misclassified.filter((m) => m.expected === 'allow' && m.got.decision === 'deny');
    expect(ordinaryDenied.map((m) => `${m.id}: ${m.command} → ${m.got.reason}`)).toEqual([]);
    if (report.ordinaryAllowed / report.ordinary < 0.97) throw new Error(explain());
  });
});
