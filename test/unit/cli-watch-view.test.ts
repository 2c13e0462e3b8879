/** The `corral watch` view: lines for a run's events (steps, decisions, results, approval hints), budget bars from the events, and the live footer on a terminal. */
import type { RunEvent, RunEventBody } from '../../src/domain/events';
import { LiveOutput } from '../../src/cli/live-output';
import { bar, visible, WatchView } from '../../src/cli/watch-view';

const T0 = Date.parse('2025-03-01T10:00:00.000Z');

/** Events one second apart, as the API streams them. */
function stamp(bodies: RunEventBody[]): RunEvent[] {
  return bodies.map((b, i) => ({ ...b, runId: 'run_watch01', seq: i + 1, ts: new Date(T0 + i * 1000).toISOString() }) as RunEvent);
}

const usage = (inputTokens: number, outputTokens: number) => ({ inputTokens, outputTokens });

const RUN: RunEventBody[] = [
  { type: 'run.started', workerId: 'host-1', task: 'clean up', policy: 'default', approvals: true, model: 'gpt-4.1-mini', budgets: { llmCalls: 4, toolCalls: 5, tokens: 10_000, wallTimeS: 60, costUsd: 0.5 } },
  { type: 'sandbox.ready', containerId: 'abcdef1234567890', image: 'corral/sandbox:latest', ms: 250, egressAllow: [] },
  { type: 'context.loaded', agentsMd: null, skills: [], memory: null },
  { type: 'model.response', turn: 1, content: 'Let me look first.', toolCalls: [{ id: 'call_ls', name: 'bash', arguments: '{}' }, { id: 'call_rm', name: 'bash', arguments: '{}' }], usage: usage(1000, 100), costUsd: 0.01, ms: 900, model: 'gpt-4.1-mini', finishReason: 'tool_calls' },
  { type: 'tool.call', callId: 'call_ls', tool: 'bash', args: { command: 'ls -1 && wc -l notes.txt' } },
  { type: 'policy.decision', callId: 'call_ls', tool: 'bash', verdict: { decision: 'allow', static: { decision: 'allow', rule: 'read-only', reason: 'ls: lists files' }, reason: 'Allowed: ls: lists files; wc: counts lines.' } },
  { type: 'tool.result', callId: 'call_ls', tool: 'bash', ok: true, blocked: false, summary: 'exit 0 in 12 ms', ms: 15, output: 'exit code: 0\nstdout:\nnotes.txt\n3 notes.txt\n' },
  { type: 'tool.call', callId: 'call_rm', tool: 'bash', args: { command: 'rm notes.txt' } },
  { type: 'approval.pending', callId: 'call_rm', tool: 'bash', args: { command: 'rm notes.txt' }, reason: 'rm: deletes files', risk: 'medium' },
  { type: 'policy.decision', callId: 'call_rm', tool: 'bash', verdict: { decision: 'allow', static: { decision: 'ask', rule: 'deletes', reason: 'rm: deletes files' }, approval: { approved: true, by: 'carol', waitedMs: 4000, timedOut: false }, reason: 'Allowed: approved by carol.' } },
  { type: 'tool.result', callId: 'call_rm', tool: 'bash', ok: true, blocked: false, summary: 'exit 0 in 5 ms', ms: 4010, output: 'exit code: 0\n(no output)' },
  { type: 'model.response', turn: 2, content: null, toolCalls: [{ id: 'call_pip', name: 'bash', arguments: '{}' }, { id: 'call_w', name: 'write_file', arguments: '{}' }], usage: usage(2000, 200), costUsd: 0.02, ms: 800, model: 'gpt-4.1-mini', finishReason: 'tool_calls' },
  { type: 'tool.call', callId: 'call_pip', tool: 'bash', args: { command: 'pip install requests' } },
  { type: 'policy.decision', callId: 'call_pip', tool: 'bash', verdict: { decision: 'deny', static: { decision: 'ask', rule: 'package-installs', reason: 'pip: installs packages' }, approval: { approved: false, by: 'carol', waitedMs: 1000, timedOut: false }, reason: 'This call was blocked: carol denied it; do not retry the same call — choose another approach or explain what you need.' } },
  { type: 'tool.result', callId: 'call_pip', tool: 'bash', ok: false, blocked: true, summary: 'This call was blocked: carol denied it', ms: 1000 },
  { type: 'tool.call', callId: 'call_w', tool: 'write_file', args: '{"path":"x"' },
  { type: 'tool.result', callId: 'call_w', tool: 'write_file', ok: false, blocked: true, summary: 'write_file is not among the task\'s allowed tools', ms: 0 },
  { type: 'budget.warning', budget: 'toolCalls', limit: 5, used: 4 },
  { type: 'model.response', turn: 3, content: 'Removed notes.txt.\nNothing else to do.', toolCalls: [], usage: usage(3000, 300), costUsd: 0.03, ms: 700, model: 'gpt-4.1-mini', finishReason: 'stop' },
  { type: 'workspace.changes', files: [{ path: 'notes.txt', change: 'deleted', added: 0, removed: 3 }] },
  { type: 'sandbox.removed', containerId: 'abcdef1234567890' },
  { type: 'run.finished', outcome: 'succeeded', finalAnswer: 'Removed notes.txt.', reason: 'the model gave its final answer', usage: { llmCalls: 3, toolCalls: 4, inputTokens: 6000, outputTokens: 600, costUsd: 0.06, wallTimeMs: 18_500 } },
];

test('bar(): rounded to ten cells, never full before the limit', () => {
  expect(bar(4, 10)).toBe('▓▓▓▓░░░░░░');
  expect(bar(0, 10)).toBe('░░░░░░░░░░');
  expect(bar(0.001, 10)).toBe('░░░░░░░░░░');
  expect(bar(29, 30)).toBe('▓▓▓▓▓▓▓▓▓░');
  expect(bar(30, 30)).toBe('▓▓▓▓▓▓▓▓▓▓');
  expect(bar(45, 30)).toBe('▓▓▓▓▓▓▓▓▓▓');
  expect(bar(1, 0)).toBe('░░░░░░░░░░');
});

test('plain view: every step with its decision and result, approval commands, budget bars per turn and at the end', () => {
  const view = new WatchView({ live: false, approveCommand: (run, call) => `corral approve ${run} ${call} --api http://h:1` });
  const lines = stamp(RUN).flatMap((e) => view.push(e));
  expect(lines).toEqual([
    '▶ run_watch01 started on host-1',
    '  model: gpt-4.1-mini · policy: default · approvals: on',
    '  sandbox abcdef123456 ready in 250 ms (no network)',
    'turn 1 “Let me look first.”',
    '  budget: LLM calls ▓▓▓░░░░░░░ 1/4 · tool calls ░░░░░░░░░░ 0/5 · tokens ▓░░░░░░░░░ 1.1k/10k · cost ░░░░░░░░░░ $0.01/$0.50 · time ░░░░░░░░░░ 1.0/60 s',
    '  step 1  bash  ls -1 && wc -l notes.txt',
    '         ✓ allowed: ls: lists files; wc: counts lines.',
    '         ← ok: exit 0 in 12 ms · 3 notes.txt',
    '  step 2  bash  rm notes.txt',
    '         ⏸ waiting for a human: rm: deletes files (risk: medium)',
    '           approve: corral approve run_watch01 call_rm --api http://h:1',
    '           deny:    corral approve run_watch01 call_rm --api http://h:1 --deny',
    '         ✓ allowed: approved by carol.',
    '         ← ok: exit 0 in 5 ms',
    'turn 2',
    '  budget: LLM calls ▓▓▓▓▓░░░░░ 2/4 · tool calls ▓▓▓▓░░░░░░ 2/5 · tokens ▓▓▓░░░░░░░ 3.3k/10k · cost ▓░░░░░░░░░ $0.03/$0.50 · time ▓▓░░░░░░░░ 9.0/60 s',
    '  step 3  bash  pip install requests',
    '         ✗ BLOCKED: carol denied it',
    '  step 4  write_file  {"path":"x"',
    '         ✗ REFUSED: write_file is not among the task\'s allowed tools',
    '  ⚠ budget warning: tool calls at 80 % (4/5)',
    'turn 3 · final answer “Removed notes.txt. ⏎ Nothing else to do.”',
    '  files changed: notes.txt (deleted, +0/-3)',
    '  sandbox abcdef123456 removed',
    '■ succeeded — the model gave its final answer',
    '  LLM calls  ▓▓▓▓▓▓▓▓░░ 3/4',
    '  tool calls ▓▓▓▓▓▓▓▓░░ 4/5  ⚠',
    '  tokens     ▓▓▓▓▓▓▓░░░ 6.6k/10k',
    '  cost       ▓░░░░░░░░░ $0.06/$0.50',
    '  wall time  ▓▓▓░░░░░░░ 19/60 s',
  ]);
});

test('live view: no budget lines in the log; the footer holds the bars and the pending approval until it is answered', () => {
  const view = new WatchView({ live: true });
  const events = stamp(RUN);
  const upTo = (type: string, callId?: string) => events.findIndex((e) => e.type === type && (!callId || (e as { callId?: string }).callId === callId));
  const log: string[] = [];
  for (const e of events.slice(0, upTo('approval.pending') + 1)) log.push(...view.push(e, T0 + 60_000));
  expect(log.some((l) => l.includes('budget:'))).toBe(false);
  expect(log.at(-2)).toBe('           approve: corral approve run_watch01 call_rm');
  // 2 s after the last event (at T0+8 s) arrived: wall time counts from context.loaded (T0+2 s) = 8 s.
  expect(view.footer(T0 + 62_000)).toEqual([
    '  ── run_watch01 · awaiting approval ──',
    '  LLM calls  ▓▓▓░░░░░░░ 1/4',
    '  tool calls ▓▓▓▓░░░░░░ 2/5',
    '  tokens     ▓░░░░░░░░░ 1.1k/10k',
    '  cost       ░░░░░░░░░░ $0.01/$0.50',
    '  wall time  ▓░░░░░░░░░ 8.0/60 s',
    '  ⏸ waiting for approval: corral approve run_watch01 call_rm',
  ]);
  view.push(events[upTo('policy.decision', 'call_rm')]!, T0 + 70_000);
  expect(view.footer(T0 + 70_000).at(-1)).toBe('  wall time  ▓░░░░░░░░░ 7.0/60 s');
  for (const e of events.slice(upTo('policy.decision', 'call_rm') + 1)) view.push(e);
  expect(view.footer()).toEqual([]);
});

test('a second attempt (run.started again after a crash) starts the counts afresh', () => {
  const view = new WatchView({ live: false });
  const events = stamp([RUN[0]!, RUN[3]!, { ...(RUN[0] as object), attempt: 2, note: 'the first worker died; started again from a clean workspace' } as RunEventBody, RUN[3]!]);
  const lines = events.flatMap((e) => view.push(e));
  expect(lines).toContain('▶ run_watch01 started on host-1 (attempt 2)');
  expect(lines).toContain('  note: the first worker died; started again from a clean workspace');
  const budgets = lines.filter((l) => l.startsWith('  budget:'));
  expect(budgets).toHaveLength(2);
  for (const l of budgets) expect(l).toMatch(/^ {2}budget: LLM calls ▓▓▓░░░░░░░ 1\/4 · /);
});

test('a run that waited for sub-runs: their usage counts in the bars, and the clock keeps the first start', () => {
  const view = new WatchView({ live: false });
  const b = { llmCalls: 10, toolCalls: 10, tokens: 10_000, wallTimeS: 100, costUsd: 1 };
  const granted = { llmCalls: 3, toolCalls: 3, tokens: 3000, wallTimeS: 75, costUsd: 0.3 };
  const used = { llmCalls: 2, toolCalls: 2, inputTokens: 200, outputTokens: 40, costUsd: 0.05, wallTimeMs: 3000 };
  const at = (sec: number, body: RunEventBody, seq: number): RunEvent => ({ ...body, runId: 'run_watch01', seq, ts: new Date(T0 + sec * 1000).toISOString() }) as RunEvent;
  const lines = [
    at(0, { type: 'run.started', workerId: 'w', task: 't', policy: 'default', approvals: false, model: 'm', budgets: b }, 1),
    at(1, { type: 'sandbox.ready', containerId: 'aaaaaaaaaaaa1', image: 'i', ms: 1, egressAllow: [] }, 2),
    at(2, { type: 'subrun.started', callId: 'c1', childRunId: 'run_child0001', task: 'do it', budgets: granted, depth: 1, checkpoint: 'checkpoint-1.tar' }, 3),
    at(2, { type: 'run.suspended', children: ['run_child0001'], checkpoint: 'checkpoint-1.tar', sandboxKept: false }, 4),
    at(40, { type: 'sandbox.ready', containerId: 'bbbbbbbbbbbb2', image: 'i', ms: 1, egressAllow: [] }, 5),
    at(40, { type: 'subrun.finished', callId: 'c1', childRunId: 'run_child0001', outcome: 'succeeded', reason: 'ok', usage: used, budgets: granted, node: { runId: 'run_child0001', task: 'do it', outcome: 'succeeded', reason: 'ok', usage: used, budgets: granted, children: [] } }, 6),
    at(40, { type: 'run.resumed', workerId: 'w2', children: [{ runId: 'run_child0001', outcome: 'succeeded' }], waitedMs: 38_000, checkpoint: 'checkpoint-1.tar' }, 7),
    at(41, { type: 'model.response', turn: 2, content: null, toolCalls: [{ id: 'x', name: 'bash', arguments: '{}' }], usage: usage(100, 10), costUsd: 0.01, ms: 5, model: 'm', finishReason: 'tool_calls' }, 8),
  ].flatMap((e) => view.push(e));
  expect(lines.find((l) => l.startsWith('  budget:'))).toBe('  budget: LLM calls ▓▓▓░░░░░░░ 3/10 · tool calls ▓▓░░░░░░░░ 2/10 · tokens ░░░░░░░░░░ 350/10k · cost ▓░░░░░░░░░ $0.06/$1.00 · time ▓▓▓▓░░░░░░ 40/100 s');
  expect(lines).toContain('  ⏸ waiting for 1 sub-run(s) without a worker slot; sandbox removed, /workspace kept as checkpoint-1.tar');
});

describe('streamed text (live deltas)', () => {
  const delta = (turn: number, more: Record<string, unknown>) => ({ type: 'model.delta' as const, runId: 'run_watch01', turn, ts: new Date(T0).toISOString(), ...more });

  test('a turn\'s text is shown as it arrives, tool names once; its model.response then adds only what the text did not show', () => {
    const view = new WatchView({ live: false });
    const [started] = stamp(RUN.slice(0, 1));
    view.push(started!);
    const shown = [
      view.pushDelta(delta(1, { text: 'Let me ' })),
      view.pushDelta(delta(1, { text: 'look first.\nThen act.' })),
      view.pushDelta(delta(1, { tools: [{ index: 0, name: 'bash', argumentsChars: 10 }] })),
      view.pushDelta(delta(1, { tools: [{ index: 0, name: 'bash', argumentsChars: 30 }, { index: 1, name: 'bash', argumentsChars: 2 }] })),
    ].join('');
    expect(shown).toBe('turn 1 ▸ Let me look first.\n    Then act. [→ bash] [→ bash]');
    const response = stamp(RUN.slice(0, 4))[3]!;
    expect(view.push(response)[0]).toBe('  ↳ 2 tool calls');
    // A late delta of a turn already answered (a reconnect) shows nothing.
    expect(view.pushDelta(delta(1, { text: 'again' }))).toBe('');
    expect(view.pushDelta(delta(2, { text: 'Done.' }))).toBe('turn 2 ▸ Done.');
  });

  test('with routing the turn line names the tier and the model', () => {
    const view = new WatchView({ live: true });
    const e = { ...stamp(RUN.slice(3, 4))[0]!, route: { model: 'small', tier: 'cheap', rule: null, strongCostUsd: 0.1 } } as RunEvent;
    expect(view.push(e)[0]).toBe('turn 1 [cheap: small] “Let me look first.”');
  });

  test('control characters, escapes and bidi controls from the model are shown, never sent to the terminal', () => {
    const view = new WatchView({ live: false });
    const hostile = `red${String.fromCharCode(27)}[31m bell${String.fromCharCode(7)} cr\r back\b rtl\u202e del\u007f c1\u009b sep\u2028 tab\tend`;
    const out = view.pushDelta(delta(1, { text: hostile, tools: [{ index: 0, name: `x${String.fromCharCode(27)}]0;title`, argumentsChars: 0 }], note: 'n\u0007' }));
    // eslint-disable-next-line no-control-regex
    expect(out).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202e\u2028]/);
    expect(out).toContain('red\\u{1b}[31m bell\\u{7} cr\\u{d} back\\u{8} rtl\\u{202e} del\\u{7f} c1\\u{9b} sep\\u{2028} tab\tend');
    expect(out).toContain('[→ x\\u{1b}]0;title]');
    expect(visible('plain\ntext')).toBe('plain\ntext');
  });
});

describe('LiveOutput', () => {
  function sink(isTTY: boolean) {
    const chunks: string[] = [];
    return { chunks, out: { isTTY, columns: 40, write: (s: string) => chunks.push(s) } };
  }

  const ESC = String.fromCharCode(27);
  const ERASE = new RegExp(`^${ESC}\\[(\\d+)A\r${ESC}\\[J`);

  /** What a terminal shows after the writes: cursor-up and clear-to-end applied. */
  function screen(chunks: string[]): string[] {
    const rows: string[] = [''];
    let row = 0;
    const text = chunks.join('');
    for (let i = 0; i < text.length;) {
      const m = ERASE.exec(text.slice(i));
      if (m) {
        row -= Number(m[1]);
        rows.length = row + 1;
        rows[row] = '';
        i += m[0].length;
      } else if (text[i] === '\n') {
        row++;
        rows[row] ??= '';
        i++;
      } else {
        rows[row] = (rows[row] ?? '') + text[i]!;
        i++;
      }
    }
    return rows;
  }

  test('without a TTY: lines only, no footer, no escape codes', () => {
    const { chunks, out } = sink(false);
    const o = new LiveOutput(out);
    expect(o.live).toBe(false);
    o.print(['a', 'b'], ['footer']);
    o.setFooter(['other footer']);
    o.print(['c']);
    o.clearFooter();
    expect(chunks.join('')).toBe('a\nb\nc\n');
  });

  test('on a TTY: the footer stays below the log, is redrawn in place, clipped to the width, and removed at the end', () => {
    const { chunks, out } = sink(true);
    const o = new LiveOutput(out);
    o.print(['line 1'], ['  bars 1/4', 'x'.repeat(60)]);
    o.print(['line 2'], ['  bars 2/4']);
    expect(screen(chunks)).toEqual(['line 1', 'line 2', '  bars 2/4', '']);
    o.print([], ['  bars 2/4']); // unchanged: nothing written
    const n = chunks.length;
    o.setFooter(['  bars 2/4']);
    expect(chunks.length).toBe(n);
    o.print(['line 3'], ['  bars 3/4', 'y'.repeat(60)]);
    expect(screen(chunks).at(-2)).toBe(`${'y'.repeat(38)}…`);
    o.clearFooter();
    o.print(['done']);
    expect(screen(chunks)).toEqual(['line 1', 'line 2', 'line 3', 'done', '']);
  });

  test('partial text: the footer steps aside while a line is open, and the next lines start on a line of their own', () => {
    const { chunks, out } = sink(true);
    const o = new LiveOutput(out);
    o.print(['line 1'], ['  bars 1/4']);
    o.partial('turn 2 ▸ Hel');
    o.partial('lo');
    expect(screen(chunks)).toEqual(['line 1', 'turn 2 ▸ Hello']);
    o.setFooter(['  bars 2/4']); // kept for later, not drawn inside the open line
    expect(screen(chunks)).toEqual(['line 1', 'turn 2 ▸ Hello']);
    o.print(['  ↳ final answer'], ['  bars 2/4']);
    expect(screen(chunks)).toEqual(['line 1', 'turn 2 ▸ Hello', '  ↳ final answer', '  bars 2/4', '']);
    // Whatever a line holds, no escape reaches the terminal except the footer's own.
    const hostile = sink(false);
    const h = new LiveOutput(hostile.out);
    h.print([`step 1  bash  printf '${String.fromCharCode(27)}]0;owned${String.fromCharCode(7)}'\r`], [`pending ${String.fromCharCode(27)}[2J`]);
    h.partial(`x${String.fromCharCode(155)}y`);
    // eslint-disable-next-line no-control-regex
    expect(hostile.chunks.join('')).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(hostile.chunks.join('')).toContain('\\u{1b}]0;owned\\u{7}');
    const plain = sink(false);
    const p = new LiveOutput(plain.out);
    p.partial('a');
    p.partial('b');
    p.print(['c']);
    expect(plain.chunks.join('')).toBe('ab\nc\n');
  });
});
