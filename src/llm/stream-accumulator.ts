/**
 * Assembles a streamed chat completion (the chunks of `stream: true`) into one ModelTurn, and hands
 * each piece to a delta callback as it arrives. The chunks come from a server we do not control, so
 * every field is checked before use and every size is bounded: the answer's text, the number of tool
 * calls, each call's name and arguments, and the chunks themselves. Breaking a bound, or a malformed
 * chunk, is a ModelError that names what was wrong (the run ends `error` with it; nothing half-read
 * is executed).
 *
 * Tool calls arrive in fragments keyed by `index`: the first fragment of a call usually carries its
 * `id` and `function.name`, later ones append to `function.arguments`. As in the openai SDK's own
 * helper, an `id` or `name` replaces the earlier one and `arguments` fragments are concatenated.
 * Only choice 0 is read (corral never asks for more than one).
 */
import { ModelError } from '../domain/errors';
import type { ModelDelta, ModelToolCall, ModelTurn } from '../domain/model';

export interface StreamBounds {
  /** Characters of answer text. */
  maxContentChars: number;
  /** Tool calls in one answer; an index at or above this is refused. */
  maxToolCalls: number;
  /** Characters of one tool call's arguments. */
  maxArgumentsChars: number;
  /** Characters of a tool call's name or id. */
  maxNameChars: number;
  /** Chunks in one answer. */
  maxChunks: number;
}

export const DEFAULT_STREAM_BOUNDS: StreamBounds = {
  maxContentChars: 1_000_000,
  maxToolCalls: 64,
  maxArgumentsChars: 512 * 1024,
  maxNameChars: 256,
  maxChunks: 200_000,
};

interface PartialCall {
  id: string;
  name: string;
  arguments: string;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export class StreamAccumulator {
  private content = '';
  private sawContent = false;
  private readonly calls = new Map<number, PartialCall>();
  private finishReason: string | null = null;
  private model: string | null = null;
  private usage: { inputTokens: number; outputTokens: number } | null = null;
  private chunks = 0;

  constructor(
    private readonly bounds: StreamBounds = DEFAULT_STREAM_BOUNDS,
    private readonly onDelta?: (d: ModelDelta) => void,
    /** What a refusal calls the answer ("streamed answer", "answer"). */
    private readonly what = 'streamed answer',
  ) {}

  /** How many chunks were read so far. */
  get chunkCount(): number {
    return this.chunks;
  }

  /** Reads one chunk. Throws ModelError for a malformed chunk or a broken bound. */
  push(chunk: unknown): void {
    this.chunks += 1;
    if (this.chunks > this.bounds.maxChunks) throw this.fail(`more than ${this.bounds.maxChunks} chunks`);
    if (!isObject(chunk)) throw this.fail('a chunk is not a JSON object');
    if (typeof chunk.model === 'string' && chunk.model) this.model = chunk.model.slice(0, this.bounds.maxNameChars);
    if (isObject(chunk.usage)) {
      const u = chunk.usage;
      this.usage = { inputTokens: tokenCount(u.prompt_tokens), outputTokens: tokenCount(u.completion_tokens) };
    }
    if (chunk.choices === undefined || chunk.choices === null) return;
    if (!Array.isArray(chunk.choices)) throw this.fail('"choices" is not an array');
    for (const choice of chunk.choices) {
      if (!isObject(choice)) throw this.fail('a choice is not an object');
      if (choice.index !== undefined && choice.index !== 0) continue;
      if (typeof choice.finish_reason === 'string') this.finishReason = choice.finish_reason.slice(0, 64);
      const delta = choice.delta;
      if (delta === undefined || delta === null) continue;
      if (!isObject(delta)) throw this.fail('"delta" is not an object');
      if (delta.content !== undefined && delta.content !== null) {
        if (typeof delta.content !== 'string') throw this.fail('"delta.content" is not a string');
        this.sawContent = true;
        if (this.content.length + delta.content.length > this.bounds.maxContentChars) {
          throw this.fail(`the answer's text passed ${this.bounds.maxContentChars} characters`);
        }
        this.content += delta.content;
        if (delta.content) this.onDelta?.({ kind: 'text', text: delta.content });
      }
      if (delta.tool_calls !== undefined && delta.tool_calls !== null) {
        if (!Array.isArray(delta.tool_calls)) throw this.fail('"delta.tool_calls" is not an array');
        for (const tc of delta.tool_calls) this.pushToolCall(tc);
      }
    }
  }

  private pushToolCall(tc: unknown): void {
    if (!isObject(tc)) throw this.fail('a tool call delta is not an object');
    const index = tc.index;
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0) throw this.fail('a tool call delta has no valid "index"');
    if (index >= this.bounds.maxToolCalls) throw this.fail(`more than ${this.bounds.maxToolCalls} tool calls (index ${index})`);
    let call = this.calls.get(index);
    if (!call) {
      call = { id: '', name: '', arguments: '' };
      this.calls.set(index, call);
    }
    if (tc.id !== undefined && tc.id !== null) {
      if (typeof tc.id !== 'string') throw this.fail('a tool call "id" is not a string');
      if (tc.id.length > this.bounds.maxNameChars) throw this.fail(`a tool call id is longer than ${this.bounds.maxNameChars} characters`);
      if (tc.id) call.id = tc.id;
    }
    const fn = tc.function;
    if (fn === undefined || fn === null) return;
    if (!isObject(fn)) throw this.fail('a tool call "function" is not an object');
    const before = { name: call.name, args: call.arguments.length };
    if (fn.name !== undefined && fn.name !== null) {
      if (typeof fn.name !== 'string') throw this.fail('a tool call name is not a string');
      if (fn.name.length > this.bounds.maxNameChars) throw this.fail(`a tool call name is longer than ${this.bounds.maxNameChars} characters`);
      if (fn.name) call.name = fn.name;
    }
    if (fn.arguments !== undefined && fn.arguments !== null) {
      if (typeof fn.arguments !== 'string') throw this.fail('tool call arguments are not a string');
      if (call.arguments.length + fn.arguments.length > this.bounds.maxArgumentsChars) {
        throw this.fail(`the arguments of tool call ${index} (${call.name || 'unnamed'}) passed ${this.bounds.maxArgumentsChars} characters`);
      }
      call.arguments += fn.arguments;
    }
    if (call.name !== before.name || call.arguments.length !== before.args) {
      this.onDelta?.({ kind: 'tool', index, name: call.name, argumentsChars: call.arguments.length });
    }
  }

  /**
   * The assembled turn. `usage` is null when the server sent none (the caller estimates it);
   * tool calls come in index order, a call without an id gets `call_<index>`.
   */
  finish(fallbackModel: string): Omit<ModelTurn, 'usage'> & { usage: ModelTurn['usage'] | null } {
    if (this.chunks === 0) {
      throw this.fail('no chunks at all (does the endpoint support stream: true? set CORRAL_MODEL_STREAM=false if not)');
    }
    const toolCalls: ModelToolCall[] = [...this.calls.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([i, c]) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.arguments }));
    return {
      content: this.sawContent ? this.content : null,
      toolCalls,
      usage: this.usage,
      finishReason: this.finishReason ?? 'unknown',
      model: this.model ?? fallbackModel,
    };
  }

  private fail(what: string): ModelError {
    return new ModelError(`the model's ${this.what} was refused: ${what}`);
  }
}

/**
 * A whole (not streamed) chat completion, read with the stream's checks and bounds: its choice 0 is
 * checked field by field and handed to a StreamAccumulator as one chunk, so a server answering in one
 * piece can send no more (text, tool calls, names, arguments) and nothing of another type than one
 * that streams. Tool calls of another type than `function` are left out, as before. `usage` is null
 * when the server sent none (the caller estimates it, so the budgets hold).
 */
export function readWholeAnswer(res: unknown, bounds: StreamBounds, fallbackModel: string): ReturnType<StreamAccumulator['finish']> {
  const fail = (what: string) => new ModelError(`the model's answer was refused: ${what}`);
  if (!isObject(res)) throw fail('the answer is not a JSON object');
  if (res.choices !== undefined && res.choices !== null && !Array.isArray(res.choices)) throw fail('"choices" is not an array');
  const choices: unknown[] = Array.isArray(res.choices) ? res.choices : [];
  const choice = choices.find((c) => isObject(c) && (c.index === undefined || c.index === 0)) ?? choices[0];
  if (choice === undefined) throw new ModelError(`the model endpoint returned no choices (model ${fallbackModel})`);
  if (!isObject(choice)) throw fail('a choice is not an object');
  const message = choice.message;
  if (!isObject(message)) throw fail('"message" is not an object');
  let toolCalls = message.tool_calls;
  if (toolCalls !== undefined && toolCalls !== null) {
    if (!Array.isArray(toolCalls)) throw fail('"message.tool_calls" is not an array');
    if (toolCalls.length > bounds.maxToolCalls) throw fail(`more than ${bounds.maxToolCalls} tool calls (${toolCalls.length})`);
    toolCalls = toolCalls
      .filter((tc) => !(isObject(tc) && tc.type !== undefined && tc.type !== 'function'))
      .map((tc, index) => (isObject(tc) ? { id: tc.id, function: tc.function, index } : tc));
  }
  const acc = new StreamAccumulator(bounds, undefined, 'answer');
  acc.push({
    ...(res.model !== undefined ? { model: res.model } : {}),
    ...(res.usage !== undefined ? { usage: res.usage } : {}),
    choices: [{ index: 0, finish_reason: choice.finish_reason, delta: { content: message.content, tool_calls: toolCalls } }],
  });
  return acc.finish(fallbackModel);
}

function tokenCount(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.min(Math.floor(v), 1e12) : 0;
}
