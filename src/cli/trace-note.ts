/** The run's trace, for the line the CLI prints when it submits (the API answers with it when it traces). */

const hasControl = (s: string) => [...s].some((ch) => ch.charCodeAt(0) < 0x20 || ch.charCodeAt(0) === 0x7f);

/** "; trace ID (URL)" when the API traced the submission (the operator's viewer link when it has one). */
export function traceNote(c: object): string {
  const { traceId, traceUrl } = c as { traceId?: unknown; traceUrl?: unknown };
  if (typeof traceId !== 'string' || !/^[0-9a-f]{32}$/.test(traceId)) return '';
  const url = typeof traceUrl === 'string' && /^https?:\/\/\S+$/.test(traceUrl) && !hasControl(traceUrl) ? ` ${traceUrl}` : '';
  return `; trace ${traceId}${url}`;
}
