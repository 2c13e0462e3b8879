/**
 * A stateless scripted agent for load tests and the benchmark: a run whose task contains
 * `LOAD-TOOLS=N` gets N bash tool calls (one per model turn, each appending a line to steps.txt),
 * then a final answer. The turn is read from the request itself (the number of tool results so far),
 * so any number of runs can share one fake model server at once.
 */
import { promptText, type Handler, type Scripted } from './fake-decisions-server';
import { finalTurn, messagesOf, toolCallTurn } from './fake-openai-chat';

const MARKER = /LOAD-TOOLS=(\d+)/;

/** The task text of a load run that makes `tools` bash calls. */
export function loadTask(tools: number, note = ''): string {
  return `LOAD-TOOLS=${tools} append ${tools} lines to steps.txt, then say done${note ? ` (${note})` : ''}`;
}

/** The final answer a load run with `tools` calls ends with. */
export function loadAnswer(tools: number): string {
  return `done after ${tools} steps`;
}

export function loadAgent(): Handler & { requests: () => number } {
  let requests = 0;
  const handler = (body: Record<string, unknown>): Scripted => {
    requests += 1;
    const m = MARKER.exec(promptText(body));
    if (!m) return { status: 400, body: { error: { message: 'no LOAD-TOOLS=N marker in the prompt', type: 'invalid_request_error' } } };
    const tools = Number(m[1]);
    const done = messagesOf(body).filter((x) => x.role === 'tool').length;
    if (done >= tools) return finalTurn(loadAnswer(tools));
    return toolCallTurn([{ name: 'bash', args: { command: `echo step-${done + 1} >> steps.txt && wc -l < steps.txt` } }]);
  };
  return Object.assign(handler, { requests: () => requests });
}
