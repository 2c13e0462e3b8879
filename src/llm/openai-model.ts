/**
 * Model over the openai SDK's chat completions (any OpenAI-compatible endpoint). The SDK's own
 * retries handle 429/5xx; what still fails becomes a ModelError (the openai → corral boundary).
 *
 * With `stream` on, the answer is requested with `stream: true` and assembled by StreamAccumulator
 * (bounded sizes, checked fields), each piece going to the request's onDelta as it arrives. Until the
 * response starts, the SDK's timeout and retries apply as for a plain request; a stream that then
 * goes quiet for `idleTimeoutMs` is aborted. When the server reports no usage for a streamed
 * answer, tokens are estimated (4 characters a token) so the token and cost budgets still hold.
 * Without streaming, the whole answer is read with the same checks and bounds (readWholeAnswer): any
 * OpenAI-compatible server may send anything, whichever way it answers.
 * The request's `model` (model routing) overrides the model this adapter was made with.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { CancelledError, ModelError } from '../domain/errors';
import type { ChatMessage, Model, ModelRequest, ModelTurn } from '../domain/model';
import { DEFAULT_STREAM_BOUNDS, StreamAccumulator, readWholeAnswer, type StreamBounds } from './stream-accumulator';

export interface OpenAIModelOptions {
  /** Ask for a streamed answer (deltas go to the request's onDelta). */
  stream?: boolean;
  /** A stream with no chunk for this long is aborted (ModelError). */
  idleTimeoutMs?: number;
  /** Sizes an answer may have, streamed or whole. */
  bounds?: StreamBounds;
}

export class OpenAIModel implements Model {
  readonly description: string;

  constructor(
    private readonly client: OpenAI,
    private readonly model: string,
    private readonly opts: OpenAIModelOptions = {},
  ) {
    this.description = `${model} at ${client.baseURL}${opts.stream ? ' (streamed)' : ''}`;
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    const tools: ChatCompletionTool[] = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    const model = req.model ?? this.model;
    const body = { model, messages: req.messages.map(toOpenAI), ...(tools.length ? { tools } : {}) };
    if (this.opts.stream) return this.streamed(body, model, req);
    let res;
    try {
      res = await this.client.chat.completions.create(body, { signal: req.signal });
    } catch (err) {
      throw toModelError(err, req.signal);
    }
    // The SDK types the answer but does not check it: it is read with the stream's checks and bounds.
    return withUsage(readWholeAnswer(res as unknown, this.opts.bounds ?? DEFAULT_STREAM_BOUNDS, model), body.messages);
  }

  private async streamed(body: { model: string; messages: ChatCompletionMessageParam[]; tools?: ChatCompletionTool[] }, model: string, req: ModelRequest): Promise<ModelTurn> {
    const idleMs = this.opts.idleTimeoutMs ?? 120_000;
    const idle = new AbortController();
    const signal = req.signal ? AbortSignal.any([req.signal, idle.signal]) : idle.signal;
    let timer: NodeJS.Timeout | undefined;
    const arm = () => {
      clearTimeout(timer);
      timer = setTimeout(() => idle.abort(), idleMs);
      timer.unref?.();
    };
    const acc = new StreamAccumulator(this.opts.bounds ?? DEFAULT_STREAM_BOUNDS, req.onDelta);
    try {
      // Until the response starts, the SDK's own timeout and retries apply; from then on, silence does.
      const stream = await this.client.chat.completions.create({ ...body, stream: true, stream_options: { include_usage: true } }, { signal });
      arm();
      for await (const chunk of stream) {
        arm();
        acc.push(chunk);
      }
      // The SDK's stream ends quietly when its signal aborts: a cut-off answer must not pass as whole.
      if (signal.aborted) throw new APIUserAbortError();
    } catch (err) {
      if (idle.signal.aborted && !req.signal?.aborted) {
        throw new ModelError(`the model's stream went quiet: no data for ${Math.round(idleMs / 1000)} s (CORRAL_MODEL_TIMEOUT_MS), after ${acc.chunkCount} chunks`, undefined, { cause: err });
      }
      throw err instanceof ModelError ? err : toModelError(err, req.signal);
    } finally {
      clearTimeout(timer);
    }
    return withUsage(acc.finish(model), body.messages);
  }
}

/** The turn with the server's usage, or when it sent none an estimate (4 characters a token), so the token and cost budgets hold. */
function withUsage(turn: ReturnType<StreamAccumulator['finish']>, messages: ChatCompletionMessageParam[]): ModelTurn {
  const usage = turn.usage ?? {
    inputTokens: Math.ceil(JSON.stringify(messages).length / 4),
    outputTokens: Math.ceil(((turn.content ?? '').length + turn.toolCalls.reduce((n, c) => n + c.name.length + c.arguments.length, 0)) / 4),
  };
  return { ...turn, usage };
}

function toOpenAI(m: ChatMessage): ChatCompletionMessageParam {
  switch (m.role) {
    case 'system':
    case 'user':
      return { role: m.role, content: m.content };
    case 'assistant':
      return {
        role: 'assistant',
        content: m.content,
        ...(m.toolCalls?.length
          ? { tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.arguments } })) }
          : {}),
      };
    case 'tool':
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
  }
}

function toModelError(err: unknown, signal?: AbortSignal): Error {
  if (err instanceof APIUserAbortError || signal?.aborted) return new CancelledError('the model call was cancelled');
  if (err instanceof APIConnectionTimeoutError) {
    return new ModelError('the model endpoint did not answer in time, after retries (CORRAL_MODEL_TIMEOUT_MS per request)', undefined, { cause: err });
  }
  if (err instanceof APIConnectionError) {
    const c = (err as { cause?: { code?: string; message?: string } }).cause;
    const detail = c?.code ?? (c?.message && c.message !== '{}' ? c.message : undefined);
    return new ModelError(`cannot reach the model endpoint, after retries: ${err.message}${detail ? ` (${detail})` : ''}`, undefined, { cause: err });
  }
  if (err instanceof APIError) {
    const detail = err.message || 'no message';
    return new ModelError(`model endpoint error${err.status ? ` ${err.status}` : ''}: ${detail}`, err.status, { cause: err });
  }
  return new ModelError(`model call failed: ${(err as Error).message ?? String(err)}`, undefined, { cause: err });
}
