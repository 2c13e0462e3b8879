/**
 * Sub-runs end to end (real Redis, real Docker sandboxes, the real openai SDK against the scripted
 * server, streamed): a planner that delegates two children gets their result sheets with patches and
 * applies them; each child starts from a copy of the planner's workspace in a sandbox of its own; the
 * planner's slot is free while it waits (one worker with concurrency 1 runs the children); budgets are
 * carved out (a child cannot get or spend more than the planner had left); depth and fan-out caps;
 * cancelling the planner cancels its children (running and queued); the tree shows in GET and report.md.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, readdirSync } from 'node:fs';
import { Queue } from 'bullmq';
import { RUN_JOB_NAME, RUN_JOB_OPTIONS, newRunId } from '../../src/queue/run-queue';
import { dirname, resolve } from 'node:path';
import type { Scripted } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';

jest.setTimeout(240_000);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Logged = Record<string, any>;
type Body = Record<string, unknown>;
const readEvents = (path: string): Logged[] => readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Logged);

/** The result sheets the planner's model received, in order (tool messages that hold one). */
function sheets(body: Body): Logged[] {
  return messagesOf(body).filter((m) => m.role === 'tool').flatMap((m) => {
    try {
      const v = JSON.parse(String(m.content).split('\n\nNote:')[0]!) as Logged;
      return v.subRun ? [v] : [];
    } catch {
      return [];
    }
  });
}
const lastTool = (body: Body) => String(messagesOf(body).filter((m) => m.role === 'tool').at(-1)?.content ?? '');

const PLANNER = `# Task
PLANNER-TWO: split the work: add.py with add() and mul.py with mul(), one sub-run each.

# Allowed tools
- bash
- write_file
- apply_patch
- delegate

# Done means
- check: python3 -c "from add import add; from mul import mul; assert add(2, 3) == 5 and mul(2, 3) == 6"
`;

const childTurns = (file: string, code: string) => (body: Body, turn: number): Scripted => {
  if (turn === 0) return toolCallTurn([{ name: 'bash', args: { command: 'cat plan.txt' } }, { name: 'write_file', args: { path: file, content: code } }]);
  const saw = messagesOf(body).some((m) => m.role === 'tool' && String(m.content).includes('from the planner'));
  return finalTurn(`wrote ${file}; plan.txt said: ${saw ? 'from the planner' : '(not found)'}`);
};

const planner = (body: Body, turn: number): Scripted => {
  if (turn === 0) return toolCallTurn([{ name: 'bash', id: 'c_plan', args: { command: 'echo "from the planner" > plan.txt' } }]);
  if (turn === 1) {
    return toolCallTurn([
      { name: 'delegate', id: 'c_add', args: { task: 'CHILD-ADD: write add.py with add(a, b) returning a + b; read plan.txt first.', doneChecks: ['python3 -c "from add import add; assert add(2, 3) == 5"'], budgets: { llmCalls: 3, toolCalls: 4 } } },
      { name: 'delegate', id: 'c_mul', args: { task: 'CHILD-MUL: write mul.py with mul(a, b) returning a * b; read plan.txt first.', doneChecks: ['python3 -c "from mul import mul; assert mul(2, 3) == 6"'] } },
    ]);
  }
  const got = sheets(body);
  if (turn === 2) return toolCallTurn(got.map((s, i) => ({ name: 'apply_patch', id: `c_apply${i}`, args: { patch: s.patch } })));
  return finalTurn(`applied ${got.length} patches`);
};

/** Asks for more than it has, twice; then for 3 LLM calls and gets them; the child tries to spend more. */
const carver = (body: Body, turn: number): Scripted => {
  if (turn === 0) {
    return toolCallTurn([
      { name: 'delegate', id: 'c_greedy_calls', args: { task: 'CHILD-GREEDY: loop forever', budgets: { llmCalls: 10 } } },
      { name: 'delegate', id: 'c_greedy_cost', args: { task: 'CHILD-GREEDY: loop forever', budgets: { llmCalls: 2, costUsd: 5 } } },
    ]);
  }
  if (turn === 1) return toolCallTurn([{ name: 'delegate', id: 'c_fits', args: { task: 'CHILD-GREEDY: loop forever', budgets: { llmCalls: 3, toolCalls: 10 } } }]);
  return finalTurn(`the sub-run ended: ${sheets(body)[0]?.outcome}`);
};
const greedy = (_b: Body, turn: number): Scripted => toolCallTurn([{ name: 'bash', args: { command: `echo spending ${turn}` } }]);

/** Three levels: the planner delegates, its child delegates, the grandchild tries to (depth cap). */
const NESTED_TOOLS = ['bash', 'delegate'];
const nestedTop = (body: Body, turn: number): Scripted =>
  turn === 0 ? toolCallTurn([{ name: 'delegate', id: 'c_level1', args: { task: 'LEVEL-ONE: delegate the leaf work', budgets: { llmCalls: 6 } } }])
    : finalTurn(`level one said: ${sheets(body)[0]?.finalAnswer}`);
const levelOne = (body: Body, turn: number): Scripted =>
  turn === 0 ? toolCallTurn([{ name: 'delegate', id: 'c_level2', args: { task: 'LEVEL-TWO: do the leaf work', budgets: { llmCalls: 3 } } }])
    : finalTurn(`level two said: ${sheets(body)[0]?.finalAnswer}`);
const levelTwo = (body: Body, turn: number): Scripted =>
  turn === 0 ? toolCallTurn([{ name: 'delegate', id: 'c_level3', args: { task: 'LEVEL-THREE: too deep' } }])
    : finalTurn(`leaf done; delegating said: ${lastTool(body).slice(0, 160)}`);

/** Five delegate calls in one turn: the fan-out cap (4) lets four start. */
const fanOut = (body: Body, turn: number): Scripted =>
  turn === 0
    ? toolCallTurn([1, 2, 3, 4, 5].map((n) => ({ name: 'delegate', id: `c_fan${n}`, args: { task: `FAN-CHILD ${n}: say hello`, budgets: { llmCalls: 1, toolCalls: 1, wallTimeS: 60 } } })))
    : finalTurn(`${sheets(body).length} sub-runs answered; the fifth call said: ${lastTool(body).slice(0, 200)}`);

/** Two children that block; the test cancels the planner. */
const blocker = (): Scripted => toolCallTurn([{ name: 'bash', args: { command: 'sleep 600; echo never' } }]); // ends only when killed
const cancelTop = (_b: Body, turn: number): Scripted =>
  turn === 0 ? toolCallTurn([
    { name: 'delegate', id: 'c_block1', args: { task: 'CHILD-BLOCK one', budgets: { llmCalls: 2 } } },
    { name: 'delegate', id: 'c_block2', args: { task: 'CHILD-BLOCK two', budgets: { llmCalls: 2 } } },
  ]) : finalTurn('should not get here');

/** Issue 37: a delegate call whose done check (run later in the child's sandbox) would write a CI workflow. */
const ciChecker = (body: Body, turn: number): Scripted =>
  turn === 0 ? toolCallTurn([{ name: 'delegate', id: 'c_ci', args: { task: 'CHILD-CI: tidy up', doneChecks: ['mkdir -p .github/workflows && echo "on: push" > .github/workflows/pwn.yml'], budgets: { llmCalls: 2 } } }])
    : finalTurn(`delegating said: ${lastTool(body).slice(0, 300)}`);

const agent = scriptedAgent({
  'CI-CHECK-TOP': ciChecker,
  'CHILD-CI': () => finalTurn('done'),
  'PLANNER-TWO': planner,
  'CARVER': carver,
  'CHILD-GREEDY': greedy,
  'NESTED-TOP': nestedTop,
  'LEVEL-ONE': levelOne,
  'LEVEL-TWO': levelTwo,
  'FAN-TOP': fanOut,
  'FAN-CHILD': (b: Body) => finalTurn(`hello from ${/FAN-CHILD (\d)/.exec(JSON.stringify(messagesOf(b)))?.[1]}`),
  'CANCEL-TOP': cancelTop,
  'CHILD-BLOCK': blocker,
  'CHILD-ADD': childTurns('add.py', 'def add(a, b):\n    return a + b\n'),
  'CHILD-MUL': childTurns('mul.py', 'def mul(a, b):\n    return a * b\n'),
});

let h: Harness;
beforeAll(async () => {
  h = await startHarness('subruns', { chat: (b) => agent(b) }, { CORRAL_CONCURRENCY: '1' });
});
afterAll(async () => {
  await h?.close();
});

async function submit(spec: Record<string, unknown>): Promise<string> {
  const r = await h.api<{ id: string }>('POST', '/v1/runs', spec);
  expect(r.status).toBe(201);
  return r.body.id;
}

describe("a delegate call's done checks are model-written commands: they pass the gate (issue 37)", () => {
  test('a check that would write a CI workflow gets the call refused; no sub-run starts and nothing reaches the patch', async () => {
    const id = await submit({ task: `# Task\nCI-CHECK-TOP: delegate the tidy-up\n\n# Allowed tools\n- bash\n- delegate\n`, budgets: { llmCalls: 4, toolCalls: 4, wallTimeS: 90 } });
    const run = await h.waitFor(id, undefined, 120_000);
    const events = readEvents(run.logPath as string);
    expect(run.status).toBe('succeeded');
    const decision = events.find((e) => e.type === 'policy.decision' && e.callId === 'c_ci')!;
    expect(decision.verdict).toMatchObject({ decision: 'deny', static: { decision: 'ask', rule: 'ci-and-dev-configs' } });
    expect(decision.verdict.static.reason).toContain('doneChecks[0]');
    expect(events.filter((e) => e.type === 'subrun.started')).toEqual([]);
    expect(String(run.finalAnswer)).toMatch(/blocked/);
    const patchPath = `${dirname(run.logPath as string)}/workspace.patch`;
    expect(existsSync(patchPath) ? readFileSync(patchPath, 'utf8') : '').not.toContain('.github');
  });
});

describe('a planner that delegates two sub-runs', () => {
  let id: string;
  let run: Logged;
  let events: Logged[];
  beforeAll(async () => {
    id = await submit({ task: PLANNER, budgets: { llmCalls: 12, toolCalls: 20, costUsd: 0.5, wallTimeS: 120 } });
    run = await h.waitFor(id, undefined, 180_000);
    events = readEvents(run.logPath as string);
  });

  test('it succeeds with both children\'s work applied from their patches', () => {
    expect(run).toMatchObject({ status: 'succeeded', reason: 'the model gave its final answer and all 1 done check(s) passed' });
    const patch = readFileSync(`${dirname(run.logPath as string)}/workspace.patch`, 'utf8');
    expect(patch).toContain('+++ b/add.py');
    expect(patch).toContain('+++ b/mul.py');
    expect(patch).toContain('+++ b/plan.txt');
    const changes = events.find((e) => e.type === 'workspace.changes')!;
    expect(changes.files.map((f: Logged) => f.path).sort()).toEqual(['add.py', 'mul.py', 'plan.txt']);
  });

  test('each child ran in its own sandbox, from a copy of the planner\'s workspace, and came back as a result sheet', async () => {
    const started = events.filter((e) => e.type === 'subrun.started');
    expect(started.map((e) => e.callId)).toEqual(['c_add', 'c_mul']);
    const sandboxes = new Set<string>(events.filter((e) => e.type === 'sandbox.ready').map((e) => e.containerId));
    for (const s of started) {
      const child = await h.waitFor(s.childRunId);
      expect(child).toMatchObject({ status: 'succeeded', parent: { runId: id, callId: s.callId, depth: 1 } });
      const ce = readEvents(child.logPath as string);
      expect(ce.find((e) => e.type === 'run.started')).toMatchObject({ parent: { runId: id, callId: s.callId, depth: 1 } });
      expect(String(child.finalAnswer)).toContain('plan.txt said: from the planner');
      const box = ce.find((e) => e.type === 'sandbox.ready')!.containerId;
      expect(sandboxes.has(box)).toBe(false);
      sandboxes.add(box);
    }
    expect(sandboxes.size).toBe(4); // the planner's first sandbox, its re-created one, and one per child
    // What the planner's model got back: the sheets, with each child's patch against the copy.
    const third = h.fake.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes('PLANNER-TWO'))[2]!.body;
    const got = sheets(third);
    expect(got.map((s) => [s.outcome, s.doneChecks[0].ok])).toEqual([['succeeded', true], ['succeeded', true]]);
    expect(got[0]!.patch).toMatch(/^diff --git a\/add\.py b\/add\.py\nnew file mode 100644\n/);
    expect(got[0]!.patch).not.toContain('plan.txt'); // the child diffs against the planner's copy, which had plan.txt
    expect(got[1]!.files).toEqual([{ path: 'mul.py', change: 'added', added: 2, removed: 0 }]);
    expect(lastTool(third)).toContain('now runs in a new sandbox');
  });

  test('the planner gave up its slot while it waited: one worker of concurrency 1 ran both children meanwhile', async () => {
    const suspended = events.find((e) => e.type === 'run.suspended')!;
    const resumed = events.find((e) => e.type === 'run.resumed')!;
    expect(suspended).toMatchObject({ sandboxKept: false, checkpoint: 'checkpoint-1.tar' });
    const removed = events.filter((e) => e.type === 'sandbox.removed');
    expect(removed).toHaveLength(2);
    expect(removed[0]!.seq).toBeGreaterThan(suspended.seq - 5);
    for (const c of suspended.children as string[]) {
      const child = await h.waitFor(c);
      expect(Date.parse(child.startedAt as string)).toBeGreaterThanOrEqual(Date.parse(suspended.ts));
      expect(Date.parse(child.finishedAt as string)).toBeLessThanOrEqual(Date.parse(resumed.ts));
    }
    expect(resumed.children.map((c: Logged) => c.outcome)).toEqual(['succeeded', 'succeeded']);
    // The checkpoint is gone once the planner ended.
    expect(readdirSync(dirname(run.logPath as string)).filter((f) => f.startsWith('checkpoint-'))).toEqual([]);
  });

  test('budgets: the second child got a share of what was left, and the planner\'s usage includes its children\'s', async () => {
    const started = events.filter((e) => e.type === 'subrun.started');
    expect(started[0]!.budgets).toMatchObject({ llmCalls: 3, toolCalls: 4 });
    // Left after turn 2: 12 - 2 - 1 kept = 9 LLM calls; the first child took 3, the default share is 9 / 3 = 3.
    expect(started[1]!.budgets).toMatchObject({ llmCalls: 3, toolCalls: 6, wallTimeS: expect.any(Number) });
    const finished = events.filter((e) => e.type === 'subrun.finished');
    const childCalls = finished.reduce((n, e) => n + e.usage.llmCalls, 0);
    expect(childCalls).toBe(4);
    const own = events.filter((e) => e.type === 'model.response').length;
    expect(run.usage).toMatchObject({ llmCalls: own + childCalls });
    const { body } = await h.api<Logged>('GET', `/v1/runs/${id}`);
    expect(body.budgets.llmCalls).toMatchObject({ used: own + childCalls, limit: 12 });
  });

  test('GET shows the children; the report shows the tree with each child\'s budget use', async () => {
    const { body } = await h.api<Logged>('GET', `/v1/runs/${id}`);
    expect(body.children.map((c: Logged) => [c.callId, c.status])).toEqual([['c_add', 'succeeded'], ['c_mul', 'succeeded']]);
    expect(body.children[0].links.self).toBe(`/v1/runs/${body.children[0].id}`);
    const report = readFileSync(run.reportPath as string, 'utf8');
    expect(report).toContain('## Sub-runs');
    expect(report).toMatch(/├─ ✅ run_\S+ succeeded — “CHILD-ADD: write add\.py/);
    expect(report).toMatch(/└─ ✅ run_\S+ succeeded — “CHILD-MUL/);
    expect(report).toMatch(/used LLM calls 2\/3 · tool calls 2\/4 · tokens [\d,]+\/[\d,]+ · \$[\d.]+\/\$[\d.]+ · [\d.]+\/\d+ s/);
    expect(report).toContain('no worker slot and no sandbox held meanwhile');
    const runsDir = dirname(dirname(run.logPath as string));
    const childReport = readFileSync(`${runsDir}/${body.children[0].id}/report.md`, 'utf8');
    expect(childReport).toContain(`This run is a sub-run (depth 1) of \`${id}\``);
    expect(existsSync(`${runsDir}/${body.children[0].id}/workspace.patch`)).toBe(true);
  });

  test('a job put on the queue with a forged parent link is refused before any sandbox: it cannot read another run\'s workspace copy', async () => {
    const runsDir = dirname(dirname(run.logPath as string));
    const { body } = await h.api<Logged>('GET', `/v1/runs/${id}`);
    // A real copy of the planner's workspace is there, so only the link check stands in the way.
    copyFileSync(`${runsDir}/${body.children[0].id}/workspace.tar`, `${dirname(run.logPath as string)}/checkpoint-7.tar`);
    const queue = new Queue(h.config.CORRAL_QUEUE, { connection: { url: process.env.REDIS_URL! } });
    const spec = { task: 'FORGED: read the planner\'s files', policy: 'default', approvals: false, workspace: { files: {} }, egress: { allow: [] }, limits: {}, budgets: { llmCalls: 2, toolCalls: 2, tokens: 10_000, wallTimeS: 60, costUsd: 0.1 } };
    const forged = [
      { runId: newRunId(), link: { runId: id, callId: 'c_add', depth: 1, checkpoint: 'checkpoint-7.tar', deadlineAt: Date.now() + 60_000 }, why: /parent: run \S+ did not start run_\S+ for call c_add/ },
      { runId: newRunId(), link: { runId: id, callId: 'c_made_up', depth: 1, checkpoint: 'checkpoint-7.tar', deadlineAt: Date.now() + 60_000 }, why: /did not start run_\S+ for call c_made_up/ },
      // The real child's id again: it already ended, so it is never executed twice.
      { runId: body.children[0].id as string, link: { runId: id, callId: 'c_add', depth: 1, checkpoint: 'checkpoint-7.tar', deadlineAt: Date.now() + 60_000 }, why: /already ended/ },
      { runId: newRunId(), link: { runId: id, callId: 'c_add', depth: 1, checkpoint: '../../etc/passwd', deadlineAt: Date.now() + 60_000 }, why: /malformed job data: parent\.checkpoint: must be checkpoint-N\.tar/ },
    ];
    try {
      for (const f of forged) {
        // The job id is the run id (the queue contract); the real child's finished job is removed first so the add lands.
        await (await queue.getJob(f.runId))?.remove().catch(() => undefined);
        const job = await queue.add(RUN_JOB_NAME, { runId: f.runId, spec, parent: f.link }, { ...RUN_JOB_OPTIONS, jobId: f.runId });
        await eventually(async () => (await job.isCompleted()) || (await job.isFailed()), { what: `the forged job ${f.runId} to end` }).catch(() => undefined);
        const j = (await queue.getJob(job.id!))!;
        const rec = (await h.api<Logged>('GET', `/v1/runs/${f.runId}`)).body;
        const said = `${j.failedReason ?? ''} ${rec.reason ?? ''}`;
        expect(said).toMatch(f.why);
        if (rec.logPath && existsSync(rec.logPath as string) && f.runId !== body.children[0].id) {
          expect(readEvents(rec.logPath as string).some((e) => e.type === 'sandbox.ready')).toBe(false);
        }
      }
    } finally {
      await queue.close();
    }
    // No request for the forged task reached the model.
    expect(h.fake.requests.some((r) => JSON.stringify(r.body).includes('FORGED'))).toBe(false);
  });

  test('the CLI: corral watch shows the sub-runs start and end and the planner resume; corral report prints the tree', async () => {
    const w = await corral(['watch', id, '--plain', '--api', h.url]);
    expect(w.code).toBe(0);
    expect(w.stdout).toMatch(/⤷ sub-run run_\S+ started \(depth 1\) for c_add: “CHILD-ADD: write add\.py/);
    expect(w.stdout).toMatch(/⏸ waiting for 2 sub-run\(s\) without a worker slot; sandbox removed, \/workspace kept as checkpoint-1\.tar/);
    expect(w.stdout).toMatch(/⤶ sub-run run_\S+ succeeded: .* · used /);
    expect(w.stdout).toMatch(/▶ resumed on \S+ after [\d.]+ s: run_\S+ succeeded, run_\S+ succeeded \(new sandbox from checkpoint-1\.tar\)/);
    const r = await corral(['report', id, '--api', h.url]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('## Sub-runs');
    expect(r.stdout).toMatch(/├─ ✅ run_\S+ succeeded — “CHILD-ADD/);
  });
});

/** bin/corral as a child process; resolves with its exit code and stdout. */
function corral(args: string[]): Promise<{ code: number | null; stdout: string }> {
  return new Promise((res, rej) => {
    const child = spawn(resolve(__dirname, '../../bin/corral'), args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.on('error', rej);
    child.on('close', (code) => res({ code, stdout }));
  });
}

const contract = (task: string, tools: string[]) => ({ task, allowedTools: tools });

test('budget carve-out: a sub-run cannot be granted more than the planner has left, nor spend more than it was granted', async () => {
  const id = await submit({ task: 'CARVER', contract: contract('CARVER: delegate within the budget', ['bash', 'delegate']), budgets: { llmCalls: 6, costUsd: 0.5, wallTimeS: 120 } });
  const run = await h.waitFor(id, undefined, 120_000);
  const events = readEvents(run.logPath as string);
  const refused = events.filter((e) => e.type === 'tool.result' && e.tool === 'delegate' && !e.ok && String(e.summary).startsWith('not started'));
  expect(refused.map((e) => e.summary)).toEqual([
    'not started: the sub-run asks for 10 LLM calls but this run has only 4 LLM calls left to give (one LLM call is kept for this run to read the results); ask for less or leave it out to get a share',
    // The first turn cost a little: what is left is shown rounded down.
    'not started: the sub-run asks for $5.0000 but this run has only $0.4999 left to give; ask for less or leave it out to get a share',
  ]);
  const started = events.filter((e) => e.type === 'subrun.started');
  expect(started).toHaveLength(1);
  expect(started[0]!.budgets.llmCalls).toBe(3);
  const child = await h.waitFor(started[0]!.childRunId);
  expect(child).toMatchObject({ status: 'budget_exhausted', usage: { llmCalls: 3 } });
  expect(readEvents(child.logPath as string).find((e) => e.type === 'run.started')!.budgets.llmCalls).toBe(3);
  // The whole tree stayed within the planner's 6 LLM calls: 3 of its own, 3 of the child's.
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: 'the sub-run ended: budget_exhausted', usage: { llmCalls: 6 } });
});

test('depth cap: a sub-run of a sub-run is at the cap (CORRAL_SUBRUN_MAX_DEPTH=2): it is not offered delegate, and a call is refused', async () => {
  const id = await submit({ task: 'NESTED-TOP', contract: contract('NESTED-TOP: three levels', NESTED_TOOLS), budgets: { llmCalls: 12, wallTimeS: 120 } });
  const run = await h.waitFor(id, undefined, 120_000);
  expect(run).toMatchObject({ status: 'succeeded' });
  expect(String(run.finalAnswer)).toContain('level one said: level two said: leaf done; delegating said:');
  expect(String(run.finalAnswer)).toContain('the depth cap is reached (this run is at depth 2; CORRAL_SUBRUN_MAX_DEPTH is 2)');
  const toolsOf = (marker: string) => h.fake.requests.filter((r) => r.path === '/v1/chat/completions' && JSON.stringify(r.body).includes(marker))
    .map((r) => ((r.body.tools ?? []) as Array<{ function: { name: string } }>).map((t) => t.function.name));
  expect(toolsOf('LEVEL-ONE: delegate')[0]).toEqual(['bash', 'delegate']);
  expect(toolsOf('LEVEL-TWO: do the leaf')[0]).toEqual(['bash']);
  // The tree in the top run's report has both levels, each with its use of its budgets.
  const report = readFileSync(run.reportPath as string, 'utf8');
  expect(report).toMatch(/└─ ✅ run_\S+ succeeded — “LEVEL-ONE: delegate the leaf work”\n {6}used LLM calls \d\/6 .*\n {3}└─ ✅ run_\S+ succeeded — “LEVEL-TWO: do the leaf work”\n {9}used LLM calls 2\/3/);
  const level1 = (await h.api<Logged>('GET', `/v1/runs/${id}`)).body.children[0];
  const { body: l1 } = await h.api<Logged>('GET', `/v1/runs/${level1.id}`);
  expect(l1.parent).toEqual({ runId: id, callId: 'c_level1', depth: 1 });
  expect(l1.children).toHaveLength(1);
});

test('fan-out cap: of five delegate calls in one turn four start (CORRAL_SUBRUN_MAX_CHILDREN=4), the fifth is refused', async () => {
  const id = await submit({ task: 'FAN-TOP', contract: contract('FAN-TOP: five at once', ['bash', 'delegate']), budgets: { llmCalls: 12, toolCalls: 20, wallTimeS: 150 } });
  const run = await h.waitFor(id, undefined, 150_000);
  const events = readEvents(run.logPath as string);
  expect(events.filter((e) => e.type === 'subrun.started').map((e) => e.callId)).toEqual(['c_fan1', 'c_fan2', 'c_fan3', 'c_fan4']);
  expect(run).toMatchObject({ status: 'succeeded' });
  expect(String(run.finalAnswer)).toContain('4 sub-runs answered; the fifth call said: error: the sub-run was not started: the fan-out cap is reached (a run may start 4 sub-runs');
  const answers = events.filter((e) => e.type === 'subrun.finished').map((e) => e.outcome);
  expect(answers).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
});

test('cancelling the planner cancels its sub-runs: the running one is killed, the queued one never starts, the planner ends cancelled', async () => {
  const id = await submit({ task: 'CANCEL-TOP', contract: contract('CANCEL-TOP: two blockers', ['bash', 'delegate']), budgets: { llmCalls: 8, wallTimeS: 200 } });
  const waiting = await h.waitFor(id, (r) => r.status === 'awaiting_children', 60_000);
  expect(waiting.status).toBe('awaiting_children');
  const { body } = await h.api<Logged>('GET', `/v1/runs/${id}`);
  const [first, second] = body.children as Logged[];
  // With one slot, the first child runs (in its sleep) while the second waits in the queue.
  await h.waitFor(first!.id, (r) => r.status === 'running' && existsSync(r.logPath as string) && readFileSync(r.logPath as string, 'utf8').includes('"tool.call"'), 60_000);
  expect((await h.api<Logged>('GET', `/v1/runs/${second!.id}`)).body.status).toBe('queued');
  const c = await h.api<Logged>('POST', `/v1/runs/${id}/cancel`);
  expect(c).toMatchObject({ status: 202, body: { status: 'cancelling' } });
  const run = await h.waitFor(id, undefined, 60_000); // the children's sleeps take ten minutes: only the cancel ends them in time
  expect(run).toMatchObject({ status: 'cancelled', reason: 'the run was cancelled (requested through the API)' });
  const a = await h.waitFor(first!.id);
  const b = await h.waitFor(second!.id);
  expect(a).toMatchObject({ status: 'cancelled', reason: 'the run was cancelled (requested through the API)' });
  expect(b).toMatchObject({ status: 'cancelled', reason: 'its parent run was cancelled before it started' });
  expect(b.startedAt).toBeUndefined();
  // The running child's sandbox is gone; so is every sandbox of the tree.
  const left = await h.docker.listContainers({ all: true, filters: { label: [`corral.run-id=${first!.id}`] } });
  expect(left).toEqual([]);
  const events = readEvents(run.logPath as string);
  expect(events.filter((e) => e.type === 'subrun.finished').map((e) => e.outcome)).toEqual(['cancelled', 'cancelled']);
  expect(events.some((e) => e.type === 'model.response' && e.turn === 2)).toBe(false);
  expect(readFileSync(run.reportPath as string, 'utf8')).toMatch(/├─ ⏹ run_\S+ cancelled — “CHILD-BLOCK one”/);
});
