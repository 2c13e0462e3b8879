/**
 * What the agent loop carries over a suspension, as plain JSON: when a turn delegates to sub-runs the
 * loop stops, the worker stores this (Redis) and gives up the run's slot; when every sub-run has
 * ended, any worker reads it back, re-creates the sandbox and continues the loop from here. It holds
 * the conversation, the meter, the streak counters, the repetition tracker, the routing signals, how
 * many sub-runs were started, and the suspended turn's tool results in call order — the delegate
 * calls among them waiting for their result sheets.
 *
 * It is read back from Redis, so it is parsed with LoopStateSchema (a trust boundary like any other).
 */
import { z } from 'zod';
import type { CallHistory } from '../domain/gate';
import type { ChatMessage } from '../domain/model';
import { RunBudgets } from '../domain/run-spec';
import { TaskSheet } from '../domain/subrun';
import type { MeterState } from './budget-meter';
import type { TurnSignals } from './model-router';
import type { CallKind } from './tool-call';

/** One tool result of the suspended turn: done (content), or a delegate call waiting for its sub-run. */
export interface PendingResult {
  callId: string;
  tool: string;
  content?: string;
  kind?: CallKind;
  child?: { sheet: TaskSheet; budgets: RunBudgets };
}

export interface LoopState {
  v: 1;
  /** The last model turn taken (the one that delegated). */
  turn: number;
  messages: ChatMessage[];
  meter: MeterState;
  doneRounds: number;
  malformed: number;
  blocked: number;
  evidence: string[];
  repetition: { lastKey: string | null; streak: number };
  signals: TurnSignals;
  childrenStarted: number;
  pending: PendingResult[];
  /** What the run's calls wrote and linked, for the gate (absent in states saved before it existed). */
  history?: CallHistory;
}

const ToolCallSchema = z.object({ id: z.string().max(256), name: z.string().max(256), arguments: z.string() }).strict();
const MessageSchema = z.discriminatedUnion('role', [
  z.object({ role: z.literal('system'), content: z.string() }).strict(),
  z.object({ role: z.literal('user'), content: z.string() }).strict(),
  z.object({ role: z.literal('assistant'), content: z.string().nullable(), toolCalls: z.array(ToolCallSchema).max(256).optional() }).strict(),
  z.object({ role: z.literal('tool'), toolCallId: z.string().max(256), content: z.string() }).strict(),
]);
const count = z.number().int().min(0);
const BudgetNameSchema = z.enum(['llmCalls', 'toolCalls', 'tokens', 'wallTimeS', 'costUsd']);

export const LoopStateSchema = z
  .object({
    v: z.literal(1),
    turn: count,
    messages: z.array(MessageSchema).min(1).max(50_000),
    meter: z.object({
      usage: z.object({ llmCalls: count, toolCalls: count, inputTokens: count, outputTokens: count, costUsd: z.number().min(0) }).strict(),
      startedAt: z.number().int().positive(),
      warned: z.array(BudgetNameSchema).max(5),
    }).strict(),
    doneRounds: count,
    malformed: count,
    blocked: count,
    evidence: z.array(z.string().max(10_000)).max(10),
    repetition: z.object({ lastKey: z.string().nullable(), streak: count }).strict(),
    signals: z.object({ failedCheck: z.boolean(), failedTool: z.boolean(), blockedCall: z.boolean(), malformedCall: z.boolean(), subRunResults: z.boolean(), compacted: z.boolean() }).strict(),
    childrenStarted: count,
    history: z.object({
      written: z.array(z.string().max(4096)).max(2_000),
      links: z.array(z.object({ name: z.string().max(4096), target: z.string().max(4096).nullable() }).strict()).max(2_000),
    }).strict().optional(),
    pending: z.array(z.object({
      callId: z.string().max(256),
      tool: z.string().max(256),
      content: z.string().optional(),
      kind: z.enum(['ok', 'failed', 'malformed', 'refused', 'blocked']).optional(),
      child: z.object({ sheet: TaskSheet, budgets: RunBudgets }).strict().optional(),
    }).strict()).min(1).max(256),
  })
  .strict();

/** Compile-time check: the schema's output is a LoopState. */
type Assignable<T, U extends T> = U;
export type LoopStateMatchesSchema = Assignable<LoopState, z.infer<typeof LoopStateSchema>>;
