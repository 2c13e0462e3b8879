/**
 * An OTLP/HTTP trace receiver on loopback for tests: POST /v1/traces, decoded with the official
 * OpenTelemetry protobuf definitions (test/support/otlp-proto, copied from open-telemetry/opentelemetry-proto
 * v1.11, Apache-2.0) through protobufjs — never our own parser — or as OTLP/JSON. Gzip bodies are
 * inflated. Spans are kept flattened (hex ids, attributes as plain values), with the resource's
 * attributes and the request headers beside them. `mode` makes it a collector that is down (503), or
 * one that never answers (the request hangs until the receiver closes).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import * as protobuf from 'protobufjs';

export type AttrValue = string | number | boolean | AttrValue[] | null;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttrValue>;
  events: Array<{ name: string; attributes: Record<string, AttrValue> }>;
  status: { code: number; message: string };
  resource: Record<string, AttrValue>;
  scope: string;
}

export interface OtlpReceiver {
  /** The base URL (OTEL_EXPORTER_OTLP_ENDPOINT). */
  url: string;
  spans: ReceivedSpan[];
  /** Each export request's headers and content type, in order. */
  requests: Array<{ headers: IncomingMessage['headers']; contentType: string; spans: number; bytes: number; answered: number }>;
  mode: 'ok' | 'down' | 'hang';
  /** With `{ lazy: true }`: the bodies taken, not yet decoded; decodeNow() decodes them into `spans` (a benchmark keeps decoding out of what it measures). */
  decodeNow(): void;
  close(): Promise<void>;
}

const ROOT = join(__dirname, 'otlp-proto');
let requestType: protobuf.Type | undefined;

/** ExportTraceServiceRequest from the official .proto files. */
function exportRequestType(): protobuf.Type {
  if (requestType) return requestType;
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(ROOT, target);
  root.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', { keepCase: false });
  requestType = root.lookupType('opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest');
  return requestType;
}

type AnyValueObj = { stringValue?: string; boolValue?: boolean; intValue?: string | number; doubleValue?: number; arrayValue?: { values?: AnyValueObj[] }; bytesValue?: string };
type KeyValueObj = { key: string; value?: AnyValueObj };

function valueOf(v: AnyValueObj | undefined): AttrValue {
  if (!v) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  if (v.bytesValue !== undefined) return v.bytesValue;
  return null;
}
const attrsOf = (kvs: KeyValueObj[] | undefined): Record<string, AttrValue> => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, valueOf(kv.value)]));

interface SpanObj {
  traceId: string; spanId: string; parentSpanId?: string; name: string; kind?: number | string; startTimeUnixNano: string | number; endTimeUnixNano: string | number;
  attributes?: KeyValueObj[]; events?: Array<{ name: string; attributes?: KeyValueObj[] }>; status?: { code?: number | string; message?: string };
}
interface RequestObj { resourceSpans?: Array<{ resource?: { attributes?: KeyValueObj[] }; scopeSpans?: Array<{ scope?: { name?: string }; spans?: SpanObj[] }> }> }

/** Flattens a decoded request; `hexIds`: ids are hex already (OTLP/JSON) rather than base64 (protobuf's toObject). */
function flatten(req: RequestObj, hexIds: boolean): ReceivedSpan[] {
  const hex = (s: string | undefined) => (!s ? '' : hexIds ? s.toLowerCase() : Buffer.from(s, 'base64').toString('hex'));
  const out: ReceivedSpan[] = [];
  for (const rs of req.resourceSpans ?? []) {
    const resource = attrsOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hex(s.traceId), spanId: hex(s.spanId), parentSpanId: hex(s.parentSpanId), name: s.name, kind: Number(s.kind ?? 0),
          startNs: BigInt(s.startTimeUnixNano), endNs: BigInt(s.endTimeUnixNano), attributes: attrsOf(s.attributes),
          events: (s.events ?? []).map((e) => ({ name: e.name, attributes: attrsOf(e.attributes) })),
          status: { code: Number(s.status?.code ?? 0), message: s.status?.message ?? '' }, resource, scope: ss.scope?.name ?? '',
        });
      }
    }
  }
  return out;
}

export async function startOtlpReceiver(mode: OtlpReceiver['mode'] = 'ok', o: { lazy?: boolean } = {}): Promise<OtlpReceiver> {
  const type = exportRequestType();
  const hanging: ServerResponse[] = [];
  const pending: Array<{ body: Buffer; json: boolean }> = [];
  const decode = (body: Buffer, json: boolean): ReceivedSpan[] => (json
    ? flatten(JSON.parse(body.toString('utf8')) as RequestObj, true)
    : flatten(type.toObject(type.decode(body), { longs: String, bytes: String, enums: Number, defaults: false }) as RequestObj, false));
  const r: OtlpReceiver = {
    url: '', spans: [], requests: [], mode, close: async () => undefined,
    decodeNow: () => {
      for (const p of pending.splice(0)) r.spans.push(...decode(p.body, p.json));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > 64 * 1024 * 1024) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      let body = Buffer.concat(chunks);
      const bytes = body.length;
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      const contentType = String(req.headers['content-type'] ?? '');
      const json = contentType.startsWith('application/json');
      let spans: ReceivedSpan[] = [];
      try {
        if (o.lazy && r.mode === 'ok') pending.push({ body, json });
        else spans = decode(body, json);
      } catch (err) {
        res.writeHead(400, { 'content-type': 'text/plain' }).end(`cannot decode: ${(err as Error).message}`);
        return;
      }
      const entry = { headers: req.headers, contentType, spans: spans.length, bytes, answered: 0 };
      r.requests.push(entry);
      if (r.mode === 'hang') {
        hanging.push(res);
        return;
      }
      if (r.mode === 'down') {
        entry.answered = 503;
        res.writeHead(503).end();
        return;
      }
      r.spans.push(...spans);
      entry.answered = 200;
      if (json) res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  r.close = async () => {
    for (const res of hanging) res.destroy();
    server.closeAllConnections();
    await new Promise<void>((ok) => server.close(() => ok()));
  };
  return r;
}

/** Every string a span shows a viewer (its name, attribute keys and values, events, status, resource). */
export function spanStrings(s: ReceivedSpan): string[] {
  const flat = (v: AttrValue): string[] => (Array.isArray(v) ? v.flatMap(flat) : v === null ? [] : [String(v)]);
  const attrs = (a: Record<string, AttrValue>) => Object.entries(a).flatMap(([k, v]) => [k, ...flat(v)]);
  return [s.name, s.status.message, s.scope, ...attrs(s.attributes), ...attrs(s.resource), ...s.events.flatMap((e) => [e.name, ...attrs(e.attributes)])];
}
