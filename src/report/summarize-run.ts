/**
 * summarizeRun: folds a run's events into one structured summary — header facts, the models the
 * server reported, usage (from run.finished, or added up from the log when the run did not finish),
 * budget warnings and exhaustion, each tool call with its arguments, verdict, result and egress, the
 * workspace context and compactions, done checks, file changes, memory proposals, and the log's own
 * health (last seq, missing seqs, unknown types). Pure; the markdown report renders this.
 */
import type { RunEvent, RunUsage } from '../domain/events';

export type EventOf<T extends RunEvent['type']> = Extract<RunEvent, { type: T }>;

export interface CallRecord {
  callId: string;
  tool: string;
  /** The model turn that requested the call, when a model.response listed it. */
  turn: number | null;
  /** false when no tool.call event was logged for this id. */
  hasArgs: boolean;
  args: unknown;
  /** The raw arguments text from the model.response that requested the call, if one was logged. */
  requestedArgs: string | null;
  verdict?: EventOf<'policy.decision'>['verdict'];
  approvalPending?: EventOf<'approval.pending'>;
  result?: EventOf<'tool.result'>;
  egress: EventOf<'egress'>[];
  /** Denied by the gate or reported as blocked by the result. */
  blocked: boolean;
}

export interface RunSummary {
  runId: string | null;
  eventCount: number;
  lastSeq: number | null;
  /** Sequence numbers absent between 1 and lastSeq, as inclusive ranges. */
  missingSeqs: Array<[number, number]>;
  /** Event types the RunEvent union does not know (e.g. a log written by a newer version). */
  unknownTypes: string[];
  started?: EventOf<'run.started'>;
  sandbox?: EventOf<'sandbox.ready'>;
  /** sandbox.ready events: more than one when the run was resumed after waiting for sub-runs. */
  sandboxCount: number;
  sandboxRemoved?: EventOf<'sandbox.removed'>;
  finished?: EventOf<'run.finished'>;
  usage: RunUsage;
  usageFrom: 'run.finished' | 'log';
  budgetsExceeded: EventOf<'budget.exceeded'>[];
  budgetWarnings: EventOf<'budget.warning'>[];
  /** model.response events in the log. */
  modelResponses: number;
  /** Model names the server reported (model.response.model), first seen first, with their turn counts. */
  reportedModels: Tally[];
  /** finish_reason of each model turn, first seen first, with counts. */
  finishReasons: Tally[];
  context?: EventOf<'context.loaded'>;
  compactions: EventOf<'context.compacted'>[];
  doneChecks: EventOf<'done.check'>[];
  /** workspace.git: the clone the run started from, and the bundle of the agent's commits. */
  cloned?: EventOf<'workspace.cloned'>;
  bundle?: EventOf<'git.bundle'>;
  /** The environment's setup phase, when it had one. */
  setup: { started?: EventOf<'setup.started'>; commands: EventOf<'setup.command'>[]; finished?: EventOf<'setup.finished'>; narrowed?: EventOf<'egress.narrowed'> };
  memoryProposals: EventOf<'memory.proposed'>[];
  /** The run's MCP servers: started (tools offered and refused), failed to start, ended. */
  mcp: Array<EventOf<'mcp.started'> | EventOf<'mcp.failed'> | EventOf<'mcp.stopped'>>;
  /** The last workspace.changes event (the final state of the workspace). */
  workspaceChanges?: EventOf<'workspace.changes'>;
  calls: CallRecord[];
  egress: EventOf<'egress'>[];
  /** Repeated attempts the proxy counted instead of logging each. */
  egressAggregates: EventOf<'egress.aggregate'>[];
  /** The egress proxy's start, failure and stop. */
  egressProxy: EventOf<'egress.proxy'>[];
  /** The last egress totals. */
  egressStats?: EventOf<'egress.stats'>;
  /** Effects observed at the exits (protected files, unpredicted connections) and what was decided. */
  effects: EventOf<'effect.decision'>[];
  effectsUnchecked: EventOf<'effect.unchecked'>[];
  effectStats: EventOf<'effect.stats'>[];
  /** Secrets masked in tool, done-check and setup output. */
  secretsMasked: EventOf<'secret.masked'>[];
  /** log.truncated markers (the cap, and the counts at the end). */
  truncations: EventOf<'log.truncated'>[];
  artifacts: EventOf<'artifact'>[];
  /** Every model turn (for the per-model table of a routed run). */
  responses: EventOf<'model.response'>[];
  subrunsStarted: EventOf<'subrun.started'>[];
  subrunsFinished: EventOf<'subrun.finished'>[];
  suspensions: EventOf<'run.suspended'>[];
  resumes: EventOf<'run.resumed'>[];
}

export interface Tally {
  value: string;
  count: number;
}

export function summarizeRun(input: readonly RunEvent[]): RunSummary {
  const events = [...input].sort((a, b) => a.seq - b.seq);
  const calls = new Map<string, CallRecord>();
  const call = (callId: string, tool: string): CallRecord => {
    let c = calls.get(callId);
    if (!c) {
      c = { callId, tool, turn: null, hasArgs: false, args: undefined, requestedArgs: null, egress: [], blocked: false };
      calls.set(callId, c);
    }
    return c;
  };
  const s: RunSummary = {
    runId: events[0]?.runId ?? null,
    eventCount: events.length,
    lastSeq: events.at(-1)?.seq ?? null,
    missingSeqs: missingRanges(events.map((e) => e.seq)),
    unknownTypes: [],
    usage: { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0, wallTimeMs: 0 },
    usageFrom: 'log',
    budgetsExceeded: [],
    budgetWarnings: [],
    modelResponses: 0,
    reportedModels: [],
    finishReasons: [],
    compactions: [],
    doneChecks: [],
    setup: { commands: [] },
    memoryProposals: [],
    mcp: [],
    calls: [],
    egress: [],
    egressAggregates: [],
    egressProxy: [],
    effects: [],
    effectsUnchecked: [],
    effectStats: [],
    secretsMasked: [],
    truncations: [],
    artifacts: [],
    sandboxCount: 0,
    responses: [],
    subrunsStarted: [],
    subrunsFinished: [],
    suspensions: [],
    resumes: [],
  };
  const counted = { llmCalls: 0, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 };

  for (const e of events) {
    switch (e.type) {
      case 'run.started': s.started ??= e; break;
      case 'sandbox.ready':
        s.sandbox ??= e;
        s.sandboxCount += 1;
        break;
      case 'subrun.started': s.subrunsStarted.push(e); break;
      case 'subrun.finished': s.subrunsFinished.push(e); break;
      case 'run.suspended': s.suspensions.push(e); break;
      case 'run.resumed': s.resumes.push(e); break;
      case 'sandbox.removed': s.sandboxRemoved ??= e; break;
      case 'run.finished': s.finished ??= e; break;
      case 'model.response':
        s.responses.push(e);
        counted.llmCalls += 1;
        s.modelResponses += 1;
        counted.inputTokens += e.usage?.inputTokens ?? 0;
        counted.outputTokens += e.usage?.outputTokens ?? 0;
        counted.costUsd += e.costUsd ?? 0;
        if (e.model) tally(s.reportedModels, e.model);
        if (e.finishReason) tally(s.finishReasons, e.finishReason);
        for (const tc of e.toolCalls ?? []) {
          const c = call(tc.id, tc.name);
          c.turn ??= e.turn;
          if (typeof tc.arguments === 'string') c.requestedArgs ??= tc.arguments;
        }
        break;
      case 'tool.call': {
        counted.toolCalls += 1;
        const c = call(e.callId, e.tool);
        c.tool = e.tool;
        c.hasArgs = true;
        c.args = e.args;
        break;
      }
      case 'policy.decision': call(e.callId, e.tool).verdict = e.verdict; break;
      case 'approval.pending': call(e.callId, e.tool).approvalPending = e; break;
      case 'tool.result': call(e.callId, e.tool).result = e; break;
      case 'egress':
        s.egress.push(e);
        if (e.callId !== null) calls.get(e.callId)?.egress.push(e);
        break;
      case 'egress.aggregate': s.egressAggregates.push(e); break;
      case 'egress.proxy': s.egressProxy.push(e); break;
      case 'egress.stats': s.egressStats = e; break;
      case 'log.truncated': s.truncations.push(e); break;
      case 'budget.exceeded': s.budgetsExceeded.push(e); break;
      case 'budget.warning': s.budgetWarnings.push(e); break;
      case 'context.loaded': s.context ??= e; break;
      case 'context.compacted': s.compactions.push(e); break;
      case 'done.check': s.doneChecks.push(e); break;
      case 'workspace.cloned': s.cloned = e; break;
      case 'git.bundle': s.bundle = e; break;
      case 'setup.started': s.setup.started = e; break;
      case 'setup.command': s.setup.commands.push(e); break;
      case 'setup.finished': s.setup.finished = e; break;
      case 'egress.narrowed': s.setup.narrowed = e; break;
      case 'memory.proposed': s.memoryProposals.push(e); break;
      case 'mcp.started':
      case 'mcp.failed':
      case 'mcp.stopped': s.mcp.push(e); break;
      case 'workspace.changes': s.workspaceChanges = e; break;
      case 'artifact': s.artifacts.push(e); break;
      case 'effect.decision': s.effects.push(e); break;
      case 'effect.unchecked': s.effectsUnchecked.push(e); break;
      case 'effect.stats': s.effectStats.push(e); break;
      case 'secret.masked': s.secretsMasked.push(e); break;
      default: {
        const type = String((e as { type: unknown }).type);
        if (!s.unknownTypes.includes(type)) s.unknownTypes.push(type);
      }
    }
  }

  for (const c of calls.values()) c.blocked = c.verdict?.decision === 'deny' || c.result?.blocked === true;
  s.calls = [...calls.values()];
  if (s.finished?.usage) {
    s.usage = s.finished.usage;
    s.usageFrom = 'run.finished';
  } else {
    const first = s.started ?? events[0];
    const last = events.at(-1);
    const wallTimeMs = first && last ? Math.max(0, Date.parse(last.ts) - Date.parse(first.ts)) : 0;
    s.usage = { ...counted, wallTimeMs: Number.isFinite(wallTimeMs) ? wallTimeMs : 0 };
  }
  return s;
}

function tally(list: Tally[], value: string): void {
  const t = list.find((x) => x.value === value);
  if (t) t.count += 1;
  else list.push({ value, count: 1 });
}

/** Gaps in an ascending list of seqs (counting from 1), without walking the numbers in between. */
function missingRanges(sortedSeqs: number[]): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let prev = 0;
  for (const seq of sortedSeqs) {
    if (seq > prev + 1) out.push([prev + 1, seq - 1]);
    if (seq > prev) prev = seq;
  }
  return out;
}
