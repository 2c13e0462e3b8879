/**
 * fetch_url: one GET of an http(s) URL from inside the sandbox, so it goes through the run's egress
 * proxy like any other traffic of the run — the run's allowlist applies, the connection is attributed
 * to this call, and a run without egress has no network at all. The fetch and the HTML-to-text
 * reduction run in the sandbox (Python's urllib and html.parser over bytes a remote server wrote);
 * the host only reads one bounded JSON line back and checks it with a schema.
 * Text is capped (`maxChars`, at most 100,000); scripts, styles and markup are dropped, block elements
 * become line breaks. Non-2xx answers, refusals by the proxy (403 naming the rule) and timeouts are
 * outcomes the model sees (ok=false), not exceptions.
 */
import { z } from 'zod';
import { defineTool } from './tool';

const MAX_CHARS = 100_000;

const FETCH_PY = String.raw`
import html.parser, json, sys, urllib.request, urllib.error
url, cap, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
SKIP = {"script", "style", "noscript", "template", "svg", "head"}
BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article", "table", "ul", "ol", "blockquote", "hr"}
class Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True); self.out = []; self.skip = 0
    def handle_starttag(self, tag, attrs):
        if tag in SKIP: self.skip += 1
        elif tag in BLOCK: self.out.append("\n")
    def handle_endtag(self, tag):
        if tag in SKIP and self.skip: self.skip -= 1
        elif tag in BLOCK: self.out.append("\n")
    def handle_data(self, d):
        if not self.skip: self.out.append(d)
def result(status, ctype, body, final):
    text = body.decode("utf-8", "replace")
    if "html" in ctype or text.lstrip()[:15].lower().startswith(("<!doctype html", "<html")):
        p = Text(); p.feed(text); p.close()
        lines = [" ".join(l.split()) for l in "".join(p.out).split("\n")]
        text = "\n".join(l for l in lines if l)
    trunc = len(text) > cap
    print(json.dumps({"status": status, "contentType": ctype[:200], "url": final[:2048], "text": text[:cap], "truncated": trunc}))
req = urllib.request.Request(url, headers={"User-Agent": "corral-fetch_url/1", "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5"})
try:
    r = urllib.request.urlopen(req, timeout=timeout)
    result(r.status, r.headers.get("content-type", ""), r.read(cap * 4 + 1), r.geturl())
except urllib.error.HTTPError as e:
    result(e.code, e.headers.get("content-type", "") if e.headers else "", e.read(cap * 4 + 1), url)
except Exception as e:
    print(json.dumps({"error": (type(e).__name__ + ": " + str(e))[:500]}))
`;

const Answer = z.union([
  z.object({ status: z.number().int(), contentType: z.string(), url: z.string(), text: z.string(), truncated: z.boolean() }).strict(),
  z.object({ error: z.string() }).strict(),
]);

export const FetchUrl = z
  .object({
    url: z
      .string()
      .max(2048)
      .url()
      // zod runs these even when .url() failed: each must take any string without throwing
      .refine((u) => !URL.canParse(u) || /^https?:$/.test(new URL(u).protocol), 'only http:// and https:// URLs')
      .refine((u) => !URL.canParse(u) || (new URL(u).username === '' && new URL(u).password === ''), 'no user name or password in the URL')
      .describe('the http(s) URL to GET; its host must be on the run\'s egress allowlist'),
    maxChars: z.number().int().min(100).max(MAX_CHARS).default(20_000).describe('at most this much text comes back (default 20,000)'),
  })
  .strict();

export const fetchUrlTool = defineTool({
  name: 'fetch_url',
  description:
    'GET a web page or file over http(s) through the run\'s egress proxy and return it as text (HTML reduced to its text). ' +
    'Only hosts on the run\'s egress allowlist can be reached; the answer is capped.',
  schema: FetchUrl,
  async execute(args, ctx) {
    const timeoutS = Math.max(1, Math.floor(ctx.execTimeoutMs / 1000) - 2);
    const exec = await ctx.sandbox.exec({
      argv: ['python3', '-I', '-c', FETCH_PY, args.url, String(args.maxChars), String(timeoutS)],
      timeoutMs: ctx.execTimeoutMs,
      maxOutputBytes: Math.min(ctx.maxOutputBytes * 8, args.maxChars * 8 + 4096),
      signal: ctx.signal,
    });
    if (exec.timedOut) return { ok: false, content: `fetch_url: ${args.url} did not answer within ${Math.round(ctx.execTimeoutMs / 1000)} s`, summary: 'timed out', exec };
    let parsed: z.infer<typeof Answer> | undefined;
    try {
      parsed = Answer.parse(JSON.parse(exec.stdout.trim().split('\n').at(-1) ?? ''));
    } catch {
      parsed = undefined;
    }
    if (!parsed) return { ok: false, content: `fetch_url: the fetch failed (exit ${exec.exitCode ?? 'none'}): ${exec.stderr.slice(0, 500)}`, summary: `failed, exit ${exec.exitCode ?? 'none'}`, exec };
    if ('error' in parsed) {
      const noNet = /Connection refused|Name or service not known|Temporary failure in name resolution|No address associated/.test(parsed.error);
      const tunnel = /Tunnel connection failed: 403/.test(parsed.error);
      const hint = tunnel ? ' — refused by the run\'s egress proxy: the host is not on its allowlist' : noNet ? ' (this run may have no network: its spec lists no egress.allow hosts)' : '';
      return { ok: false, content: `fetch_url: ${args.url}: ${parsed.error}${hint}`, summary: 'failed', exec };
    }
    const ok = parsed.status >= 200 && parsed.status < 300;
    const head = `HTTP ${parsed.status} ${parsed.contentType || '(no content type)'} from ${parsed.url}${parsed.truncated ? ` (cut to ${args.maxChars} characters)` : ''}`;
    const refused = parsed.status === 403 && /corral/i.test(parsed.text) ? ' — refused by the run\'s egress proxy: the host is not on its allowlist' : '';
    return { ok, content: `${head}${refused}\n\n${parsed.text}`, summary: `HTTP ${parsed.status}, ${parsed.text.length} characters${parsed.truncated ? ', truncated' : ''}`, exec };
  },
});
