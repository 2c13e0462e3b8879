/**
 * Streaming for the scripted OpenAI-compatible server: a scripted chat.completion turned into the
 * chunks of `stream: true` as OpenAI sends them — a role chunk, the content in small pieces, each
 * tool call opened with its id and name and then its arguments in fragments, the finish reason, the
 * usage chunk (when stream_options.include_usage) and `data: [DONE]`. Tests that attack the client
 * give raw chunks instead.
 */
import type { ServerResponse } from 'node:http';

interface Completion {
  id?: string;
  model?: string;
  created?: number;
  choices?: Array<{ finish_reason?: string; message?: { content?: string | null; tool_calls?: Array<{ id: string; function: { name: string; arguments: string } }> } }>;
  usage?: unknown;
}

function pieces(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** The chunks OpenAI would stream for this completion (content in `size`-character pieces). */
export function completionChunks(c: Completion, includeUsage: boolean, size = 7): unknown[] {
  const base = { id: c.id ?? 'chatcmpl-stream', object: 'chat.completion.chunk', created: c.created ?? 0, model: c.model ?? 'fake-agent' };
  const choice = c.choices?.[0];
  const msg = choice?.message ?? {};
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] });
  const out: unknown[] = [chunk({ role: 'assistant', content: '' })];
  for (const p of pieces(msg.content ?? '', size)) out.push(chunk({ content: p }));
  (msg.tool_calls ?? []).forEach((tc, index) => {
    out.push(chunk({ tool_calls: [{ index, id: tc.id, type: 'function', function: { name: tc.function.name, arguments: '' } }] }));
    for (const p of pieces(tc.function.arguments, size + 3)) out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  out.push(chunk({}, choice?.finish_reason ?? 'stop'));
  if (includeUsage && c.usage) out.push({ ...base, choices: [], usage: c.usage });
  return out;
}

/** Writes chunks as Server-Sent Events, `delayMs` apart, then `[DONE]` (unless `done` is false). */
export function writeChunks(res: ServerResponse, chunks: readonly unknown[], delayMs = 0, done = true): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  let i = 0;
  const next = () => {
    if (res.destroyed) return;
    if (i < chunks.length) {
      const c = chunks[i++];
      res.write(`data: ${typeof c === 'string' ? c : JSON.stringify(c)}\n\n`);
      if (delayMs) setTimeout(next, delayMs).unref();
      else setImmediate(next);
      return;
    }
    if (done) res.write('data: [DONE]\n\n');
    res.end();
  };
  next();
}
