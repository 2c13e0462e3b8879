/**
 * A Model that replays a recorded transcript (examples/*.replay.json): each turn returns the next
 * recorded assistant message. Used by the demo when no OPENAI_API_KEY is set, and says so in its
 * description. When the recording runs out, the replay fails loudly instead of pretending.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { InvalidInputError, ModelError, describeZodIssues } from '../domain/errors';
import type { RunEvent } from '../domain/events';
import type { Model, ModelRequest, ModelTurn } from '../domain/model';

const ReplayFile = z.object({
  model: z.string(),
  task: z.string(),
  turns: z
    .array(
      z.object({
        content: z.string().nullable().default(null),
        toolCalls: z.array(z.object({ id: z.string(), name: z.string(), arguments: z.string() })).default([]),
        usage: z.object({ inputTokens: z.number(), outputTokens: z.number() }).default({ inputTokens: 0, outputTokens: 0 }),
      }),
    )
    .min(1),
});
export type ReplayFile = z.infer<typeof ReplayFile>;

export function loadReplay(path: string): ReplayFile {
  const r = ReplayFile.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!r.success) throw new InvalidInputError(`replay ${path}: ${describeZodIssues(r.error.issues).message}`);
  return r.data;
}

/**
 * The model turns of a finished run, from its JSONL log (model.response events), so the run can be
 * re-run deterministically: the same tool calls with the same arguments, the same final answer.
 */
export function replayFromEvents(events: readonly RunEvent[], source: string): ReplayFile {
  const started = events.find((e) => e.type === 'run.started');
  const turns = events.flatMap((e) => (e.type === 'model.response' ? [{ content: e.content, toolCalls: e.toolCalls, usage: e.usage, model: e.model }] : []));
  if (!turns.length) throw new InvalidInputError(`${source} has no model turns to replay`);
  return { model: turns[0]!.model ?? 'unknown', task: started?.type === 'run.started' ? started.task : '', turns };
}

export class ReplayModel implements Model {
  readonly description: string;
  private next = 0;

  constructor(private readonly replay: ReplayFile, source: string) {
    this.description = `replay of ${source} (recorded from ${replay.model}; no model is called)`;
  }

  /** Returns the next recorded turn as is: a recorded call to a tool the run does not offer is replayed too. */
  async complete(_req: ModelRequest): Promise<ModelTurn> {
    const turn = this.replay.turns[this.next];
    if (!turn) throw new ModelError(`replay exhausted after ${this.next} turns`);
    this.next += 1;
    return { ...turn, finishReason: turn.toolCalls.length ? 'tool_calls' : 'stop', model: this.replay.model };
  }
}
