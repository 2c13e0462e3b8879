/**
 * The egress proxy (in-process, on a real unix socket) against a recording upstream on loopback:
 * names map to it through an injected resolver and only its exact address is exempt from the
 * forbidden table. Every smuggling variant is sent as raw bytes; the upstream — a lenient parser —
 * must never see a Host other than the allowed name, nor a second request. Caps, aggregation,
 * wildcard counting and re-checking on every connect are exercised here too. Nothing waits for time:
 * a reply is read until the proxy closes (or until it says what is awaited), "nothing reached the
 * upstream" is checked once every connection on both sides has closed, and the rate caps run on a
 * frozen clock (their token buckets never refill), so they count exactly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEgressEntry, type EgressEntry } from '../../src/domain/egress-rules';
import { forbiddenRangeChecker } from '../../src/sandbox/egress-address';
import { EgressProxy, type EgressCaps, type Resolver } from '../../src/sandbox/egress-proxy';
import type { TallyOut } from '../../src/sandbox/egress-tally';
import { eventually } from '../support/eventually';
import { startRecordingUpstream, type RecordingUpstream } from '../support/recording-upstream';

// Waits are for facts (eventually: 30 s at most, with what it waited for); this bounds the whole test above that.
jest.setTimeout(60_000);

const CAPS: EgressCaps = {
  maxConnections: 64, connectionsPerS: 10_000, requestsPerS: 10_000, maxBytesOut: 1e9, maxBytesIn: 1e9,
  wildcardResolvesPerS: 1000, wildcardMaxNames: 1000, idleTimeoutMs: 30_000,
};

let up: RecordingUpstream;
let dir: string;
let n = 0;
beforeAll(async () => {
  up = await startRecordingUpstream();
  dir = mkdtempSync(join(tmpdir(), 'corral-proxy-test-'));
});
afterAll(async () => {
  await up.close();
  rmSync(dir, { recursive: true, force: true });
});

interface Started {
  proxy: EgressProxy;
  sock: string;
  out: TallyOut[];
  resolved: string[];
}

async function startProxy(o: { allow?: string[]; caps?: Partial<EgressCaps>; resolve?: Resolver; now?: () => number } = {}): Promise<Started> {
  const out: TallyOut[] = [];
  const resolved: string[] = [];
  const names: Record<string, string[]> = { 'allowed.test': ['127.0.0.1'], 'other.allowed.test': ['127.0.0.1'], 'private.allowed.test': ['10.0.0.7'], 'mapped.allowed.test': ['::ffff:127.0.0.1'] };
  const proxy = new EgressProxy({
    allow: (o.allow ?? [`allowed.test:${up.port}`, `*.allowed.test:${up.port}`, '*.wild.test']).map((a) => parseEgressEntry(a) as EgressEntry),
    resolve: o.resolve ?? (async (h) => {
      resolved.push(h);
      const a = names[h] ?? (h.endsWith('.wild.test') ? ['127.0.0.1'] : undefined);
      if (!a) throw new Error('ENOTFOUND');
      return a;
    }),
    forbidden: forbiddenRangeChecker([], ['127.0.0.1']),
    caps: { ...CAPS, ...o.caps },
    report: (m) => out.push(m),
    ...(o.now ? { now: o.now } : {}),
  });
  const sock = join(dir, `p${n++}.sock`);
  await proxy.listen(sock);
  return { proxy, sock, out, resolved };
}

/**
 * Writes raw bytes to the proxy and returns everything it answered once it closes — or, for a
 * connection the proxy keeps open (an established tunnel), as soon as the answer matches `until`.
 * The 30 s timer only bounds a proxy that never answers (the test then fails on what it got).
 */
function raw(sock: string, bytes: string, until?: RegExp): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(sock, () => s.write(bytes));
    let got = '';
    s.on('data', (c) => {
      got += c.toString('latin1');
      if (until?.test(got)) s.destroy();
    });
    s.on('error', () => undefined);
    const t = setTimeout(() => s.destroy(), 30_000); // a bound on a proxy that never answers, not a wait
    s.on('close', () => {
      clearTimeout(t);
      resolve(got);
    });
  });
}

/** Every connection closed on both sides: whatever reached the upstream is recorded by then. */
const quiet = (p: Started) => eventually(() => ({ ...p.proxy.openConnections, upstream: up.openConnections }), {
  what: 'the proxy and the upstream to have no open connection', until: (c) => c.clients === 0 && c.upstreams === 0 && c.upstream === 0,
});
/** The clock of a proxy whose rate caps must count exactly: frozen, so no bucket refills during the test. */
const frozen = () => 0;

describe('smuggling: the upstream never sees a foreign Host or a second request', () => {
  let p: Started;
  beforeAll(async () => (p = await startProxy()));
  afterAll(() => p.proxy.close());
  beforeEach(() => up.reset());

  const P = () => up.port;
  const cases: Array<[string, () => string, RegExp]> = [
    ['a ?@ in the authority (URL host evil.test, regex host allowed.test)', () => `GET http://evil.test:${P()}?@allowed.test/ HTTP/1.1\r\nHost: evil.test:${P()}\r\n\r\n`, /403[\s\S]*evil\.test is not on the run's egress allowlist/],
    ['userinfo in the URL', () => `GET http://allowed.test:${P()}@evil.test/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\n`, /400[\s\S]*port is not a decimal|400/],
    ['a percent-encoded host', () => `GET http://allowed%2etest:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\n`, /400[\s\S]*characters other than/],
    ['a backslash before @', () => `GET http://allowed.test:${P()}\\@evil.test/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\n`, /^HTTP\/1\.1 40/],
    ['a Host header that differs from the URL', () => `GET http://allowed.test:${P()}/ HTTP/1.1\r\nHost: evil.test\r\n\r\n`, /400[\s\S]*Host header \(evil\.test\) is not the URL's host/],
    ['two Host headers', () => `GET http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nHost: evil.test\r\n\r\n`, /400[\s\S]*2 Host headers/],
    ['no Host header', () => `GET http://allowed.test:${P()}/ HTTP/1.1\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['Transfer-Encoding with Content-Length', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nContent-Length: 50\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['Transfer-Encoding not ending in chunked', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['Transfer-Encoding: gzip alone', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: gzip\r\n\r\nGET / HTTP/1.1\r\nHost: evil.test\r\n\r\n`, /^HTTP\/1\.1 400|^$/],
    ['two Transfer-Encoding headers', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['an obs-fold continuation line', () => `GET http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nX-A: 1\r\n Host: evil.test\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['a space before the colon of Transfer-Encoding', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding : chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['two Content-Length headers', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nContent-Length: 1\r\nContent-Length: 40\r\n\r\nxGET http://evil.test/ HTTP/1.1\r\n\r\n`, /^HTTP\/1\.1 400/],
    ['a Content-Length with a sign', () => `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nContent-Length: +4\r\n\r\nxxxx`, /^HTTP\/1\.1 400/],
    ['Transfer-Encoding in an HTTP/1.0 request', () => `POST http://allowed.test:${P()}/ HTTP/1.0\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`, /400[\s\S]*Transfer-Encoding in an HTTP\/1\.0 request/],
    ['bare LF line endings', () => `GET http://allowed.test:${P()}/ HTTP/1.1\nHost: allowed.test:${P()}\n\nGET http://evil.test/ HTTP/1.1\nHost: evil.test\n\n`, /^HTTP\/1\.1 400/],
    ['an origin-form request line', () => `GET / HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\n`, /400[\s\S]*origin-form/],
    ['an https:// URL in plain HTTP', () => `GET https://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\n`, /400[\s\S]*only absolute http/],
    ['a decimal IP literal', () => `GET http://2130706433:${P()}/ HTTP/1.1\r\nHost: 2130706433:${P()}\r\n\r\n`, /403[\s\S]*IP address literal \(= 127\.0\.0\.1\)/],
    ['an IPv6 literal', () => `GET http://[::1]:${P()}/ HTTP/1.1\r\nHost: [::1]:${P()}\r\n\r\n`, /403[\s\S]*IP address literal/],
    ['an upgrade to WebSocket', () => `GET http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`, /^HTTP\/1\.1 403/],
  ];
  test.each(cases)('%s is refused and nothing reaches the upstream', async (_name, bytes, answer) => {
    const got = await raw(p.sock, bytes());
    expect(got).toMatch(answer);
    await quiet(p);
    expect(up.requests).toEqual([]);
    expect(up.raw.join('')).toBe('');
  });

  test('a bad chunk size after the headers: the upstream sees at most the one request, cut, never a second', async () => {
    await raw(p.sock, `POST http://allowed.test:${P()}/ HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n0\r\n\r\n`);
    await quiet(p);
    expect(up.requests.length).toBeLessThanOrEqual(1);
    for (const r of up.requests) expect(r.hosts).toEqual([`allowed.test:${P()}`]);
    expect(up.raw.join('')).not.toContain('evil');
  });

  test('a GET with a chunked body carrying a second request: forwarded re-framed, the upstream parses one request', async () => {
    const inner = `GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n`;
    const body = `${Buffer.byteLength(inner).toString(16)}\r\n${inner}\r\n0\r\n\r\n`;
    const got = await raw(p.sock, `GET http://allowed.test:${P()}/x HTTP/1.1\r\nHost: allowed.test:${P()}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${body}`);
    expect(got).toMatch(/^HTTP\/1\.1 200[\s\S]*upstream-ok GET \/x/);
    await quiet(p);
    expect(up.requests).toEqual([{ method: 'GET', url: '/x', hosts: [`allowed.test:${P()}`], bodyBytes: Buffer.byteLength(inner) }]);
  });

  test('a GET with a Content-Length body: the upstream gets the same length, one request', async () => {
    const inner = `GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n`;
    await raw(p.sock, `GET http://allowed.test:${P()}/cl HTTP/1.1\r\nHost: allowed.test:${P()}\r\nContent-Length: ${inner.length}\r\nConnection: close\r\n\r\n${inner}`);
    await quiet(p);
    expect(up.requests).toEqual([{ method: 'GET', url: '/cl', hosts: [`allowed.test:${P()}`], bodyBytes: inner.length }]);
  });

  test('pipelined requests are checked one by one: the second, to evil.test, is refused', async () => {
    const got = await raw(p.sock, `GET http://allowed.test:${P()}/1 HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\nGET http://evil.test:${P()}/2 HTTP/1.1\r\nHost: evil.test:${P()}\r\n\r\n`);
    expect(got).toMatch(/upstream-ok GET \/1[\s\S]*403[\s\S]*evil\.test is not on the run's egress allowlist/);
    await quiet(p);
    expect(up.requests.map((r) => [r.url, r.hosts])).toEqual([['/1', [`allowed.test:${P()}`]]]);
  });

  test('case, hop-by-hop and Connection-named headers: the upstream sees the canonical Host and none of them', async () => {
    await raw(p.sock, `GET http://ALLOWED.test:${P()}/c HTTP/1.1\r\nHost: Allowed.Test:${P()}\r\nConnection: close, X-Secret\r\nX-Secret: s3cret\r\nProxy-Authorization: Basic Zm9v\r\nKeep-Alive: 5\r\n\r\n`);
    await quiet(p);
    expect(up.requests).toEqual([{ method: 'GET', url: '/c', hosts: [`allowed.test:${P()}`], bodyBytes: 0 }]);
    expect(up.raw.join('')).not.toMatch(/s3cret|Proxy-Authorization|Keep-Alive/i);
  });

  test('CONNECT: an allowed name tunnels to the upstream; a bad target, a literal, a wrong port and an unlisted name do not', async () => {
    const ok = await raw(p.sock, `CONNECT allowed.test:${P()} HTTP/1.1\r\nHost: allowed.test:${P()}\r\n\r\nGET /t HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n`);
    expect(ok).toMatch(/^HTTP\/1\.1 200 Connection Established[\s\S]*upstream-ok GET \/t/);
    for (const [target, why] of [
      ['allowed.test', /no port/], ['allowed.test:443', /port 443 is not allowed/], ['0x7f.1:443', /IP address literal/], ['[::ffff:127.0.0.1]:443', /IP address literal/],
      ['evil.test:443', /not on the run's egress allowlist/], [`allowed.test:${P()}@evil.test:443`, /port is not a decimal/], ['private.allowed.test:' + P(), /10\.0\.0\.7, a private-use address \(10\.0\.0\.0\/8\); an operator can allow it with CORRAL_EGRESS_INTERNAL_HOSTS=private\.allowed\.test=10\.0\.0\.7/],
      [`mapped.allowed.test:${P()}`, /::ffff:127\.0\.0\.1, an IPv4-mapped address \(::ffff:0:0\/96\)/],
    ] as const) {
      expect(await raw(p.sock, `CONNECT ${target} HTTP/1.1\r\nHost: x\r\n\r\n`)).toMatch(why);
    }
    await quiet(p);
    expect(up.requests.map((r) => r.url)).toEqual(['/t']);
  });

  test('a 15,000-character CONNECT name is refused by the parser (431), without being resolved', async () => {
    const before = p.resolved.length;
    const got = await raw(p.sock, `CONNECT ${'x'.repeat(15_000)}!1:443 HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(got).toMatch(/^HTTP\/1\.1 431/);
    expect(p.resolved.length).toBe(before);
  });
});

describe('caps and aggregation', () => {
  test('1,000 denials: five reported one by one, the rest as aggregates that add up', async () => {
    const p = await startProxy();
    try {
      for (let b = 0; b < 20; b++) await Promise.all(Array.from({ length: 50 }, (_, i) => raw(p.sock, `CONNECT bad!name${b * 50 + i}:443 HTTP/1.1\r\nHost: x\r\n\r\n`)));
      p.proxy.tally.flush();
      const single = p.out.filter((m) => m.kind === 'attempt');
      const agg = p.out.filter((m): m is Extract<TallyOut, { kind: 'aggregate' }> => m.kind === 'aggregate');
      expect(single.length).toBe(5);
      expect(single.length + agg.reduce((a, m) => a + m.count, 0)).toBe(1000);
      expect(agg[0]!.reason).toMatch(/^denied 995 more × CONNECT to malformed targets/);
      expect(p.proxy.tally.stats.byCode.invalid_target).toBe(1000);
    } finally {
      await p.proxy.close();
    }
  });

  test('concurrent connections: past the cap new ones are dropped, recorded once, and the run recovers when they close', async () => {
    const p = await startProxy({ caps: { maxConnections: 5 } });
    try {
      const held = await Promise.all(Array.from({ length: 5 }, () => new Promise<import('node:net').Socket>((r) => { const s = connect(p.sock, () => r(s)); })));
      await eventually(() => p.proxy.openConnections.clients, { what: 'the proxy to hold the 5 connections', until: (n) => n === 5 });
      const refused = await Promise.all(Array.from({ length: 20 }, () => raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)));
      expect(refused.every((r) => r === '')).toBe(true);
      p.proxy.tally.flush();
      const caps = p.out.filter((m) => m.kind === 'attempt' && m.attempt.code === 'cap_connections');
      expect(caps.length).toBe(1);
      expect(p.proxy.tally.stats.byCode.cap_connections).toBe(20);
      for (const s of held) s.destroy();
      await quiet(p);
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`, /\r\n\r\n/)).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      await p.proxy.close();
    }
  });

  test('new connections per second: a burst past the rate is refused and counted', async () => {
    const p = await startProxy({ caps: { connectionsPerS: 5 }, now: frozen });
    try {
      // A burst of 4 × the rate (20) passes the bucket (and is refused by the allowlist); the other 40 by the rate.
      const answers = await Promise.all(Array.from({ length: 60 }, () => raw(p.sock, `CONNECT nope.test:443 HTTP/1.1\r\n\r\n`)));
      expect(answers.filter((a) => a.startsWith('HTTP/1.1 403')).length).toBe(20);
      expect(answers.filter((a) => a === '').length).toBe(40);
      expect(p.proxy.tally.stats.byCode.cap_rate).toBe(40);
    } finally {
      await p.proxy.close();
    }
  });

  test('plain-HTTP request rate: past it, 429', async () => {
    const p = await startProxy({ caps: { requestsPerS: 2 }, now: frozen });
    try {
      const reqs = Array.from({ length: 12 }, (_, i) => `GET http://allowed.test:${up.port}/${i} HTTP/1.1\r\nHost: allowed.test:${up.port}\r\n\r\n`).join('');
      const got = await raw(p.sock, reqs);
      // the burst (4 × the rate) is answered; the 9th gets the 429, which closes the connection
      expect(got.match(/upstream-ok GET/g)).toHaveLength(8);
      expect(got).toMatch(/429 Too Many Requests[\s\S]*CORRAL_EGRESS_REQUESTS_PER_S/);
      expect(p.proxy.tally.stats.byCode.cap_requests).toBe(4); // the 4 pipelined behind it are refused too
    } finally {
      await p.proxy.close();
    }
  });

  test('bytes out: a tunnel past the cap is cut, later tunnels are refused', async () => {
    const p = await startProxy({ caps: { maxBytesOut: 100_000 } });
    try {
      const big = `POST /big HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 500000\r\n\r\n${'x'.repeat(500_000)}`;
      await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n${big}`);
      expect(p.proxy.tally.stats.byCode.cap_bytes_out).toBeGreaterThanOrEqual(1);
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/403[\s\S]*CORRAL_EGRESS_MAX_BYTES_OUT/);
    } finally {
      await p.proxy.close();
    }
  });
});

describe('names and addresses', () => {
  test('wildcards: distinct names are counted, rate-limited and capped; only allowed names are resolved', async () => {
    let t = 0; // the proxy's clock: the resolution bucket refills only when the test moves it
    const p = await startProxy({ caps: { wildcardResolvesPerS: 1, wildcardMaxNames: 6 }, now: () => t });
    try {
      const attempt = (i: number) => raw(p.sock, `CONNECT secret-${i}.wild.test:443 HTTP/1.1\r\n\r\n`, /\r\n\r\n/);
      for (let i = 0; i < 10; i++) await attempt(i); // the burst (4 × the rate) resolves; 6 are over the rate
      t += 10_000;
      for (let i = 10; i < 20; i++) await attempt(i); // 2 more reach the 6 distinct names; 8 are over that cap
      await raw(p.sock, 'CONNECT secret-data.evil.test:443 HTTP/1.1\r\n\r\n');
      const st = p.proxy.tally.stats;
      expect(p.resolved.every((h) => h.endsWith('.wild.test'))).toBe(true);
      expect(p.resolved).toHaveLength(6);
      expect(st.wildcardNames['*.wild.test']).toBe(6);
      expect(st.wildcardRefused).toBe(14);
      expect(st.byCode).toMatchObject({ wildcard_rate: 6, wildcard_names: 8 });
    } finally {
      await p.proxy.close();
    }
  });

  test('rebinding: the name is resolved and checked on every connect', async () => {
    let calls = 0;
    const p = await startProxy({ allow: [`allowed.test:${up.port}`], resolve: async () => (++calls === 1 ? ['127.0.0.1'] : ['169.254.169.254']) });
    try {
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`, /\r\n\r\n/)).toMatch(/^HTTP\/1\.1 200/);
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/403[\s\S]*169\.254\.169\.254, a link-local \(cloud metadata\) address \(169\.254\.0\.0\/16\)/);
    } finally {
      await p.proxy.close();
    }
  });

  test('a client that leaves while its name resolves gets no upstream connection', async () => {
    const resolving: Array<() => void> = []; // names being resolved, answered when the test says so
    const p = await startProxy({ allow: [`allowed.test:${up.port}`], resolve: () => new Promise((r) => resolving.push(() => r(['127.0.0.1']))) });
    up.reset();
    try {
      const clients = Array.from({ length: 20 }, () => {
        const s = connect(p.sock, () => s.write(`CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`));
        s.on('error', () => undefined);
        return s;
      });
      await eventually(() => resolving.length, { what: 'the 20 names to be resolving', until: (n) => n === 20 });
      for (const s of clients) s.destroy();
      await eventually(() => p.proxy.openConnections.clients, { what: 'the proxy to see the 20 clients leave (and close their sockets)', until: (n) => n === 0 });
      for (const answer of resolving) answer();
      await new Promise((r) => setImmediate(r)); // every decision's continuation (microtasks) has run by the next macrotask
      expect(p.proxy.openConnections.upstreams).toBe(0); // an upstream connect would be counted from the moment it is made
      await quiet(p);
      expect(up.raw).toEqual([]);
    } finally {
      await p.proxy.close();
    }
  });

  test('one forbidden address among several refuses the name', async () => {
    const p = await startProxy({ allow: [`allowed.test:${up.port}`], resolve: async () => ['127.0.0.1', '64:ff9b:1::a00:1'] });
    try {
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/403[\s\S]*64:ff9b:1::\/48/);
    } finally {
      await p.proxy.close();
    }
  });

  test('tool-call attribution: attempts carry the call that was current when they came in', async () => {
    const p = await startProxy();
    try {
      p.proxy.setCall('call_1');
      await raw(p.sock, 'CONNECT nope.test:443 HTTP/1.1\r\n\r\n');
      p.proxy.setCall(null);
      await raw(p.sock, 'CONNECT nope2.test:443 HTTP/1.1\r\n\r\n');
      const a = p.out.filter((m): m is Extract<TallyOut, { kind: 'attempt' }> => m.kind === 'attempt').map((m) => [m.attempt.host, m.attempt.callId]);
      expect(a).toEqual([['nope.test', 'call_1'], ['nope2.test', null]]);
    } finally {
      await p.proxy.close();
    }
  });
});

describe('narrowing (a setup phase ends)', () => {
  const entries = (list: string[]) => list.map((a) => parseEgressEntry(a) as EgressEntry);

  test('an open tunnel, a keep-alive client and an idle connection are closed; later attempts get the new list', async () => {
    const p = await startProxy({ allow: [`allowed.test:${up.port}`] });
    try {
      // A tunnel opened during setup, held for later use.
      const tunnel = connect(p.sock);
      let tunnelGot = '';
      tunnel.on('data', (c) => (tunnelGot += c.toString('latin1')));
      tunnel.on('error', () => undefined);
      const tunnelClosed = new Promise((r) => tunnel.on('close', r));
      tunnel.write(`CONNECT allowed.test:${up.port} HTTP/1.1\r\nHost: allowed.test:${up.port}\r\n\r\n`);
      // A client that has sent nothing yet (it would send its request after the narrowing).
      const idle = connect(p.sock);
      idle.on('error', () => undefined);
      const idleClosed = new Promise((r) => idle.on('close', r));
      await eventually(() => ({ tunnelGot, ...p.proxy.openConnections }), {
        what: 'the tunnel to be established and the idle client to be accepted', until: (c) => /^HTTP\/1\.1 200/.test(c.tunnelGot) && c.clients === 2,
      });
      up.reset();
      expect(p.proxy.narrow([])).toBeGreaterThanOrEqual(2);
      await Promise.all([tunnelClosed, idleClosed]);
      expect(tunnel.destroyed || tunnel.writableEnded).toBe(true);
      // The same target now: refused by the new (empty) list, and the upstream never hears of it.
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403[\s\S]*not on the run's egress allowlist/);
      expect(await raw(p.sock, `GET http://allowed.test:${up.port}/x HTTP/1.1\r\nHost: allowed.test:${up.port}\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/);
      expect(up.raw).toEqual([]);
    } finally {
      await p.proxy.close();
    }
  });

  test('a decision still resolving its name when the list narrows is taken again under the new list', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const p = await startProxy({ allow: [`allowed.test:${up.port}`], resolve: async () => { await gate; return ['127.0.0.1']; } });
    up.reset();
    try {
      const pending = p.proxy.decide('allowed.test', up.port, 'connect');
      p.proxy.narrow(entries([`other.allowed.test:${up.port}`]));
      release();
      expect(await pending).toMatchObject({ ok: false, code: 'not_allowed' });
      expect(up.raw).toEqual([]);
    } finally {
      await p.proxy.close();
    }
  });

  test('the byte caps are the run\'s: what setup sent counts after the narrowing too (no fresh allowance per phase)', async () => {
    const p = await startProxy({ caps: { maxBytesOut: 100_000 }, allow: [`allowed.test:${up.port}`] });
    try {
      const body = (n: number) => `POST /b HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: ${n}\r\n\r\n${'x'.repeat(n)}`;
      await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n${body(80_000)}`, /upstream-ok POST/);
      expect(p.proxy.tally.stats.byCode.cap_bytes_out ?? 0).toBe(0);
      p.proxy.narrow(entries([`allowed.test:${up.port}`]));
      // 80 kB in setup + 40 kB now: over the run's 100 kB
      // the tunnel is cut past the cap (the connection closes) — or, were the cap per phase, the upstream answers
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n${body(40_000)}`, /upstream-ok POST/)).not.toMatch(/upstream-ok/);
      expect(p.proxy.tally.stats.bytesOut).toBeGreaterThan(100_000);
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/403[\s\S]*CORRAL_EGRESS_MAX_BYTES_OUT/);
    } finally {
      await p.proxy.close();
    }
  });

  test('narrowing can also widen to the agent\'s own list (setup had none): the new entries work at once', async () => {
    const p = await startProxy({ allow: [] });
    try {
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`)).toMatch(/^HTTP\/1\.1 403/);
      p.proxy.narrow(entries([`allowed.test:${up.port}`]));
      expect(await raw(p.sock, `CONNECT allowed.test:${up.port} HTTP/1.1\r\n\r\n`, /\r\n\r\n/)).toMatch(/^HTTP\/1\.1 200/);
    } finally {
      await p.proxy.close();
    }
  });
});
