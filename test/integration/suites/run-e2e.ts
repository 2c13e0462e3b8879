/**
 * One run end to end, all real: POST /v1/runs → BullMQ job in Redis → worker → per-run container →
 * the openai SDK asks the scripted server → bash runs in that container via docker exec → the result
 * goes back → final answer → JSONL log + report.md → container removed → GET shows the outcome.
 * Run per isolation class (run-e2e.test.ts: runc with the API's input checks, run-e2e-gvisor.test.ts:
 * the runs themselves under gVisor).
 */
import { existsSync, readFileSync } from 'node:fs';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { decisionsAnswer, promptText } from '../../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../../support/fake-openai-chat';
import { startHarness, type Harness } from '../../support/corral-harness';
import type { IsolationClass } from '../../../src/domain/sandbox';
import { isolationEnv } from '../../support/sandbox-env';
import { eventually } from '../../support/eventually';

/** `inputChecks`: also the tests that do not depend on the sandbox (bad bodies, malformed jobs). */
export function runE2e(isolation: IsolationClass, o: { inputChecks: boolean }): void {

jest.setTimeout(120_000);

const agent = scriptedAgent({
  'E2E-COUNT': [
    toolCallTurn([{ name: 'bash', args: { command: 'wc -l < hello.txt > count.txt && cat count.txt && id -un && uname -r' } }]),
    finalTurn('hello.txt has 3 lines; I wrote the count to count.txt.'),
  ],
  'E2E-SECOND': () => finalTurn('nothing to do'),
});
let h: Harness;

beforeAll(async () => {
  h = await startHarness(`e2e-${isolation}`, { chat: agent, decisions: (body) => (promptText(body).includes('rm ') ? decisionsAnswer(1.5, 0.4) : decisionsAnswer(0.2, 0.95)) }, isolationEnv(isolation));
});
afterAll(async () => {
  await h?.close();
});

function readLog(path: string): Array<Record<string, unknown>> {
  return readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
}

test('a run goes from the REST API through the queue into its own container and back', async () => {
  const created = await h.api<{ id: string; status: string; links: Record<string, string> }>('POST', '/v1/runs', {
    task: 'E2E-COUNT: count the lines of hello.txt and write the number to count.txt',
    workspace: { files: { 'hello.txt': 'one\ntwo\nthree\n' } },
  });
  expect(created.status).toBe(201);
  expect(created.body.id).toMatch(/^run_/);
  expect(created.body.status).toBe('queued');
  const id = created.body.id;

  const run = await h.waitFor(id);
  expect(run).toMatchObject({ id, status: 'succeeded', outcome: 'succeeded', finalAnswer: 'hello.txt has 3 lines; I wrote the count to count.txt.' });
  expect(run.workerId).toBe(h.config.CORRAL_WORKER_ID);
  const containerId = run.containerId as string;
  expect(containerId).toMatch(/^[0-9a-f]{64}$/);

  // The log names the container; the command ran in it (its hostname is the container id) as the sandbox user.
  const events = readLog(run.logPath as string);
  // under gVisor the engine cannot read the workspace: the effect check says so once and checks connections only
  const gvisor = isolation === 'gvisor';
  expect(events.map((e) => e.type)).toEqual([
    'run.started', 'sandbox.ready', 'context.loaded', ...(gvisor ? ['effect.unchecked'] : []), 'model.response', 'tool.call', 'policy.decision', 'tool.result', 'model.response',
    'artifact', 'artifact', 'artifact', 'workspace.changes', ...(gvisor ? [] : ['effect.stats']), 'sandbox.removed', 'run.finished',
  ]);
  expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
  expect(events.find((e) => e.type === 'sandbox.ready')).toMatchObject({ containerId, image: h.config.CORRAL_SANDBOX_IMAGE, isolation });
  expect(events.find((e) => e.type === 'tool.result')).toMatchObject({ ok: true, blocked: false, exec: { exitCode: 0, timedOut: false }, output: expect.stringContaining('agent') });
  // the command ran under the run's isolation class: gVisor's Sentry reports kernel 4.4.0
  if (isolation === 'gvisor') expect((events.find((e) => e.type === 'tool.result') as { output: string }).output).toContain('4.4.0');
  else expect((events.find((e) => e.type === 'tool.result') as { output: string }).output).not.toContain('4.4.0');
  expect(events.find((e) => e.type === 'workspace.changes')).toMatchObject({ files: [{ path: 'count.txt', change: 'added', added: 1, removed: 0 }] });
  const decision = events.find((e) => e.type === 'policy.decision') as { verdict: { decision: string; static: { rule: string } } };
  expect(decision.verdict.decision).toBe('allow');

  // The model's second request carried the tool output from inside the container.
  const chats = h.fake.requests.filter((r) => r.path === '/v1/chat/completions' && promptText(r.body).includes('E2E-COUNT'));
  expect(chats).toHaveLength(2);
  const toolMsg = messagesOf(chats[1]!.body).find((m) => m.role === 'tool');
  expect(toolMsg?.content).toContain('3');
  expect(toolMsg?.content).toContain('agent');
  // The first message lists what the workspace holds.
  expect(messagesOf(chats[0]!.body).find((m) => m.role === 'user')?.content).toContain('Files in /workspace:\n- hello.txt');
  // The request offered the tools, with JSON schemas.
  const tools = (chats[0]!.body.tools as Array<{ function: { name: string } }>).map((t) => t.function.name);
  expect(tools).toEqual(expect.arrayContaining(['bash', 'read_file', 'write_file', 'edit_file', 'list_files']));

  // Artifacts: the workspace patch shows the file the command wrote.
  const patch = (run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!;
  expect(readFileSync(patch.path, 'utf8')).toMatch(/count\.txt[\s\S]*\+3/);

  // The report exists, on disk and through the API, and shows the command.
  expect(existsSync(run.reportPath as string)).toBe(true);
  const report = await h.api<string>('GET', `/v1/runs/${id}/report`);
  expect(report.status).toBe(200);
  expect(report.body).toContain('wc -l < hello.txt');
  expect(report.body).toContain(containerId.slice(0, 12));

  // The daemon's own event log shows the command exec'd in that container.
  const since = Math.floor(Date.parse(run.startedAt as string) / 1000) - 1;
  const stream = await h.docker.getEvents({ since, until: Math.ceil(Date.now() / 1000), filters: { container: [containerId] } });
  const dockerEvents = String(await new Promise<Buffer>((res) => { const b: Buffer[] = []; stream.on('data', (c: Buffer) => b.push(c)); stream.on('end', () => res(Buffer.concat(b))); }));
  const actions = dockerEvents.trim().split('\n').map((l) => (JSON.parse(l) as { Action: string }).Action);
  expect(actions).toContainEqual(expect.stringMatching(/^exec_start: timeout -s KILL \d+s bash -c wc -l < hello\.txt/));
  expect(actions.at(-1)).toBe('destroy');

  // The container is gone.
  await expect(h.docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  const left = await h.docker.listContainers({ all: true, filters: { label: [`corral.run-id=${id}`] } });
  expect(left).toEqual([]);

  // The events endpoint replays the same log.
  const ev = await h.api<{ events: Array<{ type: string }>; next: string }>('GET', `/v1/runs/${id}/events`);
  expect(ev.body.events.map((e) => e.type)).toEqual(events.map((e) => e.type));
});

test('SSE streams a run\'s events until it finishes', async () => {
  const created = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'E2E-SECOND: say hi' });
  const res = await fetch(`${h.url}/v1/runs/${created.body.id}/events`, { headers: { accept: 'text/event-stream' } });
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const text = await res.text(); // the server ends the stream after run.finished
  const types = [...text.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
  expect(types[0]).toBe('run.started');
  expect(types.at(-1)).toBe('run.finished');
});

if (o.inputChecks) {
test('unknown run → 404 JSON; malformed bodies → 400 naming the field', async () => {
  const missing = await h.api('GET', '/v1/runs/run_doesnotexist');
  expect(missing.status).toBe(404);
  expect(missing.body).toEqual({ error: { code: 'not_found', message: 'no run with id run_doesnotexist' } });

  const notId = await h.api('GET', '/v1/runs/nope');
  expect(notId.status).toBe(400);

  const cases: Array<[unknown, string]> = [
    [{}, 'task'],
    [{ task: '' }, 'task'],
    [{ task: 'x', budgets: { llmCalls: 'many' } }, 'budgets.llmCalls'],
    [{ task: 'x', workspace: { files: { '../etc/passwd': 'x' } } }, 'workspace.files'],
    [{ task: 'x', egress: { allow: ['*'] } }, 'egress.allow.0'],
    [{ task: 'x', egress: { allow: ['*.com'] } }, 'egress.allow.0'],
    [{ task: 'x', limits: { memoryMb: 999_999 } }, 'limits.memoryMb'],
    [{ task: 'x', limits: { isolation: 'kata' } }, 'limits.isolation'],
    [{ task: 'x', budgets: { llmCalls: 999 } }, 'budgets.llmCalls'],
    [{ task: 'x', policy: 'nosuchpolicy' }, 'policy'],
    [{ task: 'x', surprise: true }, '(body)'],
  ];
  for (const [body, field] of cases) {
    const r = await h.api<{ error: { code: string; message: string; field?: string } }>('POST', '/v1/runs', body);
    expect({ body, status: r.status, code: r.body.error.code }).toEqual({ body, status: 400, code: 'invalid_input' });
    if (field === '(body)') expect(r.body.error.message).toContain('surprise');
    else expect({ body, field: r.body.error.field }).toEqual({ body, field: expect.stringContaining(field) });
  }
  const badJson = await h.api<{ error: { code: string; message: string } }>('POST', '/v1/runs', '{"task": ');
  expect(badJson.status).toBe(400);
  expect(badJson.body.error.message).toMatch(/JSON/i);
});

test('a malformed job put straight on the queue fails with a reason; the worker keeps going', async () => {
  const conn = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const queue = new Queue(h.config.CORRAL_QUEUE, { connection: conn });
  try {
    const bad = await queue.add('run', { runId: 'run_malformed1', spec: { budgets: { llmCalls: -1 } } }, { jobId: 'run_malformed1' });
    const worse = await queue.add('run', 'not even an object', { jobId: 'garbage-1' });
    const good = await queue.add('run', { runId: 'run_directjob1', spec: { task: 'E2E-SECOND: from another producer' } }, { jobId: 'run_directjob1' });
    const state = async (id: string) => (await queue.getJob(id))!.getState();
    await eventually(() => state(good.id!), { what: 'the direct job to complete', until: (st) => st === 'completed', timeoutMs: 60_000 }).catch(() => undefined);
    const goodJob = (await queue.getJob(good.id!))!;
    expect({ state: await goodJob.getState(), reason: goodJob.failedReason }).toEqual({ state: 'completed', reason: undefined });
    expect(await state(bad.id!)).toBe('failed');
    expect(await state(worse.id!)).toBe('failed');
    const badJob = (await queue.getJob(bad.id!))!;
    expect(badJob.failedReason).toMatch(/malformed job data: .*spec\.task/);
    expect(badJob.failedReason).toContain('spec.budgets.llmCalls');
    expect(badJob.attemptsMade).toBe(1);
    // The run record says why, for whoever asks the API.
    const rec = await h.api<{ status: string; reason: string }>('GET', '/v1/runs/run_malformed1');
    expect(rec.body.status).toBe('error');
    expect(rec.body.reason).toContain('spec.task');
    const direct = await h.api<{ status: string; finalAnswer: string; logPath: string }>('GET', '/v1/runs/run_directjob1');
    expect(direct.body).toMatchObject({ status: 'succeeded', finalAnswer: 'nothing to do' });

    // The same run id arriving again after BullMQ forgot the job (retention, queue.clean): never run twice.
    await (await queue.getJob(good.id!))!.remove();
    const again = await queue.add('run', { runId: 'run_directjob1', spec: { task: 'E2E-SECOND: from another producer' } }, { jobId: 'run_directjob1' });
    await eventually(() => state(again.id!), { what: 'the repeated job to end', until: (st) => ['failed', 'completed'].includes(st) }).catch(() => undefined);
    expect(await state(again.id!)).toBe('failed');
    expect((await queue.getJob(again.id!))!.failedReason).toMatch(/^run run_directjob1 already ended \(succeeded at /);
    const finishedLines = readFileSync(direct.body.logPath, 'utf8').split('\n').filter((l) => l.includes('"run.finished"'));
    expect(finishedLines).toHaveLength(1);
  } finally {
    await queue.close();
    await conn.quit();
  }
});
}
}
