/**
 * An upstream for egress tests that records exactly what reached it: every raw byte of every
 * connection, and every request a lenient HTTP parser (insecureHTTPParser, the most gullible
 * victim) parsed out of those bytes — method, target, all Host values, body size. A smuggled second
 * request or a foreign Host would show up here. Listens on 127.0.0.1 (or the address given).
 */
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';

export interface SeenRequest {
  method: string;
  url: string;
  hosts: string[];
  bodyBytes: number;
}

export interface RecordingUpstream {
  port: number;
  address: string;
  requests: SeenRequest[];
  /** All bytes received, per connection, as latin1 text. */
  raw: string[];
  /** Connections open now (a closed one has delivered every byte it will: 'close' comes after the data). */
  readonly openConnections: number;
  reset(): void;
  close(): Promise<void>;
}

export async function startRecordingUpstream(address = '127.0.0.1'): Promise<RecordingUpstream> {
  const requests: SeenRequest[] = [];
  const raw: string[] = [];
  const http: HttpServer = createHttpServer({ insecureHTTPParser: true }, (req, res) => {
    const hosts: string[] = [];
    for (let i = 0; i < req.rawHeaders.length; i += 2) if (req.rawHeaders[i]!.toLowerCase() === 'host') hosts.push(req.rawHeaders[i + 1]!);
    const seen: SeenRequest = { method: req.method ?? '', url: req.url ?? '', hosts, bodyBytes: 0 };
    requests.push(seen);
    req.on('data', (c: Buffer) => (seen.bodyBytes += c.length));
    req.on('end', () => res.end(`upstream-ok ${req.method} ${req.url}`));
  });
  await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
  const httpPort = (http.address() as AddressInfo).port;
  const open = new Set<import('node:net').Socket>();
  const front: Server = createServer((s) => {
    open.add(s);
    s.on('close', () => open.delete(s));
    const i = raw.push('') - 1;
    const back = connect(httpPort, '127.0.0.1');
    s.on('data', (c: Buffer) => (raw[i] += c.toString('latin1')));
    s.pipe(back).pipe(s);
    s.on('error', () => back.destroy());
    back.on('error', () => s.destroy());
    s.on('close', () => back.destroy());
  });
  await new Promise<void>((r) => front.listen(0, address, r));
  return {
    port: (front.address() as AddressInfo).port,
    address,
    requests,
    raw,
    get openConnections() {
      return open.size;
    },
    reset() {
      requests.length = 0;
      raw.length = 0;
    },
    async close() {
      http.closeAllConnections();
      for (const s of open) s.destroy();
      await new Promise((r) => front.close(r));
      await new Promise((r) => http.close(r));
    },
  };
}
