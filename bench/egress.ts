/**
 * Egress costs, each side by side with a direct loopback connection in the same run:
 *   throughput_mb_s   bulk bytes through a CONNECT tunnel of the real proxy process vs a direct TCP
 *                     connection to the same upstream, both directions (BENCH_EGRESS_MB each)
 *   request_ms        one small HTTP request on a fresh connection: direct, through the proxy as a
 *                     plain-HTTP absolute-form request, and through a CONNECT tunnel (p50/p95, added ms)
 *   proxy_start_ms    starting a run's proxy process until it is ready (per run with an allowlist)
 *   serve_flood       the done-means scenario (test/support/serve-flood.ts): corral serve, 2 slots, one
 *                     run flooding its proxy with 36,000 CONNECTs while another run works
 * Traffic stays on this machine: the upstream listens on 127.0.0.1, names resolve through a DNS
 * server on loopback, and the upstream's address is exempt through test hooks only.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../src/config';
import { startEgressProxy, type EgressProxyHandle } from '../src/sandbox/egress-proxy-host';
import { egressTestHooks } from '../src/sandbox/egress-test-hooks';
import { serveFlood, type ServeFloodResult } from '../test/support/serve-flood';
import { startTestDns } from '../test/support/test-dns';
import { envInt, note, round, stats, time, type P50P95 } from './stats';

export interface EgressBench {
  throughput_mb_s: { upload: { direct: number; connect_tunnel: number }; download: { direct: number; connect_tunnel: number } };
  request_ms: { direct: P50P95; proxy_http: P50P95; proxy_connect: P50P95; added_p50_http: number; added_p50_connect: number };
  proxy_start_ms: P50P95;
  serve_flood: ServeFloodResult | null;
}

/** An upstream that swallows what it gets (upload), sends `mb` MB on "GET-BULK" (download), or answers HTTP. */
async function startUpstream(): Promise<{ port: number; close(): Promise<void> }> {
  const socks = new Set<Socket>();
  const chunk = Buffer.alloc(64 * 1024, 120);
  const srv = createServer((s) => {
    socks.add(s);
    s.on('close', () => socks.delete(s));
    s.on('error', () => undefined);
    let first = true;
    s.on('data', (c: Buffer) => {
      if (!first) return;
      first = false;
      const head = c.subarray(0, 12).toString('latin1');
      if (head.startsWith('BULK-DOWN ')) {
        let left = Number(c.subarray(10).toString('latin1').trim()) * 1024 * 1024;
        const pump = () => {
          while (left > 0) {
            left -= chunk.length;
            if (!s.write(chunk)) return void s.once('drain', pump);
          }
          s.end();
        };
        pump();
      } else if (head.startsWith('BULK-UP')) {
        s.on('end', () => s.end('ok'));
      } else s.end('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok');
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  return {
    port: (srv.address() as AddressInfo).port,
    close: async () => {
      for (const s of socks) s.destroy();
      await new Promise((r) => srv.close(r));
    },
  };
}

/** A socket to the upstream: direct, or a CONNECT tunnel through the proxy. */
function open(via: EgressProxyHandle | null, port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    if (!via) {
      const s = connect(port, '127.0.0.1', () => resolve(s));
      s.once('error', reject);
      return;
    }
    const s = connect(via.socketPath, () => s.write(`CONNECT bench.test:${port} HTTP/1.1\r\nHost: bench.test:${port}\r\n\r\n`));
    s.once('error', reject);
    let got = '';
    const onData = (c: Buffer) => {
      got += c.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        s.off('data', onData);
        if (!got.startsWith('HTTP/1.1 200')) reject(new Error(`CONNECT refused: ${got.split('\r\n')[0]}`));
        else resolve(s);
      }
    };
    s.on('data', onData);
  });
}

async function upload(via: EgressProxyHandle | null, port: number, mb: number): Promise<number> {
  const s = await open(via, port);
  const chunk = Buffer.alloc(64 * 1024, 121);
  const t = performance.now();
  s.write('BULK-UP\n');
  let left = mb * 1024 * 1024;
  await new Promise<void>((resolve) => {
    const pump = () => {
      while (left > 0) {
        left -= chunk.length;
        if (!s.write(chunk)) return void s.once('drain', pump);
      }
      s.end();
    };
    s.on('data', () => undefined);
    s.once('close', () => resolve());
    pump();
  });
  return mb / ((performance.now() - t) / 1000);
}

async function download(via: EgressProxyHandle | null, port: number, mb: number): Promise<number> {
  const s = await open(via, port);
  const t = performance.now();
  let got = 0;
  await new Promise<void>((resolve) => {
    s.on('data', (c: Buffer) => (got += c.length));
    s.once('close', () => resolve());
    s.write(`BULK-DOWN ${mb}\n`);
  });
  if (got < mb * 1024 * 1024) throw new Error(`download got ${got} bytes`);
  return mb / ((performance.now() - t) / 1000);
}

function httpOnce(o: { socketPath?: string; port: number; path: string }): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ ...(o.socketPath ? { socketPath: o.socketPath } : { host: '127.0.0.1', port: o.port }), path: o.path, agent: false, headers: { host: `bench.test:${o.port}` } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

async function tunnelRequest(via: EgressProxyHandle, port: number): Promise<void> {
  const s = await open(via, port);
  await new Promise<void>((resolve) => {
    s.on('data', () => undefined);
    s.once('close', () => resolve());
    s.write('GET / HTTP/1.1\r\nHost: bench.test\r\nConnection: close\r\n\r\n');
  });
}

export async function benchEgress(o: { redisUrl: string | null }): Promise<EgressBench> {
  const mb = envInt('BENCH_EGRESS_MB', 256);
  const n = envInt('BENCH_EGRESS_REQUESTS', 300);
  const up = await startUpstream();
  const dns = await startTestDns((h) => (h === 'bench.test' ? ['127.0.0.1'] : undefined));
  const dir = mkdtempSync(join(tmpdir(), 'corral-bench-egress-'));
  chmodSync(dir, 0o711); // the proxy's uid reaches its socket directory through here
  // Caps out of the way: this measures the proxy's cost, not its limits.
  const config = loadConfig({ CORRAL_EGRESS_CONNECTIONS_PER_S: '100000', CORRAL_EGRESS_REQUESTS_PER_S: '100000' });
  const start = (i: number) => startEgressProxy({
    runId: `run_bench_${i}`, dir: mkdtempSync(join(dir, 'r-')), allow: [`bench.test:${up.port}`], config,
    hooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }), onAttempt: () => undefined, onSummary: () => undefined, log: () => undefined,
  });
  try {
    note('egress: proxy process start');
    await (await start(-1)).stop(); // builds the bundle once
    const starts: number[] = [];
    for (let i = 0; i < 10; i++) {
      let h: EgressProxyHandle | undefined;
      starts.push(await time(async () => (h = await start(i))));
      await h!.stop();
    }
    const proxy = await start(99);
    try {
      note(`egress: throughput (${mb} MB each way, direct and through CONNECT)`);
      const tp = {
        upload: { direct: round(await upload(null, up.port, mb)), connect_tunnel: round(await upload(proxy, up.port, mb)) },
        download: { direct: round(await download(null, up.port, mb)), connect_tunnel: round(await download(proxy, up.port, mb)) },
      };
      note(`egress: request latency (${n} requests each)`);
      const direct: number[] = [];
      const viaHttp: number[] = [];
      const viaConnect: number[] = [];
      for (let i = 0; i < n; i++) {
        direct.push(await time(() => httpOnce({ port: up.port, path: '/' })));
        viaHttp.push(await time(() => httpOnce({ socketPath: proxy.socketPath, port: up.port, path: `http://bench.test:${up.port}/` })));
        viaConnect.push(await time(() => tunnelRequest(proxy, up.port)));
      }
      const d = stats(direct);
      const h = stats(viaHttp);
      const c = stats(viaConnect);
      let flood: ServeFloodResult | null = null;
      if (o.redisUrl) {
        note('egress: corral serve with a run flooding its proxy (36,000 CONNECTs) and another run');
        flood = await serveFlood({ redisUrl: o.redisUrl, rounds: 3 });
      }
      return {
        throughput_mb_s: tp,
        request_ms: { direct: d, proxy_http: h, proxy_connect: c, added_p50_http: round(h.p50 - d.p50), added_p50_connect: round(c.p50 - d.p50) },
        proxy_start_ms: stats(starts),
        serve_flood: flood,
      };
    } finally {
      await proxy.stop();
    }
  } finally {
    await up.close();
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
