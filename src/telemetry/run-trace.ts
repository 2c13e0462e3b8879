/**
 * One run as one trace. The run's span (`corral.run`) is the child of the context its job carried
 * (the API's submit span); below it: the queue wait, admission, the sandbox's acquisition, setup, a
 * span per model call (GenAI semantic conventions: `chat MODEL`, model, tokens in/out, finish
 * reason), a span per tool call (`execute_tool TOOL`) with the gate's decision as attributes (the
 * rule, the classifier's verdict, the approver) and, below it, the wait for a human, the exec and
 * every egress connection the call made; the artifacts; the end. Spans are made from the run's events
 * (the one log vocabulary) as they are emitted, with the events' own times, plus live spans around
 * model calls and phases.
 *
 * What a span may carry is an allowlist of names, counts, codes and decisions: never the task text
 * (unless the operator opts in), arguments, file content, tool output, reasons written by a model,
 * or a denied connection's host name (a name can carry data out).
 */
import { SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import type { RunEvent } from '../domain/events';
import type { Model, ModelRequest, ModelTurn } from '../domain/model';
import type { RunEnd, RunTrace, RunTraceStart } from '../domain/run-trace';
import { contextFrom, traceparentOf } from './trace-context';

const ms = (iso: string): number => Date.parse(iso);
/** HTTP methods shown as such (the OTel convention); any other word a sandbox sent is `_OTHER`. */
const METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE']);
const methodOf = (m: string): string => (METHODS.has(m) ? m : '_OTHER');
/** Tool calls whose spans are remembered for late events (egress after the result, a sub-run's context). */
const MAX_CALLS = 4096;

export interface RunTraceOptions {
  tracer: Tracer;
  /** Put the task text on the run's span (CORRAL_TRACE_TASK_TEXT). */
  taskText: boolean;
  /** The model server's address, for server.address on model spans. */
  modelServer?: { address: string; port?: number };
  now?: () => number;
}

export class OtelRunTrace implements RunTrace {
  readonly traceId: string | undefined;
  private readonly run: Span;
  private readonly ctx: Context;
  private readonly tracer: Tracer;
  private readonly now: () => number;
  private readonly calls = new Map<string, { span: Span; ctx: Context; open: boolean }>();
  private approvals = new Map<string, Span>();
  private setup: Span | undefined;
  private ended = false;
  private readonly toolNames: ReadonlySet<string> | undefined;

  constructor(s: RunTraceStart, private readonly o: RunTraceOptions) {
    this.tracer = o.tracer;
    this.now = o.now ?? Date.now;
    this.toolNames = s.toolNames ? new Set(s.toolNames) : undefined;
    const parent = contextFrom(s.traceparent, s.tracestate);
    const start = !s.resumed && s.queuedAt !== undefined && s.queuedAt <= s.startedAt ? s.queuedAt : s.startedAt;
    this.run = this.tracer.startSpan('corral.run', {
      kind: SpanKind.CONSUMER, startTime: start,
      attributes: {
        'corral.run.id': s.runId, 'corral.tenant': s.tenant, 'corral.run.attempt': s.attempt, 'corral.run.resumed': s.resumed,
        'messaging.system': 'bullmq', 'messaging.operation.type': 'process', 'messaging.message.id': s.runId,
        ...(s.parentRunId ? { 'corral.run.parent_id': s.parentRunId } : {}),
        ...(o.taskText ? { 'corral.task': s.task.slice(0, 4096) } : {}),
      },
    }, parent);
    this.ctx = trace.setSpan(parent, this.run);
    const sc = this.run.spanContext();
    this.traceId = trace.isSpanContextValid(sc) ? sc.traceId : trace.getSpanContext(parent)?.traceId;
    if (start < s.startedAt) this.tracer.startSpan('corral.queue_wait', { startTime: start, attributes: { 'corral.run.id': s.runId } }, this.ctx).end(s.startedAt);
  }

  readonly sink = (e: RunEvent): void => {
    if (this.ended) return;
    try {
      this.onEvent(e);
    } catch {
      // a span that cannot be made never disturbs the run
    }
  };

  async phase<T>(name: string, work: () => Promise<T>): Promise<T> {
    const span = this.tracer.startSpan(`corral.${name}`, {}, this.ctx);
    try {
      return await work();
    } catch (err) {
      failed(span, err);
      throw err;
    } finally {
      span.end();
    }
  }

  model(m: Model, requestModel: string): Model {
    const tracer = this.tracer;
    const server = this.o.modelServer;
    const ctx = this.ctx;
    return {
      description: m.description,
      async complete(req: ModelRequest): Promise<ModelTurn> {
        const model = req.model ?? requestModel;
        const span = tracer.startSpan(`chat ${model}`, {
          kind: SpanKind.CLIENT,
          attributes: {
            'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': 'openai', 'gen_ai.system': 'openai', 'gen_ai.request.model': model,
            'corral.model.tools_offered': req.tools.length,
            ...(server ? { 'server.address': server.address, ...(server.port ? { 'server.port': server.port } : {}) } : {}),
          },
        }, ctx);
        try {
          const turn = await m.complete(req);
          span.setAttributes({
            'gen_ai.response.model': turn.model, 'gen_ai.usage.input_tokens': turn.usage.inputTokens, 'gen_ai.usage.output_tokens': turn.usage.outputTokens,
            'gen_ai.response.finish_reasons': [turn.finishReason], 'corral.model.tool_calls': turn.toolCalls.length,
          });
          return turn;
        } catch (err) {
          failed(span, err);
          throw err;
        } finally {
          span.end();
        }
      },
    };
  }

  traceparentFor(callId: string): string | undefined {
    return traceparentOf(this.calls.get(callId)?.ctx ?? this.ctx);
  }

  end(e: RunEnd): void {
    if (this.ended) return;
    this.ended = true;
    const at = this.now();
    for (const [, a] of this.approvals) a.end(at);
    this.approvals.clear();
    this.setup?.end(at);
    for (const c of this.calls.values()) if (c.open) c.span.end(at);
    this.run.setAttribute('corral.run.outcome', e.outcome);
    if (e.errorCode) this.run.setAttribute('error.type', e.errorCode);
    if (e.suspended) this.run.setAttribute('corral.run.suspended', true);
    if (e.outcome === 'error') this.run.setStatus({ code: SpanStatusCode.ERROR });
    this.run.end(at);
  }

  private child(name: string, start: number, end: number | undefined, attributes: Attributes, parent: Context = this.ctx): Span {
    const span = this.tracer.startSpan(name, { startTime: start, attributes }, parent);
    if (end !== undefined) span.end(Math.max(start, end));
    return span;
  }

  private onEvent(e: RunEvent): void {
    const at = ms(e.ts);
    switch (e.type) {
      case 'run.started':
        this.run.setAttributes({ 'corral.policy': e.policy, 'corral.approvals': e.approvals, 'gen_ai.request.model': e.model.split(' ')[0] ?? e.model, ...budgetAttrs(e.budgets) });
        break;
      case 'sandbox.ready':
        this.child('corral.sandbox.acquire', at - e.ms, at, {
          'container.id': e.containerId, 'container.image.name': e.image, 'corral.sandbox.isolation': e.isolation ?? 'runc',
          'corral.egress.allowlist_size': e.egressAllow.length, ...(e.environment ? { 'corral.environment': e.environment } : {}),
        });
        break;
      case 'workspace.cloned':
        this.child('corral.git.clone', at - e.ms, at, { 'vcs.ref.head.revision': e.commit, 'corral.git.depth': e.depth, 'corral.git.files': e.files, 'corral.git.bytes': e.bytes, 'corral.git.credential': e.credential });
        break;
      case 'setup.started':
        this.setup = this.child('corral.setup', at, undefined, { 'corral.environment': e.environment, 'corral.setup.commands': e.commands, 'corral.setup.cache': e.cache });
        break;
      case 'setup.command':
        if (this.setup) this.child('corral.setup.command', at - e.ms, at, { 'corral.setup.index': e.index, 'corral.exec.timed_out': e.timedOut, ...(e.exitCode === null ? {} : { 'process.exit.code': e.exitCode }) }, trace.setSpan(this.ctx, this.setup));
        break;
      case 'setup.finished':
        if (this.setup) {
          this.setup.setAttributes({ 'corral.setup.ok': e.ok, ...(e.cached ? { 'corral.setup.cached': e.cached } : {}) });
          if (!e.ok) this.setup.setStatus({ code: SpanStatusCode.ERROR });
          this.setup.end(at);
          this.setup = undefined;
        }
        break;
      case 'tool.call': {
        // An unknown tool's name is the model's own text: not shown.
        const known = !this.toolNames || this.toolNames.has(e.tool);
        const tool = known ? e.tool : '_OTHER';
        const span = this.child(`execute_tool ${tool}`, at, undefined, {
          'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': tool, 'gen_ai.tool.call.id': e.callId, 'gen_ai.tool.type': 'function',
          ...(known ? {} : { 'corral.tool.unknown': true }),
        });
        if (this.calls.size >= MAX_CALLS) this.calls.delete(this.calls.keys().next().value!);
        this.calls.set(e.callId, { span, ctx: trace.setSpan(this.ctx, span), open: true });
        break;
      }
      case 'approval.pending': {
        const call = this.calls.get(e.callId);
        if (call) this.approvals.set(e.callId, this.child('corral.approval', at, undefined, { 'gen_ai.tool.call.id': e.callId, ...(e.risk ? { 'corral.gate.risk_level': e.risk } : {}) }, call.ctx));
        break;
      }
      case 'policy.decision': {
        const v = e.verdict;
        const attrs: Attributes = {
          'corral.gate.decision': v.decision, 'corral.gate.static.decision': v.static.decision,
          ...(v.static.rule ? { 'corral.gate.rule': v.static.rule } : {}), ...(v.static.risk ? { 'corral.gate.static.risk_level': v.static.risk } : {}),
          'corral.gate.decided_by': v.approval ? 'approval' : v.classifier && v.classifier.via !== 'none' && v.static.decision === 'ask' ? 'classifier' : 'policy',
        };
        if (v.classifier) {
          Object.assign(attrs, {
            'corral.gate.classifier.decision': v.classifier.decision, 'corral.gate.classifier.risk': v.classifier.risk,
            'corral.gate.classifier.risk_level': v.classifier.riskLevel, 'corral.gate.classifier.authorized': v.classifier.authorized,
            'corral.gate.classifier.via': v.classifier.via, 'corral.gate.classifier.latency_ms': v.classifier.latencyMs,
            ...(v.classifier.error !== undefined ? { 'corral.gate.classifier.failed': true } : {}),
          });
        }
        if (v.approval) {
          Object.assign(attrs, {
            'corral.gate.approval.approved': v.approval.approved, 'corral.gate.approval.approver': v.approval.by,
            'corral.gate.approval.timed_out': v.approval.timedOut, 'corral.gate.approval.waited_ms': v.approval.waitedMs,
          });
        }
        this.calls.get(e.callId)?.span.setAttributes(attrs);
        const waiting = this.approvals.get(e.callId);
        if (waiting) {
          waiting.setAttributes({ 'corral.gate.approval.approved': v.approval?.approved ?? false, ...(v.approval ? { 'corral.gate.approval.approver': v.approval.by } : {}) });
          waiting.end(at);
          this.approvals.delete(e.callId);
        }
        break;
      }
      case 'tool.result': {
        const call = this.calls.get(e.callId);
        if (!call?.open) break;
        if (e.exec) {
          this.child('corral.exec', at - e.exec.durationMs, at, {
            'corral.exec.timed_out': e.exec.timedOut, 'corral.exec.oom_killed': e.exec.oomKilled, 'corral.exec.truncated': e.exec.truncated,
            'corral.exec.stdout_bytes': e.exec.stdoutBytes, 'corral.exec.stderr_bytes': e.exec.stderrBytes,
            ...(e.exec.exitCode === null ? {} : { 'process.exit.code': e.exec.exitCode }),
          }, call.ctx);
        }
        call.span.setAttributes({ 'corral.tool.ok': e.ok, 'corral.tool.blocked': e.blocked });
        if (!e.ok && !e.blocked) call.span.setStatus({ code: SpanStatusCode.ERROR });
        call.span.end(at);
        call.open = false;
        break;
      }
      case 'egress': {
        const parent = e.callId ? this.calls.get(e.callId)?.ctx ?? this.ctx : this.ctx;
        this.child('corral.egress', at, at, {
          'corral.egress.decision': e.decision, 'server.port': e.port, 'http.request.method': methodOf(e.method),
          ...(e.code ? { 'corral.egress.code': e.code } : {}),
          // a refused name is not shown: a name can carry data out
          ...(e.decision === 'allow' ? { 'server.address': e.host } : {}),
          ...(e.callId ? { 'gen_ai.tool.call.id': e.callId } : {}),
        }, parent);
        break;
      }
      case 'egress.aggregate': {
        const parent = e.callId ? this.calls.get(e.callId)?.ctx ?? this.ctx : this.ctx;
        this.child('corral.egress', at, at, { 'corral.egress.decision': e.decision, 'corral.egress.code': e.code, 'corral.egress.count': e.count, ...(e.callId ? { 'gen_ai.tool.call.id': e.callId } : {}) }, parent);
        break;
      }
      case 'effect.decision': {
        const parent = e.callId ? this.calls.get(e.callId)?.span : undefined;
        (parent ?? this.run).addEvent('corral.effect', { 'corral.effect.kind': e.effect, 'corral.effect.decision': e.decision }, at);
        break;
      }
      case 'budget.exceeded':
        this.run.addEvent('corral.budget.exceeded', { 'corral.budget': e.budget, 'corral.budget.limit': e.limit }, at);
        break;
      case 'artifact':
        this.child('corral.artifact', at, at, { 'corral.artifact.name': e.name, 'corral.artifact.bytes': e.bytes });
        break;
      case 'sandbox.removed':
        this.child('corral.sandbox.remove', at, at, { 'container.id': e.containerId });
        break;
      case 'subrun.started':
        this.calls.get(e.callId)?.span.addEvent('corral.subrun.started', { 'corral.run.child_id': e.childRunId }, at);
        break;
      case 'run.finished':
        this.child('corral.end', at, at, {
          'corral.run.outcome': e.outcome, 'corral.usage.llm_calls': e.usage.llmCalls, 'corral.usage.tool_calls': e.usage.toolCalls,
          'gen_ai.usage.input_tokens': e.usage.inputTokens, 'gen_ai.usage.output_tokens': e.usage.outputTokens, 'corral.usage.cost_usd': e.usage.costUsd,
        });
        this.run.setAttributes({ 'corral.run.outcome': e.outcome, 'gen_ai.usage.input_tokens': e.usage.inputTokens, 'gen_ai.usage.output_tokens': e.usage.outputTokens });
        break;
      default:
        break;
    }
  }
}

function budgetAttrs(b: Record<string, number>): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(b)) out[`corral.budget.${k}`] = v;
  return out;
}

/** Marks a span failed with the error's class only (an error's message may quote what a span must not carry). */
function failed(span: Span, err: unknown): void {
  const code = (err as { code?: unknown }).code;
  span.setAttribute('error.type', typeof code === 'string' ? code : err instanceof Error ? err.name : 'error');
  span.setStatus({ code: SpanStatusCode.ERROR });
}
