/**
 * The done-means scenario of the egress issue, for the integration test and `npm run bench`: a real
 * `bin/corral serve` process with 2 slots; one run floods its egress proxy from inside its sandbox
 * (8 threads × CONNECT with 15,000-character names, `rounds` × 12,000 attempts, as a done check so
 * no policy decision is involved), while a second, ordinary run (scripted bash calls) is submitted
 * once the flood is under way. Returns what was measured: both outcomes, the serve process's peak
 * RSS (sampled every 50 ms), the attacker's events.jsonl size and event counts, and whether the
 * service still answers /readyz. No assertions here.
 */
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, statSync, mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiRequest } from './api-request';
import { startFakeDecisionsServer, promptText, type Scripted } from './fake-decisions-server';
import { finalTurn } from './fake-openai-chat';
import { loadAgent, loadTask } from './load-agent';
import { startRssSampler } from './load-rss';
import { ROOT } from './load-stack';

export const FLOOD_SCRIPT = `
import socket, sys, threading
N, L, T = int(sys.argv[1]), int(sys.argv[2]), 8
done = [0]
lock = threading.Lock()
def worker(k):
    for i in range(N // T):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.settimeout(5)
            s.connect("/run/corral/egress.sock")
            s.sendall(("CONNECT %s!%d:443 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n" % ("x" * L, k * N + i)).encode())
            try: s.recv(200)
            except Exception: pass
            s.close()
        except Exception:
            pass
        with lock: done[0] += 1
ts = [threading.Thread(target=worker, args=(k,)) for k in range(T)]
[t.start() for t in ts]; [t.join() for t in ts]
print("attempts=%d" % done[0])
`;
import { eventually } from './eventually';

export interface ServeFloodResult {
  attacker: { status: string; reason: string; logBytes: number; events: number; eventTypes: Record<string, number>; aggregatedAttempts: number };
  other: { status: string; reason: string };
  /** The supervisor, the API and the worker of corral serve together. */
  serveRssPeakMb: number;
  processRssPeakMb: { supervisor: number; api: number; worker: number };
  /** The attacker's egress proxy process (its own, outside the worker). */
  proxyRssPeakMb: number | null;
  readyAfter: boolean;
  /** 12,000 per done check that ran (each is one flood). */
  floodAttempts: number;
  wallS: number;
}

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

export async function serveFlood(o: { redisUrl: string; rounds?: number; otherTools?: number; env?: Record<string, string> }): Promise<ServeFloodResult> {
  const t0 = Date.now();
  const rounds = o.rounds ?? 1;
  const agent = loadAgent();
  const model = await startFakeDecisionsServer({
    chat: (body): Scripted => (promptText(body).includes('FLOOD-RUN') ? finalTurn('done (the flood runs as the done check)') : agent(body)),
  });
  const dataDir = mkdtempSync(join(tmpdir(), 'corral-flood-'));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(join(ROOT, 'bin/corral'), ['serve'], {
    env: {
      ...process.env, REDIS_URL: o.redisUrl, CORRAL_QUEUE: `flood-${process.pid}-${Date.now().toString(36)}`, CORRAL_DATA_DIR: dataDir,
      CORRAL_API_HOST: '127.0.0.1', CORRAL_API_PORT: String(port), CORRAL_CONCURRENCY: '2', CORRAL_POLICY_DIR: join(ROOT, 'policies'),
      OPENAI_API_KEY: 'flood-test', OPENAI_BASE_URL: model.baseURL, CORRAL_MODEL: 'fake-agent', CORRAL_CLASSIFIER: 'false', CORRAL_REAP_INTERVAL_S: '3600',
      ...o.env,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-20_000)));
  const rss = startRssSampler(50);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`corral serve did not start in 60 s:\n${log.slice(-2000)}`)), 60_000);
      const check = () => {
        if (log.includes('"component":"serve","msg":"started"')) {
          clearTimeout(timer);
          resolve();
        } else if (child.exitCode !== null) reject(new Error(`corral serve exited: ${log.slice(-2000)}`));
        else setTimeout(check, 50);
      };
      check();
    });
    // corral serve supervises two processes: the API and the worker (their pids in its started line).
    rss.track('serve', child.pid!);
    const pids = (JSON.parse(log.split('\n').find((l) => l.includes('"component":"serve","msg":"started"'))!) as { pids: { api: number; worker: number } }).pids;
    rss.track('api', pids.api);
    rss.track('worker', pids.worker);
    const checks = Array.from({ length: rounds }, () => '- check: `python3 flood.py 12000 15000`').join('\n');
    const a = await apiRequest<{ id: string }>(url, 'POST', '/v1/runs', {
      task: `# Task\nFLOOD-RUN: say done.\n\n# Done means\n${checks}\n`,
      workspace: { files: { 'flood.py': FLOOD_SCRIPT } },
      egress: { allow: ['pypi.org'] },
      limits: { execTimeoutS: 600 },
      budgets: { wallTimeS: 900 },
    });
    if (a.status !== 201) throw new Error(`attacker submit: ${a.status} ${JSON.stringify(a.body)}`);
    // The ordinary run goes in once the flood is under way (the attacker's done check has started).
    await eventually(async () => {
      const ev = await apiRequest<{ events: Array<{ type: string; state?: string; pid?: number }> }>(url, 'GET', `/v1/runs/${a.body.id}/events`);
      const started = ev.body.events?.find((e) => e.type === 'egress.proxy' && e.state === 'started');
      if (started?.pid) rss.track('proxy', started.pid);
      return ev.body.events?.some((e) => e.type === 'egress');
    }, { what: 'the attacker\'s flood to be under way', timeoutMs: 120_000, intervalMs: 50 });
    const b = await apiRequest<{ id: string }>(url, 'POST', '/v1/runs', { task: loadTask(o.otherTools ?? 8), budgets: { wallTimeS: 600 } });
    if (b.status !== 201) throw new Error(`other submit: ${b.status} ${JSON.stringify(b.body)}`);
    const wait = async (id: string) => {
      for (;;) {
        const r = await apiRequest<Record<string, unknown>>(url, 'GET', `/v1/runs/${id}`);
        if (r.body.finishedAt) return r.body as { status: string; reason: string; logPath: string };
        if (child.exitCode !== null) throw new Error(`corral serve died: ${log.slice(-3000)}`);
        await new Promise((res) => setTimeout(res, 200));
      }
    };
    const [ra, rb] = await Promise.all([wait(a.body.id), wait(b.body.id)]);
    const ready = await apiRequest<{ ok: boolean }>(url, 'GET', '/readyz');
    const lines = readFileSync(ra.logPath, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as { type: string; count?: number });
    const types: Record<string, number> = {};
    for (const e of lines) types[e.type] = (types[e.type] ?? 0) + 1;
    return {
      attacker: {
        status: ra.status, reason: ra.reason, logBytes: statSync(ra.logPath).size, events: lines.length, eventTypes: types,
        aggregatedAttempts: lines.filter((e) => e.type === 'egress.aggregate').reduce((n, e) => n + (e.count ?? 0), 0) + (types.egress ?? 0),
      },
      other: { status: rb.status, reason: rb.reason },
      // The three processes together (each one's own peak: an upper bound of their sum at any time).
      serveRssPeakMb: Math.round(((rss.peaks().serve ?? 0) + (rss.peaks().api ?? 0) + (rss.peaks().worker ?? 0)) * 10) / 10,
      processRssPeakMb: { supervisor: rss.peaks().serve ?? 0, api: rss.peaks().api ?? 0, worker: rss.peaks().worker ?? 0 },
      proxyRssPeakMb: rss.stop().proxy ?? null,
      readyAfter: ready.status === 200 && ready.body.ok === true,
      floodAttempts: (types['done.check'] ?? 0) * 12_000,
      wallS: Math.round((Date.now() - t0) / 100) / 10,
    };
  } finally {
    rss.stop();
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    clearTimeout(killer);
    await model.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}
