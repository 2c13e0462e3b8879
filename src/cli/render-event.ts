/**
 * One human-readable progress line per run event. `corral watch` (watch-view.ts) renders the steps,
 * decisions, approvals and budgets itself and uses this for the other events.
 */
import type { BudgetName, RunEvent, RunUsage } from '../domain/events';
import { showName } from '../domain/export-names';
import { patchPaths } from '../tools/unified-diff';

/** One line, at most n characters (newlines shown as ⏎). */
export function clip(s: string, n = 110): string {
  const one = s.replace(/\s*\n\s*/g, ' ⏎ ');
  return one.length > n ? `${one.slice(0, n - 1)}…` : one;
}

/** A tool call's arguments in short: the command for bash, the path for file tools, else JSON. */
export function describeArgs(tool: string, args: unknown): string {
  if (typeof args === 'string') return clip(args);
  const a = (args ?? {}) as Record<string, unknown>;
  if (tool === 'bash' && typeof a.command === 'string') return clip(a.command);
  if (typeof a.path === 'string') return a.path;
  if (typeof a.patch === 'string') {
    // The names apply_patch and the policy read from the same text (tools/unified-diff.ts), without a/ b/ prefixes.
    const all = patchPaths(a.patch);
    const files = all.filter((f) => !all.includes(`a/${f}`) && !all.includes(`b/${f}`));
    if (files.length) return clip(`patch: ${files.map(showName).join(', ')}`);
  }
  return clip(JSON.stringify(args));
}

function roundNum(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(n < 1 ? 4 : 1);
}

/** `LLM calls 4 · tool calls 10 · $0.20 · 60 s` */
export function budgetLine(b: Record<BudgetName, number>): string {
  return `LLM calls ${b.llmCalls} · tool calls ${b.toolCalls} · $${b.costUsd.toFixed(2)} · ${b.wallTimeS} s`;
}

/** `LLM calls 2/4 · tool calls 3/10 · $0.0012/$0.20 · 3.1/60 s` */
export function usageLine(u: RunUsage, b: Record<BudgetName, number>): string {
  return `LLM calls ${u.llmCalls}/${b.llmCalls} · tool calls ${u.toolCalls}/${b.toolCalls} · $${u.costUsd.toFixed(4)}/$${b.costUsd.toFixed(2)} · ${(u.wallTimeMs / 1000).toFixed(1)}/${b.wallTimeS} s`;
}

export function renderEvent(e: RunEvent): string | null {
  switch (e.type) {
    case 'run.started':
      return `▶ ${e.runId} started on ${e.workerId} — model: ${e.model}; policy: ${e.policy}; approvals: ${e.approvals ? 'on' : 'off (unattended)'}`;
    case 'sandbox.ready':
      return `  sandbox ${e.containerId.slice(0, 12)} ready in ${e.ms} ms (${e.environment ? `environment ${e.environment}, ` : ''}${e.isolation === 'gvisor' ? 'gVisor, ' : ''}${e.egressAllow.length ? `egress: ${e.egressAllow.join(', ')}` : 'no network'})`;
    case 'workspace.cloned':
      return `  cloned ${e.url}${e.ref ? ` ${e.ref}` : ''} at ${e.commit.slice(0, 12)}: ${e.files} file(s), ${(e.bytes / 1048576).toFixed(1)} MiB in ${(e.ms / 1000).toFixed(1)} s`;
    case 'git.bundle':
      return e.path ? `  git bundle: ${e.commits} commit(s) on ${e.branch} (${e.bytes} bytes)${e.needsReviewTotal ? `, ⚠ ${e.needsReviewTotal} change(s) to review` : ''}` : `  no git bundle: ${e.note ?? ''}`;
    case 'setup.started':
      return `  setup of ${e.environment}: ${e.cache === 'hit' ? 'cached result restored, commands skipped' : `${e.commands} command(s)`}${e.egressAllow.length && e.cache !== 'hit' ? ` (egress: ${e.egressAllow.join(', ')})` : ''}`;
    case 'setup.command':
      return `    setup ${e.index}: ${clip(e.command, 100)} → ${e.timedOut ? 'TIMED OUT' : e.exitCode === 0 ? 'ok' : `FAILED (exit ${e.exitCode ?? 'none'})`} in ${(e.ms / 1000).toFixed(1)} s`;
    case 'setup.finished':
      return e.ok
        ? `  setup done in ${(e.ms / 1000).toFixed(1)} s${e.baselineFiles !== undefined ? ` (${e.baselineFiles} file(s) in the baseline${e.cached ? `, ${e.cached}` : ''})` : ''}${e.note ? ` — ${clip(e.note, 160)}` : ''}`
        : `  SETUP FAILED: ${clip(e.reason ?? '', 300)}`;
    case 'mcp.started':
      return `  MCP server ${e.server} started in ${(e.ms / 1000).toFixed(1)} s: ${e.tools.length} tool(s)${e.refused.length ? `, ${e.refused.length} not offered (${clip(e.refused.map((r) => `${r.tool}: ${r.reason}`).join('; '), 160)})` : ''}`;
    case 'mcp.failed':
      return `  MCP SERVER ${e.server} FAILED TO START: ${clip(e.reason, 200)}`;
    case 'mcp.stopped':
      return `  MCP server ${e.server} ended: ${clip(e.reason, 160)} (${e.calls} call(s), ${e.errors} error(s), ${e.bytesIn} bytes read)`;
    case 'egress.narrowed':
      return `  egress for the agent: ${e.allow.length ? e.allow.join(', ') : 'none'} (${e.connectionsClosed} open connection(s) closed)`;
    case 'model.response': {
      const say = e.content ? ` “${clip(e.content, 90)}”` : '';
      return `  model turn ${e.turn}${say}${e.toolCalls.length ? '' : ' (final answer)'}`;
    }
    case 'tool.call':
      return `  → ${e.tool} ${describeArgs(e.tool, e.args)}`;
    case 'policy.decision':
      return e.verdict.decision === 'allow' ? `    allowed: ${clip(e.verdict.reason.replace(/^Allowed( by the policy)?: /, ''))}` : `    BLOCKED: ${clip(e.verdict.reason, 160)}`;
    case 'approval.pending':
      return `    ⏸ waiting for approval (${e.reason}). Answer with: corral approve ${e.runId} ${e.callId} [--deny]`;
    case 'tool.result':
      return e.blocked ? null : `    ← ${e.ok ? 'ok' : 'failed'}: ${clip(e.summary)}`;
    case 'egress':
      return `    egress ${e.method} ${e.host}:${e.port} ${e.decision === 'allow' ? 'allowed' : 'DENIED'} (${e.reason})`;
    case 'egress.aggregate':
      return `    egress: ${clip(e.reason, 160)}`;
    case 'egress.proxy':
      return e.state === 'failed' ? `  EGRESS PROXY FAILED: ${clip(e.detail, 200)}` : null;
    case 'egress.stats':
      return null;
    case 'effect.decision': {
      const what = e.effect === 'file' ? `${showName(e.path ?? '')} ${e.change ?? ''} (${e.class ?? ''})` : `connection to ${e.host ?? '?'}:${e.port ?? '?'}`;
      return `    ${e.decision === 'allow' ? 'effect accepted' : 'EFFECT REFUSED'}: ${what} — ${clip(e.reason, 200)}`;
    }
    case 'secret.masked':
      return `    secrets masked in ${e.where}: ${e.found.map((f) => `${f.rule} ×${f.count}`).join(', ')}${e.coarse ? ` (coarse: ${clip(e.coarse, 120)})` : ''}`;
    case 'effect.unchecked':
      return `    effect check failed: ${clip(e.reason, 200)}`;
    case 'effect.stats':
      return `  effect checks: ${e.checks} (${e.mode}), p50 ${e.p50Ms} ms, max ${e.maxMs} ms`;
    case 'log.truncated':
      return `  log truncated: ${clip(e.reason, 160)}`;
    case 'budget.warning':
      return `  budget warning: ${e.budget} at ${Math.round((e.used / e.limit) * 100)} % (${roundNum(e.used)} of ${e.limit})`;
    case 'context.loaded':
      return e.agentsMd || e.skills.length || e.memory
        ? `  context: ${[e.agentsMd ? 'AGENTS.md' : '', e.skills.length ? `${e.skills.length} skill(s): ${e.skills.map((k) => k.name).join(', ')}` : '', e.memory ? 'memory' : ''].filter(Boolean).join('; ')}`
        : null;
    case 'context.compacted':
      return `  context compacted: ${e.messagesBefore} → ${e.messagesAfter} messages (~${e.tokensBefore} → ~${e.tokensAfter} tokens)`;
    case 'done.check':
      return `  done check ${e.ok ? 'passed' : 'FAILED'}: ${clip(e.command)} (${e.summary})`;
    case 'memory.proposed':
      return `  memory: ${e.lines.length} line(s) proposed, ${e.applied ? 'appended' : 'not appended'} (${e.reason})`;
    case 'budget.exceeded':
      return `  budget exhausted: ${e.budget} (limit ${e.limit}, used ${roundNum(e.used)})`;
    case 'artifact':
      return null;
    case 'workspace.changes': {
      const files = e.files.length ? `  files changed: ${e.files.map((f) => `${showName(f.path)} (${f.change}, +${f.added}/-${f.removed})`).join(', ')}` : '  no files changed';
      const review = e.needsReview?.length ? `  ⚠ needs review: ${e.needsReview.map((f) => `${showName(f.path)} (${f.rule})`).join(', ')}` : '';
      const left = e.notExported?.length ? `  not exported: ${e.notExported.map((x) => `${showName(x.path)} (${x.code})`).join(', ')}` : '';
      return [files, review, left].filter(Boolean).map((l) => clip(l, 400)).join('\n');
    }
    case 'sandbox.removed':
      return `  sandbox ${e.containerId.slice(0, 12)} removed`;
    case 'subrun.started':
      return `  ⤷ sub-run ${e.childRunId} started (depth ${e.depth}) for ${e.callId}: “${clip(e.task, 80)}” · budget ${budgetLine(e.budgets)}`;
    case 'subrun.finished':
      return `  ⤶ sub-run ${e.childRunId} ${e.outcome}: ${clip(e.reason, 100)} · used ${usageLine(e.usage, e.budgets)}`;
    case 'run.suspended':
      return `  ⏸ waiting for ${e.children.length} sub-run(s) without a worker slot; sandbox removed, /workspace kept as ${e.checkpoint}`;
    case 'run.resumed':
      return `▶ resumed on ${e.workerId} after ${(e.waitedMs / 1000).toFixed(1)} s: ${e.children.map((c) => `${c.runId} ${c.outcome}`).join(', ')} (new sandbox from ${e.checkpoint})`;
    case 'run.finished':
      return `■ ${e.outcome}: ${e.reason} — ${e.usage.llmCalls} LLM calls, ${e.usage.toolCalls} tool calls, $${e.usage.costUsd.toFixed(4)}, ${(e.usage.wallTimeMs / 1000).toFixed(1)} s`;
  }
}
