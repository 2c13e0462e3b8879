/**
 * HTTP answers of this API process, counted by method, route (the route's template, `/v1/runs/:id`,
 * so a run id never becomes a label; `unmatched` for paths no route has) and status class (`2xx` …
 * `5xx`): /metrics shows them as corral_http_responses_total. Per process, as Prometheus expects
 * (each API instance is scraped on its own); the label sets are bounded by the routes this API has.
 */
export interface HttpCount {
  method: string;
  route: string;
  statusClass: string;
  count: number;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

export class HttpCounts {
  private readonly counts = new Map<string, HttpCount>();

  /** Counts one answer; `route` is the matched route's template, undefined when none matched. */
  record(method: string, route: string | undefined, status: number): void {
    const m = METHODS.has(method) ? method : 'OTHER';
    const r = route ?? 'unmatched';
    const statusClass = status >= 100 && status < 600 ? `${Math.floor(status / 100)}xx` : 'other';
    const key = `${m} ${r} ${statusClass}`;
    const c = this.counts.get(key);
    if (c) c.count += 1;
    else this.counts.set(key, { method: m, route: r, statusClass, count: 1 });
  }

  snapshot(): HttpCount[] {
    return [...this.counts.values()].map((c) => ({ ...c })).sort((a, b) => (a.route < b.route ? -1 : a.route > b.route ? 1 : a.method < b.method ? -1 : a.method > b.method ? 1 : a.statusClass < b.statusClass ? -1 : 1));
  }
}
