/**
 * Whole (not streamed) answers through the real openai SDK, from a scripted OpenAI-compatible server
 * on loopback (issue 40, defect 3): the answer is read with the stream path's checks and bounds, so a
 * server that answers in one piece cannot send oversize text, arguments, names or tool-call counts,
 * nor fields of the wrong type, and an answer without usage is estimated rather than free.
 */
import OpenAI from 'openai';
import { ModelError } from '../../src/domain/errors';
import { OpenAIModel } from '../../src/llm/openai-model';
import { DEFAULT_STREAM_BOUNDS } from '../../src/llm/stream-accumulator';
import { startFakeDecisionsServer, type FakeServer, type Scripted } from '../support/fake-decisions-server';
import { finalTurn, toolCallTurn } from '../support/fake-openai-chat';

let next: Scripted = finalTurn('hi');
let server: FakeServer;
let client: OpenAI;
beforeAll(async () => {
  server = await startFakeDecisionsServer({ chat: () => next });
  client = new OpenAI({ apiKey: 'test', baseURL: server.baseURL, maxRetries: 0, logLevel: 'off' });
});
afterAll(async () => server.close());

const BOUNDS = { ...DEFAULT_STREAM_BOUNDS, maxContentChars: 1000, maxToolCalls: 4, maxArgumentsChars: 500, maxNameChars: 40 };

async function ask(s: Scripted) {
  next = s;
  const m = new OpenAIModel(client, 'fake-agent', { stream: false, bounds: BOUNDS });
  return m.complete({ messages: [{ role: 'user', content: 'go' }], tools: [] });
}

async function refused(s: Scripted): Promise<string> {
  const err = await ask(s).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ModelError);
  return (err as Error).message;
}

/** A whole answer whose message is `message` (and whose other fields `extra` replaces). */
const answer = (message: unknown, extra: Record<string, unknown> = {}): Scripted => ({
  body: { id: 'x', object: 'chat.completion', created: 0, model: 'fake-agent', choices: [{ index: 0, finish_reason: 'stop', message }], usage: { prompt_tokens: 5, completion_tokens: 7 }, ...extra },
});
const call = (name: string, args: unknown, id: unknown = 'c1') => ({ id, type: 'function', function: { name, arguments: args } });

test('a whole answer within bounds: text, tool calls in order, usage, model; the request is not streamed', async () => {
  expect(await ask(finalTurn('forty-two'))).toEqual({ content: 'forty-two', toolCalls: [], usage: { inputTokens: 150, outputTokens: 30 }, finishReason: 'stop', model: 'fake-agent' });
  expect(server.requests.at(-1)!.body.stream).toBeUndefined();
  const turn = await ask(toolCallTurn([{ name: 'bash', id: 'c1', args: { command: 'ls' } }, { name: 'read_file', id: 'c2', args: { path: 'a' } }]));
  expect(turn.toolCalls).toEqual([{ id: 'c1', name: 'bash', arguments: '{"command":"ls"}' }, { id: 'c2', name: 'read_file', arguments: '{"path":"a"}' }]);
  // A tool call of another type is left out, as the SDK's types would have it; one without an id gets call_<i>.
  const mixed = await ask(answer({ role: 'assistant', content: null, tool_calls: [{ id: 'z', type: 'custom', custom: { name: 'x', input: '' } }, { type: 'function', function: { name: 'bash', arguments: '{}' } }] }));
  expect(mixed.toolCalls).toEqual([{ id: 'call_0', name: 'bash', arguments: '{}' }]);
});

test.each([
  ['text over the bound', answer({ role: 'assistant', content: 'x'.repeat(1001) }), /text passed 1000 characters/],
  ['more tool calls than the bound', answer({ role: 'assistant', content: null, tool_calls: Array.from({ length: 5 }, (_, i) => call('bash', '{}', `c${i}`)) }), /more than 4 tool calls/],
  ['arguments over the bound', answer({ role: 'assistant', content: null, tool_calls: [call('bash', JSON.stringify({ command: 'y'.repeat(600) }))] }), /arguments of tool call 0 \(bash\) passed 500/],
  ['a tool name over the bound', answer({ role: 'assistant', content: null, tool_calls: [call('n'.repeat(41), '{}')] }), /name is longer than 40/],
  ['a tool call id over the bound', answer({ role: 'assistant', content: null, tool_calls: [call('bash', '{}', 'i'.repeat(41))] }), /id is longer than 40/],
  ['text that is not a string', answer({ role: 'assistant', content: { text: 'hi' } }), /"delta.content" is not a string/],
  ['text that is an array', answer({ role: 'assistant', content: ['a', 'b'] }), /is not a string/],
  ['arguments that are not a string', answer({ role: 'assistant', content: null, tool_calls: [call('bash', { command: 'ls' })] }), /arguments are not a string/],
  ['a name that is not a string', answer({ role: 'assistant', content: null, tool_calls: [call(42 as unknown as string, '{}')] }), /name is not a string/],
  ['tool_calls that are not an array', answer({ role: 'assistant', content: null, tool_calls: { 0: call('bash', '{}') } }), /"message.tool_calls" is not an array/],
  ['a tool call that is not an object', answer({ role: 'assistant', content: null, tool_calls: ['bash ls'] }), /tool call delta is not an object/],
  ['a function that is not an object', answer({ role: 'assistant', content: null, tool_calls: [{ id: 'c', type: 'function', function: 'bash' }] }), /"function" is not an object/],
  ['no message', answer(undefined), /"message" is not an object/],
  ['a message that is a string', answer('hello'), /"message" is not an object/],
  ['choices that are not an array', { body: { id: 'x', object: 'chat.completion', model: 'm', choices: { 0: {} } } }, /"choices" is not an array/],
  ['no choices', { body: { id: 'x', object: 'chat.completion', model: 'm', choices: [] } }, /returned no choices/],
  ['a choice that is not an object', { body: { id: 'x', object: 'chat.completion', model: 'm', choices: [7] } }, /a choice is not an object/],
] as Array<[string, Scripted, RegExp]>)('refused: %s', async (_what, s, why) => {
  expect(await refused(s)).toMatch(why);
});

test('an answer without usage is estimated, never free (the token and cost budgets hold)', async () => {
  const turn = await ask(answer({ role: 'assistant', content: 'z'.repeat(400) }, { usage: undefined }));
  expect(turn.usage.outputTokens).toBeGreaterThanOrEqual(100);
  expect(turn.usage.inputTokens).toBeGreaterThan(0);
  // Nonsense counts are not taken as they are.
  const odd = await ask(answer({ role: 'assistant', content: 'ok' }, { usage: { prompt_tokens: -5, completion_tokens: 'many' } }));
  expect(odd.usage).toEqual({ inputTokens: 0, outputTokens: 0 });
});
