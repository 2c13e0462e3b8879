/**
 * Traces and the tamper-evident log on real runs (real Docker sandboxes, the real egress proxy, Redis,
 * the scripted model over the real openai SDK). Traces go over OTLP/HTTP to a receiver on loopback
 * that decodes them with the official protobuf definitions: a run submitted with a caller's
 * traceparent is one tree from the caller's span through the submit, the queue and every model call,
 * gate decision, approval, exec and egress connection to the end — and no span carries the task, file
 * content, tool output, the model's answer or a secret. A collector that never answers holds no run
 * and its losses show in /metrics. The log the run wrote verifies, and each kind of tampering with it
 * (a changed byte, a removed line, a swapped pair, a cut tail, a rewritten tail with the record's seal
 * changed to match) is caught at the right line, through the API and `corral verify`.
 */
import { execFile } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { egressTestHooks } from '../../src/sandbox/egress-test-hooks';
import { sealLine } from '../../src/report/log-chain';
import type { RunEvent } from '../../src/domain/events';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn, type ToolCallSpec } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { startTestDns, type TestDns } from '../support/test-dns';
import { startOtlpReceiver, spanStrings, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver';
import { apiRequest } from '../support/api-request';
import { eventually } from '../support/eventually';

jest.setTimeout(300_000);

const corralBin = resolve(__dirname, '../../bin/corral');
const run$ = promisify(execFile);

// Marker strings that must never reach a span (assembled at run time; none is a real credential).
const TASK_MARK = `TASKTEXT-${process.pid}-q9v`;
const FILE_MARK = `FILEBODY-${process.pid}-k2w`;
const OUTPUT_MARK = `NOTESBODY-${process.pid}-z7p`;
const ANSWER_MARK = `ANSWER-${process.pid}-m4t`;
const AWS_SECRET = ['AKIA', 'Q7XW2ZRT', 'PLMNB3VC'].join('');
const API_KEY = ['sk-test-', 'Tr4ceK3y', process.pid].join('');
const OTLP_TOKEN = ['otlp-', 'c0llect0r-', 'Bearer9'].join('');
const FORBIDDEN = [TASK_MARK, FILE_MARK, OUTPUT_MARK, ANSWER_MARK, AWS_SECRET, API_KEY, OTLP_TOKEN];

const CALLER_TRACE = '5c1e0f3b9a7d4e2f8b6a1c3d5e7f9a0b';
const CALLER_SPAN = '1a2b3c4d5e6f7081';

let receiver: OtlpReceiver;
let svc: Server;
let svcPort: number;
const svcHits: string[] = [];
let dns: TestDns;
let h: Harness;
let keyDir: string;

const write = (path: string, content: string, id: string): ToolCallSpec => ({ name: 'write_file', id, args: { path, content } });
const bash = (command: string, id: string): ToolCallSpec => ({ name: 'bash', id, args: { command } });

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  svc = createServer((req, res) => {
    svcHits.push(`${req.method} ${req.url}`);
    res.end('pong');
  });
  await new Promise<void>((r) => svc.listen(0, '127.0.0.1', r));
  svcPort = (svc.address() as AddressInfo).port;
  dns = await startTestDns((n) => (n === 'svc.test' ? ['127.0.0.1'] : undefined));
  keyDir = mkdtempSync(join(tmpdir(), 'corral-logkey-'));
  const { privateKey } = generateKeyPairSync('ed25519');
  writeFileSync(join(keyDir, 'log.pem'), privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });

  const getPy = `import urllib.request\nprint(urllib.request.urlopen('http://svc.test:${svcPort}/ping', timeout=30).read().decode())\n# ${FILE_MARK}\n`;
  const turns: ToolCallSpec[][] = [
    [write('tools/get.py', getPy, 'call_write')],
    [bash('python3 tools/get.py', 'call_get')],
    [bash('cat notes.txt', 'call_cat')],
    [bash('rm -r notes.txt && echo removed', 'call_rm')],
    [bash('sudo id', 'call_sudo')],
  ];
  const agent = scriptedAgent({
    'TRACE-RUN': (body: Record<string, unknown>, turn: number) => (turn < turns.length ? toolCallTurn(turns[turn]!) : finalTurn(`${ANSWER_MARK}: ${messagesOf(body).filter((m) => m.role === 'tool').length} results`)),
    'SLOW-COLLECTOR': (_b: Record<string, unknown>, turn: number) => (turn === 0 ? toolCallTurn([bash('echo hi', 'call_hi')]) : finalTurn('done')),
    'TRACE-PARENT': (_b: Record<string, unknown>, turn: number) => (turn === 0
      ? toolCallTurn([{ name: 'delegate', id: 'c_child', args: { task: 'TRACE-CHILD: say hello', budgets: { llmCalls: 2 } } }])
      : finalTurn('the child answered')),
    'TRACE-CHILD': () => finalTurn('hello'),
  });
  h = await startHarness('trace', {
    chat: agent,
    decisions: (body) => (promptText(body).includes('rm -r notes.txt') ? decisionsAnswer(1.2, 0.4) : decisionsAnswer(0.1, 0.95)),
  }, {
    OPENAI_API_KEY: API_KEY,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${OTLP_TOKEN}`,
    OTEL_BSP_SCHEDULE_DELAY: '100',
    OTEL_SERVICE_NAME: 'corral-test',
    CORRAL_TRACE_URL_TEMPLATE: 'http://127.0.0.1:16686/trace/{traceId}',
    CORRAL_LOG_SIGNING_KEY_FILE: join(keyDir, 'log.pem'),
    CORRAL_APPROVAL_TIMEOUT_S: '120',
  }, { egressTestHooks: egressTestHooks({ dnsServers: [dns.server], exempt: ['127.0.0.1'] }) });
});
afterAll(async () => {
  await h?.close();
  await receiver?.close();
  await dns?.close();
  await new Promise((r) => svc?.close(r));
  if (keyDir) rmSync(keyDir, { recursive: true, force: true });
});

let runId: string;
let record: Record<string, unknown>;

/** The run with every kind of call: traced from the caller's span to the end. */
async function tracedRun(): Promise<void> {
  if (runId) return;
  const created = await apiRequest<{ id: string; traceId: string; traceUrl: string }>(h.url, 'POST', '/v1/runs', {
    task: `TRACE-RUN ${TASK_MARK}: fetch the ping, tidy notes`, approvals: true,
    workspace: { files: { 'notes.txt': `${OUTPUT_MARK}\naws_secret_access_key=${AWS_SECRET}\n` } },
    egress: { allow: [`svc.test:${svcPort}`] },
  }, { traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
  expect(created.status).toBe(201);
  expect(created.body).toMatchObject({ traceId: CALLER_TRACE, traceUrl: `http://127.0.0.1:16686/trace/${CALLER_TRACE}` });
  runId = created.body.id;
  // Approve what the run asks for (the rm, and whatever else the gate sends to a human) until it ends.
  const approved: string[] = [];
  for (;;) {
    const r = await h.waitFor(runId, (x) => !!x.finishedAt || ((x.pendingApprovals as unknown[] | undefined) ?? []).length > 0, 240_000);
    if (r.finishedAt) break;
    for (const p of r.pendingApprovals as Array<{ callId: string }>) {
      if (approved.includes(p.callId)) continue;
      approved.push(p.callId);
      expect((await h.api('POST', `/v1/runs/${runId}/approvals/${p.callId}`, { decision: 'approve', by: 'alice' })).status).toBe(200);
    }
  }
  expect(approved).toContain('call_rm');
  record = await h.waitFor(runId, undefined, 240_000);
  expect(record).toMatchObject({ status: 'succeeded', traceId: CALLER_TRACE, traceUrl: `http://127.0.0.1:16686/trace/${CALLER_TRACE}` });
}

describe('traces', () => {
  let spans: ReceivedSpan[];
  const byName = (name: string) => spans.filter((s) => s.name === name);
  const one = (name: string) => {
    const found = byName(name);
    expect({ name, count: found.length }).toEqual({ name, count: 1 });
    return found[0]!;
  };
  const callSpan = (callId: string) => spans.find((s) => s.name.startsWith('execute_tool ') && s.attributes['gen_ai.tool.call.id'] === callId)!;
  const childrenOf = (s: ReceivedSpan) => spans.filter((c) => c.parentSpanId === s.spanId);

  beforeAll(async () => {
    await tracedRun();
    spans = await eventually(() => receiver.spans.filter((s) => s.traceId === CALLER_TRACE), {
      what: 'the run\'s spans up to its end', until: (s) => s.some((x) => x.name === 'corral.run') && s.some((x) => x.name === 'corral.end'), timeoutMs: 60_000,
    });
    // The tree as a viewer shows it, for the issue's note (CORRAL_TRACE_TREE_OUT=file).
    if (process.env.CORRAL_TRACE_TREE_OUT) writeFileSync(process.env.CORRAL_TRACE_TREE_OUT, treeText(spans, CALLER_SPAN));
  });

  test('one tree: caller → submit → run → queue wait, admission, sandbox, model calls, tool calls, artifacts, end', () => {
    const submit = one('corral.submit');
    expect(submit).toMatchObject({ parentSpanId: CALLER_SPAN, kind: 2 });
    expect(submit.attributes).toMatchObject({ 'http.response.status_code': 201, 'corral.run.id': runId });
    const run = one('corral.run');
    expect(run.parentSpanId).toBe(submit.spanId);
    expect(run.attributes).toMatchObject({ 'corral.run.id': runId, 'corral.run.outcome': 'succeeded', 'corral.policy': 'default' });
    // Every span of the trace hangs from the caller's span: no orphan, no second root.
    const ids = new Set(spans.map((s) => s.spanId));
    expect(spans.filter((s) => !ids.has(s.parentSpanId)).map((s) => s.name)).toEqual(['corral.submit']);
    expect(byName('corral.admission').map((s) => s.parentSpanId).sort()).toEqual([run.spanId, submit.spanId].sort());
    for (const name of ['corral.queue_wait', 'corral.sandbox.acquire', 'corral.end', 'corral.sandbox.remove']) expect(one(name).parentSpanId).toBe(run.spanId);
    expect(byName('corral.artifact').length).toBeGreaterThan(0);
    expect(one('corral.end').attributes).toMatchObject({ 'corral.run.outcome': 'succeeded', 'corral.usage.llm_calls': 6 });
    expect(spans[0]!.resource).toMatchObject({ 'service.name': 'corral-test' });
    // Spans end after they start, inside the run's span.
    for (const s of spans.filter((x) => x.parentSpanId === run.spanId)) {
      expect({ name: s.name, ordered: s.endNs >= s.startNs, inside: s.startNs >= run.startNs && s.endNs <= run.endNs }).toEqual({ name: s.name, ordered: true, inside: true });
    }
  });

  test('a span per model call with the GenAI attributes', () => {
    const chats = spans.filter((s) => s.name.startsWith('chat '));
    expect(chats).toHaveLength(6);
    for (const c of chats) {
      expect(c.kind).toBe(3);
      expect(c.parentSpanId).toBe(one('corral.run').spanId);
      expect(c.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat', 'gen_ai.request.model': 'fake-agent', 'gen_ai.response.model': 'fake-agent', 'server.address': '127.0.0.1',
        'gen_ai.usage.input_tokens': expect.any(Number), 'gen_ai.usage.output_tokens': expect.any(Number),
      });
    }
    expect(chats.map((c) => (c.attributes['gen_ai.response.finish_reasons'] as string[])[0])).toEqual(['tool_calls', 'tool_calls', 'tool_calls', 'tool_calls', 'tool_calls', 'stop']);
  });

  test('each tool call carries its gate decision; exec and egress hang below the call that made them', () => {
    const w = callSpan('call_write');
    expect(w.name).toBe('execute_tool write_file');
    expect(w.attributes).toMatchObject({ 'corral.gate.decision': 'allow', 'corral.tool.ok': true });

    const get = callSpan('call_get');
    expect(get.attributes).toMatchObject({ 'corral.gate.decision': 'allow', 'corral.tool.ok': true });
    const getKids = childrenOf(get);
    expect(getKids.find((k) => k.name === 'corral.exec')!.attributes).toMatchObject({ 'process.exit.code': 0, 'corral.exec.timed_out': false });
    const egress = getKids.filter((k) => k.name === 'corral.egress');
    expect(egress.map((e) => e.attributes)).toEqual([expect.objectContaining({ 'corral.egress.decision': 'allow', 'server.address': 'svc.test', 'server.port': svcPort, 'gen_ai.tool.call.id': 'call_get' })]);
    expect(svcHits).toContain('GET /ping');

    const rm = callSpan('call_rm');
    expect(rm.attributes).toMatchObject({
      'corral.gate.decision': 'allow', 'corral.gate.static.decision': 'ask', 'corral.gate.rule': 'deleting-files', 'corral.gate.decided_by': 'approval',
      'corral.gate.classifier.decision': 'ask', 'corral.gate.classifier.via': 'decisions', 'corral.gate.approval.approved': true,
      'corral.gate.approval.approver': 'operator (auth off)',
    });
    const approval = childrenOf(rm).find((k) => k.name === 'corral.approval')!;
    expect(approval.attributes).toMatchObject({ 'corral.gate.approval.approved': true, 'corral.gate.approval.approver': 'operator (auth off)' });
    expect(childrenOf(rm).some((k) => k.name === 'corral.exec')).toBe(true);

    const sudo = callSpan('call_sudo');
    expect(sudo.attributes).toMatchObject({ 'corral.gate.decision': 'deny', 'corral.gate.rule': 'privilege-and-host', 'corral.gate.decided_by': 'policy', 'corral.tool.blocked': true });
    expect(childrenOf(sudo).filter((k) => k.name === 'corral.exec')).toEqual([]);
  });

  test('no span shows the task, file content, tool output, the model\'s answer or a secret; the collector got its header', () => {
    const all = receiver.spans.flatMap(spanStrings);
    for (const needle of FORBIDDEN) expect({ needle, found: all.filter((s) => s.includes(needle)) }).toEqual({ needle, found: [] });
    // what the marker strings look like was in play: the log and the model saw them
    expect(readFileSync(record.logPath as string, 'utf8')).toContain(TASK_MARK);
    expect(receiver.requests.every((r) => r.headers.authorization === `Bearer ${OTLP_TOKEN}`)).toBe(true);
  });

  test('the trace id is in the record, the report (with its link) and the console\'s data', async () => {
    const report = await h.api<string>('GET', `/v1/runs/${runId}/report`);
    expect(report.body).toContain(`**Trace:** \`${CALLER_TRACE}\` — <http://127.0.0.1:16686/trace/${CALLER_TRACE}>`);
    expect(h.logs.some((l) => l.msg === 'run finished' && l.fields?.traceId === CALLER_TRACE)).toBe(true);
  });
});

describe('tamper-evident log', () => {
  let original: Buffer;
  let logPath: string;
  let lines: string[];
  const verify = async () => (await h.api<Record<string, unknown>>('GET', `/v1/runs/${runId}/verify`)).body;
  const cli = (...args: string[]) => run$(corralBin, ['verify', ...args, '--api', h.url]).then((r) => ({ code: 0, stdout: r.stdout }), (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }));
  const tamper = (ls: string[]) => writeFileSync(logPath, ls.map((l) => `${l}\n`).join(''));

  beforeAll(async () => {
    await tracedRun();
    logPath = join(h.config.CORRAL_DATA_DIR, 'runs', runId, 'events.jsonl');
    original = readFileSync(logPath);
    lines = original.toString('utf8').split('\n').slice(0, -1);
  });
  afterEach(() => writeFileSync(logPath, original));

  test('the log the run wrote verifies: chain, start from the spec, seal and signature; through the API and the CLI', async () => {
    const seal = record.logSeal as { finalHash: string; lines: number; signature: { keyId: string } };
    expect(seal.lines).toBe(lines.length);
    expect(await verify()).toMatchObject({ verified: true, lines: lines.length, finalHash: seal.finalHash, spec: 'checked', signature: 'valid', source: 'data-dir' });
    const out = await cli(runId);
    expect(out).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^verified ${runId}: ${lines.length} lines .*signature valid`)) });
    const report = (await h.api<string>('GET', `/v1/runs/${runId}/report`)).body;
    expect(report).toContain(seal.finalHash);
  });

  test('one changed byte in a line (its body, or its chain fields) is reported at that line', async () => {
    for (const [li, pick] of [[4, (l: string) => l.indexOf('"type"') + 3], [9, (l: string) => l.length - 10], [lines.length - 1, (l: string) => l.indexOf('"prev"') + 12]] as const) {
      const ls = [...lines];
      const at = pick(ls[li]!);
      const c = ls[li]![at]!;
      ls[li] = ls[li]!.slice(0, at) + (c === 'a' ? 'b' : 'a') + ls[li]!.slice(at + 1);
      tamper(ls);
      expect({ li, r: await verify() }).toEqual({ li, r: expect.objectContaining({ verified: false, firstBreak: expect.objectContaining({ line: li + 1, problem: 'altered' }) }) });
    }
    const out = await cli(runId);
    expect(out.code).toBe(1);
    expect(out.stdout).toMatch(new RegExp(`^NOT VERIFIED ${runId}: line ${lines.length} `));
  });

  test('a removed line, a swapped pair, a cut tail, a line cut short: each at its line', async () => {
    tamper([...lines.slice(0, 6), ...lines.slice(7)]);
    expect((await verify()).firstBreak).toMatchObject({ line: 7, problem: 'out-of-order' });
    const swapped = [...lines];
    [swapped[3], swapped[4]] = [swapped[4]!, swapped[3]!];
    tamper(swapped);
    expect((await verify()).firstBreak).toMatchObject({ line: 4, problem: 'out-of-order' });
    tamper(lines.slice(0, lines.length - 3));
    expect((await verify()).firstBreak).toMatchObject({ line: lines.length - 2, problem: 'missing-tail' });
    writeFileSync(logPath, original.subarray(0, original.length - 30));
    expect((await verify()).firstBreak).toMatchObject({ line: lines.length, problem: 'cut-short' });
    tamper(lines.slice(1));
    expect((await verify()).firstBreak).toMatchObject({ line: 1, problem: 'wrong-start' });
    rmSync(logPath);
    expect((await verify())).toMatchObject({ verified: false, firstBreak: { line: 1, problem: 'no-log' } });
    const out = await cli(runId);
    expect(out.code).toBe(1);
  });

  test('a forger who rewrites the tail with fresh hashes and the record\'s seal to match is caught by the signature', async () => {
    // Rewrite the last line's text and re-seal it onto the chain: the chain itself then holds.
    const ls = [...lines];
    const last = JSON.parse(ls[ls.length - 1]!) as Record<string, unknown>;
    const prev = last.prev as string;
    delete last.prev;
    delete last.hash;
    const forged = sealLine(prev, { ...last, reason: 'forged' } as unknown as RunEvent);
    ls[ls.length - 1] = forged.line;
    tamper(ls);
    expect((await verify()).firstBreak).toMatchObject({ line: lines.length, problem: 'final-hash' });
    // ... and moves the record's seal to the forged end (what someone with Redis access could do).
    const redis = new Redis(process.env.REDIS_URL!);
    const key = `corral:run:${runId}`;
    const raw = await redis.hget(key, 'logSeal');
    try {
      const seal = JSON.parse(raw!) as Record<string, unknown>;
      await redis.hset(key, 'logSeal', JSON.stringify({ ...seal, finalHash: forged.hash }));
      expect(await verify()).toMatchObject({ verified: false, signature: 'invalid', firstBreak: { line: lines.length, problem: 'signature' } });
    } finally {
      await redis.hset(key, 'logSeal', raw!);
      redis.disconnect();
    }
  });

  test('offline: corral verify --log checks a copy against the seal from the record', async () => {
    const seal = record.logSeal as { finalHash: string; lines: number };
    const dir = mkdtempSync(join(tmpdir(), 'corral-verify-'));
    try {
      const copy = join(dir, 'events.jsonl');
      writeFileSync(copy, original);
      const ok = await run$(corralBin, ['verify', '--log', copy, '--final-hash', seal.finalHash, '--lines', String(seal.lines)]);
      expect(ok.stdout).toMatch(/^chain intact: \d+ lines, final hash [0-9a-f]{64} as given/);
      writeFileSync(copy, lines.slice(0, -1).map((l) => `${l}\n`).join(''));
      const bad = await run$(corralBin, ['verify', '--log', copy, '--final-hash', seal.finalHash, '--lines', String(seal.lines)]).catch((e: { code: number; stdout: string }) => e);
      expect(bad).toMatchObject({ code: 1, stdout: expect.stringContaining(`line ${seal.lines}`) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('sub-runs', () => {
  test('a delegate call\'s sub-run is in its parent\'s trace, below the call; the parent\'s second leg too', async () => {
    const trace = '7e1f0c2b3a4d5e6f708192a3b4c5d6e7';
    const r = await apiRequest<{ id: string; traceId: string }>(h.url, 'POST', '/v1/runs', {
      task: '# Task\nTRACE-PARENT: delegate a greeting\n\n# Allowed tools\n- bash\n- delegate\n', approvals: false, budgets: { llmCalls: 6, toolCalls: 4, wallTimeS: 120 },
    }, { traceparent: `00-${trace}-${CALLER_SPAN}-01` });
    expect(r.status).toBe(201);
    const parent = await h.waitFor(r.body.id, undefined, 240_000);
    expect(parent).toMatchObject({ status: 'succeeded', traceId: trace });
    const childId = ((parent.children ?? []) as Array<{ id: string }>)[0]?.id;
    expect(childId).toEqual(expect.any(String));
    const spans = await eventually(() => receiver.spans.filter((x) => x.traceId === trace), {
      what: 'the parent\'s two legs and the child\'s run', timeoutMs: 60_000,
      until: (xs) => xs.filter((x) => x.name === 'corral.run').length === 3 && xs.filter((x) => x.name === 'corral.end').length === 2,
    });
    const runs = spans.filter((x) => x.name === 'corral.run');
    const submit = spans.find((x) => x.name === 'corral.submit')!;
    const legs = runs.filter((x) => x.attributes['corral.run.id'] === r.body.id).sort((a, b) => (a.startNs < b.startNs ? -1 : 1));
    expect(legs.map((x) => [x.parentSpanId === submit.spanId, x.attributes['corral.run.resumed'], x.attributes['corral.run.outcome']])).toEqual([[true, false, 'suspended'], [true, true, 'succeeded']]);
    const call = spans.find((x) => x.name === 'execute_tool delegate')!;
    expect(call.parentSpanId).toBe(legs[0]!.spanId);
    const child = runs.find((x) => x.attributes['corral.run.id'] === childId)!;
    expect(child).toMatchObject({ parentSpanId: call.spanId, attributes: expect.objectContaining({ 'corral.run.parent_id': r.body.id, 'corral.run.outcome': 'succeeded' }) });
    expect(spans.filter((x) => x.name === 'chat fake-agent' && x.parentSpanId === child.spanId)).toHaveLength(1);
  });
});

describe('a collector that never answers', () => {
  test('runs are unaffected; the spans it did not take are counted in /metrics', async () => {
    receiver.mode = 'hang';
    const r = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'SLOW-COLLECTOR: say hi', approvals: false });
    expect(r.status).toBe(201);
    const done = await h.waitFor(r.body.id, undefined, 240_000);
    expect(done.status).toBe('succeeded');
    const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 'NaN');
    const text = await eventually(async () => (await h.api<string>('GET', '/metrics')).body, {
      what: 'dropped spans counted in /metrics', until: (t) => metric(t, 'corral_trace_spans_dropped_total\\{reason="export_failed"\\}') > 0, timeoutMs: 120_000,
    });
    expect(metric(text, 'corral_trace_spans_exported_total')).toBeGreaterThan(0);
  });
});

/** Spans as an indented tree below `root` (ordered by start), each with its duration and a few attributes. */
function treeText(spans: ReceivedSpan[], root: string): string {
  const keys = ['corral.gate.decision', 'corral.gate.rule', 'corral.gate.decided_by', 'corral.gate.approval.approver', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'gen_ai.response.finish_reasons', 'server.address', 'corral.egress.decision', 'process.exit.code', 'corral.run.outcome'];
  const out: string[] = [];
  const walk = (parent: string, depth: number) => {
    for (const s of spans.filter((x) => x.parentSpanId === parent).sort((a, b) => (a.startNs < b.startNs ? -1 : 1))) {
      const attrs = keys.filter((k) => s.attributes[k] !== undefined).map((k) => `${k}=${JSON.stringify(s.attributes[k])}`).join(' ');
      out.push(`${'  '.repeat(depth)}${s.name} (${Number((s.endNs - s.startNs) / 1_000_000n)} ms)${attrs ? ` ${attrs}` : ''}`);
      walk(s.spanId, depth + 1);
    }
  };
  walk(root, 0);
  return `${out.join('\n')}\n`;
}
