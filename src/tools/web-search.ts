/**
 * web_search: a query to a search service the operator configured (CORRAL_WEB_SEARCH, _URL, _KEY).
 * Unlike fetch_url it runs on the worker, not in the sandbox: the service's key is the operator's and
 * must never enter a sandbox, the log or the report, so the worker holds it and sends it only to the
 * configured URL. The worker therefore parses what a remote service wrote, which is attack surface:
 * the answer is read with a time limit and at most MAX_BODY_BYTES, no redirect is followed, the JSON
 * is checked with a schema, and every string that reaches the model is cut to size with control and
 * bidi characters removed. The model sees titles, URLs and snippets as text; fetching a result is a
 * separate fetch_url call, under the run's own egress allowlist.
 *
 * Adapters (the answer shapes are the services' documented JSON):
 * - `searxng`: GET URL/search?q=…&format=json → {results: [{title, url, content}]}
 * - `brave`:   GET URL?q=…&count=… with X-Subscription-Token → {web: {results: [{title, url, description}]}}
 * - `json`:    POST URL {query, count} → {results: [{title, url, snippet}]}
 * A key, when set, goes as `Authorization: Bearer` for searxng and json.
 */
import { z } from 'zod';
import type { Config } from '../config';
import { defineTool, type Tool } from './tool';

const MAX_BODY_BYTES = 1024 * 1024;
const MAX_RESULTS = 10;
const TITLE_CHARS = 300;
const SNIPPET_CHARS = 1000;
const URL_CHARS = 2048;

export interface SearchResult {
  title: string;
  url: string;
  snippet: string;
}

export interface SearchEngine {
  /** What the model is told the results come from (the adapter and the service's host). */
  readonly label: string;
  search(query: string, count: number, signal: AbortSignal): Promise<SearchResult[]>;
}

/** A search that did not give results, in words the model can act on (never the key, never the body). */
export class SearchFailed extends Error {}

const loose = z.string().max(100_000).optional().catch(undefined);
const Hit = z.object({ title: loose, url: loose, content: loose, snippet: loose, description: loose }).passthrough();
const Hits = z.array(z.unknown()).max(1000);
const SHAPES = {
  searxng: z.object({ results: Hits }).passthrough(),
  brave: z.object({ web: z.object({ results: Hits }).passthrough().optional() }).passthrough(),
  json: z.object({ results: Hits }).passthrough(),
} as const;

// Control characters (C0 but tab/newline, DEL, C1) and bidi/zero-width format characters.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", apos: "'", nbsp: ' ' };

/** Plain text of a snippet: tags (services mark matches with <b>/<strong>) and unsafe characters gone, whitespace folded. */
export function plain(s: string | undefined, max: number): string {
  if (!s) return '';
  const t = s
    .slice(0, max * 4)
    .replace(/<[^<>]{0,200}>/g, '')
    .replace(/&(amp|lt|gt|quot|#39|apos|nbsp);/g, (_m, e: string) => ENTITIES[e] ?? '')
    .replace(UNSAFE, '')
    .replace(/\s+/g, ' ')
    .trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

function resultOf(raw: unknown): SearchResult | null {
  const h = Hit.safeParse(raw);
  if (!h.success) return null;
  const url = (h.data.url ?? '').trim();
  if (url.length > URL_CHARS || !URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) return null;
  return {
    title: plain(h.data.title, TITLE_CHARS) || '(no title)',
    url: new URL(url).href.replace(UNSAFE, ''),
    snippet: plain(h.data.content ?? h.data.snippet ?? h.data.description, SNIPPET_CHARS),
  };
}

/** The body of an answer, at most MAX_BODY_BYTES (more is refused, not cut: cut JSON is not JSON). */
async function boundedBody(res: Response, host: string): Promise<string> {
  const declared = Number(res.headers.get('content-length') ?? '0');
  if (declared > MAX_BODY_BYTES) throw new SearchFailed(`the search service (${host}) answered ${declared} bytes, over the ${MAX_BODY_BYTES}-byte cap`);
  if (!res.body) return '';
  const chunks: Buffer[] = [];
  let n = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    n += chunk.byteLength;
    if (n > MAX_BODY_BYTES) throw new SearchFailed(`the search service (${host}) answered more than the ${MAX_BODY_BYTES}-byte cap`);
    chunks.push(Buffer.from(chunk));
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The engine the configuration names, or undefined when web_search is not configured. */
export function webSearchEngine(config: Config, fetchImpl: typeof fetch = fetch): SearchEngine | undefined {
  const kind = config.CORRAL_WEB_SEARCH;
  const base = config.CORRAL_WEB_SEARCH_URL;
  if (!kind || !base) return undefined;
  const key = config.CORRAL_WEB_SEARCH_KEY;
  const timeoutMs = config.CORRAL_WEB_SEARCH_TIMEOUT_MS;
  const host = new URL(base).host;
  return {
    label: `${kind} at ${host}`,
    async search(query, count, signal) {
      let url: URL;
      const init: RequestInit = { redirect: 'error', headers: { accept: 'application/json', 'user-agent': 'corral-web_search/1' } };
      const headers = init.headers as Record<string, string>;
      if (kind === 'searxng') {
        url = new URL('search', base.endsWith('/') ? base : `${base}/`);
        url.searchParams.set('q', query);
        url.searchParams.set('format', 'json');
        if (key) headers.authorization = `Bearer ${key}`;
      } else if (kind === 'brave') {
        url = new URL(base);
        url.searchParams.set('q', query);
        url.searchParams.set('count', String(count));
        headers['x-subscription-token'] = key!;
      } else {
        url = new URL(base);
        init.method = 'POST';
        headers['content-type'] = 'application/json';
        init.body = JSON.stringify({ query, count });
        if (key) headers.authorization = `Bearer ${key}`;
      }
      const timer = AbortSignal.timeout(timeoutMs);
      init.signal = AbortSignal.any([signal, timer]);
      let res: Response;
      let text: string;
      try {
        res = await fetchImpl(url, init);
        if (res.status < 200 || res.status > 299) {
          await res.body?.cancel().catch(() => undefined);
          throw new SearchFailed(`the search service (${host}) answered HTTP ${res.status}`);
        }
        text = await boundedBody(res, host);
      } catch (e) {
        if (e instanceof SearchFailed) throw e;
        if (signal.aborted) throw e;
        if (timer.aborted) throw new SearchFailed(`the search service (${host}) did not answer within ${Math.round(timeoutMs / 1000)} s`);
        const cause = (e as { cause?: { code?: string; message?: string } }).cause;
        const why = /redirect/i.test(String((e as Error).message) + String(cause?.message)) ? 'it answered with a redirect, which is not followed' : cause?.code ?? (cause?.message ? cause.message.slice(0, 120) : 'the request failed');
        throw new SearchFailed(`the search service (${host}) could not be used: ${why}`);
      }
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new SearchFailed(`the search service (${host}) answered something that is not JSON`);
      }
      const shape = SHAPES[kind].safeParse(json);
      if (!shape.success) throw new SearchFailed(`the search service (${host}) answered JSON that is not a ${kind} result list`);
      const d = shape.data as { results?: unknown[]; web?: { results: unknown[] } };
      const raw = kind === 'brave' ? (d.web?.results ?? []) : (d.results ?? []);
      const out: SearchResult[] = [];
      for (const r of raw) {
        const x = resultOf(r);
        if (x) out.push(x);
        if (out.length >= count) break;
      }
      return out;
    },
  };
}

export const WebSearch = z
  .object({
    query: z.string().trim().min(1).max(400).describe('what to search for, in plain words (at most 400 characters)'),
    count: z.number().int().min(1).max(MAX_RESULTS).default(5).describe(`how many results (1–${MAX_RESULTS}, default 5)`),
  })
  .strict();

/** The web_search tool over one engine. */
export function webSearchTool(engine: SearchEngine): Tool<typeof WebSearch> {
  return defineTool({
    name: 'web_search',
    description:
      'Search the web through the search service this deployment configured; returns titles, URLs and snippets as text. ' +
      'To read a result, fetch it with fetch_url (its host must be on the run\'s egress allowlist).',
    schema: WebSearch,
    async execute(args, ctx) {
      const signal = ctx.signal ?? new AbortController().signal;
      try {
        const results = await engine.search(args.query, args.count, signal);
        if (results.length === 0) return { ok: true, content: `No results for "${args.query}" (${engine.label}).`, summary: '0 results' };
        const lines = results.map((r, i) => `${i + 1}. ${r.title}\n   ${r.url}${r.snippet ? `\n   ${r.snippet}` : ''}`);
        return { ok: true, content: `Results for "${args.query}" (${engine.label}):\n\n${lines.join('\n\n')}`, summary: `${results.length} result${results.length === 1 ? '' : 's'}` };
      } catch (e) {
        if (e instanceof SearchFailed) return { ok: false, content: `web_search: ${e.message}`, summary: 'failed' };
        throw e;
      }
    },
  });
}
