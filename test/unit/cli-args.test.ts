/** The `corral` CLI's argument parsing, `corral submit`'s spec building, and one-line errors. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import * as tar from 'tar-stream';
import { loadConfig } from '../../src/config';
import { ApiClient, ApiError, ApiUnreachableError } from '../../src/cli/api-client';
import { parseArgs, positionals, UsageError, wantsHelp } from '../../src/cli/cli-args';
import { errorLine } from '../../src/cli/error-line';
import { planText } from '../../src/cli/plan-text';
import { buildSpec, parseBudgets, parseSubmitArgs } from '../../src/cli/submit-spec';
import { HELP } from '../../src/cli/usage';

describe('parseArgs', () => {
  const spec = { api: 'string', exclude: 'list', watch: 'flag', output: 'string' } as const;

  test('values with a space or "=", repeatable lists, flags, positionals, "--"', () => {
    const r = parseArgs(['run_1', '--api', 'http://x:1', '--exclude=a', '--exclude', 'b', '--watch', '-o', 'f.md', '--', '--not-an-option'], spec, { o: 'output' });
    expect(r.opts).toEqual({ api: 'http://x:1', exclude: ['a', 'b'], watch: true, output: 'f.md' });
    expect(r.positionals).toEqual(['run_1', '--not-an-option']);
  });

  test('a value that starts with "-" is given with "="; "-" alone is a positional', () => {
    expect(parseArgs(['--api=-x', '--exclude=--y', '-'], spec).opts).toMatchObject({ api: '-x', exclude: ['--y'] });
    expect(parseArgs(['-'], spec).positionals).toEqual(['-']);
  });

  test('defaults: lists empty, flags false, strings undefined', () => {
    expect(parseArgs([], spec).opts).toEqual({ api: undefined, exclude: [], watch: false, output: undefined });
  });

  test.each([
    [['--nope'], 'unknown option "--nope"'],
    [['--nope=1'], 'unknown option "--nope"'],
    [['-x'], 'unknown option "-x"'],
    [['--api'], '--api needs a value'],
    [['--api', '--watch'], '--api needs a value (to give one that starts with "-", write --api=VALUE)'],
    [['--api', '-o', 'x'], '--api needs a value (to give one that starts with "-", write --api=VALUE)'],
    [['-w'], 'unknown option "-w"'],
    [['--watch=yes'], '--watch takes no value'],
  ])('%j → UsageError %s', (argv, message) => {
    expect(() => parseArgs(argv, spec)).toThrow(new UsageError(message));
  });

  test('wantsHelp looks only before "--"; positionals checks the count', () => {
    expect(wantsHelp(['RUN', '--help'])).toBe(true);
    expect(wantsHelp(['-h'])).toBe(true);
    expect(wantsHelp(['exec', '--', 'cmd', '--help'])).toBe(false);
    expect(positionals(['a', 'b'], ['RUN', 'CALL'])).toEqual(['a', 'b']);
    expect(() => positionals(['a'], ['RUN', 'CALL'])).toThrow('missing CALL');
    expect(() => positionals([], ['RUN'])).toThrow('missing RUN');
    expect(() => positionals(['a', 'b'], ['RUN'])).toThrow('unexpected argument "b"');
  });
});

describe('corral submit arguments', () => {
  test('every option', () => {
    const o = parseSubmitArgs([
      'TASK.md', '--workspace', 'repo', '--exclude', 'node_modules', '--exclude=.git', '--allow-domain', 'PyPI.org', '--allow-domain', '*.pythonhosted.org',
      '--approvals', '--policy', 'strict', '--budget', 'llmCalls=10,toolCalls=20', '--budget', 'costUsd=0.25', '--watch', '--api', 'http://h:9', '--token', 't0k',
    ]);
    expect(o).toEqual({
      source: { file: 'TASK.md' }, workspace: 'repo', exclude: ['node_modules', '.git'], patchExclude: [], allowDomains: ['pypi.org', '*.pythonhosted.org'],
      approvals: true, policy: 'strict', budgets: { llmCalls: 10, toolCalls: 20, costUsd: 0.25 }, watch: true, plain: false, dryRun: false, api: 'http://h:9', token: 't0k',
    });
  });

  test('defaults: no watch, no approvals, nothing overridden', () => {
    expect(parseSubmitArgs(['spec.json'])).toEqual({ source: { file: 'spec.json' }, exclude: [], patchExclude: [], allowDomains: [], approvals: false, budgets: {}, watch: false, plain: false, dryRun: false });
    expect(parseSubmitArgs(['--task', 'say hi', '--no-watch']).source).toEqual({ task: 'say hi' });
  });

  test('--template with --set values (a value may hold "=" and ","), --dry-run', () => {
    const o = parseSubmitArgs(['--template', 'fix-failing-tests', '--set', 'testCommand=pytest -q -k a=b,c', '--set', 'focus=app', '--dry-run']);
    expect(o).toMatchObject({ source: { template: 'fix-failing-tests', params: { testCommand: 'pytest -q -k a=b,c', focus: 'app' } }, dryRun: true });
  });

  test.each([
    [[], /missing the task/],
    [['a.md', 'b.md'], /unexpected argument "b.md"/],
    [['a.md', '--task', 'x'], /give one of a TASK.md/],
    [['a.md', '--template', 'x'], /give one of a TASK.md/],
    [['a.md', '--set', 'k=v'], /--set only applies with --template/],
    [['--template', 't', '--set', 'novalue'], /"novalue" is not NAME=VALUE/],
    [['--template', 't', '--set', '=v'], /"=v" is not NAME=VALUE/],
    [['--template', 't', '--set', 'k=1', '--set', 'k=2'], /k is given twice/],
    [['--template', 't', '--budget', 'llmCalls=3'], /--budget does not apply with --template/],
    [['--template', 't', '--allow-domain', 'pypi.org'], /--allow-domain does not apply with --template/],
    [['--template', 't', '--approvals'], /--approvals does not apply with --template/],
    [['--task', '  '], /--task is empty/],
    [['a.md', '--watch', '--no-watch'], /contradict/],
    [['a.md', '--exclude', 'x'], /--exclude only applies with --workspace/],
    [['a.md', '--allow-domain', '*'], /--allow-domain \*: .*never "\*" alone/],
    [['a.md', '--allow-domain', '*.com'], /wildcard may not cover a public suffix/],
    [['a.md', '--budget', 'llm=3'], /unknown budget "llm" \(known: llmCalls, toolCalls, tokens, wallTimeS, costUsd\)/],
    [['a.md', '--budget', 'llmCalls'], /"llmCalls" is not NAME=VALUE/],
    [['a.md', '--budget', 'llmCalls=many'], /llmCalls must be a number/],
    [['a.md', '--budget', 'costUsd=-1'], /costUsd must be a number ≥ 0/],
    [['a.md', '--model', 'a', '--route', 'a,b'], /either --model .* or --route/],
    [['a.md', '--model', ' '], /--model is empty/],
    [['a.md', '--route', 'big'], /give STRONG,CHEAP/],
    [['a.md', '--route', 'big,'], /give STRONG,CHEAP/],
    [['a.md', '--route', 'big,big'], /must differ/],
    [['a.md', '--route', 'big,small,first-turn'], /give STRONG,CHEAP or STRONG,CHEAP,on=RULE\+RULE/],
    [['a.md', '--route', 'big,small,on=first-turn+every-turn'], /unknown rule\(s\) every-turn/],
  ])('%j is refused: %s', (argv, message) => {
    expect(() => parseSubmitArgs(argv)).toThrow(message);
  });

  test('--model and --route set the spec\'s model or routing, replacing the other from SPEC.json', async () => {
    const o = parseSubmitArgs(['--task', 'x', '--route', 'big, small ,on=first-turn+after-failed-check']);
    expect(o.routing).toEqual({ strong: 'big', cheap: 'small', strongOn: ['first-turn', 'after-failed-check'] });
    expect((await buildSpec(o)).spec).toEqual({ task: 'x', routing: { strong: 'big', cheap: 'small', strongOn: ['first-turn', 'after-failed-check'] } });
    expect((await buildSpec(parseSubmitArgs(['--task', 'x', '--route', 'big,small']))).spec.routing).toEqual({ strong: 'big', cheap: 'small' });
    expect((await buildSpec(parseSubmitArgs(['--task', 'x', '--model', 'one']))).spec).toEqual({ task: 'x', model: 'one' });
  });

  test('--git URL [--ref R] [--depth N] [--bundle] is workspace.git; --patch-exclude is patch.exclude', async () => {
    const o = parseSubmitArgs(['--task', 'x', '--git', 'https://git.example.com/acme/app.git', '--ref', 'main', '--bundle', '--patch-exclude', 'dist/', '--patch-exclude', '!dist/keep.js']);
    expect((await buildSpec(o)).spec).toEqual({
      task: 'x', workspace: { git: { url: 'https://git.example.com/acme/app.git', ref: 'main', bundle: true } }, patch: { exclude: ['dist/', '!dist/keep.js'] },
    });
    expect((await buildSpec(parseSubmitArgs(['--task', 'x', '--git', 'ssh://git@h/r.git', '--depth', '50']))).spec.workspace).toEqual({ git: { url: 'ssh://git@h/r.git', depth: 50, bundle: false } });
  });

  test.each([
    [['--task', 'x', '--git', 'https://h/r.git', '--workspace', '.'], /either --workspace DIR or --git URL/],
    [['--task', 'x', '--ref', 'main'], /--ref only applies with --git URL/],
    [['--task', 'x', '--bundle'], /--bundle only applies with --git URL/],
    [['--task', 'x', '--git', 'https://h/r.git', '--ref', '../x'], /--ref must be a branch, a tag or a commit id/],
    [['--task', 'x', '--git', 'https://h/r.git', '--depth', '0'], /--depth .*>=1/],
    [['--task', 'x', '--patch-exclude', '# comment'], /--patch-exclude # comment: must be a gitignore pattern/],
  ])('%j is refused: %s', (argv, message) => {
    expect(() => parseSubmitArgs(argv)).toThrow(message);
  });

  test('budget names are case-insensitive and can repeat', () => {
    expect(parseBudgets(['LLMCALLS=3', 'wallTimeS=60, tokens=5000', 'llmCalls=4'])).toEqual({ llmCalls: 4, wallTimeS: 60, tokens: 5000 });
  });
});

describe('buildSpec', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-submit-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const TASK_MD = '# Task\nFix the failing test.\n\n# Allowed tools\n- bash\n- read_file\n\n# Done means\n- check: `python3 -m unittest`\n';

  test('a .md file is the task text as is; flags fill in the rest', async () => {
    writeFileSync(join(dir, 'TASK.md'), TASK_MD);
    const o = parseSubmitArgs([join(dir, 'TASK.md'), '--allow-domain', 'pypi.org', '--approvals', '--policy', 'default', '--budget', 'llmCalls=5']);
    const { spec, packed } = await buildSpec(o);
    expect(packed).toBeUndefined();
    expect(spec).toEqual({ task: TASK_MD, egress: { allow: ['pypi.org'] }, approvals: true, policy: 'default', budgets: { llmCalls: 5 } });
  });

  test('a .json file is a RunSpec; flags override or merge into it', async () => {
    writeFileSync(join(dir, 'spec.json'), JSON.stringify({
      task: 'from json', approvals: false, policy: 'default', egress: { allow: ['pypi.org'] },
      budgets: { llmCalls: 12, toolCalls: 20 }, workspace: { files: { 'a.txt': 'inline' } }, labels: { team: 'x' },
    }));
    mkdirSync(join(dir, 'ws/sub'), { recursive: true });
    writeFileSync(join(dir, 'ws/sub/b.txt'), 'packed');
    const notes: string[] = [];
    const o = parseSubmitArgs([join(dir, 'spec.json'), '--workspace', join(dir, 'ws'), '--allow-domain', 'pypi.org', '--allow-domain', 'files.example.org', '--budget', 'llmCalls=3']);
    const { spec, packed } = await buildSpec(o, (l) => notes.push(l));
    expect(spec).toMatchObject({
      task: 'from json', approvals: false, policy: 'default', egress: { allow: ['pypi.org', 'files.example.org'] },
      budgets: { llmCalls: 3, toolCalls: 20 }, labels: { team: 'x' },
      workspace: { files: { 'a.txt': 'inline' }, tarBase64: packed!.tar.toString('base64') },
    });
    const names: string[] = [];
    const extract = tar.extract();
    Readable.from([Buffer.from((spec.workspace as { tarBase64: string }).tarBase64, 'base64')]).pipe(extract);
    for await (const e of extract) {
      names.push(e.header.name);
      e.resume();
    }
    expect(names).toEqual(['sub/', 'sub/b.txt']);
    expect(notes).toEqual([expect.stringMatching(/^packed .*ws: 1 file\(s\), 1 directory, \d+ bytes of tar$/)]);
  });

  test('links that leave the workspace are skipped and named; links inside are kept and counted', async () => {
    writeFileSync(join(dir, 'TASK.md'), 'do it');
    mkdirSync(join(dir, 'ws'));
    const { symlinkSync } = await import('node:fs');
    symlinkSync('/etc/hostname', join(dir, 'ws/host'));
    symlinkSync('TASK.md', join(dir, 'ws/inside'));
    const notes: string[] = [];
    await buildSpec(parseSubmitArgs([join(dir, 'TASK.md'), '--workspace', join(dir, 'ws')]), (l) => notes.push(l));
    expect(notes[0]).toBe('skipped host: a symbolic link that is not kept: it points to the absolute path /etc/hostname, outside the workspace');
    expect(notes[1]).toMatch(/: 0 file\(s\), 0 directories, 1 symbolic link\(s\), \d+ bytes of tar; skipped 1$/);
  });

  test.each([
    ['missing.md', null, /cannot read .*missing\.md \(no such file\)/],
    ['empty.md', '  \n', /empty\.md is empty; write the task in it/],
    ['bad.json', '{"task": ', /bad\.json is not valid JSON .*a \.md file is the task text/],
    ['list.json', '[1]', /list\.json must hold a JSON object/],
    ['tar.json', JSON.stringify({ task: 'x', workspace: { tarBase64: 'AAAA' } }), /already has workspace\.tarBase64/],
  ])('%s is refused', async (name, body, message) => {
    if (body !== null) writeFileSync(join(dir, name), body);
    mkdirSync(join(dir, 'ws'));
    const argv = [join(dir, name), ...(name === 'tar.json' ? ['--workspace', join(dir, 'ws')] : [])];
    await expect(buildSpec(parseSubmitArgs(argv))).rejects.toThrow(message);
  });

  test('a directory given as the task says to use --workspace', async () => {
    await expect(buildSpec(parseSubmitArgs([dir]))).rejects.toThrow(/a directory; give a TASK\.md file, and the directory as --workspace/);
  });
});

describe('errors are one line that says what to do', () => {
  test('usage errors point to --help (exit 2) unless they already say what to do', () => {
    expect(errorLine('submit', new UsageError('unknown option "--x"'))).toEqual({ line: 'corral submit: unknown option "--x"; see `corral submit --help`', code: 2 });
    expect(errorLine('submit', new UsageError('the workspace is too big; use --exclude', false))).toEqual({ line: 'corral submit: the workspace is too big; use --exclude', code: 2 });
  });

  test('API errors and other failures exit 1, on one line', () => {
    const unreachable = new ApiUnreachableError('cannot reach the corral API at http://127.0.0.1:8080 (ECONNREFUSED); is `corral serve` running? set CORRAL_API_URL or --api');
    expect(errorLine('watch', unreachable)).toEqual({ line: `corral: ${unreachable.message}`, code: 1 });
    expect(errorLine('report', new ApiError('no run with id run_x (HTTP 404 not_found from http://h)', 404, 'not_found')).line).toBe('corral: no run with id run_x (HTTP 404 not_found from http://h)');
    expect(errorLine('cancel', new Error('line one\n  line two'))).toEqual({ line: 'corral: line one line two', code: 1 });
    const config = Object.assign(new Error('configuration: CORRAL_API_URL: Invalid URL'), { code: 'invalid_input' });
    expect(errorLine('watch', config)).toEqual({ line: 'corral: configuration: CORRAL_API_URL: Invalid URL; fix that environment variable', code: 2 });
  });

  test('--api must be a URL; without it the configured CORRAL_API_URL is used', () => {
    const config = loadConfig({ CORRAL_API_TOKEN: 'from-env', CORRAL_API_URL: 'http://api.example:9000/' });
    expect(() => ApiClient.from({ api: 'localhost:8080' }, config)).toThrow(/--api localhost:8080: give the API's URL, such as http:\/\/127\.0\.0\.1:8080/);
    expect(ApiClient.from({}, config).baseUrl).toBe('http://api.example:9000');
  });
});

test('every command has help text that starts with its usage line', () => {
  for (const [name, h] of Object.entries(HELP)) {
    expect({ name, usage: h.usage.split('\n')[0] }).toEqual({ name, usage: expect.stringMatching(name === 'policy' || name === 'schedules' ? /^usage:$/ : new RegExp(`^usage: corral ${name}`)) });
  }
});

describe('--budget limits come from the server\'s RunBudgets schema (issue 14, defect 12)', () => {
  test.each(['llmCalls=0', 'llmCalls=1001', 'llmCalls=2.5', 'tokens=999', 'wallTimeS=4', 'costUsd=1001'])('%s is a usage error naming the budget', (v) => {
    expect(() => parseBudgets([v])).toThrow(new RegExp(`--budget: ${v.split('=')[0]}=.* is refused`));
  });
  test('values the server accepts pass', () => {
    expect(parseBudgets(['llmCalls=1,toolCalls=0,tokens=1000,wallTimeS=5,costUsd=0'])).toEqual({ llmCalls: 1, toolCalls: 0, tokens: 1000, wallTimeS: 5, costUsd: 0 });
  });
});

describe('a dry run with a large directory uploads nothing; a directory the server keeps is not sent again', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-dryrun-'));
    mkdirSync(join(dir, 'ws'));
    writeFileSync(join(dir, 'ws', 'big.bin'), Buffer.alloc(3 * 1024 * 1024, 7));
    writeFileSync(join(dir, 'TASK.md'), 'do it');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  test('the id is computed, the server asked, nothing put', async () => {
    const puts: unknown[] = [];
    const asked: string[] = [];
    const uploads = { put: async (t: unknown) => { puts.push(t); throw new Error('must not upload'); }, find: async (id: string) => { asked.push(id); return null; } };
    const notes: string[] = [];
    const r = await buildSpec(parseSubmitArgs([join(dir, 'TASK.md'), '--workspace', join(dir, 'ws'), '--dry-run']), (l) => notes.push(l), uploads);
    expect(puts).toEqual([]);
    expect(asked).toHaveLength(1);
    expect(r.workspace).toMatchObject({ how: 'not-sent', id: asked[0], files: 1, bytes: 3 * 1024 * 1024 });
    expect(r.spec.workspace).toBeUndefined();
    expect(notes.at(-1)).toMatch(/would be uploaded as ws_[0-9a-f]{64} \(a dry run sends nothing\)/);
    // The plan's text names what would go up.
    const text = planText({ task: 'do it', tools: ['bash'], doneChecks: ['npm test', 'npm run lint'], environment: { name: 'node', image: 'corral/sandbox-node:latest', setup: ['npm ci'], setupEgress: ['registry.npmjs.org'], setupTimeoutS: 600, cached: true }, egress: [], limits: {}, budgets: { wallTimeS: 600 }, policy: 'default', approvals: false, model: 'm', workspace: { files: 0, tarBytes: 0 }, patch: { gitignore: true, exclude: ['dist/'] } }, r.workspace);
    expect(text).toContain(`  workspace   ${join(dir, 'ws')}: 1 file(s), 0 link(s), 3.0 MiB — would be uploaded as ${asked[0]} (a dry run sends nothing)`);
    expect(text).toContain('  done checks npm test\n              npm run lint\n');
    expect(text).toContain('  setup       npm ci\n              egress registry.npmjs.org; at most 600 s, apart from wallTimeS; cached by its lockfiles\n');
    expect(text).toContain('  patch       leaves out what the workspace\'s .gitignore names; and dist/');
  });

  test('a kept directory: its id goes in the spec, nothing is sent (a real submission too)', async () => {
    const uploads = { put: async () => { throw new Error('must not upload'); }, find: async (id: string) => ({ id, expiresAt: '2030-01-01T00:00:00.000Z' }) };
    const notes: string[] = [];
    const r = await buildSpec(parseSubmitArgs([join(dir, 'TASK.md'), '--workspace', join(dir, 'ws')]), (l) => notes.push(l), uploads);
    expect(r.spec.workspace).toEqual({ id: r.workspace!.id });
    expect(notes.at(-1)).toMatch(/the server keeps it already as ws_[0-9a-f]{64} \(nothing sent; kept until 2030/);
  });
});

test('the plan text: an upload and a git remote as the server resolved them', () => {
  const base = { task: 't', tools: [], doneChecks: [], environment: { name: 'default', image: 'corral/sandbox:latest', setup: [], setupEgress: [], setupTimeoutS: 600, cached: false }, egress: [], limits: {}, budgets: {}, policy: 'default', approvals: true, model: 'm', patch: { gitignore: true, exclude: [] } };
  expect(planText({ ...base, workspace: { files: 0, tarBytes: 0, upload: { id: 'ws_ab', files: 120, bytes: 61 * 1024 * 1024 } } })).toContain('  workspace   upload ws_ab: 120 file(s), 61.0 MiB (kept on the server)\n');
  expect(planText({ ...base, workspace: { files: 0, tarBytes: 0, git: { url: 'https://git.example.com/a.git', ref: 'main', depth: 1, bundle: true } } }))
    .toContain("  workspace   git https://git.example.com/a.git at main (depth 1; the agent's commits come back as agent.bundle), cloned by the worker\n");
  expect(planText({ ...base, workspace: { files: 0, tarBytes: 0 } })).toContain('  done checks none\n  environment default (corral/sandbox:latest)\n  setup       none\n');
});
