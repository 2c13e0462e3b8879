/**
 * The report's audit section: the log's seal (final hash, line count, signature) — what
 * `corral verify` checks the stored events.jsonl against — and the run's trace (id, link).
 */
import { codeSpan, escapeInline } from './markdown-escape';

export interface ReportAudit {
  finalHash?: string;
  lines?: number;
  signature?: { alg: string; keyId: string; value: string };
  incomplete?: string;
  traceId?: string;
  traceUrl?: string;
}

export function auditSection(a: ReportAudit, runId: string | null): string {
  const lines: string[] = [];
  if (a.finalHash !== undefined) {
    lines.push(`- **Log:** ${a.lines ?? '?'} lines of events.jsonl, hash-chained; final hash ${codeSpan(a.finalHash)}${runId ? ` (check the stored log: ${codeSpan(`corral verify ${runId}`)})` : ''}`);
  }
  if (a.signature) lines.push(`- **Signature:** ${escapeInline(a.signature.alg)} by key ${codeSpan(a.signature.keyId)}: ${codeSpan(a.signature.value)}`);
  if (a.incomplete) lines.push(`- ⚠ **The log is incomplete:** ${escapeInline(a.incomplete)}`);
  if (a.traceId) {
    const url = a.traceUrl && /^https?:\/\//.test(a.traceUrl) ? a.traceUrl : undefined;
    lines.push(`- **Trace:** ${codeSpan(a.traceId)}${url ? ` — <${url.replace(/[<>\s]/g, encodeURIComponent)}>` : ''}`);
  }
  return lines.length ? `## Audit\n\n${lines.join('\n')}` : '';
}
