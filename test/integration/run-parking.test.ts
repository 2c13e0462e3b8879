/**
 * Parking (issue 14, defect 2): a run that waits for a human gives its worker slot back, keeps its
 * sandbox, and takes a slot again when the answer comes. At concurrency 2, two of one tenant's runs
 * waiting for approval do not stop another tenant's run; a tenant's parked runs are capped.
 */
import { readFileSync } from 'node:fs';
import { decisionsAnswer, promptText } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { apiRequest } from '../support/api-request';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';

jest.setTimeout(180_000);

const TOKENS = { acme: 'acme-token-parking-0123456789', globex: 'globex-token-parking-0123456789' };

/** Leaves a file outside /workspace, asks to delete notes.txt (needs approval), then reports what it saw. */
const parkedRun = (body: Record<string, unknown>, turn: number) => {
  if (turn === 0) return toolCallTurn([{ name: 'bash', id: 'call_mark', args: { command: 'echo kept > /tmp/marker' } }]);
  if (turn === 1) return toolCallTurn([{ name: 'bash', id: 'call_rm', args: { command: 'rm -r notes.txt && cat /tmp/marker' } }]);
  const tools = messagesOf(body).filter((m) => m.role === 'tool');
  return finalTurn(`tool said: ${tools.at(-1)?.content ?? '(nothing)'}`);
};
const agent = scriptedAgent({
  'PARK-A1': parkedRun, 'PARK-A2': parkedRun, 'PARK-A3': parkedRun, 'PARK-C1': parkedRun, 'PARK-C2': parkedRun, 'PARK-C3': parkedRun,
  'PLAIN-B': [toolCallTurn([{ name: 'bash', id: 'call_ls', args: { command: 'ls' } }]), finalTurn('globex done')],
});
let h: Harness;

beforeAll(async () => {
  h = await startHarness('parking', {
    chat: agent,
    decisions: (body) => (promptText(body).includes('rm -r notes.txt') ? decisionsAnswer(1.2, 0.4) : decisionsAnswer(0.1, 0.95)),
  }, {
    CORRAL_CONCURRENCY: '2', CORRAL_MAX_PARKED_PER_TENANT: '2', CORRAL_APPROVAL_TIMEOUT_S: '150',
    CORRAL_API_TOKENS: `acme=${TOKENS.acme},globex=${TOKENS.globex}`, CORRAL_WARM_POOL: '0',
  });
});
afterAll(async () => {
  await h?.close();
});

const as = (tenant: keyof typeof TOKENS) => ({ authorization: `Bearer ${TOKENS[tenant]}` });
async function submit(tenant: keyof typeof TOKENS, marker: string): Promise<string> {
  const r = await apiRequest<{ id: string }>(h.url, 'POST', '/v1/runs', {
    task: `${marker}: clean up the workspace`, approvals: true, workspace: { files: { 'notes.txt': 'old notes\n' } },
  }, as(tenant));
  expect(r.status).toBe(201);
  return r.body.id;
}
async function waitFor(tenant: keyof typeof TOKENS, id: string, until: (r: Record<string, unknown>) => boolean, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  return eventually(async () => (await apiRequest<Record<string, unknown>>(h.url, 'GET', `/v1/runs/${id}`, undefined, as(tenant))).body, { what: `run ${id} in the expected state`, until, timeoutMs });
}
const awaiting = (r: Record<string, unknown>) => r.status === 'awaiting_approval';
const finished = (r: Record<string, unknown>) => !!r.finishedAt;

test('two runs of one tenant waiting for approval do not hold both slots; the cap refuses a third; answers resume them in their sandboxes', async () => {
  const slotsSeen: number[] = [];
  const sampler = setInterval(() => slotsSeen.push(h.corral.worker!.slots.inUse), 50);
  try {
    const a1 = await submit('acme', 'PARK-A1');
    const a2 = await submit('acme', 'PARK-A2');
    await waitFor('acme', a1, awaiting);
    await waitFor('acme', a2, awaiting);
    expect(h.corral.worker!.slots.parked).toBe(2);

    // Both slots are free for others: globex's run starts and ends while acme's two wait.
    const b = await submit('globex', 'PLAIN-B');
    const bRun = await waitFor('globex', b, finished, 60_000);
    expect(bRun).toMatchObject({ status: 'succeeded', finalAnswer: 'globex done' });
    for (const id of [a1, a2]) expect((await waitFor('acme', id, () => true)).status).toBe('awaiting_approval');

    // acme's third run needing approval: acme already has 2 parked runs, the cap; the call is refused at once.
    const a3 = await submit('acme', 'PARK-A3');
    const a3Run = await waitFor('acme', a3, (r) => finished(r) || awaiting(r), 60_000);
    expect(a3Run.status).toBe('succeeded');
    expect(a3Run.finalAnswer).toMatch(/tenant acme already has 2 run\(s\) waiting for a human \(CORRAL_MAX_PARKED_PER_TENANT\)/);

    // The answers come: each run takes a slot again and goes on in the sandbox it had (/tmp kept).
    for (const id of [a1, a2]) {
      expect((await apiRequest(h.url, 'POST', `/v1/runs/${id}/approvals/call_rm`, { decision: 'approve', by: 'alice' }, as('acme'))).status).toBe(200);
    }
    for (const id of [a1, a2]) {
      const run = await waitFor('acme', id, finished, 60_000);
      expect(run).toMatchObject({ status: 'succeeded', finalAnswer: expect.stringContaining('stdout:\nkept') });
      const patch = (run.artifacts as Array<{ name: string; path: string }>).find((a) => a.name === 'workspace.patch')!;
      expect(readFileSync(patch.path, 'utf8')).toMatch(/notes\.txt[\s\S]*-old notes/);
    }
    expect(h.corral.worker!.slots.parked).toBe(0);
  } finally {
    clearInterval(sampler);
  }
  // Never more than the worker's two slots in use at once.
  expect(Math.max(...slotsSeen)).toBeLessThanOrEqual(2);
  expect(slotsSeen.length).toBeGreaterThan(10);
});

test('a cancelled parked run ends cancelled and gives back its parking place and its sandbox', async () => {
  const id = await submit('acme', 'PARK-C1');
  const waiting = await waitFor('acme', id, awaiting);
  expect(h.corral.worker!.slots.parked).toBe(1);
  const containerId = waiting.containerId as string;
  expect((await h.docker.getContainer(containerId).inspect()).State.Running).toBe(true);
  expect((await apiRequest(h.url, 'POST', `/v1/runs/${id}/cancel`, undefined, as('acme'))).status).toBe(202);
  const run = await waitFor('acme', id, finished);
  expect(run).toMatchObject({ status: 'cancelled', pendingApprovals: [] });
  expect(h.corral.worker!.slots.parked).toBe(0);
  expect(h.corral.worker!.slots.inUse).toBe(0);
  await expect(h.docker.getContainer(containerId).inspect()).rejects.toMatchObject({ statusCode: 404 });
  // Its place under the cap is free again: two more acme runs can park.
  const again = [await submit('acme', 'PARK-C2'), await submit('acme', 'PARK-C3')];
  for (const r of again) await waitFor('acme', r, awaiting);
  for (const r of again) expect((await apiRequest(h.url, 'POST', `/v1/runs/${r}/approvals/call_rm`, { decision: 'deny', by: 'bob' }, as('acme'))).status).toBe(200);
  // Who denied is acme's token (its principal), not the name the body gave.
  for (const r of again) expect(await waitFor('acme', r, finished)).toMatchObject({ status: 'succeeded', finalAnswer: expect.stringMatching(/acme\/key-[0-9a-f]{8} denied it/) });
});
