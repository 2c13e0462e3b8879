/** PolicyGate: static → classifier → approval/unattended, with a scripted classifier server and a fake ApprovalPort. */
import OpenAI from 'openai';
import { InvalidInputError } from '../../src/domain/errors';
import type { GateContext } from '../../src/domain/gate';
import type { ApprovalPort, ApprovalRequest, ApprovalResult } from '../../src/domain/approval-port';
import { Classifier } from '../../src/policy/classifier';
import { loadPolicies } from '../../src/policy/load-policy';
import { PolicyGate } from '../../src/policy/policy-gate';
import { inProcessAnalyzer } from '../../src/policy/static-analyzer';
import { FIVE, scriptedByCommand, startFakeDecisionsServer, type FakeServer } from '../support/fake-decisions-server';

class FakeApprovals implements ApprovalPort {
  requests: ApprovalRequest[] = [];
  constructor(private readonly answer: ApprovalResult) {}
  async request(p: ApprovalRequest): Promise<ApprovalResult> {
    this.requests.push(p);
    return this.answer;
  }
}

const policies = loadPolicies('policies');
const analyzer = inProcessAnalyzer(policies);
const ctx = (task: string, approvals = false): GateContext => ({ runId: 'run-1', task, policy: 'default', approvals });
const call = (command: string, callId = 'call-1') => ({ callId, tool: 'bash', args: { command } });

describe('PolicyGate', () => {
  let server: FakeServer;
  afterEach(async () => server?.close());

  async function gate(approvals: ApprovalPort, handler = scriptedByCommand) {
    server = await startFakeDecisionsServer({ decisions: handler });
    const classifier = new Classifier({ client: new OpenAI({ apiKey: 'k', baseURL: server.baseURL, maxRetries: 0 }), model: 'm', timeoutMs: 2000 });
    return new PolicyGate({ policies, analyzer, classifier, approvals });
  }

  it('the five labelled examples, unattended: allow, allow, deny (ask), deny (ask), deny', async () => {
    const approvals = new FakeApprovals({ approved: true, by: 'x', waitedMs: 0, timedOut: false });
    const g = await gate(approvals);
    const verdicts = [];
    for (const f of FIVE) verdicts.push(await g.decide(call(f.command), ctx(f.task)));
    expect(verdicts.map((v) => v.decision)).toEqual(['allow', 'allow', 'deny', 'deny', 'deny']);
    // a static allow is final: the analyser understood the whole call, so the classifier is not asked
    expect(verdicts[0]!.classifier).toBeUndefined();
    expect(verdicts[1]!.classifier).toBeUndefined();
    expect(verdicts[2]!.classifier?.decision).toBe('ask');
    expect(verdicts[2]!.reason).toMatch(/unattended/);
    expect(verdicts[3]!.classifier?.decision).toBe('ask');
    expect(verdicts[4]!.static.decision).toBe('deny');
    expect(verdicts[4]!.classifier).toBeUndefined(); // a static deny is never sent to the classifier
    expect(server.requests).toHaveLength(2);
    expect(approvals.requests).toHaveLength(0);
    for (const v of verdicts.filter((x) => x.decision === 'deny')) expect(v.reason).toMatch(/blocked.*do not retry the same call/i);
  });

  it('ask with approvals on → ApprovalPort decides', async () => {
    const yes = new FakeApprovals({ approved: true, by: 'alice', waitedMs: 1200, timedOut: false });
    const g = await gate(yes);
    const v = await g.decide(call('rm -rf docs/', 'c7'), ctx('Remove the old docs folder', true));
    expect(v.decision).toBe('allow');
    expect(v.approval).toEqual({ approved: true, by: 'alice', waitedMs: 1200, timedOut: false });
    expect(yes.requests[0]).toMatchObject({ runId: 'run-1', callId: 'c7', tool: 'bash', args: { command: 'rm -rf docs/' } });
    expect(yes.requests[0]!.reason).toBeTruthy();
    await server.close();

    const timeout = new FakeApprovals({ approved: false, by: 'timeout', waitedMs: 900_000, timedOut: true });
    const g2 = await gate(timeout);
    const v2 = await g2.decide(call('rm -rf docs/'), ctx('Remove the old docs folder', true));
    expect(v2.decision).toBe('deny');
    expect(v2.reason).toMatch(/nobody approved it in time/);
  });

  it('classifier outage → ask → deny when unattended; → approval when attended', async () => {
    const approvals = new FakeApprovals({ approved: false, by: 'bob', waitedMs: 5, timedOut: false });
    const g = await gate(approvals, () => ({ status: 500, body: { error: { message: 'down' } } }));
    const v = await g.decide(call('pip install requests'), ctx('Summarise data/sales.csv'));
    expect(v.decision).toBe('deny');
    expect(v.classifier?.decision).toBe('ask');
    expect(v.classifier?.error).toBeDefined();
    expect(v.reason).toMatch(/unattended/);
    const v2 = await g.decide(call('pip install requests'), ctx('Summarise data/sales.csv', true));
    expect(v2.decision).toBe('deny');
    expect(v2.reason).toMatch(/bob denied it/);
    expect(approvals.requests).toHaveLength(1);
  });

  it('without a classifier: static allow → allow, static ask → approval or deny', async () => {
    const approvals = new FakeApprovals({ approved: true, by: 'cli', waitedMs: 1, timedOut: false });
    const g = new PolicyGate({ policies, analyzer, approvals });
    expect((await g.decide(call('npm test'), ctx('Fix the failing test'))).decision).toBe('allow');
    expect((await g.decide(call('git push'), ctx('Fix the failing test'))).decision).toBe('deny');
    expect((await g.decide(call('git push'), ctx('Fix the failing test', true))).decision).toBe('allow');
    expect((await g.decide({ callId: 'w', tool: 'write_file', args: { path: '.git/hooks/pre-commit', content: 'x' } }, ctx('t', true))).decision).toBe('deny');
    expect(approvals.requests).toHaveLength(1);
  });

  it('assess says whether the static answer is final and where an ask goes', async () => {
    const approvals = new FakeApprovals({ approved: true, by: 'x', waitedMs: 0, timedOut: false });
    const bare = new PolicyGate({ policies, analyzer, approvals });
    await expect(bare.assess({ tool: 'bash', args: { command: 'pytest -q' } }, 'default')).resolves.toMatchObject({ final: true, next: 'final', static: { decision: 'allow' } });
    await expect(bare.assess({ tool: 'bash', args: { command: 'pip install x' } }, 'default')).resolves.toMatchObject({ final: false, next: 'approval', static: { decision: 'ask' } });
    await expect(bare.assess({ tool: 'bash', args: { command: 'rm -rf .git' } }, 'default')).resolves.toMatchObject({ final: true, static: { decision: 'deny' } });
    const g = await gate(approvals);
    expect((await g.assess({ tool: 'bash', args: { command: 'pip install x' } }, 'default')).next).toBe('classifier');
  });

  it('unknown policy name → InvalidInputError', async () => {
    const g = new PolicyGate({ policies, analyzer, approvals: new FakeApprovals({ approved: true, by: 'x', waitedMs: 0, timedOut: false }) });
    await expect(g.decide(call('ls'), { ...ctx('t'), policy: 'nope' })).rejects.toBeInstanceOf(InvalidInputError);
  });
});
