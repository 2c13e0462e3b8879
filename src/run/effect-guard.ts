/**
 * The effect check around each tool call: what a call did, compared with what its decision covered.
 *
 * Files. Before the agent's first call the guard reads the protected files' state (through the
 * engine, sandbox/protected-snapshot.ts); after every call that ran in the sandbox it reads it again
 * and compares. A change is accepted when the call's decision covered it (a file tool writing that
 * very path, allowed), or when it is harmless by rule (domain/benign-effects.ts). Any other change is
 * undone at once (the old state put back through the engine, then read again to make sure: a process
 * that races the restore gets every agent process stopped and a second restore, and a restore that
 * still does not hold ends the run), then asked about: a human sees the file and the change and may
 * approve it (the new state is put back and accepted); unattended, it stays refused. Each change gets
 * an `effect.decision` event; the model is told in the call's result. Changes made by a background
 * process between calls are caught by the next check and charged to the call that ran then.
 *
 * Network. When the gate predicted no network use for a call (GateVerdict.static.network), the egress
 * proxy holds each connection the call opens and the guard asks a human (approved: it goes on;
 * unattended: the proxy refuses it at once); connections while no call runs are refused. A call
 * predicted to use the network goes on under the run's allowlist as before.
 */
import type { EffectDecision, EffectFacet, ProtectedEntry, ProtectedMatcher, ProtectedState } from '../domain/effects';
import { CancelledError, CorralError, type CorralErrorOptions } from '../domain/errors';
import type { Emit } from '../domain/events';
import type { GateVerdict } from '../domain/gate';
import type { EgressAttempt, EgressCode, EgressHold, LeasedSandbox } from '../domain/sandbox';
import type { ApprovalPort } from '../domain/approval-port';
import { benignChange } from '../domain/benign-effects';
import { patchPaths } from '../tools/unified-diff';
import { effectDiff } from './effect-diff';

export interface EffectGuardOptions {
  runId: string;
  sandbox: LeasedSandbox;
  set: ProtectedMatcher;
  /** Absent: unattended (every effect the decision did not cover is refused). */
  approvals?: ApprovalPort;
  emit: Emit;
  clock: () => number;
  /** Masks secrets in what the guard shows (diffs); identity when absent. */
  mask?: (text: string) => Promise<string>;
}

export interface CallInfo {
  callId: string;
  tool: string;
  args: Record<string, unknown>;
}

export interface CallEffects {
  /** A note for the model about what was refused or accepted (appended to the call's result). */
  note?: string;
  /** true when an effect of the call was refused: the call counts as blocked. */
  refused: boolean;
}

/** Tools whose decision names the paths they write (covered when allowed). */
const PATH_TOOLS: Record<string, (args: Record<string, unknown>) => string[]> = {
  write_file: (a) => (typeof a.path === 'string' ? [a.path] : []),
  edit_file: (a) => (typeof a.path === 'string' ? [a.path] : []),
};
/** Tools that run nothing in the sandbox that could write (the check still runs after them: a background process may have). */
const NO_SANDBOX = new Set(['web_search', 'delegate']);
/** Egress refusals whose reason the call's result quotes (the agent can act on them; a client often hides the proxy's answer). */
const EXPLAINED: ReadonlySet<EgressCode> = new Set<EgressCode>(['not_allowed', 'port_not_allowed', 'ip_literal', 'invalid_name', 'forbidden_address', 'upstream_refused', 'upstream_unreachable']);

const normal = (p: string) => p.replace(/^\/workspace\/?/, '').split('/').filter((s) => s !== '' && s !== '.').join('/');

/** Whether two entries are the same state (content, type, mode, link). */
export function sameEntry(a: ProtectedEntry | undefined, b: ProtectedEntry | undefined): boolean {
  if (!a || !b) return a === b;
  return a.type === b.type && a.mode === b.mode && a.sha256 === b.sha256 && (a.link ?? '') === (b.link ?? '') && a.size === b.size;
}

/** The path inside its git directory (`config`, `info/exclude`) for git's own files, else null. */
function gitRel(path: string): string | null {
  const segs = path.split('/');
  const g = segs.lastIndexOf('.git');
  return g >= 0 && g < segs.length - 1 ? segs.slice(g + 1).join('/') : null;
}

interface Change {
  path: string;
  change: 'added' | 'modified' | 'deleted';
  before?: ProtectedEntry;
  after?: ProtectedEntry;
}

export class EffectGuard {
  private base!: ProtectedState;
  private mode: 'full' | 'targeted' = 'full';
  private failures = 0;
  private readonly times: number[] = [];
  private bytes = 0;
  private requests = 0;
  private restores = 0;
  private decisions = 0;
  private current: { call: CallInfo; predicted: boolean; refused: string[]; approved: string[]; asked: Map<string, Promise<boolean>>; proxyRefusals: string[] } | null = null;
  private readonly unattended: boolean;

  private constructor(private readonly o: EffectGuardOptions) {
    this.unattended = !o.approvals;
  }

  /**
   * Reads the baseline (the workspace as the agent gets it) and refuses connections while no call
   * runs. A sandbox whose files the engine cannot read (gVisor) gets the network check only; the log
   * says so once.
   */
  static async start(o: EffectGuardOptions, signal?: AbortSignal): Promise<EffectGuard> {
    const g = new EffectGuard(o);
    if (o.sandbox.effects) g.base = await g.read(signal);
    else o.emit({ type: 'effect.unchecked', callId: null, reason: 'this sandbox\'s files cannot be read through the engine (under gVisor the workspace is a tmpfs of the sandbox\'s own kernel): protected files are checked in the artifacts\' review only; connections are still checked per call' });
    o.sandbox.noteToolCall?.(null, 'refuse');
    return g;
  }

  private async read(signal?: AbortSignal): Promise<ProtectedState> {
    const facet = this.facet();
    const t0 = this.o.clock();
    let s: ProtectedState;
    try {
      s = await facet.protectedState(this.o.set, { mode: this.mode, ...(signal ? { signal } : {}) });
    } catch (err) {
      if (this.mode === 'full' && (err as CorralError).code === 'limit_exceeded') {
        // too large to read whole after every call: targeted reads from now on, against a targeted baseline
        this.mode = 'targeted';
        s = await facet.protectedState(this.o.set, { mode: 'targeted', ...(signal ? { signal } : {}) });
        s.notes.unshift(`the workspace is too large to read whole after every call (${(err as Error).message}); from now on only the protected set's root-level names and git's directory are read per call, the rest is reviewed in the artifacts`);
        if (this.base) this.base = this.scoped(this.base, s);
      } else throw err;
    }
    this.times.push(this.o.clock() - t0);
    this.bytes += s.bytes;
    this.requests += s.requests;
    return s;
  }

  /** `base` limited to what a targeted read like `like` covers (its scope). */
  private scoped(base: ProtectedState, like: ProtectedState): ProtectedState {
    const scope = like.scope ?? [];
    const seen = (p: string) => scope.some((q) => p === q || p.startsWith(`${q}/`)) || p === '.git';
    return { ...like, entries: new Map([...base.entries].filter(([p]) => seen(p))), dirs: base.dirs };
  }

  private facet(): EffectFacet {
    const f = this.o.sandbox.effects;
    if (!f) throw new CorralError('internal', 'the effect check needs a sandbox that can read its protected files');
    return f;
  }

  /** Before the call runs: what the egress proxy does with the connections it opens. */
  beginCall(call: CallInfo, verdict: GateVerdict): void {
    const predicted = verdict.static.network === true;
    this.current = { call, predicted, refused: [], approved: [], asked: new Map(), proxyRefusals: [] };
    this.o.sandbox.noteToolCall?.(call.callId, predicted ? 'open' : this.unattended ? 'refuse' : 'hold');
  }

  /** A connection the proxy holds: asks a human once per host and port for this call. */
  onHold(h: EgressHold): void {
    const cur = this.current;
    const sb = this.o.sandbox;
    if (!cur || h.callId !== cur.call.callId || !this.o.approvals) {
      sb.releaseEgress?.(h.id, false);
      return;
    }
    const key = `${h.host}:${h.port}`;
    let answer = cur.asked.get(key);
    if (!answer) {
      const n = cur.asked.size + 1;
      const reason = `the call connects to ${h.host}:${h.port} (${h.method}), and the gate predicted no network use for it`;
      answer = this.o.approvals.request({
        runId: this.o.runId, callId: `${cur.call.callId}~net-${n}`, tool: cur.call.tool,
        args: { effect: 'network', host: h.host, port: h.port, method: h.method, call: cur.call.args }, reason, risk: 'high',
      }).then((a) => {
        this.record({
          callId: cur.call.callId, tool: cur.call.tool, effect: 'network', decision: a.approved ? 'allow' : 'deny', by: 'approval', host: h.host, port: h.port,
          approvedBy: a.by, reason: a.approved ? `${reason}; ${a.by} approved it` : `${reason}; ${a.timedOut ? 'nobody approved it in time' : `${a.by} denied it`}`,
        });
        (a.approved ? cur.approved : cur.refused).push(`a connection to ${key}`);
        return a.approved;
      }, () => false);
      cur.asked.set(key, answer);
    }
    void answer.then((ok) => sb.releaseEgress?.(h.id, ok));
  }

  /** An attempt the proxy reported: a refused unpredicted connection is an effect decision. */
  onAttempt(a: EgressAttempt): void {
    // The proxy's own refusal reason, for the call's result: a client often shows only "CONNECT 403".
    if (a.decision === 'deny' && a.code && EXPLAINED.has(a.code) && this.current && a.callId === this.current.call.callId) {
      const list = this.current.proxyRefusals;
      if (list.length < 3 && !list.includes(a.reason)) list.push(a.reason);
    }
    if (a.code !== 'unpredicted' || a.decision !== 'deny' || a.reason.includes('not approved')) return;
    const cur = this.current && a.callId === this.current.call.callId ? this.current : null;
    this.record({
      callId: a.callId ?? null, tool: cur?.call.tool ?? '(none)', effect: 'network', decision: 'deny', by: 'unattended', host: a.host, port: a.port,
      reason: `${a.method} ${a.host}:${a.port} refused: ${a.reason}`,
    });
    cur?.refused.push(`a connection to ${a.host}:${a.port}`);
  }

  /**
   * After the call: settles its network effects (waits for the proxy's report) and checks the
   * protected files. Throws when a restore does not hold, or the files cannot be read twice in a row.
   */
  async endCall(verdict: GateVerdict, ran: boolean, signal?: AbortSignal): Promise<CallEffects> {
    const cur = this.current;
    if (!cur) return { refused: false };
    await this.o.sandbox.egressSync?.();
    await Promise.all(cur.asked.values());
    this.o.sandbox.noteToolCall?.(null, 'refuse');
    this.current = null;
    const notes: string[] = [];
    if (this.o.sandbox.effects && (ran || !NO_SANDBOX.has(cur.call.tool))) {
      try {
        const files = await this.checkFiles(cur.call, verdict, signal);
        notes.push(...files.notes);
        cur.refused.push(...files.refused);
        this.failures = 0;
      } catch (err) {
        if (signal?.aborted || err instanceof CancelledError) throw err;
        if (err instanceof RestoreFailed) throw err;
        this.failures += 1;
        this.o.emit({ type: 'effect.unchecked', callId: cur.call.callId, reason: (err as Error).message.slice(0, 500) });
        if (this.failures >= 2) throw CorralError.wrap(err, `the protected files could not be read after two calls in a row (${(err as Error).message}); the run is stopped rather than go on unchecked`, 'sandbox_failed');
      }
    }
    if (cur.proxyRefusals.length > 0) notes.push(`Note: the egress proxy refused connections this call opened: ${cur.proxyRefusals.map((r) => `\n- ${r}`).join('')}`);
    if (cur.refused.some((r) => r.startsWith('a connection'))) {
      const conns = [...new Set(cur.refused.filter((r) => r.startsWith('a connection')))];
      notes.push(`Note: this call tried to open ${conns.join(', ')}, but the gate did not predict network use for it${this.unattended ? ' and this run is unattended' : ''}: ${conns.length === 1 ? 'it was' : 'they were'} refused. Do not retry it; if the task needs the network, use a command whose purpose is the download, or say so in your answer.`);
    }
    return { refused: cur.refused.length > 0, ...(notes.length ? { note: notes.join('\n') } : {}) };
  }

  private covered(call: CallInfo, verdict: GateVerdict, path: string): boolean {
    if (verdict.decision !== 'allow') return false;
    const paths = PATH_TOOLS[call.tool]?.(call.args) ?? (call.tool === 'apply_patch' && typeof call.args.patch === 'string' ? patchPaths(call.args.patch) : []);
    return paths.map(normal).includes(path);
  }

  private async checkFiles(call: CallInfo, verdict: GateVerdict, signal?: AbortSignal, ask = true): Promise<{ notes: string[]; refused: string[] }> {
    const now = await this.read(signal);
    const base = now.mode === 'targeted' && this.base.mode === 'full' ? this.scoped(this.base, now) : this.base;
    const changes = diffStates(base, now);
    const unexpected: Change[] = [];
    const next = new Map(now.entries);
    for (const c of changes) {
      const m = this.o.set.match(c.path, c.after?.type ?? c.before?.type) ?? this.o.set.match(c.path, 'file');
      const benign = benignChange(gitRel(c.path), c.before?.data ?? null, c.after?.data ?? null);
      if (this.covered(call, verdict, c.path)) {
        this.record({ callId: call.callId, tool: call.tool, effect: 'file', decision: 'allow', by: 'covered', path: c.path, change: c.change, ...(m ? { class: m.class, rule: m.rule } : {}), reason: `${call.tool} was allowed to write ${c.path}` });
      } else if (benign && c.change !== 'deleted' && c.before?.type !== 'symlink' && c.after?.type === 'file') {
        this.record({ callId: call.callId, tool: call.tool, effect: 'file', decision: 'allow', by: 'benign', path: c.path, change: c.change, ...(m ? { class: m.class, rule: m.rule } : {}), reason: benign });
      } else unexpected.push(c);
    }
    if (unexpected.length === 0) {
      this.base = { ...now, entries: next };
      return { notes: [], refused: [] };
    }
    // undo first: nothing may use the change while a human looks at it
    const paths = unexpected.map((c) => c.path);
    await this.restore(base, paths, signal);
    for (const p of paths) {
      const b = base.entries.get(p);
      if (b) next.set(p, b);
      else next.delete(p);
    }
    const shown = await Promise.all(unexpected.map(async (c) => ({ c, m: this.o.set.match(c.path, c.after?.type ?? c.before?.type), diff: await this.diffOf(c) })));
    const list = shown.map(({ c, m }) => `${c.path} (${c.change}${m ? `: ${m.reason.split(':')[0]}` : ''})`);
    const reason = `the call ${unexpected.length === 1 ? 'changed a protected file' : `changed ${unexpected.length} protected files`} its decision did not cover: ${list.join('; ')}`;
    let approved = false;
    let by = 'unattended';
    let decidedBy: 'unattended' | 'approval' = 'unattended';
    let why = ask ? 'this run is unattended, so it stays refused' : 'the run had ended (a change made after the last call is not asked about)';
    if (this.o.approvals && ask) {
      decidedBy = 'approval';
      try {
        const a = await this.o.approvals.request({
          runId: this.o.runId, callId: `${call.callId}~files`, tool: call.tool,
          args: { effect: 'protected-files', changes: shown.map(({ c, m, diff }) => ({ path: c.path, change: c.change, class: m?.class ?? null, diff })), call: call.args },
          reason: `${reason} (the change is undone while it waits; approve to put it back)`, risk: 'high',
        }, signal);
        approved = a.approved;
        by = a.by;
        why = a.approved ? `${a.by} approved it, and it was put back` : a.timedOut ? 'nobody approved it in time' : `${a.by} denied it`;
      } catch (err) {
        if (signal?.aborted) throw err;
        why = `the approval could not be obtained (${(err as Error).message})`;
      }
    }
    if (approved) {
      await this.restore(now, paths, signal);
      for (const p of paths) {
        const a = now.entries.get(p);
        if (a) next.set(p, a);
        else next.delete(p);
      }
    }
    for (const { c, m, diff } of shown) {
      this.record({
        callId: call.callId, tool: call.tool, effect: 'file', decision: approved ? 'allow' : 'deny', by: decidedBy, path: c.path, change: c.change,
        ...(m ? { class: m.class, rule: m.rule } : {}), diff, restored: !approved, ...(decidedBy === 'approval' ? { approvedBy: by } : {}),
        reason: `${c.path} ${c.change}${m ? ` (${m.reason})` : ''}: ${why}`,
      });
    }
    this.base = { ...now, entries: next };
    const note = approved
      ? `Note: this call changed protected files (${list.join('; ')}); ${why}.`
      : `Note: this call changed protected files that its approval did not cover: ${list.join('; ')}. The change was undone and refused (${why}). Do not retry it; if the task needs it, say so in your final answer.`;
    return { notes: [note], refused: approved ? [] : paths };
  }

  /** Puts `state`'s entries for `paths` back and makes sure they hold; a race gets the agent's processes stopped and one more try. */
  private async restore(state: ProtectedState, paths: string[], signal?: AbortSignal): Promise<void> {
    const facet = this.facet();
    for (let attempt = 1; ; attempt++) {
      this.restores += 1;
      await facet.restoreProtected(state, paths, signal);
      const check = await this.read(signal);
      const wrong = paths.filter((p) => !sameEntry(state.entries.get(p), check.entries.get(p)));
      if (wrong.length === 0) return;
      if (attempt >= 2) throw new RestoreFailed(`protected files could not be put back (${wrong.slice(0, 5).join(', ')}): something keeps changing them`);
      // something raced the restore (a background process): stop every agent process, then once more
      await facet.stopAgentProcesses();
    }
  }

  private async diffOf(c: Change): Promise<string> {
    const d = effectDiff(c.path, c.before, c.after);
    return this.o.mask ? this.o.mask(d) : d;
  }

  private record(d: EffectDecision): void {
    this.decisions += 1;
    this.o.emit({ type: 'effect.decision', ...d });
  }

  /**
   * The last check, after the agent's last call and before the workspace is exported: every process
   * of the agent is stopped first (nothing runs in the sandbox on the agent's behalf any more, so
   * nothing can change a protected file between this check and the export), then the files are
   * compared as after a call. Changes found here are charged to no call. Never throws: what it could
   * not settle is recorded, and the artifacts' review still flags every protected change.
   */
  async finalCheck(): Promise<void> {
    this.current = null;
    if (!this.o.sandbox.effects) return;
    try {
      await this.facet().stopAgentProcesses();
      this.o.sandbox.noteToolCall?.(null, 'refuse');
      await this.checkFiles({ callId: '(run end)', tool: '(run end)', args: {} }, { decision: 'deny', static: { decision: 'deny', rule: null, reason: 'the run ended' }, reason: 'the run ended' }, undefined, false);
    } catch (err) {
      this.o.emit({ type: 'effect.unchecked', callId: null, reason: `the last check before the export failed: ${(err as Error).message.slice(0, 400)}` });
    }
  }

  /** The run's totals (an effect.stats event). */
  finish(): void {
    if (!this.o.sandbox.effects) return;
    const sorted = [...this.times].sort((a, b) => a - b);
    this.o.emit({
      type: 'effect.stats', checks: this.times.length, mode: this.mode, p50Ms: sorted[Math.floor(sorted.length / 2)] ?? 0, maxMs: sorted.at(-1) ?? 0,
      totalMs: sorted.reduce((a, b) => a + b, 0), bytes: this.bytes, requests: this.requests, restores: this.restores, decisions: this.decisions,
    });
  }
}

/** A restore that does not hold: the run ends (continuing would let the change stand). */
export class RestoreFailed extends CorralError {
  constructor(message: string, options?: CorralErrorOptions) {
    super('sandbox_failed', message, undefined, options);
  }
}

/** Paths whose state differs between two reads. */
export function diffStates(before: ProtectedState, after: ProtectedState): Change[] {
  const out: Change[] = [];
  for (const p of new Set([...before.entries.keys(), ...after.entries.keys()])) {
    const b = before.entries.get(p);
    const a = after.entries.get(p);
    if (sameEntry(b, a)) continue;
    out.push({ path: p, change: !b ? 'added' : !a ? 'deleted' : 'modified', ...(b ? { before: b } : {}), ...(a ? { after: a } : {}) });
  }
  return out.sort((x, y) => (x.path < y.path ? -1 : 1));
}

