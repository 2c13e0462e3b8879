/** estimateTokens / compactMessages: the middle of the conversation summarised by the model, tool calls never split. */
import type { ChatMessage } from '../../src/domain/model';
import { SUMMARY_INSTRUCTION, compactMessages, estimateTokens } from '../../src/run/compaction';
import { ScriptedModel, answers, toolCall } from '../support/fake-ports';

const system: ChatMessage = { role: 'system', content: 'SYSTEM PROMPT' };
const task: ChatMessage = { role: 'user', content: 'TASK: fix the failing test' };
const call = (_id: string, text: string | null, ...calls: [string, string, Record<string, unknown>][]): ChatMessage => ({
  role: 'assistant', content: text, toolCalls: calls.map(([cid, name, args]) => toolCall(cid, name, args)),
});
const result = (id: string, content: string): ChatMessage => ({ role: 'tool', toolCallId: id, content });

/** No message may be a tool message whose call is not in an earlier assistant message. */
function orphans(messages: ChatMessage[]): string[] {
  const seen = new Set<string>();
  const bad: string[] = [];
  for (const m of messages) {
    if (m.role === 'assistant') for (const c of m.toolCalls ?? []) seen.add(c.id);
    if (m.role === 'tool' && !seen.has(m.toolCallId)) bad.push(m.toolCallId);
  }
  return bad;
}

describe('estimateTokens', () => {
  it('is chars/4 plus 4 per message, counting tool call arguments', () => {
    expect(estimateTokens([])).toBe(0);
    expect(estimateTokens([{ role: 'user', content: 'x'.repeat(40) }])).toBe(10 + 4);
    const withCall: ChatMessage = { role: 'assistant', content: null, toolCalls: [{ id: 'c1', name: 'bash', arguments: 'y'.repeat(396) }] };
    expect(estimateTokens([withCall])).toBe(100 + 4);
  });

  it('grows with content and with the number of messages', () => {
    const small = [system, task];
    const bigger = [system, { role: 'user', content: `${task.content} ${'more words '.repeat(50)}` } as ChatMessage];
    expect(estimateTokens(bigger)).toBeGreaterThan(estimateTokens(small));
    expect(estimateTokens([...small, result('c1', '')])).toBe(estimateTokens(small) + 4);
    const args = (n: number): ChatMessage => call('a', null, ['c1', 'write_file', { path: 'f', content: 'z'.repeat(n) }]);
    expect(estimateTokens([args(4000)])).toBeGreaterThan(estimateTokens([args(40)]) + 900);
  });
});

describe('compactMessages', () => {
  it('replaces the middle with the model summary, keeping system, task and the recent messages', async () => {
    const messages: ChatMessage[] = [
      system, task,
      call('a1', 'Looking around.', ['c1', 'bash', { command: 'ls' }]),
      result('c1', 'MIDDLE-LS-OUTPUT'),
      call('a2', 'Reading.', ['c2', 'read_file', { path: 'src/a.ts' }]),
      result('c2', 'MIDDLE-FILE-CONTENT'),
      call('a3', 'RECENT-THOUGHT', ['c3', 'bash', { command: 'npm test' }]),
      result('c3', 'RECENT-TEST-OUTPUT'),
    ];
    const model = new ScriptedModel([answers('  Listed files; read src/a.ts.  ', { inputTokens: 321, outputTokens: 12 })]);
    const out = await compactMessages(messages, { model, keepRecent: 2 });

    expect(out.removed).toBe(4);
    expect(out.summary).toBe('Listed files; read src/a.ts.');
    expect(out.usage).toEqual({ inputTokens: 321, outputTokens: 12 });
    expect(out.messages).toEqual([
      system, task,
      { role: 'user', content: '[Summary of earlier work, written by the model: Listed files; read src/a.ts.]' },
      messages[6], messages[7],
    ]);
    expect(messages).toHaveLength(8); // the input is not modified

    expect(model.requests).toHaveLength(1);
    const req = model.requests[0]!;
    expect(req.tools).toEqual([]);
    expect(req.messages[0]).toEqual({ role: 'system', content: SUMMARY_INSTRUCTION });
    const sent = req.messages.map((m) => m.content).join('\n');
    for (const s of ['Looking around.', 'MIDDLE-LS-OUTPUT', 'MIDDLE-FILE-CONTENT', '"path":"src/a.ts"', 'read_file']) expect(sent).toContain(s);
    for (const s of ['SYSTEM PROMPT', 'TASK: fix the failing test', 'RECENT-THOUGHT', 'RECENT-TEST-OUTPUT', 'npm test']) expect(sent).not.toContain(s);
  });

  it('moves the cut earlier rather than separate a tool call from its results', async () => {
    // Naive cut at length-2 = index 6 would keep results r2/r3 of the assistant at index 4 but drop it.
    const messages: ChatMessage[] = [
      system, task,
      call('a1', 'First.', ['c1', 'bash', { command: 'pwd' }]),
      result('c1', 'MIDDLE-PWD'),
      call('a2', 'KEPT-ASSISTANT', ['c2', 'read_file', { path: 'a' }], ['c3', 'read_file', { path: 'b' }], ['c4', 'read_file', { path: 'c' }]),
      result('c2', 'KEPT-A'),
      result('c3', 'KEPT-B'),
      result('c4', 'KEPT-C'),
    ];
    const model = new ScriptedModel([answers('Ran pwd.')]);
    const out = await compactMessages(messages, { model, keepRecent: 2 });

    expect(orphans(out.messages)).toEqual([]);
    expect(out.removed).toBe(2);
    expect(out.messages).toEqual([system, task, { role: 'user', content: '[Summary of earlier work, written by the model: Ran pwd.]' }, ...messages.slice(4)]);
    const sent = model.requests[0]!.messages.map((m) => m.content).join('\n');
    expect(sent).toContain('MIDDLE-PWD');
    expect(sent).not.toContain('KEPT-A');
    expect(sent).not.toContain('KEPT-ASSISTANT');
  });

  it('never orphans a tool message for any keepRecent', async () => {
    const messages: ChatMessage[] = [system, task];
    for (let i = 0; i < 6; i++) {
      messages.push(call(`a${i}`, `step ${i}`, [`c${i}a`, 'bash', { i }], [`c${i}b`, 'bash', { i, b: true }]));
      messages.push(result(`c${i}a`, `out ${i}a`), result(`c${i}b`, `out ${i}b`));
    }
    messages.push({ role: 'assistant', content: 'thinking' }, { role: 'user', content: 'continue' });
    for (let keep = 0; keep <= messages.length; keep++) {
      const out = await compactMessages(messages, { model: new ScriptedModel([answers('S')]), keepRecent: keep });
      expect(orphans(out.messages)).toEqual([]);
      expect(out.messages.slice(0, 2)).toEqual([system, task]);
      expect(out.messages.length).toBeGreaterThanOrEqual(Math.min(keep, messages.length - 2) + (out.removed ? 3 : 2));
    }
  });

  it('returns the messages unchanged without a model call when there is no middle', async () => {
    const messages: ChatMessage[] = [system, task, call('a1', null, ['c1', 'bash', { command: 'ls' }]), result('c1', 'x')];
    const model = new ScriptedModel([]);
    for (const keepRecent of [2, 10]) {
      const out = await compactMessages(messages, { model, keepRecent });
      expect(out).toEqual({ messages, summary: '', removed: 0, usage: { inputTokens: 0, outputTokens: 0 } });
    }
    // keepRecent 1 would keep only the tool result; its call comes along, leaving no middle.
    expect((await compactMessages(messages, { model, keepRecent: 1 })).removed).toBe(0);
    expect(model.requests).toHaveLength(0);
  });

  it('keeps everything when the model returns an empty summary, but still reports its usage', async () => {
    const messages: ChatMessage[] = [system, task, { role: 'assistant', content: 'a' }, { role: 'user', content: 'b' }, { role: 'assistant', content: 'c' }];
    const out = await compactMessages(messages, { model: new ScriptedModel([answers('  ', { inputTokens: 50, outputTokens: 1 })]), keepRecent: 1 });
    expect(out).toEqual({ messages, summary: '', removed: 0, usage: { inputTokens: 50, outputTokens: 1 } });
  });

  it('cuts very long messages in the summary request and says so', async () => {
    const huge = `HEAD${'x'.repeat(20_000)}TAIL`;
    const messages: ChatMessage[] = [system, task, call('a1', null, ['c1', 'bash', { command: 'cat big' }]), result('c1', huge), { role: 'assistant', content: 'recent' }];
    const model = new ScriptedModel([answers('Read a big file.')]);
    await compactMessages(messages, { model, keepRecent: 1 });
    const sent = model.requests[0]!.messages[1]!.content!;
    expect(sent).toContain('HEAD');
    expect(sent).toContain('TAIL');
    expect(sent).toContain('characters cut');
    expect(sent.length).toBeLessThan(5000);
  });

  it('passes the signal to the model and lets its errors propagate', async () => {
    const messages: ChatMessage[] = [system, task, { role: 'assistant', content: 'a' }, { role: 'assistant', content: 'b' }];
    const ac = new AbortController();
    const model = new ScriptedModel([answers('S')]);
    await compactMessages(messages, { model, keepRecent: 1, signal: ac.signal });
    expect(model.requests[0]!.signal).toBe(ac.signal);
    await expect(compactMessages(messages, { model: new ScriptedModel([{ throws: new Error('endpoint down') }]), keepRecent: 1 })).rejects.toThrow('endpoint down');
  });
});
