/** One JSON request to a corral API under test: the status and the body, parsed when it is JSON. */
export async function apiRequest<T = unknown>(
  baseUrl: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {},
): Promise<{ status: number; body: T }> {
  const res = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* not JSON (report.md, logs) */
  }
  return { status: res.status, body: parsed as T };
}
