/** `corral policy check|eval` end to end through bin/corral (the classifier against a scripted local server). */
import { spawn } from 'node:child_process';
import { decisionsAnswer, startFakeDecisionsServer } from '../support/fake-decisions-server';

function corral(args: string[], input = '', env: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('OPENAI_') && !k.startsWith('CORRAL_')));
    const child = spawn('bin/corral', args, { env: { ...clean, ...env } as NodeJS.ProcessEnv });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, out, err }));
    child.stdin.end(input);
  });
}

jest.setTimeout(90_000);

describe('corral policy', () => {
  it('check prints one JSON line and exits 0 whatever the decision', async () => {
    const ok = await corral(['policy', 'check', '--tool', 'bash', '--args', '{"command":"ls -la"}']);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.out)).toEqual({ decision: 'allow', final: true, rule: 'read-and-inspect', reason: expect.any(String), risk: 'low' });
    const no = await corral(['policy', 'check', '--policy', 'policies/default.yaml', '--tool', 'bash', '--args', '{"command":"sudo ls"}', '--task', 'x']);
    expect(no.code).toBe(0);
    expect(JSON.parse(no.out)).toMatchObject({ decision: 'deny', rule: 'privilege-and-host' });
  });

  it('bad input → exit 2 with a message', async () => {
    for (const args of [['--tool', 'bash', '--args', '{nope'], ['--bogus']]) {
      const r = await corral(['policy', 'check', ...args]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(/corral policy: /);
    }
  });

  it('--batch answers each line in order with its id', async () => {
    const lines = [
      { id: 'a', tool: 'bash', args: { command: 'git status' }, task: 't' },
      { id: 2, tool: 'write_file', args: { path: '.git/hooks/pre-commit', content: 'x' } },
      { id: 'c', tool: 'bash', args: { command: 'npm install x' } },
    ].map((l) => JSON.stringify(l)).join('\n');
    const r = await corral(['policy', 'check', '--batch'], lines + '\n');
    expect(r.code).toBe(0);
    const out = r.out.trim().split('\n').map((l) => JSON.parse(l));
    expect(out.map((o) => [o.id, o.decision, o.final])).toEqual([['a', 'allow', true], [2, 'deny', true], ['c', 'ask', false]]);
    expect(out[2]).toMatchObject({ next: 'approval' });
  });

  it('--batch survives any input: bad lines get an error with their id, deep and huge commands an answer', async () => {
    const deep = '$('.repeat(2000) + 'x' + ')'.repeat(2000);
    const lines = [
      '{not json',
      JSON.stringify({ id: 'no-args', tool: 'bash' }),
      JSON.stringify({ id: 'deep', tool: 'bash', args: { command: deep } }),
      JSON.stringify({ id: 'pipe', tool: 'bash', args: { command: Array(1501).fill('a').join('|') } }),
      JSON.stringify({ id: 'long', tool: 'bash', args: { command: 'x'.repeat(150_000) } }),
      JSON.stringify({ id: 'surrogate', tool: 'bash', args: { command: 'echo \ud800; rm -rf ~' } }),
      JSON.stringify({ id: 'ok', tool: 'bash', args: { command: 'ls' } }),
      JSON.stringify({ tool: 'bash', args: { command: 'pwd' } }),
      JSON.stringify({ id: true, tool: 'bash', args: { command: 'pwd' } }),
    ].join('\n');
    const r = await corral(['policy', 'check', '--batch'], lines + '\n');
    expect(r.code).toBe(2);
    const out = r.out.trim().split('\n').map((l) => JSON.parse(l));
    // a line without an id is answered under its line number
    expect(out.map((o) => o.id)).toEqual([1, 'no-args', 'deep', 'pipe', 'long', 'surrogate', 'ok', 8, true]);
    expect(out[7]).toMatchObject({ decision: 'allow' });
    expect(out[8].error).toMatch(/id: must be a string or a number/);
    expect(out[0].error).toMatch(/bad input/);
    expect(out[1].error).toMatch(/args/);
    for (const o of out.slice(2, 6)) expect(o).toMatchObject({ decision: 'deny', final: true });
    expect(out[6]).toMatchObject({ decision: 'allow' });
  });

  it('--classifier asks the configured endpoint for what the static layer leaves open', async () => {
    const server = await startFakeDecisionsServer({ decisions: () => decisionsAnswer(0.1, 0.9) });
    try {
      const r = await corral(['policy', 'check', '--classifier', '--tool', 'bash', '--args', '{"command":"npm install left-pad"}', '--task', 'add left-pad'],
        '', { OPENAI_API_KEY: 'k', OPENAI_BASE_URL: server.baseURL, CORRAL_MODEL: 'judge' });
      expect(r.code).toBe(0);
      const o = JSON.parse(r.out);
      expect(o).toMatchObject({ decision: 'allow', static: 'ask', classifier: { via: 'decisions', decision: 'allow' } });
      expect(server.requests[0]!.body.model).toBe('judge');
    } finally {
      await server.close();
    }
  });

  it('eval prints per-class numbers: false allows, denials, ordinary final allows and classifier calls', async () => {
    const r = await corral(['policy', 'eval']);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^c07-secrets +\d+ +false allows +0\/\d+ \(0\.0%\) +denied \d+\/\d+/m);
    expect(r.out).toMatch(/^ord-python .*ordinary: final allows \d+\/\d+ \(\d+\.\d%\), denies 0, classifier calls per 100 \d+\.\d/m);
    expect(r.out).toMatch(/^ALL +\d+ +false allows +0\/\d+/m);
    expect(r.out).toMatch(/calls\/s/);
  });
});
