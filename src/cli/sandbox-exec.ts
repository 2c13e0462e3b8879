/**
 * `corral sandbox exec [--allow-domain D]... [--timeout-s N] [--memory-mb M] [--isolation runc|gvisor] -- CMD [ARGS...]`
 * One fresh sandbox with exactly the production spec (same provider, same limits resolution, same
 * exec path the tools use); removes the sandbox, then prints one JSON object (the ExecResult fields,
 * plus the egress attempts and summaries — counted repeats, the proxy's start and stop, the totals —
 * when an allowlist was given). Exit 0 when the sandbox worked, whatever the command's exit code; 2 on
 * bad flags; 1 when the sandbox itself failed — when it died during the command (out of memory under
 * gVisor, its deadline), the JSON says how (`sandboxDied`, `oomKilled`).
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { loadConfig } from '../config';
import { CorralError } from '../domain/errors';
import { EgressPattern } from '../domain/run-spec';
import type { EgressAttempt, EgressSummary } from '../domain/sandbox';
import { createSandboxProvider, resolveLimits } from '../sandbox';

const HINT = '; see `corral sandbox --help`\n';

interface Parsed {
  allow: string[];
  timeoutS?: number;
  memoryMb?: number;
  isolation?: 'runc' | 'gvisor';
  argv: string[];
}

export function parseSandboxExecArgs(argv: string[]): Parsed | string {
  if (argv[0] !== 'exec') return `unknown sandbox subcommand "${argv[0] ?? ''}"`;
  const out: Parsed = { allow: [], argv: [] };
  let i = 1;
  const num = (flag: string, v: string | undefined): number | string => {
    const n = Number(v);
    return v !== undefined && /^\d+$/.test(v) && n > 0 ? n : `${flag} needs a positive integer, got "${v ?? ''}"`;
  };
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') break;
    const [flag, inline] = a.startsWith('--') && a.includes('=') ? [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)] : [a, undefined];
    const value = () => inline ?? argv[++i];
    if (flag === '--allow-domain') {
      const r = EgressPattern.safeParse(value() ?? '');
      if (!r.success) return `--allow-domain: ${r.error.issues.map((x) => x.message).join('; ')}`;
      out.allow.push(r.data);
    } else if (flag === '--timeout-s' || flag === '--memory-mb') {
      const n = num(flag, value());
      if (typeof n === 'string') return n;
      if (flag === '--timeout-s') out.timeoutS = n;
      else out.memoryMb = n;
    } else if (flag === '--isolation') {
      const v = value();
      if (v !== 'runc' && v !== 'gvisor') return `--isolation must be runc or gvisor, got "${v ?? ''}"`;
      out.isolation = v;
    } else if (a.startsWith('-')) return `unknown flag "${a}"`;
    else return `the command goes after "--" (got "${a}")`;
  }
  out.argv = argv.slice(i + 1);
  if (argv[i] !== '--' || out.argv.length === 0) return 'the command goes after "--"';
  return out;
}

export async function run(argv: string[]): Promise<number> {
  const parsed = parseSandboxExecArgs(argv);
  if (typeof parsed === 'string') {
    process.stderr.write(`corral sandbox: ${parsed}${HINT}`);
    return 2;
  }
  const config = loadConfig();
  let limits;
  try {
    limits = resolveLimits({ memoryMb: parsed.memoryMb, execTimeoutS: parsed.timeoutS, isolation: parsed.isolation }, config);
  } catch (err) {
    process.stderr.write(`corral sandbox: ${(err as Error).message}${HINT}`);
    return 2;
  }
  const provider = createSandboxProvider(config);
  const egress: EgressAttempt[] = [];
  const egressSummary: EgressSummary[] = [];
  const ac = new AbortController();
  const onSig = () => ac.abort();
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);
  const runId = `run_cli_${randomBytes(4).toString('hex')}`;
  const sandbox = await provider.acquire({
    runId,
    workerId: config.CORRAL_WORKER_ID ?? `cli-${hostname()}-${process.pid}`,
    deadline: new Date(Date.now() + (limits.execTimeoutS + 60) * 1000),
    files: {},
    limits,
    egressAllow: parsed.allow,
    onEgress: (a) => egress.push(a),
    onEgressSummary: (s) => egressSummary.push(s),
    signal: ac.signal,
  });
  let result;
  try {
    result = await sandbox.exec({
      argv: parsed.argv,
      timeoutMs: limits.execTimeoutS * 1000,
      maxOutputBytes: config.CORRAL_MAX_OUTPUT_BYTES,
      signal: ac.signal,
    });
  } catch (err) {
    if (err instanceof CorralError) {
      const d = err.details;
      if (d && typeof d.oomKilled === 'boolean' && typeof d.cause === 'string') {
        // The sandbox died during the command: say how, in the same shape as a result.
        process.stdout.write(`${JSON.stringify({ exitCode: d.exitCode ?? null, timedOut: false, oomKilled: d.oomKilled, sandboxDied: d.cause, durationMs: d.durationMs ?? null, error: err.message }, null, 2)}\n`);
      }
      process.stderr.write(`corral sandbox: [${err.code}] ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    process.off('SIGINT', onSig);
    process.off('SIGTERM', onSig);
    await sandbox.dispose();
  }
  // After dispose: the egress proxy's last counted repeats and its totals are in by then.
  process.stdout.write(`${JSON.stringify(parsed.allow.length ? { ...result, egress, egressSummary } : result, null, 2)}\n`);
  return 0;
}
