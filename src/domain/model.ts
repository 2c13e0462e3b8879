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

export interface ModelRequest {
  messages: ChatMessage[];
  tools: ToolSpec[];
  signal?: AbortSignal;
}

export interface Model {
  /** Human-readable: "gpt-4.1-mini at https://…" or "replay of examples/…". */
  readonly description: string;
  complete(req: ModelRequest): Promise<ModelTurn>;
}
