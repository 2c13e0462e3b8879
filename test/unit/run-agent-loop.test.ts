/** runAgentLoop over fakes of our ports: turns, tool results back to the model, refusals as values, the gate, files. */
import type { RunEventBody } from '../../src/domain/events';
import type { ChatMessage } from '../../src/domain/model';
import { runAgentLoop, type AgentLoopInput, type Prices } from '../../src/run/agent-loop';
import { systemPrompt } from '../../src/run/system-prompt';
import { bashTool } from '../../src/tools/bash';
import { readFileTool } from '../../src/tools/files';
import { TOOLS } from '../../src/tools/registry';
import type { Tool } from '../../src/tools/tool';
import {
  FakeGate, FakeSandbox, ScriptedModel, allowVerdict, answers, callsTools, denyVerdict, recordEvents, toolCall,
} from '../support/fake-ports';

const PRICES: Prices = { inputPerMtok: 2, outputPerMtok: 8 };
const ALL_TOOLS = 'bash, read_file, write_file, edit_file, apply_patch, list_files, fetch_url';

function harness(opts: { model: ScriptedModel; sandbox?: FakeSandbox; gate?: FakeGate; input?: Partial<AgentLoopInput>; clock?: () => number; tools?: readonly Tool[] }) {
  const rec = recordEvents();
  const sandbox = opts.sandbox ?? new FakeSandbox();
  const gate = opts.gate ?? new FakeGate();
  const input: AgentLoopInput = {
    runId: 'run_loop01', task: 'count the files in the workspace', policy: 'default', approvals: false,
    budgets: { llmCalls: 10, toolCalls: 20, tokens: 1_000_000, wallTimeS: 60, costUsd: 1 },
    execTimeoutMs: 30_000, maxOutputBytes: 65_536,
    ...opts.input,
  };
  const deps = { model: opts.model, sandbox, gate, emit: rec.emit, clock: opts.clock ?? (() => 1_000_000), prices: PRICES, ...(opts.tools ? { tools: opts.tools } : {}) };
  return { ...rec, sandbox, gate, model: opts.model, input, run: () => runAgentLoop(deps, input) };
}

const types = (events: RunEventBody[]) => events.map((e) => e.type);
const toolMessages = (messages: ChatMessage[]) => messages.filter((m) => m.role === 'tool');

describe('runAgentLoop: the happy path', () => {
  it('runs bash in the sandbox, sends the result back under its call id, and returns the final answer with usage', async () => {
    let now = 1_000_000;
    const model = new ScriptedModel([
      callsTools([toolCall('call_1', 'bash', { command: 'ls -1 | wc -l' })], { inputTokens: 1000, outputTokens: 200 }, 'Let me look.'),
      answers('There are 3 files.', { inputTokens: 1500, outputTokens: 50 }),
    ]);
    const sandbox = new FakeSandbox({
      exec: () => {
        now += 40;
        return { stdout: '3\n', durationMs: 12 };
      },
    });
    const h = harness({ model, sandbox, clock: () => now });

    const result = await h.run();

    expect(sandbox.calls).toEqual([
      { op: 'exec', argv: ['bash', '-c', 'ls -1 | wc -l'], timeoutMs: 30_000, maxOutputBytes: 65_536, signal: expect.any(AbortSignal) },
    ]);
    // First request: system prompt, the task, every tool's spec.
    const [first, second] = model.requests;
    expect(first!.messages).toEqual([
      { role: 'system', content: systemPrompt(TOOLS.filter((t) => !t.optIn)) },
      { role: 'user', content: 'count the files in the workspace\n\n(The workspace /workspace is empty.)' },
    ]);
    expect(first!.tools.map((t) => t.name)).toEqual(ALL_TOOLS.split(', '));
    expect(first!.tools[0]!.parameters).toMatchObject({ type: 'object', properties: { command: { type: 'string' } }, required: ['command'] });
    expect(first!.signal).toBeInstanceOf(AbortSignal);
    // Second request: the same history plus the assistant turn and the tool result under its id.
    expect(second!.messages.slice(0, 2)).toEqual(first!.messages);
    expect(second!.messages.slice(2)).toEqual([
      { role: 'assistant', content: 'Let me look.', toolCalls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls -1 | wc -l"}' }] },
      { role: 'tool', toolCallId: 'call_1', content: 'exit code: 0\nstdout:\n3\n' },
    ]);

    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'policy.decision', 'tool.result', 'model.response']);
    expect(h.events).toEqual([
      {
        type: 'model.response', turn: 1, content: 'Let me look.', toolCalls: [{ id: 'call_1', name: 'bash', arguments: '{"command":"ls -1 | wc -l"}' }],
        usage: { inputTokens: 1000, outputTokens: 200 }, costUsd: expect.closeTo(0.0036, 10), ms: 0, model: 'scripted', finishReason: 'tool_calls',
      },
      { type: 'tool.call', callId: 'call_1', tool: 'bash', args: { command: 'ls -1 | wc -l' } },
      { type: 'policy.decision', callId: 'call_1', tool: 'bash', verdict: allowVerdict() },
      {
        type: 'tool.result', callId: 'call_1', tool: 'bash', ok: true, blocked: false, summary: 'exit 0 in 12 ms', ms: 40,
        exec: { exitCode: 0, truncated: false, timedOut: false, oomKilled: false, durationMs: 12, stdoutBytes: 2, stderrBytes: 0 },
        output: 'exit code: 0\nstdout:\n3\n',
      },
      {
        type: 'model.response', turn: 2, content: 'There are 3 files.', toolCalls: [],
        usage: { inputTokens: 1500, outputTokens: 50 }, costUsd: expect.closeTo(0.0034, 10), ms: 0, model: 'scripted', finishReason: 'stop',
      },
    ]);

    expect(result).toEqual({
      outcome: 'succeeded', finalAnswer: 'There are 3 files.', reason: 'the model gave its final answer',
      usage: { llmCalls: 2, toolCalls: 1, inputTokens: 2500, outputTokens: 250, costUsd: expect.closeTo(0.007, 10), wallTimeMs: 40 },
    });
    expect(result).not.toHaveProperty('budgetExceeded');
    // The run is over: nothing it handed out is left aborted-by-timer or pending.
    expect(first!.signal!.aborted).toBe(false);
  });

  it('a final answer with null content is an empty answer; no tool call means no gate and no sandbox', async () => {
    const h = harness({ model: new ScriptedModel([{ content: null, toolCalls: [] }]) });
    const result = await h.run();
    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: '', usage: { llmCalls: 1, toolCalls: 0, inputTokens: 0, outputTokens: 0, costUsd: 0 } });
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
    expect(types(h.events)).toEqual(['model.response']);
  });

  it('names the workspace files in the first message, at most 50 of them', async () => {
    const files = Array.from({ length: 53 }, (_, i) => `src/f${i}.ts`);
    const h = harness({ model: new ScriptedModel([answers('ok')]), input: { workspaceFiles: files } });
    await h.run();
    const user = h.model.requests[0]!.messages[1]!;
    expect(user.role).toBe('user');
    expect(user.content).toBe(
      `count the files in the workspace\n\nFiles in /workspace:\n${files.slice(0, 50).map((f) => `- ${f}`).join('\n')}\n… and 3 more`,
    );
  });

  it('answers several tool calls of one turn in order, each under its own id', async () => {
    const model = new ScriptedModel([
      callsTools([
        toolCall('c1', 'bash', { command: 'echo one' }),
        toolCall('c2', 'write_file', { path: 'two.txt', content: 'two' }),
        toolCall('c3', 'bash', { command: 'echo three' }),
      ]),
      answers('done'),
    ]);
    const sandbox = new FakeSandbox({ exec: (argv) => ({ stdout: `${argv[2]!.slice(5)}\n` }) });
    const h = harness({ model, sandbox });

    const result = await h.run();

    expect(result.outcome).toBe('succeeded');
    expect(sandbox.calls.map((c) => (c.op === 'exec' ? c.argv[2] : c.op))).toEqual(['echo one', 'writeFile', 'echo three']);
    expect(h.gate.calls.map((g) => g.call.callId)).toEqual(['c1', 'c2', 'c3']);
    expect(model.requests[1]!.messages.slice(3)).toEqual([
      { role: 'tool', toolCallId: 'c1', content: 'exit code: 0\nstdout:\none\n' },
      { role: 'tool', toolCallId: 'c2', content: 'wrote 3 bytes to two.txt' },
      { role: 'tool', toolCallId: 'c3', content: 'exit code: 0\nstdout:\nthree\n' },
    ]);
    expect(h.events.filter((e) => e.type !== 'model.response').map((e) => `${e.type}:${'callId' in e ? e.callId : ''}`)).toEqual([
      'tool.call:c1', 'policy.decision:c1', 'tool.result:c1',
      'tool.call:c2', 'policy.decision:c2', 'tool.result:c2',
      'tool.call:c3', 'policy.decision:c3', 'tool.result:c3',
    ]);
    expect(h.events[0]).toMatchObject({
      type: 'model.response',
      toolCalls: [
        { id: 'c1', name: 'bash', arguments: '{"command":"echo one"}' },
        { id: 'c2', name: 'write_file', arguments: '{"path":"two.txt","content":"two"}' },
        { id: 'c3', name: 'bash', arguments: '{"command":"echo three"}' },
      ],
    });
    expect(result.usage).toMatchObject({ llmCalls: 2, toolCalls: 3 });
  });

  it('a non-zero exit is a result the model reads, not a failure of the run', async () => {
    const model = new ScriptedModel([callsTools([toolCall('c1', 'bash', { command: 'false' })]), answers('it failed')]);
    const sandbox = new FakeSandbox({ exec: () => ({ exitCode: 1, stderr: 'nope\n', durationMs: 3 }) });
    const h = harness({ model, sandbox });
    const result = await h.run();
    expect(result.outcome).toBe('succeeded');
    expect(model.lastMessages[1]).toEqual({ role: 'tool', toolCallId: 'c1', content: 'exit code: 1\nstderr:\nnope\n' });
    expect(h.ofType('tool.result')[0]).toMatchObject({
      ok: false, blocked: false, summary: 'exit 1 in 3 ms', exec: { exitCode: 1, stderrBytes: 5 }, output: 'exit code: 1\nstderr:\nnope\n',
    });
  });

  it('model.response carries the model name and finish reason the server reported, and the tool calls as sent (bad JSON too)', async () => {
    const model = new ScriptedModel([
      { content: 'trying', toolCalls: [toolCall('x1', 'bash', '{"command": "ls"')], model: 'gpt-4.1-mini-2025-04-14', finishReason: 'length' },
      { content: 'done', toolCalls: [], model: 'gpt-4.1-mini-2025-04-14', finishReason: 'content_filter' },
    ]);
    const h = harness({ model });
    await h.run();
    expect(h.ofType('model.response')).toEqual([
      {
        type: 'model.response', turn: 1, content: 'trying', toolCalls: [{ id: 'x1', name: 'bash', arguments: '{"command": "ls"' }],
        usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, ms: 0, model: 'gpt-4.1-mini-2025-04-14', finishReason: 'length',
      },
      {
        type: 'model.response', turn: 2, content: 'done', toolCalls: [],
        usage: { inputTokens: 0, outputTokens: 0 }, costUsd: 0, ms: 0, model: 'gpt-4.1-mini-2025-04-14', finishReason: 'content_filter',
      },
    ]);
  });
});

describe('runAgentLoop: bad tool calls are results the model sees', () => {
  const cases: { name: string; call: ReturnType<typeof toolCall>; content: RegExp; args: unknown; summary: string | RegExp }[] = [
    {
      name: 'arguments that are not JSON',
      call: toolCall('bad1', 'bash', '{"command": "ls"'),
      content: /^error: the arguments are not valid JSON \(.+\)\. Send a JSON object matching the bash schema\.$/,
      args: '{"command": "ls"',
      summary: 'arguments were not valid JSON',
    },
    {
      name: 'an unknown tool',
      call: toolCall('bad2', 'python', { code: 'print(1)' }),
      content: new RegExp(`^error: there is no tool named "python"\\. Available tools: ${ALL_TOOLS}\\.$`),
      args: '{"code":"print(1)"}',
      summary: 'unknown tool "python"',
    },
    {
      name: 'arguments that do not match the schema',
      call: toolCall('bad3', 'bash', { cmd: 'ls' }),
      content: /^error: invalid arguments for bash: command: Invalid input: expected string, received undefined; cmd: unknown field \(not in the schema\)$/,
      args: { cmd: 'ls' },
      summary: /^invalid arguments: command: .*cmd: unknown field \(not in the schema\)$/,
    },
    {
      name: 'a JSON value that is not an object',
      call: toolCall('bad4', 'read_file', '["a.txt"]'),
      content: /^error: invalid arguments for read_file: \(body\): Invalid input: expected object, received array$/,
      args: ['a.txt'],
      summary: /^invalid arguments: \(body\)/,
    },
    {
      name: 'empty arguments where a field is required',
      call: toolCall('bad5', 'bash', '  '),
      content: /^error: invalid arguments for bash: command: Invalid input: expected string, received undefined$/,
      args: {},
      summary: /^invalid arguments: command/,
    },
  ];

  it.each(cases)('$name: error message to the model, tool.call + tool.result(ok false), no gate, no sandbox, the run goes on', async ({ call, content, args, summary }) => {
    const model = new ScriptedModel([callsTools([call]), answers('I will stop here.')]);
    const h = harness({ model });

    const result = await h.run();

    const seen = model.lastMessages[1]!;
    expect(seen).toEqual({ role: 'tool', toolCallId: call.id, content: expect.stringMatching(content) });
    expect(types(h.events)).toEqual(['model.response', 'tool.call', 'tool.result', 'model.response']);
    expect(h.events[1]).toEqual({ type: 'tool.call', callId: call.id, tool: call.name, args });
    expect(h.events[2]).toEqual({
      type: 'tool.result', callId: call.id, tool: call.name, ok: false, blocked: false,
      summary: typeof summary === 'string' ? summary : expect.stringMatching(summary), ms: 0,
    });
    expect(h.gate.calls).toEqual([]);
    expect(h.sandbox.calls).toEqual([]);
    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'I will stop here.', usage: { llmCalls: 2, toolCalls: 1 } });
  });

  it('empty arguments are {} and schema defaults apply (list_files lists ".")', async () => {
    const model = new ScriptedModel([callsTools([toolCall('l1', 'list_files', '')]), answers('listed')]);
    const sandbox = new FakeSandbox({ files: { 'a.txt': 'abc', 'src/b.ts': 'x' } });
    const h = harness({ model, sandbox });
    await h.run();
    expect(h.gate.calls[0]!.call).toEqual({ callId: 'l1', tool: 'list_files', args: { path: '.' } });
    expect(sandbox.calls).toEqual([{ op: 'listFiles', path: '.', maxEntries: 500 }]);
    expect(model.lastMessages[1]).toEqual({ role: 'tool', toolCallId: 'l1', content: `-         3 a.txt\n-         1 src/b.ts` });
  });

  it('offers only deps.tools when given: the prompt, the specs and the unknown-tool message agree', async () => {
    const tools = [bashTool, readFileTool] as Tool[];
    const model = new ScriptedModel([callsTools([toolCall('w1', 'write_file', { path: 'a', content: 'b' })]), answers('ok')]);
    const h = harness({ model, tools });
    await h.run();
    expect(model.requests[0]!.tools.map((t) => t.name)).toEqual(['bash', 'read_file']);
    expect(model.requests[0]!.messages[0]!.content).toContain('Tools: bash, read_file.');
    expect(model.lastMessages[1]!.content).toBe('error: there is no tool named "write_file". Available tools: bash, read_file.');
    expect(h.sandbox.calls).toEqual([]);
  });
});

describe('runAgentLoop: the gate', () => {
  it('a deny: the sandbox is not called, the model reads the reason, tool.result is blocked, policy.decision carries the verdict', async () => {
    const reason = 'Blocked: the policy forbids network access (curl).';
    const gate = new FakeGate((call) => (String(call.args.command).startsWith('curl') ? denyVerdict(reason) : allowVerdict()));
    const model = new ScriptedModel([
      callsTools([toolCall('n1', 'bash', { command: 'curl https://example.org' })]),
      callsTools([toolCall('n2', 'bash', { command: 'echo offline' })]),
      answers('no network, so I stopped'),
    ]);
    const h = harness({ model, gate });

    const result = await h.run();

    expect(h.sandbox.execs.map((c) => c.argv)).toEqual([['bash', '-c', 'echo offline']]);
    expect(model.lastMessages[1]).toEqual({ role: 'tool', toolCallId: 'n1', content: reason });
    expect(h.events.slice(1, 4)).toEqual([
      { type: 'tool.call', callId: 'n1', tool: 'bash', args: { command: 'curl https://example.org' } },
      { type: 'policy.decision', callId: 'n1', tool: 'bash', verdict: denyVerdict(reason) },
      { type: 'tool.result', callId: 'n1', tool: 'bash', ok: false, blocked: true, summary: reason, ms: 0 },
    ]);
    expect(h.ofType('tool.result').map((e) => [e.callId, e.ok, e.blocked])).toEqual([['n1', false, true], ['n2', true, false]]);
    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'no network, so I stopped', usage: { toolCalls: 2, llmCalls: 3 } });
  });

  it('gets the run id, task, policy, approvals, the signal and the last 3 tool outputs as evidence (never blocked ones)', async () => {
    const commands = ['echo 1', 'echo 2', 'rm -rf /', 'echo 3', 'echo 4', 'echo 5'];
    const model = new ScriptedModel(
      (_req, i) => (i < commands.length ? callsTools([toolCall(`e${i}`, 'bash', { command: commands[i]! })]) : answers('done')),
    );
    const gate = new FakeGate((call) => (call.args.command === 'rm -rf /' ? denyVerdict('no') : allowVerdict()));
    const sandbox = new FakeSandbox({ exec: (argv) => ({ stdout: `out${argv[2]!.slice(5)}` }) });
    const h = harness({ model, gate, sandbox, input: { runId: 'run_gate42', task: 'print numbers', policy: 'strict', approvals: true } });

    await h.run();

    const out = (n: number) => `bash output: exit code: 0\nstdout:\nout${n}`;
    expect(gate.calls.map((g) => g.ctx.evidence)).toEqual([
      [],
      [out(1)],
      [out(1), out(2)],
      [out(1), out(2)],
      [out(1), out(2), out(3)],
      [out(2), out(3), out(4)],
    ]);
    for (const { ctx } of gate.calls) {
      expect(ctx).toMatchObject({ runId: 'run_gate42', task: 'print numbers', policy: 'strict', approvals: true });
      expect(ctx.signal).toBeInstanceOf(AbortSignal);
    }
    expect(gate.calls.map((g) => g.call)).toEqual(commands.map((command, i) => ({ callId: `e${i}`, tool: 'bash', args: { command } })));
  });

  it('keeps at most 2000 characters of each tool output as evidence', async () => {
    const big = 'x'.repeat(5000);
    const model = new ScriptedModel([
      callsTools([toolCall('r1', 'read_file', { path: 'big.txt' })]),
      callsTools([toolCall('r2', 'bash', { command: 'true' })]),
      answers('ok'),
    ]);
    const h = harness({ model, sandbox: new FakeSandbox({ files: { 'big.txt': big } }) });
    await h.run();
    const seen = `     1\t${big}`; // read_file numbers its lines
    expect(model.lastMessages[1]!.content).toBe(seen); // the model itself gets the whole read
    expect(h.gate.calls[1]!.ctx.evidence).toEqual([`read_file output: ${seen.slice(0, 2000)}`]);
    // The log keeps a head and tail of what the model saw, and says how much was cut.
    expect(h.ofType('tool.result')[0]!.output).toBe(`${seen.slice(0, 1000)}\n[… 3007 characters not logged …]\n${'x'.repeat(1000)}`);
  });
});

describe('runAgentLoop: file tools go through the sandbox port', () => {
  it('write_file then read_file round-trip through the fake workspace', async () => {
    const model = new ScriptedModel([
      callsTools([toolCall('w1', 'write_file', { path: 'notes/a.txt', content: 'hello\nworld' })]),
      callsTools([toolCall('r1', 'read_file', { path: 'notes/a.txt', offset: 2 })]),
      answers('wrote and read it'),
    ]);
    const sandbox = new FakeSandbox({ files: { 'README.md': '# hi' } });
    const h = harness({ model, sandbox });

    const result = await h.run();

    expect(sandbox.files.get('notes/a.txt')).toBe('hello\nworld');
    expect(sandbox.calls).toEqual([
      { op: 'writeFile', path: 'notes/a.txt', content: 'hello\nworld' },
      { op: 'readFile', path: 'notes/a.txt', maxBytes: 256 * 1024 },
    ]);
    expect(model.lastMessages.slice(1)).toEqual([
      { role: 'tool', toolCallId: 'w1', content: 'wrote 11 bytes to notes/a.txt' },
      { role: 'tool', toolCallId: 'r1', content: '     2\tworld' },
    ]);
    const results = h.ofType('tool.result');
    expect(results.map((r) => [r.tool, r.ok, r.summary, r.output])).toEqual([
      ['write_file', true, 'wrote notes/a.txt (11 bytes)', 'wrote 11 bytes to notes/a.txt'],
      ['read_file', true, 'read notes/a.txt (11 bytes)', '     2\tworld'],
    ]);
    for (const r of results) expect(r).not.toHaveProperty('exec');
    expect(h.gate.calls.map((g) => g.call.args)).toEqual([{ path: 'notes/a.txt', content: 'hello\nworld' }, { path: 'notes/a.txt', offset: 2 }]);
    expect(result.outcome).toBe('succeeded');
  });

  it('a refused path or a missing file: the model sees the error, the workspace is unchanged, the run goes on', async () => {
    const model = new ScriptedModel([
      callsTools([
        toolCall('w1', 'write_file', { path: '../etc/passwd', content: 'x' }),
        toolCall('w2', 'write_file', { path: '/etc/passwd', content: 'x' }),
        toolCall('r1', 'read_file', { path: 'missing.txt' }),
      ]),
      answers('could not'),
    ]);
    const sandbox = new FakeSandbox({ files: { 'a.txt': 'a' } });
    const h = harness({ model, sandbox });

    const result = await h.run();

    expect(toolMessages(model.requests[1]!.messages)).toEqual([
      { role: 'tool', toolCallId: 'w1', content: 'error: path refused: "../etc/passwd" contains "..", which could leave /workspace' },
      { role: 'tool', toolCallId: 'w2', content: 'error: path refused: "/etc/passwd" is absolute; paths are relative to /workspace' },
      { role: 'tool', toolCallId: 'r1', content: 'error: no such file: missing.txt' },
    ]);
    expect(h.ofType('tool.result').map((r) => [r.callId, r.ok, r.blocked, r.output])).toEqual([
      ['w1', false, false, 'error: path refused: "../etc/passwd" contains "..", which could leave /workspace'],
      ['w2', false, false, 'error: path refused: "/etc/passwd" is absolute; paths are relative to /workspace'],
      ['r1', false, false, 'error: no such file: missing.txt'],
    ]);
    expect(h.ofType('tool.result')[0]!.summary).toBe('write ../etc/passwd: path refused: "../etc/passwd" contains "..", which could leave /workspace');
    expect([...sandbox.files.keys()]).toEqual(['a.txt']);
    expect(result).toMatchObject({ outcome: 'succeeded', finalAnswer: 'could not' });
  });
});
