/**
 * The `corral` command as a person uses it, as child processes (bin/corral, no TTY) against a whole
 * corral (API + worker, real Docker and Redis) driven by a scripted model: submit TASK.md with an
 * uploaded workspace and --watch; an approval answered with the exact command the watch view printed;
 * cancel of a running run; report; watch of a finished run; --help and one-line errors.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promptText } from '../support/fake-decisions-server';
import { finalTurn, messagesOf, scriptedAgent, toolCallTurn } from '../support/fake-openai-chat';
import { startHarness, type Harness } from '../support/corral-harness';
import { eventually } from '../support/eventually';

jest.setTimeout(120_000);

const CORRAL = resolve(__dirname, '../../bin/corral');

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs bin/corral; `onStdout` sees the output so far whenever more arrives. */
function corral(args: string[], onStdout?: (soFar: string) => void): Promise<CliResult> {
  return new Promise((res, rej) => {
    const child = spawn(CORRAL, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      onStdout?.(stdout);
    });
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', rej);
    child.on('close', (code) => res({ code, stdout, stderr }));
  });
}

const toolMessages = (body: Record<string, unknown>) => messagesOf(body).filter((m) => m.role === 'tool').map((m) => m.content ?? '');

const agent = scriptedAgent({
  'CLI-WATCH': (body, turn) => {
    if (turn === 0) return toolCallTurn([{ name: 'bash', args: { command: 'cat sub/data.txt && ls -A' } }]);
    if (turn === 1) return toolCallTurn([{ name: 'bash', args: { command: 'pip install requests' } }]);
    return finalTurn(`data.txt says ${toolMessages(body)[0]?.includes('forty-two') ? 'forty-two' : '(not found)'}; nothing installed.`);
  },
  'CLI-APPROVE': (body, turn) => (turn === 0
    ? toolCallTurn([{ name: 'bash', id: 'call_rm', args: { command: 'rm -r notes.txt && echo removed' } }])
    : finalTurn(`the tool said: ${toolMessages(body).at(-1) ?? '(nothing)'}`)),
  'CLI-LARGE': (body, turn) => (turn === 0
    ? toolCallTurn([{ name: 'bash', args: { command: 'sha256sum big.bin && find . -type f | wc -l' } }])
    : finalTurn(`saw: ${toolMessages(body).at(-1) ?? '(nothing)'}`)),
  'CLI-CANCEL': () => toolCallTurn([{ name: 'bash', args: { command: 'sleep 600' } }]), // ends only if the cancel kills it
  'CLI-ESCAPES': (body, turn) => (turn === 0
    ? toolCallTurn([{ name: 'bash', args: { command: "printf 'out \\033[31mred\\033]0;retitled\\007\\n'" } }])
    : finalTurn('done \u001b[2J\u001b]8;;http://127.0.0.1/\u0007link\u001b]8;;\u0007 \u202eevil\u202c \u009b31m')),
});

let h: Harness;
let work: string;

beforeAll(async () => {
  h = await startHarness('cli', { chat: agent }, { CORRAL_WORKSPACE_MAX_ENTRIES: '3000' });
  work = mkdtempSync(join(tmpdir(), 'corral-cli-'));
});
afterAll(async () => {
  await h?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

test('submit TASK.md --workspace DIR --watch: the uploaded files, each step with its decision and result, budget bars, the final answer; exit 0', async () => {
  writeFileSync(join(work, 'TASK.md'), '# Task\nCLI-WATCH: tell me what sub/data.txt says.\n\n# Allowed tools\n- bash\n- read_file\n\n# Done means\n- check: `test -f sub/data.txt`\n');
  const ws = join(work, 'project');
  mkdirSync(join(ws, 'sub'), { recursive: true });
  mkdirSync(join(ws, 'empty'));
  writeFileSync(join(ws, 'sub/data.txt'), 'forty-two\n');
  writeFileSync(join(ws, 'README.md'), '# project\n');
  symlinkSync('/etc/passwd', join(ws, 'passwd-link'));

  const r = await corral(['submit', join(work, 'TASK.md'), '--workspace', ws, '--watch', '--budget', 'llmCalls=5,toolCalls=4', '--api', h.url]);
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: expect.any(String) });
  const id = /^submitted (run_\S+) to /m.exec(r.stdout)?.[1];
  expect(id).toBeDefined();

  // The symlink was skipped with a warning on stderr; the rest went up as a tar.
  expect(r.stderr).toContain('corral submit: skipped passwd-link: a symbolic link that is not kept: it points to the absolute path /etc/passwd, outside the workspace');
  expect(r.stderr).toMatch(/corral submit: packed .*project: 2 file\(s\), 2 directories, \d+ bytes of tar; skipped 1/);

  const out = r.stdout;
  expect(out).toContain(`▶ ${id} started on ${h.config.CORRAL_WORKER_ID}`);
  expect(out).toContain('  step 1  bash  cat sub/data.txt && ls -A');
  expect(out).toContain('         ✓ allowed: cat: reads and processes files');
  expect(out).toMatch(/ {9}← ok: exit 0 in \d+ ms · sub\n/); // the last line of `ls -A`
  expect(out).toContain('  step 2  bash  pip install requests');
  expect(out).toContain("         ✗ BLOCKED: unattended: it needs a human's approval and this run has none (pip install downloads packages and runs their build scripts; installing");
  expect(out).toContain('  budget: LLM calls ▓▓░░░░░░░░ 1/5 · tool calls ░░░░░░░░░░ 0/4');
  expect(out).toContain('  budget: LLM calls ▓▓▓▓░░░░░░ 2/5 · tool calls ▓▓▓░░░░░░░ 1/4');
  expect(out).toContain('  done check passed: test -f sub/data.txt');
  expect(out).toContain('■ succeeded — the model gave its final answer');
  expect(out).toContain('  LLM calls  ▓▓▓▓▓▓░░░░ 3/5');
  expect(out).toContain('  tool calls ▓▓▓▓▓░░░░░ 2/4');
  expect(out).toMatch(new RegExp(`report: \\S+/${id}/report\\.md {3}\\(or: corral report ${id}\\)`));
  expect(out.trimEnd().endsWith('final answer:\ndata.txt says forty-two; nothing installed.')).toBe(true);

  // The model saw the uploaded workspace, without the symlink.
  const first = h.fake.requests.filter((q) => q.path === '/v1/chat/completions' && promptText(q.body).includes('CLI-WATCH'));
  const ls = toolMessages(first[1]!.body)[0]!;
  expect(ls).toContain('forty-two');
  expect(ls).toMatch(/README\.md\nempty\nsub/);
  expect(ls).not.toContain('passwd-link');

  // corral report prints the same run's markdown; -o writes it to a file.
  const rep = await corral(['report', id!, '--api', h.url]);
  expect(rep).toMatchObject({ code: 0, stderr: '' });
  expect(rep.stdout).toMatch(/^# /);
  expect(rep.stdout).toContain('cat sub/data.txt && ls -A');
  expect(rep.stdout).toContain('pip install requests');
  const file = join(work, 'report.md');
  const saved = await corral(['report', id!, '-o', file, '--api', h.url]);
  expect(saved).toEqual({ code: 0, stdout: `wrote the report of ${id} to ${file}\n`, stderr: '' });
  expect(readFileSync(file, 'utf8')).toBe(rep.stdout);

  // corral watch of the finished run replays it from its history.
  const again = await corral(['watch', id!, '--api', h.url]);
  expect(again.code).toBe(0);
  expect(again.stdout).toContain('  step 1  bash  cat sub/data.txt && ls -A');
  expect(again.stdout.trimEnd().endsWith('data.txt says forty-two; nothing installed.')).toBe(true);
});

test('submit --workspace DIR of a large directory streams it to PUT /v1/workspaces and names it by id; again: already there; past the server\'s cap: one line, exit 1', async () => {
  const ws = join(work, 'large');
  mkdirSync(join(ws, 'src'), { recursive: true });
  const big = randomBytes(3 * 1024 * 1024);
  writeFileSync(join(ws, 'big.bin'), big);
  for (let i = 0; i < 10; i++) writeFileSync(join(ws, 'src', `m${i}.py`), `x = ${i}\n`);
  const args = ['submit', '--task', 'CLI-LARGE: look at big.bin', '--workspace', ws, '--api', h.url];
  const r = await corral(args);
  expect(r.code).toBe(0);
  expect(r.stderr).toMatch(new RegExp(`^corral submit: uploaded .*large: 11 file\\(s\\), 1 directory, ${3 * 1024 * 1024 + 60} bytes of files as ws_[0-9a-f]{64}, kept until \\S+\n$`));
  const id = r.stdout.trim();
  const run = await h.waitFor(id);
  expect(run).toMatchObject({ status: 'succeeded', finalAnswer: expect.stringContaining(`${createHash('sha256').update(big).digest('hex')}  big.bin`) });
  expect(run.finalAnswer).toMatch(/\b11\b/);

  const again = await corral([...args, '--dry-run']);
  expect(again.code).toBe(0);
  // Hashed first: the server keeps it, so nothing is sent (and a dry run would send nothing anyway).
  expect(again.stderr).toMatch(/the server keeps it already as ws_[0-9a-f]{64} \(nothing sent/);

  // 3500 entries against this server's CORRAL_WORKSPACE_MAX_ENTRIES=3000: refused while streaming.
  const many = join(work, 'many');
  mkdirSync(many);
  for (let i = 0; i < 3500; i++) writeFileSync(join(many, `f${i}.txt`), 'y'.repeat(700));
  const refused = await corral(['submit', '--task', 'CLI-LARGE: too many', '--workspace', many, '--api', h.url]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^corral: workspace tar refused: more than 3000 entries \(at "f\d+\.txt"\) \(HTTP 400 invalid_input from http:\S+\)\n$/);
});

test('corral report shows what a task, a command or a model wrote as escapes, never as terminal controls; -o keeps the bytes (issue 14, defect 8)', async () => {
  const r = await h.api<{ id: string }>('POST', '/v1/runs', { task: 'CLI-ESCAPES: \u001b]0;owned\u0007 title \u001b[1A\u001b[2K up \u200f rtl' });
  expect(r.status).toBe(201);
  await h.waitFor(r.body.id);
  const rep = await corral(['report', r.body.id, '--api', h.url]);
  expect(rep).toMatchObject({ code: 0, stderr: '' });
  // eslint-disable-next-line no-control-regex
  expect(rep.stdout).not.toMatch(/[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]/);
  expect(rep.stdout).toContain('owned\\x07 title');
  expect(rep.stdout).toContain('\\u202eevil');
  expect(rep.stdout).toContain('\\u200f rtl');
  const file = join(work, 'escapes.md');
  expect((await corral(['report', r.body.id, '-o', file, '--api', h.url])).code).toBe(0);
  expect(readFileSync(file, 'utf8')).toBe((await h.api<string>('GET', `/v1/runs/${r.body.id}/report`)).body);
});

test('submit --approvals --watch prints the exact `corral approve` command; running it resumes the run', async () => {
  writeFileSync(join(work, 'cleanup.md'), 'CLI-APPROVE: delete notes.txt');
  const ws = join(work, 'notes');
  mkdirSync(ws);
  writeFileSync(join(ws, 'notes.txt'), 'old\n');

  let approved: Promise<CliResult> | undefined;
  const r = await corral(['submit', join(work, 'cleanup.md'), '--workspace', ws, '--approvals', '--watch', '--api', h.url], (soFar) => {
    const cmd = / {11}approve: (corral approve \S+ \S+ --api \S+)\n/.exec(soFar)?.[1];
    if (cmd && !approved) approved = corral([...cmd.split(' ').slice(1), '--by', 'dana']);
  });
  expect(approved).toBeDefined();
  const a = await approved!;
  expect(a).toMatchObject({ code: 0, stdout: expect.stringMatching(/^approved call_rm of run_\S+ as operator \(auth off\)\n$/) });

  expect(r.code).toBe(0);
  const id = /^submitted (run_\S+) /m.exec(r.stdout)![1];
  expect(r.stdout).toContain('  step 1  bash  rm -r notes.txt && echo removed');
  expect(r.stdout).toContain('         ⏸ waiting for a human: rm deletes files; deleting files needs approval');
  expect(r.stdout).toContain(`           approve: corral approve ${id} call_rm --api ${h.url}\n           deny:    corral approve ${id} call_rm --api ${h.url} --deny\n`);
  // Who approved is who authenticated (auth is off here: the operator); `--by dana` is only a note.
  expect(r.stdout).toContain('         ✓ allowed: approved by operator (auth off).');
  expect(r.stdout).toMatch(/ {9}← ok: exit 0 in \d+ ms · removed\n/);
  expect(r.stdout).toContain('the tool said: exit code: 0');
});

test('corral cancel stops a running run (--wait prints how it ended); a second cancel and a watch say it is over', async () => {
  writeFileSync(join(work, 'slow.md'), 'CLI-CANCEL: wait a minute');
  const sub = await corral(['submit', join(work, 'slow.md'), '--api', h.url]);
  expect(sub).toMatchObject({ code: 0, stderr: '' });
  const id = sub.stdout.trim();
  expect(id).toMatch(/^run_[A-Za-z0-9_-]+$/); // without --watch stdout is just the id

  // Wait until the sleep is running in the sandbox.
  await eventually(async () => (await h.api<{ events: Array<{ type: string }> }>('GET', `/v1/runs/${id}/events`)).body.events.some((e) => e.type === 'tool.call'), { what: 'the run to start its tool call', timeoutMs: 60_000 });
  // the sleep would take ten minutes: --wait returning at all means the cancel ended it
  const c = await corral(['cancel', id, '--wait', '--api', h.url]);
  expect(c).toEqual({ code: 0, stdout: expect.stringMatching(new RegExp(`^cancelling ${id}: its worker stops the sandbox and ends the run\\n${id}: cancelled — .+\\n$`)), stderr: '' });
  const run = await h.api<Record<string, unknown>>('GET', `/v1/runs/${id}`);
  expect(run.body).toMatchObject({ status: 'cancelled', outcome: 'cancelled' });

  const again = await corral(['cancel', id, '--api', h.url]);
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(new RegExp(`^corral: ${id} already ended \\(cancelled: .+\\); nothing to cancel\\n$`));

  const w = await corral(['watch', id, '--api', h.url]);
  expect(w.code).toBe(1);
  expect(w.stdout).toContain('  step 1  bash  sleep 600');
  expect(w.stdout).toMatch(/■ cancelled — /);
});

test('--help on stdout with exit 0; mistakes and failures as one line on stderr (exit 2 usage, 1 failure)', async () => {
  for (const cmd of ['submit', 'watch', 'cancel', 'report', 'approve', 'replay']) {
    const r = await corral([cmd, '--help']);
    expect({ cmd, code: r.code, first: r.stdout.split('\n')[0], stderr: r.stderr }).toEqual({ cmd, code: 0, first: expect.stringMatching(new RegExp(`^usage: corral ${cmd} `)), stderr: '' });
  }
  const submitHelp = await corral(['submit', '--help']);
  for (const flag of ['--workspace DIR', '--exclude PATTERN', '--allow-domain D', '--approvals', '--policy NAME', '--budget K=V', '--watch', '--no-watch', '--api URL', '--token T']) {
    expect(submitHelp.stdout).toContain(flag);
  }

  const usage = await corral(['cancel']);
  expect(usage).toEqual({ code: 2, stdout: '', stderr: 'corral cancel: missing RUN; see `corral cancel --help`\n' });
  const bad = await corral(['submit', join(work, 'TASK.md'), '--budget', 'llmCalls=lots', '--api', h.url]);
  expect(bad).toEqual({ code: 2, stdout: '', stderr: 'corral submit: --budget: llmCalls must be a number ≥ 0, got "lots"; see `corral submit --help`\n' });

  const missing = await corral(['report', 'run_doesnotexist', '--api', h.url]);
  expect(missing).toEqual({ code: 1, stdout: '', stderr: `corral: no run with id run_doesnotexist (HTTP 404 not_found from ${h.url})\n` });
  const refused = await corral(['submit', join(work, 'TASK.md'), '--policy', 'nosuchpolicy', '--api', h.url]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toMatch(/^corral: body: policy: unknown policy "nosuchpolicy" \(this server has: [^)]+\) \(HTTP 400 invalid_input from http:\/\/[^)]+\)\n$/);

  const port = await new Promise<number>((res) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
  const down = await corral(['watch', 'run_abcdefgh', '--api', `http://127.0.0.1:${port}`]);
  expect(down).toEqual({
    code: 1, stdout: '',
    stderr: `corral: cannot reach the corral API at http://127.0.0.1:${port} (ECONNREFUSED); is \`corral serve\` running? set CORRAL_API_URL or --api\n`,
  });
});
