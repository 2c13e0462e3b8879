/**
 * One tool call: parse → validate → (outside the task's allowed tools: refused) → gate → execute.
 * Returns what the model sees and what kind of result it was, so the loop can notice streaks of
 * malformed or blocked calls. Infrastructure errors and cancellation propagate; all else is a result.
 */
import { CancelledError, describeZodIssues } from '../domain/errors';
import { findIllFormed } from '../domain/tool-input';
import { toolAllowed } from '../domain/mcp';
import type { Emit } from '../domain/events';
import type { CallHistory, Gate, GateContext, GateVerdict } from '../domain/gate';
import type { ModelToolCall } from '../domain/model';
import type { Sandbox } from '../domain/sandbox';
import type { SecretMasker } from '../domain/effects';
import type { Tool } from '../tools/tool';
import type { CallEffects, CallInfo } from './effect-guard';

/** The effect check around a call (run/effect-guard.ts); absent in loops without a sandbox that has one. */
export interface CallEffectsPort {
  beginCall(call: CallInfo, verdict: GateVerdict): void;
  endCall(verdict: GateVerdict, ran: boolean, signal?: AbortSignal): Promise<CallEffects>;
}

export type CallKind = 'ok' | 'failed' | 'malformed' | 'refused' | 'blocked';

export interface ToolCallDeps {
  tools: readonly Tool[];
  /** Names of the tools the task allows; null = all offered tools. */
  allowed: ReadonlySet<string> | null;
  gate: Gate;
  sandbox: Sandbox;
  emit: Emit;
  clock: () => number;
  execTimeoutMs: number;
  maxOutputBytes: number;
  /**
   * Takes over an allowed call of a deferred tool (tool.deferred): `deferred` when the loop will
   * give its result later (a sub-run), or the result now (a refusal the model sees).
   */
  defer?: (call: ModelToolCall, args: Record<string, unknown>) => 'deferred' | { content: string; summary: string; kind: CallKind };
  /** The effect check: files and connections compared with what the decision covered. */
  effects?: CallEffectsPort;
  /** Masks secrets in the tool's output before the model, the log, the report and the console see it. */
  secrets?: SecretMasker;
}

/** How much of a tool's output the log keeps (head and tail). */
const LOG_EXCERPT_CHARS = 2000;

export function excerpt(text: string, max = LOG_EXCERPT_CHARS): string {
  if (text.length <= max) return text;
  const half = Math.max(1, Math.floor(max / 2));
  return `${text.slice(0, half)}\n[… ${text.length - 2 * half} characters not logged …]\n${text.slice(-half)}`;
}

/** The arguments as JSON when they parse (for a readable log), else the raw text the model sent. */
function parsedOrRaw(raw: string): unknown {
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw;
  }
}

export async function runToolCall(
  d: ToolCallDeps,
  call: ModelToolCall,
  gateCtx: GateContext & { signal: AbortSignal },
): Promise<{ content: string; kind: CallKind; deferred?: true; adds?: CallHistory }> {
  const { signal } = gateCtx;
  const t0 = d.clock();
  const reject = (kind: CallKind, args: unknown, content: string, summary: string) => {
    d.emit({ type: 'tool.call', callId: call.id, tool: call.name, args });
    d.emit({ type: 'tool.result', callId: call.id, tool: call.name, ok: false, blocked: kind === 'refused', summary, ms: d.clock() - t0 });
    return { content, kind };
  };

  const tool = d.tools.find((t) => t.name === call.name);
  if (!tool) {
    const names = d.tools.filter((t) => (d.allowed ? toolAllowed(d.allowed, t.name) : !t.optIn)).map((t) => t.name).join(', ');
    return reject('malformed', call.arguments, `error: there is no tool named "${call.name}". Available tools: ${names}.`, `unknown tool "${call.name}"`);
  }
  if (d.allowed && !toolAllowed(d.allowed, tool.name)) {
    return reject('refused', parsedOrRaw(call.arguments), `error: the task does not allow the ${tool.name} tool. Allowed tools: ${[...d.allowed].join(', ')}.`, `${tool.name} is not among the task's allowed tools`);
  }
  let raw: unknown;
  try {
    raw = call.arguments.trim() === '' ? {} : JSON.parse(call.arguments);
  } catch (e) {
    return reject('malformed', call.arguments, `error: the arguments are not valid JSON (${(e as Error).message}). Send a JSON object matching the ${tool.name} schema.`, 'arguments were not valid JSON');
  }
  const illFormed = findIllFormed(raw);
  if (illFormed) {
    return reject('malformed', raw, `error: invalid arguments for ${tool.name}: ${illFormed.path} ${illFormed.reason}. Send well-formed text.`, `invalid arguments: ${illFormed.path} ${illFormed.reason}`);
  }
  const parsed = tool.schema.safeParse(raw);
  if (!parsed.success) {
    const { message } = describeZodIssues(parsed.error.issues);
    return reject('malformed', raw, `error: invalid arguments for ${tool.name}: ${message}`, `invalid arguments: ${message}`);
  }
  const args = parsed.data as Record<string, unknown>;
  d.emit({ type: 'tool.call', callId: call.id, tool: tool.name, args });

  const verdict = await d.gate.decide({ callId: call.id, tool: tool.name, args, ...(tool.mcp ? { mcp: tool.mcp } : {}) }, gateCtx);
  d.emit({ type: 'policy.decision', callId: call.id, tool: tool.name, verdict });
  if (verdict.decision === 'deny') {
    d.emit({ type: 'tool.result', callId: call.id, tool: tool.name, ok: false, blocked: true, summary: verdict.reason, ms: d.clock() - t0 });
    return { content: verdict.reason, kind: 'blocked' };
  }

  if (signal.aborted) throw new CancelledError();
  if (tool.deferred && d.defer) {
    const r = d.defer(call, args);
    if (r === 'deferred') return { content: '', kind: 'ok', deferred: true };
    d.emit({ type: 'tool.result', callId: call.id, tool: tool.name, ok: false, blocked: false, summary: r.summary, ms: d.clock() - t0, output: excerpt(r.content) });
    return { content: r.content, kind: r.kind };
  }
  d.effects?.beginCall({ callId: call.id, tool: tool.name, args }, verdict);
  const out = await tool.execute(args, { sandbox: d.sandbox, execTimeoutMs: d.execTimeoutMs, maxOutputBytes: d.maxOutputBytes, signal });
  // What the call did at the exits: protected files and connections the decision did not cover are undone or refused.
  const fx = d.effects ? await d.effects.endCall(verdict, true, signal) : undefined;
  let content = fx?.note ? `${out.content}\n\n${fx.note}` : out.content;
  // secrets never reach the transcript: masked before the log and the model see the output
  if (d.secrets) {
    const m = await d.secrets.mask(content);
    content = m.text;
    if (m.found.length || m.coarse) d.emit({ type: 'secret.masked', callId: call.id, where: 'tool-output', found: m.found, ...(m.coarse ? { coarse: m.coarse } : {}) });
  }
  // A call that completed is logged even if the run was cancelled meanwhile (its effects happened);
  // the loop stops before the next call or model turn.
  const { stdout: _o, stderr: _e, ...exec } = out.exec ?? ({} as NonNullable<typeof out.exec>);
  d.emit({
    type: 'tool.result', callId: call.id, tool: tool.name, ok: out.ok, blocked: false, summary: fx?.refused ? `${out.summary}; an effect was refused` : out.summary,
    ...(out.exec ? { exec } : {}), ms: d.clock() - t0, output: excerpt(content),
  });
  // what this call wrote and linked, as the gate predicted it, becomes part of the run's history
  return { content, kind: fx?.refused ? 'blocked' : out.ok ? 'ok' : 'failed', ...(verdict.adds ? { adds: verdict.adds } : {}) };
}
