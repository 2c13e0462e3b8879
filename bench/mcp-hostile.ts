/**
 * What a hostile MCP server costs the worker: `npx tsx bench/mcp-hostile.ts` (BENCH_MCP_ROUNDS, 5).
 * In one node sandbox (CORRAL_SANDBOX_NODE_IMAGE, else corral/sandbox-node:latest) it starts the test's
 * hostile server (test/fixtures/mcp/hostile-server.js) through corral's MCP client with a 1 MiB frame
 * limit and makes one call per round of each kind, sampling this process's memory every 5 ms:
 *   baseline  a well-behaved answer of 900 KB (below the limit);
 *   big       a 50 MB message (stopped at the 1 MiB limit);
 *   flood     notifications without end (stopped at 5,000).
 * Printed as one JSON line: per kind, the median call time and the peak RSS / heap+external growth
 * over the value before the call, so the hostile kinds read beside the baseline of the same run.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import Docker from 'dockerode';
import { loadConfig } from '../src/config';
import { McpServerDecl } from '../src/domain/mcp';
import { McpConnection } from '../src/mcp/mcp-connection';
import { mcpLimits } from '../src/mcp/mcp-session';
import { DockerSandboxProvider } from '../src/sandbox';

const image = process.env.CORRAL_SANDBOX_NODE_IMAGE || 'corral/sandbox-node:latest';
const rounds = Number(process.env.BENCH_MCP_ROUNDS ?? 5);

async function main(): Promise<void> {
  const config = loadConfig({ CORRAL_SANDBOX_IMAGES: image, CORRAL_MCP_MAX_MESSAGE_KB: '1024' });
  const provider = new DockerSandboxProvider({ docker: new Docker(), config });
  const sb = await provider.acquire({
    runId: `run_bench_mcp_${process.pid}`, workerId: 'bench-mcp', deadline: new Date(Date.now() + 15 * 60_000), image,
    files: { '.mcp/hostile-server.js': readFileSync(resolve(__dirname, '../test/fixtures/mcp/hostile-server.js'), 'utf8') },
    limits: { memoryMb: 512, cpus: 1, pids: 128, workspaceMb: 64 }, egressAllow: [],
  });
  const limits = mcpLimits(config);
  const out: Record<string, { call_ms_p50: number; rss_growth_mb_max: number; heap_external_growth_mb_max: number; outcome: string }> = {};
  try {
    for (const kind of ['baseline', 'big', 'flood'] as const) {
      const ms: number[] = [];
      let rss = 0;
      let heap = 0;
      let outcome = '';
      for (let i = 0; i < rounds; i++) {
        const mode = kind === 'baseline' ? 'large' : kind;
        const conn = await McpConnection.start({ name: mode, decl: McpServerDecl.parse({ command: 'node', args: ['/workspace/.mcp/hostile-server.js', mode] }), sandbox: sb, limits });
        global.gc?.();
        const before = process.memoryUsage();
        let peakRss = before.rss;
        let peakHeap = before.heapUsed + before.external;
        const timer = setInterval(() => {
          const m = process.memoryUsage();
          peakRss = Math.max(peakRss, m.rss);
          peakHeap = Math.max(peakHeap, m.heapUsed + m.external);
        }, 5);
        const t0 = performance.now();
        outcome = await conn.call('go', {}, { timeoutMs: 60_000 }).then((r) => `ok, ${JSON.stringify(r).length} bytes`, (e: Error) => e.message);
        ms.push(performance.now() - t0);
        clearInterval(timer);
        rss = Math.max(rss, peakRss - before.rss);
        heap = Math.max(heap, peakHeap - (before.heapUsed + before.external));
        await conn.close();
      }
      ms.sort((a, b) => a - b);
      out[kind] = { call_ms_p50: Math.round(ms[Math.floor(ms.length / 2)]!), rss_growth_mb_max: +(rss / 1048576).toFixed(1), heap_external_growth_mb_max: +(heap / 1048576).toFixed(1), outcome: outcome.slice(0, 160) };
    }
  } finally {
    await sb.dispose();
  }
  process.stdout.write(`${JSON.stringify({ image, rounds, frame_limit_kb: 1024, ...out })}\n`);
}

void main().catch((err: unknown) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exitCode = 1;
});
