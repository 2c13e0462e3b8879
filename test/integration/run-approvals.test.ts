/**
 * Approvals through the REST API on real runs: a call the policy and the risk review cannot settle
 * puts the run in awaiting_approval with the call visible in GET; approve resumes it and the command
 * runs in the container; deny blocks it and the model is told; no answer in time is a deny; an
 * unattended run never waits.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';

// Events read back from the JSONL log, checked field by field with toMatchObject.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type LoggedEvent = Record<string, any>;
const readEvents = (path: string): LoggedEvent[] => readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as LoggedEvent);

jest.setTimeout(120_000);

/** Each run asks to delete notes.txt (policy: ask; risk review: medium, not clearly authorized), then reports. */
const deleteThenReport = (body: Record<string, unknown>, turn: number) => {
  if (turn === 0) return toolCallTurn([{ name: 'bash', id: 'call_rm', args: { command: 'rm -r notes.txt && echo removed' } }]);
  const tool = messagesOf(body).find((m) => m.role === 'tool');
  return finalTurn(`tool said: ${tool?.content ?? '(nothing)'}`);
};
const agent = scriptedAgent({ 'CLI-APPROVE': deleteThenReport, 'CLI-DENY': deleteThenReport, 'APPROVE-ME': deleteThenReport, 'DENY-ME': deleteThenReport, 'UNATTENDED': deleteThenReport, 'TIMEOUT-ME': deleteThenReport });
let h: Harness;

beforeAll(async () => {
  h = await startHarness('approvals', {
    chat: agent,
    decisions: (body) => (promptText(body).includes('rm -r notes.txt') ? decisionsAnswer(1.2, 0.4) : decisionsAnswer(0.1, 0.95)),
  // Long enough for `corral approve` (a CLI process starting under a loaded CI host) to answer in time;
  // the timeout test waits it out once.
  }, { CORRAL_APPROVAL_TIMEOUT_S: '10' });
});
afterAll(async () => {
  await h?.close();
});

async function submit(marker: string, approvals: boolean): Promise<string> {
  const r = await h.api<{ id: string }>('POST', '/v1/runs', {
    task: `${marker}: clean up the workspace`, approvals, workspace: { files: { 'notes.txt': 'old notes\n', 'keep.txt': 'keep\n' } },
  });
  expect(r.status).toBe(201);
  return r.body.id;
}

const awaiting = (r: Record<string, unknown>) => r.status === 'awaiting_approval';

test('approve: the run waits with the call visible, then resumes and the command runs', async () => {
  const id = await submit('APPROVE-ME', true);
  const waiting = await h.waitFor(id, awaiting);
  expect(waiting.pendingApprovals).toEqual([
    expect.objectContaining({ callId: 'call_rm', tool: 'bash', args: { command: 'rm -r notes.txt && echo removed' }, risk: 'medium', reason: expect.stringContaining('risk review') }),
  ]);

  const wrongCall = await h.api('POST', `/v1/runs/${id}/approvals/call_nope`, { decision: 'approve' });
  expect(wrongCall.status).toBe(404);
  const badBody = await h.api<{ error: { field: string } }>('POST', `/v1/runs/${id}/approvals/call_rm`, { decision: 'maybe' });
  expect(badBody.status).toBe(400);
  expect(badBody.body.error.field).toBe('decision');

  const ok = await h.api('POST', `/v1/runs/${id}/approvals/call_rm`, { decision: 'approve', by: 'alice' });
  expect(ok.status).toBe(200);
  const again = await h.api('POST', `/v1/runs/${id}/approvals/call_rm`, { decision: 'deny' });
  expect(again.status).toBe(409);

  const run = await h.waitFor(id);
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: expect.stringContaining('removed'), pendingApprovals: [] });
  const events = readEvents(run.logPath as string);
  const decision = events.find((e) => e.type === 'policy.decision')!;
  expect(decision.verdict).toMatchObject({
    decision: 'allow', static: { decision: 'ask', rule: 'deleting-files' }, classifier: { decision: 'ask', riskLevel: 'medium', via: 'decisions' },
    // This server has auth off: the operator answered; "by" in the body is a note beside it.
    approval: { approved: true, by: 'operator (auth off)', note: 'alice', timedOut: false },
  });
  expect(events.find((e) => e.type === 'approval.pending')).toMatchObject({ callId: 'call_rm', tool: 'bash' });
  // The file is really gone from the workspace the container left behind.
  const patch = (run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!;
  expect(readFileSync(patch.path, 'utf8')).toMatch(/notes\.txt[\s\S]*-old notes/);
  const report = await h.api<string>('GET', `/v1/runs/${id}/report`);
  expect(report.body).toContain('alice');
});

test('deny: the command never runs and the model is told it was blocked', async () => {
  const id = await submit('DENY-ME', true);
  await h.waitFor(id, awaiting);
  expect((await h.api('POST', `/v1/runs/${id}/approvals/call_rm`, { decision: 'deny', by: 'bob' })).status).toBe(200);
  const run = await h.waitFor(id);
  expect(run.status).toBe('succeeded');
  expect(run.finalAnswer).toContain('This call was blocked: operator (auth off) denied it');
  const events = readEvents(run.logPath as string);
  expect(events.find((e) => e.type === 'tool.result')).toMatchObject({ blocked: true, ok: false });
  const patch = (run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!;
  expect(readFileSync(patch.path, 'utf8')).not.toContain('notes.txt');
});

test('no answer within the configured time is a deny', async () => {
  const id = await submit('TIMEOUT-ME', true);
  await h.waitFor(id, awaiting);
  const run = await h.waitFor(id);
  expect(run.finalAnswer).toContain('nobody approved it in time');
  const events = readEvents(run.logPath as string);
  expect(events.find((e) => e.type === 'policy.decision')!.verdict.approval).toMatchObject({ approved: false, by: 'timeout', timedOut: true });
  expect(events.find((e) => e.type === 'policy.decision')!.verdict.approval.waitedMs).toBeGreaterThanOrEqual(9900);
});

test('unattended: the same call is refused at once, the run never waits', async () => {
  const id = await submit('UNATTENDED', false);
  const run = await h.waitFor(id, (r) => !!r.finishedAt || r.status === 'awaiting_approval');
  expect(run.status).toBe('succeeded');
  expect(run.finalAnswer).toContain('unattended');
});

test('corral approve / --deny answer a pending call through the API', async () => {
  const corral = resolve(__dirname, '../../bin/corral');
  for (const [marker, flags, word, decision] of [['CLI-APPROVE', [], 'approved', 'allow'], ['CLI-DENY', ['--deny'], 'denied', 'deny']] as const) {
    const id = await submit(marker, true);
    await h.waitFor(id, awaiting);
    const { stdout } = await promisify(execFile)(corral, ['approve', id, 'call_rm', ...flags, '--note', 'carol', '--api', h.url]);
    expect(stdout).toBe(`${word} call_rm of ${id} as operator (auth off)\n`);
    const run = await h.waitFor(id);
    const verdict = readEvents(run.logPath as string).find((e) => e.type === 'policy.decision')!.verdict;
    expect(verdict).toMatchObject({ decision, approval: { approved: decision === 'allow', by: 'operator (auth off)', note: 'carol' } });
  }
  // Unknown call: a clear message and exit 1.
  const err = await promisify(execFile)(corral, ['approve', 'run_doesnotexist', 'call_x', '--api', h.url]).catch((e: { code: number; stderr: string }) => e);
  expect(err).toMatchObject({ code: 1, stderr: expect.stringContaining('no run with id run_doesnotexist') });
});
