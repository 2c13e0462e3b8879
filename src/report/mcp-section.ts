/**
 * The "MCP servers" section of report.md: each server the run started (what it says it is — its own,
 * untrusted claim — the tools offered to the model and those refused with why), each that could not
 * start, how each ended (calls, errors, bytes read, why it stopped), and every call of an MCP tool with
 * the gate's decision (rule, classifier, approval) and its result. Empty when the run had none.
 */
import { parseMcpToolName } from '../domain/mcp';
import { codeSpan, escapeInline, markdownTable } from './markdown-escape';
import type { RunSummary } from './summarize-run';

export function mcpSection(s: RunSummary): string {
  const mcpCalls = s.calls.map((c, i) => ({ c, n: i + 1, name: parseMcpToolName(c.tool) })).filter((x) => x.name !== null);
  if (!s.mcp.length && !mcpCalls.length) return '';
  const parts = ['## MCP servers'];
  for (const e of s.mcp) {
    if (e.type === 'mcp.started') {
      const info = e.serverInfo ? ` — says it is ${codeSpan(`${e.serverInfo.name} ${e.serverInfo.version}`)}` : '';
      const tools = e.tools.length ? e.tools.map((t) => codeSpan(t.name)).join(', ') : 'none';
      const lines = [`- **${escapeInline(e.server)}** started in ${(e.ms / 1000).toFixed(1)} s (${codeSpan(e.argv.join(' '))})${info}; ${e.tools.length} tool${e.tools.length === 1 ? '' : 's'} offered: ${tools}`];
      for (const r of e.refused) lines.push(`  - not offered: ${codeSpan(r.tool)} — ${escapeInline(r.reason)}`);
      if (e.toolsOmitted) lines.push(`  - ${e.toolsOmitted} more tool(s) past the limit were not taken`);
      parts.push(lines.join('\n'));
    } else if (e.type === 'mcp.failed') {
      parts.push(`- **${escapeInline(e.server)}** ⛔ **could not start** (${codeSpan(e.argv.join(' '))}): ${escapeInline(e.reason)} — its tools were not offered`);
    } else {
      parts.push(`- **${escapeInline(e.server)}** ended: ${escapeInline(e.reason)} — ${e.calls} call${e.calls === 1 ? '' : 's'}, ${e.errors} error${e.errors === 1 ? '' : 's'}, ${e.bytesIn.toLocaleString('en-US')} bytes read in ${e.frames} message${e.frames === 1 ? '' : 's'} (at most ${e.maxBufferedBytes.toLocaleString('en-US')} bytes of one held), ${e.stderrBytes.toLocaleString('en-US')} bytes of stderr`);
    }
  }
  if (mcpCalls.length) {
    const rows = mcpCalls.map(({ c, n, name }) => {
      const v = c.verdict;
      const rule = v?.static ? (v.static.rule === null ? `no rule → ${v.static.decision}` : `${codeSpan(v.static.rule)} → ${v.static.decision}`) : 'not consulted';
      const how = [rule, v?.classifier ? `classifier ${v.classifier.decision}` : '', v?.approval ? `${v.approval.approved ? 'approved' : 'denied'} by ${codeSpan(v.approval.by)}` : ''].filter(Boolean).join(' · ');
      const decision = v ? (v.decision === 'deny' ? '**deny**' : 'allow') : '—';
      const result = c.result ? `${c.result.blocked ? '⛔ blocked' : c.result.ok ? 'ok' : '**failed**'}${c.result.summary ? ` — ${escapeInline(c.result.summary.slice(0, 200))}` : ''}` : '_none recorded_';
      return [String(n), codeSpan(name!.server), codeSpan(name!.tool), decision, how, result];
    });
    parts.push(`MCP tool calls (numbered as under "Tool calls"):\n\n${markdownTable(['#', 'Server', 'Tool', 'Decision', 'How', 'Result'], ['r', 'l', 'l', 'l', 'l', 'l'], rows)}`);
  }
  return parts.join('\n\n');
}
