/** runToolCall over fakes of our ports: parse → validate → allowed tools → gate → execute, and the log excerpt. */
import { CancelledError } from '../../src/domain/errors';
import type { ModelToolCall } from '../../src/domain/model';
import { TOOLS } from '../../src/tools/registry';
import { excerpt, runToolCall } from '../../src/run/tool-call';
import { FakeGate, FakeSandbox, allowVerdict, denyVerdict, recordEvents, toolCall } from '../support/fake-ports';

function harness(opts: { allowed?: string[] | null; gate?: FakeGate; sandbox?: FakeSandbox; signal?: AbortSignal } = {}) {
  const rec = recordEvents();
  const gate = opts.gate ?? new FakeGate();
  const sandbox = opts.sandbox ?? new FakeSandbox();
  const allowed = opts.allowed ? new Set(opts.allowed) : null;
  const deps = { tools: TOOLS, allowed, gate, sandbox, emit: rec.emit, clock: () => 1_000, execTimeoutMs: 5_000, maxOutputBytes: 1024 };
  const ctx = { runId: 'run_tc01', task: 'read the notes', policy: 'default', approvals: false, evidence: ['bash output: earlier'], signal: opts.signal ?? new AbortController().signal };
  return { ...rec, gate, sandbox, ctx, call: (c: ModelToolCall) => runToolCall(deps, c, ctx) };
}

describe('excerpt', () => {
  it('keeps text up to the limit whole', () => {
    expect(excerpt('')).toBe('');
    expect(excerpt('abcd', 4)).toBe('abcd');
    expect(excerpt('x'.repeat(2000))).toBe('x'.repeat(2000));
  });

  it('cuts longer text to a head and a tail of half the limit each, and says how much was left out', () => {
    expect(excerpt('abcdefghij', 4)).toBe('ab\n[… 6 characters not logged …]\nij');
    expect(excerpt('abcdefghij', 5)).toBe('ab\n[… 6 characters not logged …]\nij'); // an odd limit rounds the halves down
    expect(excerpt('abcde', 4)).toBe('ab\n[… 1 characters not logged …]\nde');
  });

  it('defaults to 2000 characters: 1000 of head, 1000 of tail', () => {
    const text = `${'h'.repeat(1000)}${'m'.repeat(3)}${'t'.repeat(1000)}`;
    expect(excerpt(text)).toBe(`${'h'.repeat(1000)}\n[… 3 characters not logged …]\n${'t'.repeat(1000)}`);
  });
});

describe('runToolCall: the allowed tools', () => {
  it('refuses a tool outside the allowed set before the gate: neither the gate nor the sandbox is called', async () => {
    const h = harness({ allowed: ['read_file', 'list_files'] });

    const r = await h.call(toolCall('x1', 'bash', { command: 'rm -rf /' }));

    expect(r).toEqual({ kind: 'refused', content: 'error: the task does not allow the bash tool. Allowed tools: read_file, list_files.' });
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
    expect(h.events).toEqual([
      { type: 'tool.call', callId: 'x1', tool: 'bash', args: { command: 'rm -rf /' } },
      { type: 'tool.result', callId: 'x1', tool: 'bash', ok: false, blocked: true, summary: "bash is not among the task's allowed tools", ms: 0 },
    ]);
  });

  it('refuses before parsing: a disallowed tool with bad JSON is refused, not malformed', async () => {
    const h = harness({ allowed: ['read_file'] });
    const r = await h.call(toolCall('x2', 'write_file', '{"path": '));
    expect(r).toEqual({ kind: 'refused', content: 'error: the task does not allow the write_file tool. Allowed tools: read_file.' });
    expect(h.ofType('tool.result')).toEqual([
      { type: 'tool.result', callId: 'x2', tool: 'write_file', ok: false, blocked: true, summary: "write_file is not among the task's allowed tools", ms: 0 },
    ]);
    expect(h.gate.calls).toEqual([]);
  });

  it('an unknown tool is malformed, and the message names only the allowed tools', async () => {
    const h = harness({ allowed: ['list_files', 'read_file'] });
    const r = await h.call(toolCall('x3', 'python', { code: '1' }));
    expect(r).toEqual({ kind: 'malformed', content: 'error: there is no tool named "python". Available tools: read_file, list_files.' });
    expect(h.ofType('tool.result')).toEqual([
      { type: 'tool.result', callId: 'x3', tool: 'python', ok: false, blocked: false, summary: 'unknown tool "python"', ms: 0 },
    ]);
  });

  it('an allowed tool goes through the gate to the sandbox', async () => {
    const h = harness({ allowed: ['read_file'], sandbox: new FakeSandbox({ files: { 'notes.txt': 'hello' } }) });

    const r = await h.call(toolCall('x4', 'read_file', { path: 'notes.txt' }));

    expect(r).toEqual({ kind: 'ok', content: '     1\thello' });
    expect(h.gate.calls).toEqual([{ call: { callId: 'x4', tool: 'read_file', args: { path: 'notes.txt' } }, ctx: h.ctx }]);
    expect(h.sandbox.calls).toEqual([{ op: 'readFile', path: 'notes.txt', maxBytes: 256 * 1024 }]);
    expect(h.events).toEqual([
      { type: 'tool.call', callId: 'x4', tool: 'read_file', args: { path: 'notes.txt' } },
      { type: 'policy.decision', callId: 'x4', tool: 'read_file', verdict: allowVerdict() },
      { type: 'tool.result', callId: 'x4', tool: 'read_file', ok: true, blocked: false, summary: 'read notes.txt (5 bytes)', ms: 0, output: '     1\thello' },
    ]);
  });

  it('allowed null: every offered tool may be called', async () => {
    const h = harness({ allowed: null });
    expect(await h.call(toolCall('x5', 'bash', { command: 'true' }))).toEqual({ kind: 'ok', content: 'exit code: 0\n(no output)' });
    expect(h.gate.calls).toHaveLength(1);
    expect(h.sandbox.execs.map((c) => c.argv)).toEqual([['bash', '-c', 'true']]);
  });
});

describe('runToolCall: kinds and the log', () => {
  it('a gate deny is blocked: the model reads the reason, the sandbox is not called', async () => {
    const h = harness({ gate: new FakeGate(() => denyVerdict('Blocked: no network.')) });
    const r = await h.call(toolCall('k1', 'bash', { command: 'curl https://example.org' }));
    expect(r).toEqual({ kind: 'blocked', content: 'Blocked: no network.' });
    expect(h.sandbox.calls).toEqual([]);
    expect(h.events.at(-1)).toEqual({ type: 'tool.result', callId: 'k1', tool: 'bash', ok: false, blocked: true, summary: 'Blocked: no network.', ms: 0 });
  });

  it('bad JSON and schema mismatches are malformed and never reach the gate', async () => {
    const h = harness();
    expect(await h.call(toolCall('k2', 'bash', '{'))).toMatchObject({ kind: 'malformed' });
    expect(await h.call(toolCall('k3', 'bash', { cmd: 'ls' }))).toMatchObject({ kind: 'malformed' });
    expect(h.gate.calls).toEqual([]);
    expect(h.ofType('tool.result').map((e) => [e.callId, e.ok, e.blocked])).toEqual([['k2', false, false], ['k3', false, false]]);
  });

  it('a non-zero exit is failed, with exec details (no stdout/stderr) and the output in the log', async () => {
    const h = harness({ sandbox: new FakeSandbox({ exec: () => ({ exitCode: 2, stderr: 'boom\n', durationMs: 7 }) }) });
    const r = await h.call(toolCall('k4', 'bash', { command: 'make' }));
    expect(r).toEqual({ kind: 'failed', content: 'exit code: 2\nstderr:\nboom\n' });
    expect(h.events.at(-1)).toEqual({
      type: 'tool.result', callId: 'k4', tool: 'bash', ok: false, blocked: false, summary: 'exit 2 in 7 ms', ms: 0,
      exec: { exitCode: 2, truncated: false, timedOut: false, oomKilled: false, durationMs: 7, stdoutBytes: 0, stderrBytes: 5 },
      output: 'exit code: 2\nstderr:\nboom\n',
    });
  });

  it('the model gets the whole output; the log keeps an excerpt with the cut noted', async () => {
    const big = `${'a'.repeat(1000)}${'b'.repeat(4000)}${'c'.repeat(1000)}`;
    const h = harness({ sandbox: new FakeSandbox({ files: { 'big.txt': big } }) });
    const r = await h.call(toolCall('k5', 'read_file', { path: 'big.txt' }));
    const seen = `     1\t${big}`; // read_file numbers its lines
    expect(r).toEqual({ kind: 'ok', content: seen });
    expect(h.ofType('tool.result')[0]!.output).toBe(`${seen.slice(0, 1000)}\n[… 4007 characters not logged …]\n${'c'.repeat(1000)}`);
    expect(h.ofType('tool.result')[0]!.output).toBe(excerpt(seen));
  });

  it('a signal aborted while the gate decided: CancelledError, nothing runs, no tool.result', async () => {
    const ctrl = new AbortController();
    const gate = new FakeGate(() => {
      ctrl.abort();
      return allowVerdict();
    });
    const h = harness({ gate, signal: ctrl.signal });
    await expect(h.call(toolCall('k6', 'bash', { command: 'ls' }))).rejects.toBeInstanceOf(CancelledError);
    expect(h.sandbox.calls).toEqual([]);
    expect(h.events.map((e) => e.type)).toEqual(['tool.call', 'policy.decision']);
  });
});
