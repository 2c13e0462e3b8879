/**
 * Model over the openai SDK's chat completions (any OpenAI-compatible endpoint). The SDK's own
 * retries handle 429/5xx; what still fails becomes a ModelError (the openai → corral boundary).
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { CancelledError, ModelError } from '../domain/errors';
import type { ChatMessage, Model, ModelRequest, ModelTurn } from '../domain/model';

export class OpenAIModel implements Model {
  readonly description: string;

  constructor(
    private readonly client: OpenAI,
    private readonly model: string,
  ) {
    this.description = `${model} at ${client.baseURL}`;
  }

  async complete(req: ModelRequest): Promise<ModelTurn> {
    const tools: ChatCompletionTool[] = req.tools.map((t) => ({
      type: 'function',
      function: { name: t.name, description: t.description, parameters: t.parameters },
    }));
    let res;
    try {
      res = await this.client.chat.completions.create(
        { model: this.model, messages: req.messages.map(toOpenAI), ...(tools.length ? { tools } : {}) },
        { signal: req.signal },
      );
    } catch (err) {
      throw toModelError(err, req.signal);
    }
    const choice = res.choices?.[0];
    if (!choice?.message) throw new ModelError(`the model endpoint returned no choices (model ${this.model})`);
    const toolCalls = (choice.message.tool_calls ?? []).flatMap((c) =>
      c.type === 'function' ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments ?? '' }] : [],
    );
    return {
      content: choice.message.content ?? null,
      toolCalls,
      usage: { inputTokens: res.usage?.prompt_tokens ?? 0, outputTokens: res.usage?.completion_tokens ?? 0 },
      finishReason: choice.finish_reason ?? 'unknown',
      model: res.model ?? this.model,
    };
  }
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
