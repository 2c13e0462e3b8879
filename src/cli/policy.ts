/**
 * `corral policy check|eval`, through the same PolicyGate a run uses.
 *   check [--policy FILE] --tool NAME --args JSON [--task TEXT] [--classifier] → one JSON line
 *     {"decision","final","next","rule","reason","risk"}: `final` says the static answer stands (no
 *     classifier, no human); otherwise `next` says where an ask goes (classifier, or approval —
 *     refused when the run is unattended). With --classifier an ask is sent to it, as in a run.
 *     Exit 0 whatever the decision; exit 2 for bad input.
 *   check --batch [...] — JSON lines {"id","tool","args","task","run"} on stdin (id defaults to the line number), one result
 *     line per input with its id, in order; a bad line gets {"id","error"} and the rest go on. Lines with the same `run`
 *     are one run's calls in order, each judged with the history of the ones before it (files written, links made).
 *   eval [--policy FILE] [--set FILE]... — per-class numbers of the static layer on labelled sets (default: every test/fixtures/policy/*.jsonl).
 * Both run the static layer in analysis threads (analysis-pool.ts) with the configured time and heap
 * bounds, as a worker does: an input built to be expensive is `ask`, not a hung command.
 */
import { createInterface } from 'node:readline';
import { join } from 'node:path';
import { z } from 'zod';
import { loadConfig, type Config } from '../config';
import { Classifier } from '../policy/classifier';
import { emptyHistory, extendHistory } from '../domain/call-history';
import type { CallHistory } from '../domain/gate';
import { defaultLabelledSets, evaluateLabelled, formatEvalReport, loadLabelledSet } from '../policy/labelled-eval';
import { loadPolicy } from '../policy/load-policy';
import { AnalysisPool } from '../policy/analysis-pool';
import { PolicyGate } from '../policy/policy-gate';
import type { Policy } from '../policy/policy-schema';
import { parseArgs, UsageError } from './cli-args';

const HINT = '; see `corral policy --help`\n';
const MAX_LINE = 1_000_000;

const CallSchema = z.object({ tool: z.string().min(1), args: z.record(z.string(), z.unknown()), task: z.string().default('') });
const BatchLine = CallSchema.extend({
  id: z.union([z.string(), z.number()], { message: 'must be a string or a number' }).optional(),
  /** Lines with the same run are one run's calls, in order: each is judged with what the earlier ones wrote and linked. */
  run: z.string().min(1).max(200).optional(),
});

async function makeClassifier(config: Config): Promise<Classifier> {
  if (!config.OPENAI_API_KEY && !config.OPENAI_BASE_URL) throw new UsageError('--classifier needs OPENAI_API_KEY and/or OPENAI_BASE_URL');
  const { default: OpenAI } = await import('openai'); // loaded only when asked for
  const client = new OpenAI({ apiKey: config.OPENAI_API_KEY ?? 'unused', baseURL: config.OPENAI_BASE_URL });
  return new Classifier({
    client, model: config.CORRAL_CLASSIFIER_MODEL ?? config.CORRAL_MODEL, timeoutMs: config.CORRAL_CLASSIFIER_TIMEOUT_MS,
    denyAt: config.CORRAL_RISK_DENY_AT, allowBelow: config.CORRAL_RISK_ALLOW_BELOW, authorizedAllowAt: config.CORRAL_AUTHORIZED_ALLOW_AT,
  });
}

/** Approvals are never reachable from the CLI: an ask that survives the classifier is an unattended refusal. */
const NO_APPROVALS = { request: () => Promise.reject(new Error('no approvals from the command line')) };

/** The analyser a run uses: threads with the configured time and heap bounds, so a hostile input here cannot hang the CLI either. */
function startPool(policy: Policy, config: Config): Promise<AnalysisPool> {
  return AnalysisPool.start({
    policies: new Map([[policy.name, policy]]), threads: config.CORRAL_POLICY_THREADS,
    timeoutMs: config.CORRAL_POLICY_ANALYSIS_TIMEOUT_MS, heapMb: config.CORRAL_POLICY_ANALYSIS_HEAP_MB,
  });
}

async function makeGate(file: string, config: Config, classifier?: Classifier): Promise<{ gate: PolicyGate; name: string; pool: AnalysisPool }> {
  const policy = loadPolicy(file);
  const pool = await startPool(policy, config);
  const policies = new Map([[policy.name, policy]]);
  return { gate: new PolicyGate({ policies, analyzer: pool, approvals: NO_APPROVALS, ...(classifier ? { classifier } : {}) }), name: policy.name, pool };
}

async function checkOne(g: { gate: PolicyGate; name: string }, call: z.infer<typeof CallSchema>, withClassifier: boolean, history?: CallHistory): Promise<{ answer: Record<string, unknown>; adds?: CallHistory }> {
  const a = await g.gate.assess(call, g.name, history);
  const base = { decision: a.static.decision, final: a.final, ...(a.final ? {} : { next: a.next }), rule: a.static.rule, reason: a.static.reason, ...(a.static.risk ? { risk: a.static.risk } : {}) };
  const adds = a.adds ? { adds: a.adds } : {};
  if (a.final || !withClassifier) return { answer: base, ...adds };
  const v = await g.gate.decide({ callId: 'check', ...call }, { runId: 'policy-check', task: call.task, policy: g.name, approvals: false, ...(history ? { history } : {}) });
  return { answer: { ...base, decision: v.decision, static: a.static.decision, classifier: v.classifier, reason: v.reason }, ...adds };
}

async function check(argv: string[], config: Config): Promise<number> {
  const { opts } = parseArgs(argv, { policy: 'string', tool: 'string', args: 'string', task: 'string', batch: 'flag', classifier: 'flag' });
  const classifier = opts.classifier ? await makeClassifier(config) : undefined;
  const g = await makeGate(opts.policy ?? join(config.CORRAL_POLICY_DIR, 'default.yaml'), config, classifier);
  try {
    return await checkWith(g, opts, classifier, config.CORRAL_POLICY_THREADS * 2);
  } finally {
    await g.pool.close();
  }
}

async function checkWith(g: { gate: PolicyGate; name: string }, opts: { args?: string; tool?: string; task?: string; batch?: boolean }, classifier: Classifier | undefined, window: number): Promise<number> {
  if (opts.batch) {
    let bad = false;
    let lineNo = 0;
    // lines are judged a few at a time (the analysis threads work side by side), answered in input order
    const inFlight: Array<Promise<string>> = [];
    const runs = new Map<string, Promise<CallHistory>>();
    const flush = async (keep: number) => { while (inFlight.length > keep) process.stdout.write(await inFlight.shift()!); };
    const answer = async (line: string, n: number): Promise<string> => {
      let id: unknown = n;
      try {
        if (line.length > MAX_LINE) throw new Error(`the line is longer than ${MAX_LINE} characters`);
        const json = JSON.parse(line) as { id?: unknown };
        id = json?.id ?? n;
        const r = BatchLine.safeParse(json);
        if (!r.success) throw new Error(r.error.issues.map((x) => `${x.path.join('.') || '(line)'}: ${x.message}`).join('; '));
        const { run, ...call } = r.data;
        if (run === undefined) return JSON.stringify({ id: r.data.id ?? n, ...(await checkOne(g, call, !!classifier)).answer }) + '\n';
        // one run's lines in order: each waits for the one before it, and sees its history
        const prev = runs.get(run) ?? Promise.resolve(emptyHistory());
        const done = prev.then(async (history) => {
          const c = await checkOne(g, call, !!classifier, history);
          return { c, history: extendHistory(history, c.adds) };
        });
        runs.set(run, done.then((x) => x.history, () => prev));
        return JSON.stringify({ id: r.data.id ?? n, ...(await done).c.answer }) + '\n';
      } catch (e) {
        bad = true;
        return JSON.stringify({ id, error: `bad input: ${(e as Error).message}` }) + '\n';
      }
    };
    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      lineNo++;
      if (!line.trim()) continue;
      inFlight.push(answer(line, lineNo));
      await flush(window);
    }
    await flush(0);
    return bad ? 2 : 0;
  }
  if (opts.tool === undefined || opts.args === undefined) throw new UsageError('--tool and --args are required');
  let args: unknown;
  try {
    args = JSON.parse(opts.args);
  } catch (e) {
    throw new UsageError(`--args is not JSON: ${(e as Error).message}`);
  }
  const r = CallSchema.safeParse({ tool: opts.tool, args, task: opts.task ?? '' });
  if (!r.success) throw new UsageError(`--args must be a JSON object (${r.error.issues[0]?.message})`);
  process.stdout.write(JSON.stringify((await checkOne(g, r.data, !!classifier)).answer) + '\n');
  return 0;
}

async function evaluate(argv: string[], config: Config): Promise<number> {
  const { opts } = parseArgs(argv, { policy: 'string', set: 'list' });
  const policy = loadPolicy(opts.policy ?? join(config.CORRAL_POLICY_DIR, 'default.yaml'));
  const sets = opts.set.length ? opts.set : defaultLabelledSets();
  const cases = sets.flatMap((s) => loadLabelledSet(s));
  const pool = await startPool(policy, config);
  try {
    const t0 = performance.now();
    const r = await evaluateLabelled(policy, cases, (call, history) => pool.analyze(policy.name, call, history), config.CORRAL_POLICY_THREADS);
    const ms = performance.now() - t0;
    process.stdout.write(`policy ${policy.file} · ${sets.join(', ')} · ${r.total} cases (static layer in ${config.CORRAL_POLICY_THREADS} analysis threads, ${Math.round((r.total / ms) * 1000)} calls/s)\n`);
    process.stdout.write(formatEvalReport(r));
    return 0;
  } finally {
    await pool.close();
  }
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  try {
    const config = loadConfig();
    if (sub === 'check') return await check(rest, config);
    if (sub === 'eval') return await evaluate(rest, config);
    process.stderr.write(`corral policy: ${sub ? `unknown subcommand "${sub}"` : 'give a subcommand: check or eval'}${HINT}`);
    return 2;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`corral policy: ${e.message}${HINT}`);
      return 2;
    }
    throw e;
  }
}
