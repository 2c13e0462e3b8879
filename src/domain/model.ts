/** The Model port: one chat turn with tools. Implemented over the openai SDK (llm/) and by a replay model. */
export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments object. */
  parameters: Record<string, unknown>;
}

export interface ModelToolCall {
  id: string;
  name: string;
  /** Raw JSON text as the model produced it; parsed and validated by the tool, never trusted. */
  arguments: string;
}

export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; toolCallId: string; content: string };

export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
}

export interface ModelTurn {
  content: string | null;
  toolCalls: ModelToolCall[];
  usage: ModelUsage;
  finishReason: string;
  /** The model name the server reports. */
  model: string;
}

/**
 * A piece of a streamed answer, as it arrives: text, or progress of a tool call being written
 * (its name once known, and how many characters of arguments so far). Deltas are for live views
 * only; the assembled ModelTurn is what the run records.
 */
export type ModelDelta =
  | { kind: 'text'; text: string }
  | { kind: 'tool'; index: number; name: string; argumentsChars: number };

export interface ModelRequest {
  messages: ChatMessage[];
  tools: ToolSpec[];
  signal?: AbortSignal;
  /** The model to ask for this turn (model routing); absent: the model's own default. */
  model?: string;
  /** Receives the answer's deltas as they stream in (when the model streams). */
  onDelta?: (d: ModelDelta) => void;
}

export interface Model {
  /** Human-readable: "gpt-4.1-mini at https://…" or "replay of examples/…". */
  readonly description: string;
  complete(req: ModelRequest): Promise<ModelTurn>;
}
