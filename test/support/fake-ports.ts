/**
 * In-memory fakes of our own ports (Model, Sandbox, Gate, Emit) for unit tests of the run loop.
 * Each records what it was asked, and honours AbortSignal the way the real adapters do: an abort
 * while a call is in flight rejects it with CancelledError.
 */
import { CancelledError, SandboxError } from '../../src/domain/errors';
import type { RunEventBody } from '../../src/domain/events';
import type { Gate, GateContext, GateVerdict, ToolCallRequest } from '../../src/domain/gate';
import type { ChatMessage, Model, ModelRequest, ModelToolCall, ModelTurn, ModelUsage } from '../../src/domain/model';
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import type { ExecRequest, ExecResult, ExportTarget, FileContent, FileEntry, Sandbox, WorkspaceExport, WriteOptions } from '../../src/domain/sandbox';
// The real sandbox's path rules and diff model (pure; no Docker), so the fake refuses and reports exactly what the real one does.
import { normaliseWorkspacePath } from '../../src/sandbox/archive';
import { comparePaths } from '../../src/domain/export-names';
import { diffFile, sideOf } from '../../src/sandbox/workspace-diff';

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

/** Waits until `signal` aborts, then rejects with `make()`; never settles without a signal. */
function untilAborted<T>(signal: AbortSignal | undefined, make: () => Error): Promise<T> {
  return new Promise<T>((_resolve, reject) => {
    if (!signal) return;
    if (signal.aborted) return reject(make());
    signal.addEventListener('abort', () => reject(make()), { once: true });
  });
}

/** Races `work` against `signal`: whichever comes first wins; an abort rejects with CancelledError. */
async function abortable<T>(signal: AbortSignal | undefined, work: () => T | Promise<T>, message: string): Promise<T> {
  if (signal?.aborted) throw new CancelledError(message);
  const p = Promise.resolve().then(work);
  if (!signal) return p;
  return Promise.race([p, untilAborted<T>(signal, () => new CancelledError(message))]);
}

// ---------------------------------------------------------------- Model

/** One scripted model step: a turn (missing fields default), an error to throw, or a hang until abort. */
export type ModelStep = (Partial<Omit<ModelTurn, 'usage'>> & { usage?: Partial<ModelUsage> }) | { throws: Error } | { hang: true };

export type ModelScript = readonly ModelStep[] | ((req: ModelRequest, index: number) => ModelStep | Promise<ModelStep>);

/** What the model was sent: the messages as they were at call time (the loop keeps appending to its array). */
export interface RecordedModelRequest {
  messages: ChatMessage[];
  tools: ModelRequest['tools'];
  signal?: AbortSignal;
}

export class ScriptedModel implements Model {
  readonly description = 'scripted test model';
  readonly requests: RecordedModelRequest[] = [];

  /** `ignoresAbort`: the call finishes even when the signal aborts meanwhile (a response already on its way). */
  constructor(
    private readonly script: ModelScript,
    private readonly opts: { ignoresAbort?: boolean } = {},
  ) {}

  async complete(req: ModelRequest): Promise<ModelTurn> {
    const index = this.requests.length;
    this.requests.push({ messages: req.messages.map((m) => ({ ...m })), tools: req.tools, ...(req.signal ? { signal: req.signal } : {}) });
    // Like the openai adapter: an abort before or during the call is a CancelledError.
    const signal = this.opts.ignoresAbort ? undefined : req.signal;
    const step = await abortable(signal, () => this.stepAt(req, index), 'the model call was cancelled');
    if ('throws' in step) throw step.throws;
    if ('hang' in step) return untilAborted(signal, () => new CancelledError('the model call was cancelled'));
    const toolCalls = step.toolCalls ?? [];
    return {
      content: step.content ?? null,
      toolCalls,
      usage: { inputTokens: step.usage?.inputTokens ?? 0, outputTokens: step.usage?.outputTokens ?? 0 },
      finishReason: step.finishReason ?? (toolCalls.length ? 'tool_calls' : 'stop'),
      model: step.model ?? 'scripted',
    };
  }

  /** The last message of each request, i.e. what the model was answering. */
  get lastMessages(): ChatMessage[] {
    return this.requests.map((r) => r.messages[r.messages.length - 1]!);
  }

  private stepAt(req: ModelRequest, index: number): ModelStep | Promise<ModelStep> {
    if (typeof this.script === 'function') return this.script(req, index);
    const step = this.script[index];
    if (!step) throw new Error(`ScriptedModel: the script has only ${this.script.length} turns, asked for turn ${index + 1}`);
    return step;
  }
}

/** A tool call; `args` objects are JSON-encoded, strings are sent as they are (for bad JSON). */
export function toolCall(id: string, name: string, args: Record<string, unknown> | string): ModelToolCall {
  return { id, name, arguments: typeof args === 'string' ? args : JSON.stringify(args) };
}

export function callsTools(calls: ModelToolCall[], usage?: Partial<ModelUsage>, content: string | null = null): ModelStep {
  return { content, toolCalls: calls, ...(usage ? { usage } : {}) };
}

export function answers(content: string, usage?: Partial<ModelUsage>): ModelStep {
  return { content, toolCalls: [], ...(usage ? { usage } : {}) };
}

// ---------------------------------------------------------------- Sandbox

export type ExecAnswer = Partial<ExecResult> | 'hang';
export type ExecHandler = (argv: string[], req: ExecRequest) => ExecAnswer | Promise<ExecAnswer>;

export type SandboxCall =
  | { op: 'exec'; argv: string[]; timeoutMs: number; maxOutputBytes?: number; signal?: AbortSignal }
  | { op: 'readFile'; path: string; maxBytes?: number }
  | { op: 'writeFile'; path: string; content: string; expectSha256?: string }
  | { op: 'removeFile'; path: string; expectSha256?: string }
  | { op: 'listFiles'; path: string; maxEntries?: number }
  | { op: 'exportWorkspace' };

export function execResult(partial: Partial<ExecResult> = {}): ExecResult {
  const stdout = partial.stdout ?? '';
  const stderr = partial.stderr ?? '';
  return {
    exitCode: 0, truncated: false, timedOut: false, oomKilled: false, durationMs: 0,
    stdoutBytes: Buffer.byteLength(stdout), stderrBytes: Buffer.byteLength(stderr),
    ...partial, stdout, stderr,
  };
}

/**
 * An in-memory workspace. Paths are checked like the real sandbox does lexically (absolute outside
 * /workspace or `..` → SandboxError('path_refused')); a missing file is path_refused too.
 */
export class FakeSandbox implements Sandbox {
  readonly id = 'fake-sandbox';
  readonly files: Map<string, string>;
  readonly calls: SandboxCall[] = [];
  /** The files as the sandbox started: exportWorkspace()'s baseline. */
  private readonly seed: Map<string, string>;

  private readonly execHandler: ExecHandler;
  private readonly ignoresAbort: boolean;

  /** `ignoresAbort`: exec finishes even when the signal aborts meanwhile (the process had already exited). */
  constructor(opts: { files?: Record<string, string>; exec?: ExecHandler; ignoresAbort?: boolean } = {}) {
    this.files = new Map(Object.entries(opts.files ?? {}));
    this.seed = new Map(this.files);
    this.execHandler = opts.exec ?? (() => ({}));
    this.ignoresAbort = opts.ignoresAbort ?? false;
  }

  get execs(): Extract<SandboxCall, { op: 'exec' }>[] {
    return this.calls.filter((c): c is Extract<SandboxCall, { op: 'exec' }> => c.op === 'exec');
  }

  async exec(req: ExecRequest): Promise<ExecResult> {
    this.calls.push({ op: 'exec', argv: [...req.argv], timeoutMs: req.timeoutMs, ...(req.maxOutputBytes !== undefined ? { maxOutputBytes: req.maxOutputBytes } : {}), ...(req.signal ? { signal: req.signal } : {}) });
    const cancelled = 'the command was cancelled; its processes were killed in the sandbox';
    const signal = this.ignoresAbort ? undefined : req.signal;
    const answer = await abortable(signal, () => this.execHandler([...req.argv], req), cancelled);
    if (answer === 'hang') return untilAborted(signal, () => new CancelledError(cancelled));
    return execResult(answer);
  }

  async readFile(path: string, opts?: { maxBytes?: number; signal?: AbortSignal }): Promise<FileContent> {
    this.calls.push({ op: 'readFile', path, ...(opts?.maxBytes !== undefined ? { maxBytes: opts.maxBytes } : {}) });
    return abortable(opts?.signal, () => {
      const rel = normaliseWorkspacePath(path);
      const content = this.files.get(rel);
      if (content === undefined) throw new SandboxError('path_refused', `no such file: ${path}`);
      const max = opts?.maxBytes ?? Infinity;
      const size = Buffer.byteLength(content);
      return size > max
        ? { content: Buffer.from(content).subarray(0, max).toString('utf8'), size, truncated: true }
        : { content, size, truncated: false, sha256: sha(content) };
    }, 'the read was cancelled');
  }

  async writeFile(path: string, content: string, opts?: WriteOptions): Promise<void> {
    this.calls.push({ op: 'writeFile', path, content, ...(opts?.expectSha256 ? { expectSha256: opts.expectSha256 } : {}) });
    return abortable(opts?.signal, () => {
      const rel = normaliseWorkspacePath(path);
      if (!rel) throw new SandboxError('path_refused', `path refused: "${path}" names the workspace itself, not a file`);
      this.expect(rel, opts?.expectSha256);
      this.files.set(rel, content);
    }, 'the write was cancelled');
  }

  async removeFile(path: string, opts?: { expectSha256?: string; signal?: AbortSignal }): Promise<void> {
    this.calls.push({ op: 'removeFile', path, ...(opts?.expectSha256 ? { expectSha256: opts.expectSha256 } : {}) });
    return abortable(opts?.signal, () => {
      const rel = normaliseWorkspacePath(path);
      if (!this.files.has(rel)) throw new SandboxError('path_refused', `no such file: ${path}`);
      this.expect(rel, opts?.expectSha256);
      this.files.delete(rel);
    }, 'the removal was cancelled');
  }

  /** The real helper's --expect: conflict unless the file is as the caller last saw it. */
  private expect(rel: string, want: string | undefined): void {
    if (want === undefined) return;
    const cur = this.files.get(rel);
    if (want === 'absent' ? cur !== undefined : cur === undefined || sha(cur) !== want) {
      throw new SandboxError('conflict', `${rel} changed since it was read (another process in the sandbox wrote it)`);
    }
  }

  async listFiles(path: string, opts?: { maxEntries?: number; signal?: AbortSignal }): Promise<FileEntry[]> {
    this.calls.push({ op: 'listFiles', path, ...(opts?.maxEntries !== undefined ? { maxEntries: opts.maxEntries } : {}) });
    return abortable(opts?.signal, () => {
      const rel = normaliseWorkspacePath(path);
      const prefix = rel ? `${rel}/` : '';
      return [...this.files.entries()]
        .filter(([p]) => p.startsWith(prefix))
        .map(([p, c]): FileEntry => ({ path: p, type: 'file', size: Buffer.byteLength(c) }))
        .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
        .slice(0, opts?.maxEntries ?? Infinity);
    }, 'the listing was cancelled');
  }

  /** Writes an empty tar and the real diff model's patch of the files against how they started. */
  async exportWorkspace(opts: ExportTarget): Promise<WorkspaceExport> {
    this.calls.push({ op: 'exportWorkspace' });
    return abortable(opts.signal, () => {
      const paths = [...new Set([...this.seed.keys(), ...this.files.keys()])].sort(comparePaths);
      const side = (m: Map<string, string>, p: string) => (m.has(p) ? sideOf(Buffer.from(m.get(p)!), 0o644) : null);
      const sections = paths.map((p) => diffFile(p, side(this.seed, p), side(this.files, p))).filter((d) => d !== null);
      const patch = sections.map((d) => d.text).join('');
      writeFileSync(opts.tarPath, Buffer.alloc(1024));
      writeFileSync(opts.patchPath, patch);
      return {
        tar: { path: opts.tarPath, bytes: 1024 }, patch: { path: opts.patchPath, bytes: Buffer.byteLength(patch) },
        files: sections.map((d) => d.change), gitFiles: [], ignored: { count: 0, paths: [] }, notExported: [], notExportedOmitted: {}, needsReview: [], notes: [],
        stats: { files: this.files.size, dirs: 0, bytes: 0, ms: 0 },
      };
    }, 'the export was cancelled');
  }
}

// ---------------------------------------------------------------- Gate

export function allowVerdict(reason = 'Allowed by the test policy.'): GateVerdict {
  return { decision: 'allow', static: { decision: 'allow', rule: 'test-allow', reason }, reason };
}

export function denyVerdict(reason = 'Blocked by the test policy.'): GateVerdict {
  return { decision: 'deny', static: { decision: 'deny', rule: 'test-deny', reason }, reason };
}

export type GateDecider = (call: ToolCallRequest, ctx: GateContext) => GateVerdict | Promise<GateVerdict>;

export class FakeGate implements Gate {
  readonly calls: { call: ToolCallRequest; ctx: GateContext }[] = [];

  constructor(private readonly decider: GateDecider = () => allowVerdict()) {}

  async decide(call: ToolCallRequest, ctx: GateContext): Promise<GateVerdict> {
    this.calls.push({ call, ctx: { ...ctx, ...(ctx.evidence ? { evidence: [...ctx.evidence] } : {}) } });
    return this.decider(call, ctx);
  }
}

// ---------------------------------------------------------------- Emit

/** An Emit that keeps every event, plus a filter by type. */
export function recordEvents(): { emit: (e: RunEventBody) => void; events: RunEventBody[]; ofType: <T extends RunEventBody['type']>(t: T) => Extract<RunEventBody, { type: T }>[] } {
  const events: RunEventBody[] = [];
  return {
    events,
    emit: (e) => void events.push(e),
    ofType: <T extends RunEventBody['type']>(t: T) => events.filter((e): e is Extract<RunEventBody, { type: T }> => e.type === t),
  };
}
