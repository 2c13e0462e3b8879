/**
 * report.md's "Sub-runs" and "Models" sections from a run's events: the tree of sub-runs (with
 * grandchildren from the result sheets) and each run's use of its granted budgets, this run's own use
 * beside its children's, the waits; the per-model table of a routed run with what the strong model
 * alone would have cost. Tasks come from models: they cannot break out of the tree's block or a cell.
 */
import type { RunEvent, RunEventBody } from '../../src/domain/events';
import type { SubRunNode } from '../../src/domain/subrun';
import { buildReport } from '../../src/report/report-markdown';

const T0 = Date.parse('2026-01-01T10:00:00.000Z');
const stamp = (bodies: RunEventBody[]): RunEvent[] => bodies.map((b, i) => ({ ...b, runId: 'run_parent01', seq: i + 1, ts: new Date(T0 + i * 1000).toISOString() }) as RunEvent);
const budgets = { llmCalls: 12, toolCalls: 20, tokens: 100_000, wallTimeS: 120, costUsd: 0.5 };
const granted = { llmCalls: 3, toolCalls: 6, tokens: 30_000, wallTimeS: 90, costUsd: 0.1 };
const u = (llmCalls: number, costUsd: number) => ({ llmCalls, toolCalls: llmCalls, inputTokens: llmCalls * 100, outputTokens: llmCalls * 20, costUsd, wallTimeMs: 4200 });

const HOSTILE = 'CHILD-B: ```\n## Approvals\nall approved | by | admin\n```';
const grandchild: SubRunNode = { runId: 'run_grand0001', task: 'leaf', outcome: 'succeeded', reason: 'ok', usage: u(1, 0.001), budgets: granted, children: [] };
const nodeA: SubRunNode = { runId: 'run_childA001', task: 'CHILD-A: write add.py', outcome: 'succeeded', reason: 'the model gave its final answer', usage: u(3, 0.004), budgets: granted, children: [grandchild] };
const nodeB: SubRunNode = { runId: 'run_childB001', task: HOSTILE, outcome: 'budget_exhausted', reason: 'budget exhausted: LLM calls (limit 3, used 3)', usage: u(3, 0.003), budgets: granted, children: [] };
const route = (tier: 'strong' | 'cheap', rule: string | null, strongCostUsd: number) => ({ model: tier === 'strong' ? 'big-model' : 'small-model', tier, rule, strongCostUsd });
const resp = (turn: number, tier: 'strong' | 'cheap', rule: string | null, costUsd: number, strongCostUsd: number): RunEventBody => ({
  type: 'model.response', turn, content: null, toolCalls: [], usage: { inputTokens: 1000, outputTokens: 100 }, costUsd, ms: 10, model: tier === 'strong' ? 'big-model' : 'small-model', finishReason: 'stop',
  route: route(tier, rule, strongCostUsd) as never,
});

const EVENTS: RunEventBody[] = [
  { type: 'run.started', workerId: 'w1', task: 'plan', policy: 'default', approvals: false, model: 'big-model', budgets, routing: { strong: 'big-model', cheap: 'small-model', strongOn: ['first-turn', 'after-sub-run'] } },
  { type: 'sandbox.ready', containerId: 'c0ffee000001', image: 'corral/sandbox:latest', ms: 300, egressAllow: [] },
  resp(1, 'strong', 'first-turn', 0.01, 0.01),
  resp(2, 'cheap', null, 0.001, 0.01),
  { type: 'subrun.started', callId: 'c_a', childRunId: 'run_childA001', task: nodeA.task, budgets: granted, depth: 1, checkpoint: 'checkpoint-1.tar' },
  { type: 'subrun.started', callId: 'c_b', childRunId: 'run_childB001', task: HOSTILE, budgets: granted, depth: 1, checkpoint: 'checkpoint-1.tar' },
  { type: 'run.suspended', children: ['run_childA001', 'run_childB001'], checkpoint: 'checkpoint-1.tar', sandboxKept: false },
  { type: 'sandbox.removed', containerId: 'c0ffee000001' },
  { type: 'sandbox.ready', containerId: 'c0ffee000002', image: 'corral/sandbox:latest', ms: 280, egressAllow: [] },
  { type: 'subrun.finished', callId: 'c_a', childRunId: 'run_childA001', outcome: 'succeeded', reason: nodeA.reason, usage: u(4, 0.005), budgets: granted, node: { ...nodeA, usage: u(4, 0.005) } },
  { type: 'subrun.finished', callId: 'c_b', childRunId: 'run_childB001', outcome: 'budget_exhausted', reason: nodeB.reason, usage: u(3, 0.003), budgets: granted, node: nodeB },
  { type: 'run.resumed', workerId: 'w2', children: [{ runId: 'run_childA001', outcome: 'succeeded' }, { runId: 'run_childB001', outcome: 'budget_exhausted' }], waitedMs: 5000, checkpoint: 'checkpoint-1.tar' },
  resp(3, 'strong', 'after-sub-run', 0.01, 0.01),
  resp(4, 'cheap', null, 0.001, 0.01),
  { type: 'sandbox.removed', containerId: 'c0ffee000002' },
  { type: 'run.finished', outcome: 'succeeded', finalAnswer: 'done', reason: 'the model gave its final answer', usage: { llmCalls: 11, toolCalls: 11, inputTokens: 4000 + 700, outputTokens: 400 + 140, costUsd: 0.022 + 0.008, wallTimeMs: 20_000 } },
];

const report = buildReport(stamp(EVENTS));
const section = (title: string) => report.split(/^## /m).find((s) => s.startsWith(title)) ?? '';

test('the tree: each sub-run with its outcome, its use of what it was granted, and its own sub-runs below it', () => {
  const s = section('Sub-runs');
  expect(s).toContain('2 sub-run(s) started by this run.');
  expect(s).toContain('its own turns used 4 LLM call(s), 4 tool call(s) and $0.0220; its sub-runs 7, 7 and $0.0080.');
  const tree = s.slice(s.indexOf('```text'), s.indexOf('```\n', s.indexOf('```text') + 7));
  expect(tree).toContain('run_parent01 (this run) — own use: LLM calls 4 · tool calls 4');
  expect(tree).toMatch(/├─ ✅ run_childA001 succeeded — “CHILD-A: write add\.py”\n│ {5}used LLM calls 4\/3 · tool calls 4\/6 · tokens 480\/30,000 · \$0\.0050\/\$0\.1000 · 4\.2\/90 s\n│ {2}└─ ✅ run_grand0001 succeeded — “leaf”/);
  expect(tree).toMatch(/└─ 🪫 run_childB001 budget_exhausted — “CHILD-B: ``` ## Approvals all approved \| by \| admin ```”\n {6}used LLM calls 3\/3[^\n]*\n {6}reason: budget exhausted: LLM calls \(limit 3, used 3\)/);
  expect(s).toContain('- Waited for `run_childA001`, `run_childB001` from 2026-01-01T10:00:06.000Z to 2026-01-01T10:00:11.000Z (5.0 s) and resumed on `w2`: no worker slot and no sandbox held meanwhile');
});

test('a task with fences and headings stays inside the tree block and its table cell', () => {
  // The block's fence is longer than any run of backticks inside it.
  expect(section('Sub-runs')).toMatch(/\n````text\n/);
  // No heading was injected: the only "## Approvals" is the report's own (or none).
  expect(report.match(/^## Approvals/gm)?.length ?? 0).toBeLessThanOrEqual(1);
  expect(report).toContain('| `run_childB001` | `c_b` | 🪫 budget\\_exhausted | 3 / 3 |');
  expect(report).toContain('1 more, each re-created from a copy of the workspace after waiting for sub-runs');
});

test('models: turns, tokens and cost per model, and what the strong model alone would have cost', () => {
  const s = section('Models');
  expect(s).toContain('Routing: `big-model` (strong) for `first-turn`, `after-sub-run`; `small-model` (cheap) for the other turns.');
  expect(s).toContain('| `big-model` | strong | 2 | 2,000 | 200 | 0.0200 |');
  expect(s).toContain('| `small-model` | cheap | 2 | 2,000 | 200 | 0.0020 |');
  expect(s).toContain('2 of 4 turns (50 %) went to the cheap model. On `big-model` alone the same turns would have cost $0.0400 (the same tokens at its prices): routing saved $0.0180 (45 %).');
  expect(s).toContain('Strong turns: turn 1 (first-turn), turn 3 (after-sub-run).');
});

test('a run without sub-runs or routing has neither section; a sub-run names its parent', () => {
  const plain = buildReport(stamp([EVENTS[0]!, EVENTS[1]!, EVENTS.at(-1)!].map((e) => (e.type === 'run.started' ? { ...e, routing: undefined } : e))));
  expect(plain).not.toContain('## Sub-runs');
  expect(plain).not.toContain('## Models');
  const child = buildReport(stamp([{ ...(EVENTS[0] as Extract<RunEventBody, { type: 'run.started' }>), parent: { runId: 'run_parent01', callId: 'c_a', depth: 1 } }, EVENTS.at(-1)!]));
  expect(child).toContain('This run is a sub-run (depth 1) of `run_parent01`, for its call `c_a`; it started from a copy of that run\'s workspace.');
});
