/**
 * Streamed answers through the real openai SDK, from a scripted OpenAI-compatible server on loopback:
 * the adapter assembles text and fragmented tool calls, hands out deltas as they arrive, takes the
 * usage chunk (or estimates tokens when there is none), and refuses hostile streams — oversize text,
 * arguments, names, tool-call counts and chunk counts, malformed fields, a stream that goes quiet,
 * a server that does not stream — with a ModelError that names what was wrong.
 */
import OpenAI from 'openai';
import { CancelledError, ModelError } from '../../src/domain/errors';
import type { ModelDelta } from '../../src/domain/model';
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

const BOUNDS = { ...DEFAULT_STREAM_BOUNDS, maxContentChars: 1000, maxToolCalls: 4, maxArgumentsChars: 500, maxNameChars: 40, maxChunks: 300 };

async function ask(s: Scripted, opts: { idleTimeoutMs?: number; model?: string } = {}) {
  next = s;
  const deltas: ModelDelta[] = [];
  const m = new OpenAIModel(client, 'fake-agent', { stream: true, bounds: BOUNDS, idleTimeoutMs: opts.idleTimeoutMs ?? 5000 });
  const turn = await m.complete({ messages: [{ role: 'user', content: 'go' }], tools: [], onDelta: (d) => deltas.push(d), ...(opts.model ? { model: opts.model } : {}) });
  return { turn, deltas, body: server.requests.at(-1)!.body };
}

async function refused(s: Scripted, opts: { idleTimeoutMs?: number } = {}): Promise<string> {
  const err = await ask(s, opts).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(ModelError);
  return (err as Error).message;
}

const chunk = (delta: unknown, extra: Record<string, unknown> = {}) => ({ id: 'c', object: 'chat.completion.chunk', created: 0, model: 'fake-agent', choices: [{ index: 0, delta, finish_reason: null }], ...extra });

test('text arrives in pieces, as deltas in order; the turn is the whole text with the usage chunk\'s tokens', async () => {
  const { turn, deltas, body } = await ask(finalTurn('The answer is forty-two, said the model.'));
  expect(body).toMatchObject({ stream: true, stream_options: { include_usage: true }, model: 'fake-agent' });
  expect(turn).toEqual({ content: 'The answer is forty-two, said the model.', toolCalls: [], usage: { inputTokens: 150, outputTokens: 30 }, finishReason: 'stop', model: 'fake-agent' });
  expect(deltas.length).toBeGreaterThan(4);
  expect(deltas.map((d) => (d.kind === 'text' ? d.text : '')).join('')).toBe(turn.content);
});

test('tool calls in fragments are assembled by index; progress deltas carry the name and argument length', async () => {
  const { turn, deltas } = await ask(toolCallTurn([{ name: 'bash', id: 'c1', args: { command: 'ls -la /workspace && cat notes.txt' } }, { name: 'read_file', id: 'c2', args: { path: 'a.txt' } }]));
  expect(turn.toolCalls).toEqual([
    { id: 'c1', name: 'bash', arguments: JSON.stringify({ command: 'ls -la /workspace && cat notes.txt' }) },
    { id: 'c2', name: 'read_file', arguments: JSON.stringify({ path: 'a.txt' }) },
  ]);
  const tools = deltas.filter((d): d is Extract<ModelDelta, { kind: 'tool' }> => d.kind === 'tool');
  expect(tools[0]).toEqual({ kind: 'tool', index: 0, name: 'bash', argumentsChars: 0 });
  expect(tools.filter((d) => d.index === 0).at(-1)!.argumentsChars).toBe(turn.toolCalls[0]!.arguments.length);
  expect(turn.finishReason).toBe('tool_calls');
});

test('the request\'s model (model routing) overrides the adapter\'s', async () => {
  const { body } = await ask(finalTurn('ok'), { model: 'cheap-model' });
  expect(body.model).toBe('cheap-model');
});

test('a stream without a usage chunk: tokens are estimated, so token and cost budgets still hold', async () => {
  const text = 'x'.repeat(400);
  const { turn } = await ask({ chunks: [chunk({ role: 'assistant', content: text }), chunk({}, { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })] });
  expect(turn.usage.outputTokens).toBe(100);
  expect(turn.usage.inputTokens).toBeGreaterThan(0);
});

test('choices other than 0 are ignored, a missing id becomes call_<index>', async () => {
  const { turn } = await ask({
    chunks: [
      { ...chunk({ content: 'mine' }), choices: [{ index: 1, delta: { content: 'NOT MINE' } }, { index: 0, delta: { content: 'mine' } }] },
      chunk({ tool_calls: [{ index: 0, function: { name: 'bash', arguments: '{}' } }] }),
    ],
  });
  expect(turn.content).toBe('mine');
  expect(turn.toolCalls).toEqual([{ id: 'call_0', name: 'bash', arguments: '{}' }]);
});

test('with streaming off (CORRAL_MODEL_STREAM=false) the answer is one JSON response, routed model included, no deltas', async () => {
  next = toolCallTurn([{ name: 'bash', id: 'c9', args: { command: 'ls' } }]);
  const deltas: ModelDelta[] = [];
  const m = new OpenAIModel(client, 'fake-agent');
  const turn = await m.complete({ messages: [{ role: 'user', content: 'go' }], tools: [], model: 'cheap-model', onDelta: (d) => deltas.push(d) });
  expect(server.requests.at(-1)!.body).toMatchObject({ model: 'cheap-model' });
  expect(server.requests.at(-1)!.body.stream).toBeUndefined();
  expect(turn.toolCalls).toEqual([{ id: 'c9', name: 'bash', arguments: '{"command":"ls"}' }]);
  expect(deltas).toEqual([]);
});

describe('hostile streams are refused with a reason', () => {
  test.each<[string, unknown[], string]>([
    ['text past the cap', Array.from({ length: 11 }, () => chunk({ content: 'y'.repeat(100) })), 'the answer\'s text passed 1000 characters'],
    ['arguments past the cap', [chunk({ tool_calls: [{ index: 0, id: 'a', function: { name: 'bash', arguments: '"'.repeat(300) } }] }), chunk({ tool_calls: [{ index: 0, function: { arguments: '"'.repeat(300) } }] })], 'the arguments of tool call 0 (bash) passed 500 characters'],
    ['a huge tool-call index', [chunk({ tool_calls: [{ index: 1e9, function: { name: 'bash' } }] })], 'more than 4 tool calls (index 1000000000)'],
    ['a negative index', [chunk({ tool_calls: [{ index: -1, function: { name: 'bash' } }] })], 'a tool call delta has no valid "index"'],
    ['a fractional index', [chunk({ tool_calls: [{ index: 0.5, function: { name: 'bash' } }] })], 'a tool call delta has no valid "index"'],
    ['a long name', [chunk({ tool_calls: [{ index: 0, function: { name: 'n'.repeat(41) } }] })], 'a tool call name is longer than 40 characters'],
    ['arguments that are an object', [chunk({ tool_calls: [{ index: 0, function: { name: 'bash', arguments: { command: 'rm -rf /' } } }] })], 'tool call arguments are not a string'],
    ['an id that is a number', [chunk({ tool_calls: [{ index: 0, id: 7, function: { name: 'bash' } }] })], 'a tool call "id" is not a string'],
    ['content that is not a string', [chunk({ content: ['a'] })], '"delta.content" is not a string'],
    ['choices that are not an array', [{ ...chunk({}), choices: { 0: {} } }], '"choices" is not an array'],
    ['a delta that is a string', [{ ...chunk({}), choices: [{ index: 0, delta: 'hello' }] }], '"delta" is not an object'],
    ['a chunk that is an array', [[1, 2]], 'a chunk is not a JSON object'],
    ['too many chunks', Array.from({ length: 301 }, () => chunk({ content: '' })), 'more than 300 chunks'],
    ['no chunks at all', [], 'no chunks at all'],
  ])('%s', async (_name, chunks, why) => {
    expect(await refused({ chunks })).toContain(why);
  });

  test('a chunk that is not JSON', async () => {
    expect(await refused({ chunks: ['{not json'] })).toMatch(/model call failed|model endpoint error|JSON/);
  });

  test('a stream that goes quiet is aborted after the idle timeout, saying how far it got', async () => {
    // After its first chunk the server stays silent for ten minutes: only the idle timer can end the call.
    const msg = await refused({ chunks: [chunk({ content: 'a' }), chunk({ content: 'b' }), ...Array.from({ length: 5 }, () => chunk({ content: 'c' }))], chunkDelayMs: 600_000 }, { idleTimeoutMs: 400 });
    expect(msg).toMatch(/the model's stream went quiet: no data for 0 s .* after 1 chunks/);
  });

  test('a cancel mid-stream is a cancel, never a cut-off answer passed on as whole', async () => {
    next = { chunks: Array.from({ length: 20 }, () => chunk({ content: 'part ' })), chunkDelayMs: 50 };
    const ac = new AbortController();
    const m = new OpenAIModel(client, 'fake-agent', { stream: true, bounds: BOUNDS });
    const p = m.complete({ messages: [{ role: 'user', content: 'go' }], tools: [], signal: ac.signal, onDelta: () => ac.abort() });
    await expect(p).rejects.toThrow(CancelledError);
  });

  test('a server that answers plain JSON to stream: true gets a hint to switch streaming off', async () => {
    expect(await refused({ ...finalTurn('plain'), json: true })).toMatch(/no chunks at all .*CORRAL_MODEL_STREAM=false/);
  });
});
