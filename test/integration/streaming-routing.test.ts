/**
 * Streaming and model routing end to end: `corral submit --route big,small --watch` (bin/corral as a
 * child process) against a whole corral (real Redis, real Docker sandbox, the real openai SDK against
 * the scripted server streaming SSE chunks). The model's text goes out as live model.delta messages on
 * the run's SSE stream, coalesced, each turn's before its model.response; it is not in the JSONL log,
 * the JSON event pages or the report; `corral watch` prints it as it arrives. Routing sends the first
 * turn and the turn after a failed tool to the strong model, the others to the cheap one; the report
 * shows turns and cost per model and what the strong one alone would have cost.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ApiClient } from '../../src/cli/api-client';
import type { LiveDelta, RunEvent } from '../../src/domain/events';
import type { Scripted } from '../support/fake-decisions-server';
import { finalTurn, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';

jest.setTimeout(120_000);

const CORRAL = resolve(__dirname, '../../bin/corral');

/** A streamed turn: `text` before the tool calls, chunks `ms` apart. */
function say(text: string, s: Scripted, ms = 15): Scripted {
  const body = s.body as { choices: Array<{ message: { content: string | null } }> };
  body.choices[0]!.message.content = text;
  return { ...s, chunkDelayMs: ms };
}

const TEXTS = [
  'Looking at the workspace first; notes.txt should be there.',
  'That failed: there is no notes.txt. Writing it now.',
  'Checking what was written.',
  'All done: notes.txt says hello from the routed run.',
];

const agent = scriptedAgent({
  'ROUTED-STREAM': [
    say(TEXTS[0]!, toolCallTurn([{ name: 'bash', args: { command: 'cat notes.txt' } }])),
    say(TEXTS[1]!, toolCallTurn([{ name: 'bash', args: { command: 'echo "hello from the routed run" > notes.txt' } }])),
    say(TEXTS[2]!, toolCallTurn([{ name: 'bash', args: { command: 'cat notes.txt' } }])),
    say(TEXTS[3]!, finalTurn('')),
  ],
});

let h: Harness;
beforeAll(async () => {
  h = await startHarness('stream', { chat: agent }, {
    CORRAL_MODEL_PRICES: JSON.stringify({ big: { input: 10, output: 40 }, small: { input: 0.5, output: 2 } }),
  });
});
afterAll(async () => h?.close());

describe('a routed, streamed run submitted and watched with the CLI', () => {
  let stdout = '';
  let code: number | null = null;
  let id = '';
  const live: Array<{ kind: 'event'; e: RunEvent } | { kind: 'delta'; d: LiveDelta }> = [];
  let events: RunEvent[] = [];

  beforeAll(async () => {
    let following: Promise<void> | undefined;
    code = await new Promise<number | null>((res, rej) => {
      const child = spawn(CORRAL, ['submit', '--task', 'ROUTED-STREAM: make notes.txt', '--route', 'big,small', '--watch', '--plain', '--budget', 'llmCalls=6', '--api', h.url], { stdio: ['ignore', 'pipe', 'pipe'] });
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        const m = /submitted (run_\S+)/.exec(stdout);
        if (m && !following) {
          id = m[1]!;
          // A second follower over the same SSE endpoint, in process, records the order of everything.
          following = new ApiClient(h.url).follow(id, (e) => live.push({ kind: 'event', e }), { onDelta: (d) => live.push({ kind: 'delta', d }) });
        }
      });
      child.on('error', rej);
      child.on('close', res);
    });
    await following;
    const run = await h.waitFor(id);
    events = readFileSync(run.logPath as string, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as RunEvent);
  });

  test('the run succeeds and the CLI exits 0', () => {
    expect(code).toBe(0);
    expect(events.at(-1)).toMatchObject({ type: 'run.finished', outcome: 'succeeded', finalAnswer: TEXTS[3] });
  });

  test('routing: the first turn and the turn after the failed cat go to the strong model, the others to the cheap one', () => {
    const asked = h.fake.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes('ROUTED-STREAM')).map((r) => [r.body.model, r.body.stream]);
    expect(asked).toEqual([['big', true], ['big', true], ['small', true], ['small', true]]);
    const routes = events.filter((e): e is Extract<RunEvent, { type: 'model.response' }> => e.type === 'model.response').map((e) => e.route);
    expect(routes.map((r) => [r?.model, r?.tier, r?.rule])).toEqual([['big', 'strong', 'first-turn'], ['big', 'strong', 'after-failed-tool'], ['small', 'cheap', null], ['small', 'cheap', null]]);
    expect(events[0]).toMatchObject({ type: 'run.started', routing: { strong: 'big', cheap: 'small' } });
    // Each turn costs its model's prices; strongCostUsd is the same tokens at the strong model's.
    const r = events.filter((e): e is Extract<RunEvent, { type: 'model.response' }> => e.type === 'model.response');
    expect(r[2]!.costUsd).toBeCloseTo((100 * 0.5 + 20 * 2) / 1e6, 12);
    expect(r[2]!.route!.strongCostUsd).toBeCloseTo((100 * 10 + 20 * 40) / 1e6, 12);
  });

  test('live deltas: each turn\'s text arrives in pieces before its model.response, and adds up to it', () => {
    for (const [i, text] of TEXTS.entries()) {
      const turn = i + 1;
      const at = live.findIndex((x) => x.kind === 'event' && x.e.type === 'model.response' && x.e.turn === turn);
      expect(at).toBeGreaterThan(0);
      const mine = live.map((x, j) => [x, j] as const).filter(([x]) => x.kind === 'delta' && x.d.turn === turn);
      expect(mine.length).toBeGreaterThan(0);
      expect(mine.every(([, j]) => j < at)).toBe(true);
      expect(mine.map(([x]) => (x.kind === 'delta' ? x.d.text ?? '' : '')).join('')).toBe(text);
    }
    // Coalesced: far fewer deltas than the server's chunks (7 characters each, 15 ms apart).
    const deltas = live.filter((x) => x.kind === 'delta').length;
    const chunks = TEXTS.reduce((n, t) => n + Math.ceil(t.length / 7), 0);
    expect(deltas).toBeLessThan(chunks);
    const toolDelta = live.find((x) => x.kind === 'delta' && x.d.turn === 1 && x.d.tools);
    expect(toolDelta && toolDelta.kind === 'delta' && toolDelta.d.tools![0]).toMatchObject({ index: 0, name: 'bash' });
  });

  test('deltas are live only: not in the JSONL log, the JSON event pages, a finished run\'s SSE history or the report', async () => {
    expect(events.some((e) => (e.type as string) === 'model.delta')).toBe(false);
    const page = await h.api<{ events: Array<{ type: string }> }>('GET', `/v1/runs/${id}/events`);
    expect(page.body.events.length).toBe(events.length);
    expect(page.body.events.some((e) => e.type === 'model.delta')).toBe(false);
    const again: string[] = [];
    await new ApiClient(h.url).follow(id, (e) => again.push(e.type), { onDelta: (d) => again.push(d.type) });
    expect(again).not.toContain('model.delta');
    expect(again.length).toBe(events.length);
  });

  test('corral watch printed the text as it streamed, with each turn\'s tier and model', () => {
    expect(stdout).toContain(`turn 1 ▸ ${TEXTS[0]} [→ bash]\n  ↳ 1 tool call [strong: big]`);
    expect(stdout).toContain(`turn 2 ▸ ${TEXTS[1]} [→ bash]\n  ↳ 1 tool call [strong: big]`);
    expect(stdout).toContain(`turn 3 ▸ ${TEXTS[2]} [→ bash]\n  ↳ 1 tool call [cheap: small]`);
    expect(stdout).toContain(`turn 4 ▸ ${TEXTS[3]}\n  ↳ final answer [cheap: small]`);
  });

  test('the report has turns and cost per model and what the strong model alone would have cost', async () => {
    const run = await h.waitFor(id);
    const report = readFileSync(run.reportPath as string, 'utf8');
    expect(report).toContain('## Models');
    expect(report).toContain('Routing: `big` (strong) for `first-turn`, `after-failed-check`, `after-failed-tool`, `after-blocked-call`, `after-malformed-call`, `after-sub-run`; `small` (cheap) for the other turns.');
    expect(report).toMatch(/\| `big` \| strong \| 2 \| 200 \| 40 \| 0\.0036 \|/);
    expect(report).toMatch(/\| `small` \| cheap \| 2 \| 250 \| 50 \| 0\.0002 \|/);
    expect(report).toMatch(/2 of 4 turns \(50 %\) went to the cheap model\. On `big` alone the same turns would have cost \$0\.0081 .*: routing saved \$0\.0043 \(53 %\)/);
    expect(report).not.toContain('model.delta');
  });
});
