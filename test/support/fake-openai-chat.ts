/**
 * Scripted agent turns for the OpenAI-compatible test server (fake-decisions-server.ts serves the
 * HTTP; the real openai SDK talks to it). A script is chosen per run by a marker in the task text, so
 * one server can drive several runs at once; each script is a list of turns served in order.
 */
import { promptText, type Handler, type Scripted } from './fake-decisions-server';

export interface ToolCallSpec {
  name: string;
  /** An object is JSON-encoded; a string is sent as is (to test bad JSON). */
  args: Record<string, unknown> | string;
  id?: string;
}

let nextId = 1;

export function toolCallTurn(calls: ToolCallSpec[], usage = { prompt_tokens: 100, completion_tokens: 20 }): Scripted {
  return {
    body: {
      id: `chatcmpl-${nextId++}`, object: 'chat.completion', created: 0, model: 'fake-agent',
      choices: [{
        index: 0, finish_reason: 'tool_calls',
        message: {
          role: 'assistant', content: null, refusal: null,
          tool_calls: calls.map((c) => ({
            id: c.id ?? `call_${nextId++}`, type: 'function',
            function: { name: c.name, arguments: typeof c.args === 'string' ? c.args : JSON.stringify(c.args) },
          })),
        },
      }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    },
  };
}

export function finalTurn(text: string, usage = { prompt_tokens: 150, completion_tokens: 30 }): Scripted {
  return {
    body: {
      id: `chatcmpl-${nextId++}`, object: 'chat.completion', created: 0, model: 'fake-agent',
      choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: text, refusal: null } }],
      usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
    },
  };
}

export function errorTurn(status: number, message: string): Scripted {
  return { status, body: { error: { message, type: 'server_error', code: null } } };
}

/**
 * A chat handler serving scripts keyed by a marker string found in the request's messages (put the
 * marker in the run's task). Turn i of a script answers the i-th request carrying that marker.
 */
export function scriptedAgent(scripts: Record<string, Scripted[] | ((body: Record<string, unknown>, turn: number) => Scripted)>): Handler & { served: Record<string, number> } {
  const served: Record<string, number> = {};
  const handler = (body: Record<string, unknown>): Scripted => {
    const text = promptText(body);
    const marker = Object.keys(scripts).find((m) => text.includes(m));
    if (!marker) return errorTurn(400, `no script for this request: ${text.slice(0, 200)}`);
    const turn = served[marker] ?? 0;
    served[marker] = turn + 1;
    const s = scripts[marker]!;
    if (typeof s === 'function') return s(body, turn);
    return s[turn] ?? errorTurn(400, `script "${marker}" has only ${s.length} turns`);
  };
  return Object.assign(handler, { served });
}

/** The messages of a chat request, as the server received them. */
export function messagesOf(body: Record<string, unknown>): Array<{ role: string; content?: string | null; tool_call_id?: string }> {
  return (body.messages ?? []) as Array<{ role: string; content?: string | null; tool_call_id?: string }>;
}
