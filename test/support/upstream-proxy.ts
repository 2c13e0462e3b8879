/**
 * An operator's upstream HTTP proxy for egress tests, on 127.0.0.1: CONNECT tunnels and absolute-form
 * plain-HTTP requests, with Basic proxy authentication (407 without the right credentials). Every
 * name it is asked for is "resolved" to 127.0.0.1 (the port is kept), as a site's gateway resolves
 * names the sandbox's host cannot. It records what it was asked and with which Proxy-Authorization.
 */
import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface UpstreamSeen {
  method: string;
  target: string;
  authorization: string | undefined;
  status: number;
}

export interface TestUpstreamProxy {
  port: number;
  seen: UpstreamSeen[];
  close(): Promise<void>;
}

export async function startUpstreamProxy(user: string, pass: string): Promise<TestUpstreamProxy> {
  const want = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
  const seen: UpstreamSeen[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((req, res) => {
    const auth = req.headers['proxy-authorization'];
    if (auth !== want) {
      seen.push({ method: req.method ?? '', target: req.url ?? '', authorization: auth, status: 407 });
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="site"' }).end();
      return;
    }
    let u: URL;
    try {
      u = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end();
      return;
    }
    seen.push({ method: req.method ?? '', target: req.url ?? '', authorization: auth, status: 200 });
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const up = request({ host: '127.0.0.1', port: Number(u.port || 80), method: req.method, path: `${u.pathname}${u.search}`, headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.on('error', () => client.destroy());
    const auth = req.headers['proxy-authorization'];
    if (auth !== want) {
      seen.push({ method: 'CONNECT', target: req.url ?? '', authorization: auth, status: 407 });
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="site"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    seen.push({ method: 'CONNECT', target: req.url ?? '', authorization: auth, status: 200 });
    const port = Number((req.url ?? '').split(':').pop());
    const up = connect({ host: '127.0.0.1', port }, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) up.write(head);
      up.pipe(client);
      client.pipe(up);
    });
    sockets.add(up);
    up.on('close', () => sockets.delete(up));
    up.on('error', () => client.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () => {
      for (const s of sockets) s.destroy();
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}
