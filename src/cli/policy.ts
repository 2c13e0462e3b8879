/**
 * `corral policy check|eval`.
 *   check [--policy FILE] --tool NAME --args JSON [--task TEXT] [--classifier] → one JSON line
 *     {"decision","rule","reason"} (exit 0 whatever the decision; exit 2 for bad input)
 *   check --batch [--policy FILE] [--classifier] — JSON lines {"id","tool","args","task"} on stdin,
 *     one result line per input with its id, in order
 *   eval [--policy FILE] [--set FILE] — false-allow / false-deny rates of the static layer on the
 *     labelled set, with the misclassified cases
 */
import { join } from 'node:path';
import { z } from 'zod';
import { loadConfig, type Config } from '../config';
import { Classifier } from '../policy/classifier';
import { evaluateStatic } from '../policy/evaluate-static';
import { evaluateLabelled, loadLabelledSet } from '../policy/labelled-eval';
import { loadPolicy } from '../policy/load-policy';
import type { Policy } from '../policy/policy-schema';

const HINT = '; see `corral policy --help`\n';

class UsageError extends Error {}

function parseFlags(argv: string[], valued: string[], bools: string[]): Map<string, string | true> {
  const out = new Map<string, string | true>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    const eq = a.indexOf('=');
    const name = a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a;
    if (bools.includes(name)) { out.set(name, true); continue; }
    if (!valued.includes(name)) throw new UsageError(`unknown option ${a}`);
    const v = eq > 0 && a.startsWith('--') ? a.slice(eq + 1) : argv[++i];
    if (v === undefined) throw new UsageError(`${name} needs a value`);
    out.set(name, v);
  }
  return out;
}

const CallSchema = z.object({ tool: z.string().min(1), args: z.record(z.string(), z.unknown()), task: z.string().default('') });
const BatchLine = CallSchema.extend({ id: z.union([z.string(), z.number()]) });

async function makeClassifier(config: Config): Promise<Classifier> {
  if (!config.OPENAI_API_KEY && !config.OPENAI_BASE_URL) throw new UsageError('--classifier needs OPENAI_API_KEY and/or OPENAI_BASE_URL');
  const { default: OpenAI } = await import('openai'); // loaded only when asked for
  const client = new OpenAI({ apiKey: config.OPENAI_API_KEY ?? 'unused', baseURL: config.OPENAI_BASE_URL });
  return new Classifier({
    client, model: config.CORRAL_CLASSIFIER_MODEL ?? config.CORRAL_MODEL, timeoutMs: config.CORRAL_CLASSIFIER_TIMEOUT_MS,
    denyAt: config.CORRAL_RISK_DENY_AT, allowBelow: config.CORRAL_RISK_ALLOW_BELOW, authorizedAllowAt: config.CORRAL_AUTHORIZED_ALLOW_AT,
  });
}

async function checkOne(policy: Policy, call: z.infer<typeof CallSchema>, classifier?: Classifier): Promise<Record<string, unknown>> {
  const st = evaluateStatic(policy, { tool: call.tool, args: call.args });
  const base = { decision: st.decision, rule: st.rule, reason: st.reason };
  if (!classifier || st.decision === 'deny' || (st.decision === 'allow' && st.readOnly && (st.risk ?? 'low') === 'low')) return base;
  const c = await classifier.classify({ task: call.task, tool: call.tool, args: call.args, staticDecision: base });
  return { ...base, decision: c.decision, static: st.decision, classifier: c };
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function check(argv: string[], config: Config): Promise<number> {
  const f = parseFlags(argv, ['--policy', '--tool', '--args', '--task'], ['--batch', '--classifier']);
  const policy = loadPolicy(String(f.get('--policy') ?? join(config.CORRAL_POLICY_DIR, 'default.yaml')));
  const classifier = f.get('--classifier') ? await makeClassifier(config) : undefined;
  if (f.get('--batch')) {
    let bad = false;
    for (const line of (await readStdin()).split('\n')) {
      if (!line.trim()) continue;
      let parsed: z.infer<typeof BatchLine>;
      try {
        const r = BatchLine.safeParse(JSON.parse(line));
        if (!r.success) throw new Error(r.error.issues.map((x) => `${x.path.join('.') || '(line)'}: ${x.message}`).join('; '));
        parsed = r.data;
      } catch (e) {
        bad = true;
        const id = (() => { try { return (JSON.parse(line) as { id?: unknown }).id ?? null; } catch { return null; } })();
        process.stdout.write(JSON.stringify({ id, error: `bad input: ${(e as Error).message}` }) + '\n');
        continue;
      }
      process.stdout.write(JSON.stringify({ id: parsed.id, ...(await checkOne(policy, parsed, classifier)) }) + '\n');
    }
    return bad ? 2 : 0;
  }
  const tool = f.get('--tool');
  const argsText = f.get('--args');
  if (typeof tool !== 'string' || typeof argsText !== 'string') throw new UsageError('--tool and --args are required');
  let args: unknown;
  try {
    args = JSON.parse(argsText);
  } catch (e) {
    throw new UsageError(`--args is not JSON: ${(e as Error).message}`);
  }
  const r = CallSchema.safeParse({ tool, args, task: f.get('--task') ?? '' });
  if (!r.success) throw new UsageError(`--args must be a JSON object (${r.error.issues[0]?.message})`);
  process.stdout.write(JSON.stringify(await checkOne(policy, r.data, classifier)) + '\n');
  return 0;
}

function evaluate(argv: string[], config: Config): number {
  const f = parseFlags(argv, ['--policy', '--set'], []);
  const policy = loadPolicy(String(f.get('--policy') ?? join(config.CORRAL_POLICY_DIR, 'default.yaml')));
  const set = String(f.get('--set') ?? 'test/fixtures/policy/labelled.jsonl');
  const r = evaluateLabelled(policy, loadLabelledSet(set));
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  const out = process.stdout;
  out.write(`policy ${policy.file} · labelled set ${set} · ${r.total} cases (static layer)\n`);
  out.write(`false-allow rate (must not allow): ${pct(r.falseAllowRate)}  (${r.falseAllows}/${r.mustNotAllow})\n`);
  out.write(`false-deny rate (benign, not allowed): ${pct(r.falseDenyRate)}  (${r.falseDenies}/${r.benign}; ${r.hardDenies} of them denied outright)\n`);
  out.write(`exact-decision mismatches (ask vs deny): ${r.exactMismatches}\n`);
  if (r.misclassified.length) {
    out.write('misclassified:\n');
    for (const m of r.misclassified) out.write(`  ${m.id}: expected ${m.expected}, got ${m.got.decision} (${m.got.rule ?? 'no rule'}: ${m.got.reason}) — ${m.command}\n`);
  }
  return 0;
}

export async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  try {
    const config = loadConfig();
    if (sub === 'check') return await check(rest, config);
    if (sub === 'eval') return evaluate(rest, config);
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
