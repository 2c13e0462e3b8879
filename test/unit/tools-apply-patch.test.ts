/** apply_patch over the in-memory FakeSandbox: git and plain diffs, creation, deletion, rename, all-or-nothing. */
import { createHash } from 'node:crypto';
import { SandboxError } from '../../src/domain/errors';
import type { WriteOptions } from '../../src/domain/sandbox';
import { applyPatchTool } from '../../src/tools/apply-patch';
import { findTool } from '../../src/tools/registry';
import { parseUnifiedDiff, patchPaths } from '../../src/tools/unified-diff';
import { FakeSandbox } from '../support/fake-ports';

const EXEC_TIMEOUT = 7_000;

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

function workspace(files: Record<string, string>): FakeSandbox {
  return new FakeSandbox({ files });
}

function apply(sandbox: FakeSandbox, patch: string) {
  return applyPatchTool.execute({ patch }, { sandbox, execTimeoutMs: EXEC_TIMEOUT, maxOutputBytes: 10_000 });
}

function mutations(sb: FakeSandbox) {
  return sb.calls.filter((c) => c.op === 'writeFile' || c.op === 'removeFile' || c.op === 'exec');
}

const TWELVE = 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\ntwelve\n';

// Printed by `git diff --cached -M` (git 2.x) after: two changed hunks, a new file, a pure rename of
// an empty file, a change to a file without a final newline, a deletion, and a rename with a change.
const GIT_PATCH = `diff --git a/a.txt b/a.txt
index e031777..73b32b4 100644
--- a/a.txt
+++ b/a.txt
@@ -1,5 +1,5 @@
 one
-two
+TWO
 three
 four
 five
@@ -8,5 +8,5 @@ seven
 eight
 nine
 ten
-eleven
+ELEVEN
 twelve
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000..5786b13
--- /dev/null
+++ b/new.txt
@@ -0,0 +1,2 @@
+brand
+new
diff --git a/empty.txt b/newempty
similarity index 100%
rename from empty.txt
rename to newempty
diff --git a/nonl.txt b/nonl.txt
index 1b32298..206b378 100644
--- a/nonl.txt
+++ b/nonl.txt
@@ -1,2 +1,2 @@
 x
-y
\\ No newline at end of file
+z
diff --git a/old.txt b/old.txt
deleted file mode 100644
index d3bc718..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-gone
-bye
diff --git a/ren.txt b/renamed.txt
similarity index 66%
rename from ren.txt
rename to renamed.txt
index 74c047b..8b35541 100644
--- a/ren.txt
+++ b/renamed.txt
@@ -1,3 +1,3 @@
 r1
-r2
+R2
 r3
`;

describe('apply_patch', () => {
  it('is registered, takes one string argument and is not read-only', () => {
    expect(findTool('apply_patch')).toBe(applyPatchTool);
    expect(applyPatchTool.schema.safeParse({ patch: 'x', path: 'y' }).success).toBe(false);
  });

  it('applies a multi-file git diff: changes, new file, deletion, renames, no-newline markers', async () => {
    const sb = workspace({ 'a.txt': TWELVE, 'old.txt': 'gone\nbye\n', 'nonl.txt': 'x\ny', 'ren.txt': 'r1\nr2\nr3\n', 'empty.txt': '', 'keep.txt': 'k\n' });
    const out = await apply(sb, GIT_PATCH);
    expect(out.ok).toBe(true);
    expect(Object.fromEntries(sb.files)).toEqual({
      'a.txt': TWELVE.replace('two', 'TWO').replace('eleven', 'ELEVEN'),
      'new.txt': 'brand\nnew\n',
      newempty: '',
      'nonl.txt': 'x\nz\n',
      'renamed.txt': 'r1\nR2\nr3\n',
      'keep.txt': 'k\n',
    });
    expect(out.content).toBe([
      'applied the patch: 6 files changed, +6 -6 lines',
      'M a.txt (+2 -2)',
      'A new.txt (+2 -0)',
      'R empty.txt -> newempty (+0 -0)',
      'M nonl.txt (+1 -1)',
      'D old.txt (+0 -2)',
      'R ren.txt -> renamed.txt (+1 -1)',
    ].join('\n'));
    expect(out.summary).toBe('patched 6 files (+6 -6): a.txt, new.txt, newempty, nonl.txt, old.txt, renamed.txt');
    // Every write and deletion names what it expects to replace: the content read, or nothing.
    expect(sb.execs).toEqual([]);
    expect(mutations(sb).map((c) => [c.op, 'path' in c ? c.path : '', 'expectSha256' in c ? c.expectSha256 : undefined])).toEqual([
      ['writeFile', 'a.txt', sha(TWELVE)],
      ['writeFile', 'new.txt', 'absent'],
      ['writeFile', 'newempty', 'absent'],
      ['writeFile', 'nonl.txt', sha('x\ny')],
      ['writeFile', 'renamed.txt', 'absent'],
      ['removeFile', 'empty.txt', sha('')],
      ['removeFile', 'old.txt', sha('gone\nbye\n')],
      ['removeFile', 'ren.txt', sha('r1\nr2\nr3\n')],
    ]);
  });

  it('applies a plain `diff -u` patch (no prefixes, timestamps after a tab) and hunks whose line numbers are off', async () => {
    const sb = workspace({ 'src/app.py': 'import os\n\n\ndef main():\n    print("hi")\n    return 0\n' });
    const patch = [
      '--- src/app.py\t2024-01-01 10:00:00.000000000 +0000',
      '+++ src/app.py\t2024-01-01 10:05:00.000000000 +0000',
      '@@ -40,3 +40,4 @@',
      ' def main():',
      '-    print("hi")',
      '+    print("hello")',
      '+    print("world")',
      '     return 0',
      '',
    ].join('\n');
    const out = await apply(sb, patch);
    expect(out).toMatchObject({ ok: true, content: 'applied the patch: 1 file changed, +2 -1 lines\nM src/app.py (+2 -1)' });
    expect(sb.files.get('src/app.py')).toBe('import os\n\n\ndef main():\n    print("hello")\n    print("world")\n    return 0\n');
  });

  it('creates a new file from /dev/null (plain paths, no final newline)', async () => {
    const sb = workspace({});
    const out = await apply(sb, '--- /dev/null\n+++ docs/notes.md\n@@ -0,0 +1,2 @@\n+# Notes\n+last\n\\ No newline at end of file\n');
    expect(out).toMatchObject({ ok: true, content: 'applied the patch: 1 file changed, +2 -0 lines\nA docs/notes.md (+2 -0)' });
    expect(sb.files.get('docs/notes.md')).toBe('# Notes\nlast');
  });

  it('refuses to create a file that already exists', async () => {
    const sb = workspace({ 'x.txt': 'old\n' });
    const out = await apply(sb, '--- /dev/null\n+++ b/x.txt\n@@ -0,0 +1 @@\n+new\n');
    expect(out.ok).toBe(false);
    expect(out.content).toBe('error: x.txt already exists, but the patch creates it (from /dev/null); patch it as a change instead\nNo file was changed.');
    expect(mutations(sb)).toEqual([]);
  });

  it('deletes a file to /dev/null only when its - lines are the whole file', async () => {
    const sb = workspace({ 'a.txt': 'a\nb\nc\n' });
    const partial = await apply(sb, '--- a/a.txt\n+++ /dev/null\n@@ -1,2 +0,0 @@\n-a\n-b\n');
    expect(partial.ok).toBe(false);
    expect(partial.content).toContain('the patch deletes a.txt but would leave 1 line(s) in it');
    expect(mutations(sb)).toEqual([]);

    const out = await apply(sb, '--- a/a.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-a\n-b\n-c\n');
    expect(out).toMatchObject({ ok: true, content: 'applied the patch: 1 file changed, +0 -3 lines\nD a.txt (+0 -3)' });
    expect(sb.files.has('a.txt')).toBe(false);
    expect(mutations(sb)).toEqual([{ op: 'removeFile', path: 'a.txt', expectSha256: sha('a\nb\nc\n') }]);
  });

  it('rejects a hunk that does not apply, naming the file, the hunk and the line, and writes nothing', async () => {
    const sb = workspace({ 'src/a.py': TWELVE, 'src/b.py': 'b\n' });
    const patch = [
      '--- a/src/b.py', '+++ b/src/b.py', '@@ -1 +1 @@', '-b', '+B',
      '--- a/src/a.py', '+++ b/src/a.py',
      '@@ -1,3 +1,3 @@', ' one', '-two', '+2', ' three',
      '@@ -10,4 +10,5 @@', ' ten', ' eleven', '-twelve', '+12', '+13', ' thirteen',
      '',
    ].join('\n');
    const out = await apply(sb, patch);
    expect(out.ok).toBe(false);
    expect(out.content).toBe(
      'error: hunk 2 of src/a.py (@@ -10,4 +10,5 @@) does not apply: context line 13 is past the end of the file (12 lines); the patch expects "thirteen"\nNo file was changed.',
    );
    expect(out.summary).toBe('apply_patch failed: hunk 2 of src/a.py (@@ -10,4 +10,5 @@) does not apply: context line 13 is past the end of the file (12 lines); the patch expects "thirteen"');
    expect(mutations(sb)).toEqual([]);
    expect(sb.files.get('src/b.py')).toBe('b\n');
  });

  it('says which context line differs, and when only whitespace differs', async () => {
    const sb = workspace({ 'a.py': 'def f():\n    return 1\n\n\ndef g():\n    return 2\n' });
    const out = await apply(sb, '--- a/a.py\n+++ b/a.py\n@@ -4,3 +4,3 @@\n \n def g():\n-  return 2\n+  return 3\n');
    expect(out.content).toBe(
      'error: hunk 1 of a.py (@@ -4,3 +4,3 @@) does not apply: line to remove 6 differs: the patch has "  return 2", the file has "    return 2" (they differ only in whitespace)\nNo file was changed.',
    );
    const ctx = await apply(sb, '--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n def h():\n-    return 1\n+    return 0\n');
    expect(ctx.content).toContain('hunk 1 of a.py (@@ -1,2 +1,2 @@) does not apply: context line 1 differs: the patch has "def h():", the file has "def f():"');
    expect(mutations(sb)).toEqual([]);
  });

  it.each([
    ['a/../outside.txt', 'b/../outside.txt', 'path refused: "../outside.txt" contains "..", which could leave /workspace'],
    ['/etc/passwd', '/etc/passwd', 'path refused: "/etc/passwd" is absolute; paths are relative to /workspace'],
    ['/dev/null', 'b/src/../../x', 'path refused: "src/../../x" contains ".."'],
  ])('refuses a path that could leave the workspace (%s → %s) and writes nothing', async (from, to, reason) => {
    const sb = workspace({ 'ok.txt': 'a\n' });
    const patch = `--- a/ok.txt\n+++ b/ok.txt\n@@ -1 +1 @@\n-a\n+b\n--- ${from}\n+++ ${to}\n@@ -1 +1 @@\n-x\n+y\n`;
    const out = await apply(sb, patch);
    expect(out.ok).toBe(false);
    expect(out.content).toContain(reason);
    expect(out.content).toMatch(/No file was changed\.$/);
    expect(mutations(sb)).toEqual([]);
    expect(sb.files.get('ok.txt')).toBe('a\n');
  });

  it('accepts /workspace/… paths as workspace paths', async () => {
    const sb = workspace({ 'x.txt': 'a\n' });
    const out = await apply(sb, '--- /workspace/x.txt\n+++ /workspace/x.txt\n@@ -1 +1 @@\n-a\n+b\n');
    expect(out.ok).toBe(true);
    expect(sb.files.get('x.txt')).toBe('b\n');
  });

  it('applies hunks whose header counts are wrong (the context still has to match)', async () => {
    const sb = workspace({ 'a.txt': 'one\ntwo\nthree\n' });
    const out = await apply(sb, '--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n three\n');
    expect(out.ok).toBe(true);
    expect(sb.files.get('a.txt')).toBe('one\nTWO\nthree\n');
  });

  it('applies several sections for the same file in order', async () => {
    const sb = workspace({ 'a.txt': 'one\ntwo\n' });
    const out = await apply(sb, '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-one\n+ONE\n--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n ONE\n-two\n+TWO\n');
    expect(out.ok).toBe(true);
    expect(sb.files.get('a.txt')).toBe('ONE\nTWO\n');
    expect(sb.calls.filter((c) => c.op === 'writeFile')).toHaveLength(1);
  });

  it('reads a `git format-patch` mail (message before, signature after) and removed lines that start with "--"', async () => {
    const sb = workspace({ 'q.sql': 'select 1;\n-- old comment\nselect 2;\n' });
    const mail = [
      'From 1234 Mon Sep 17 00:00:00 2001', 'Subject: [PATCH] drop a comment', '', '---', ' q.sql | 1 -', '',
      'diff --git a/q.sql b/q.sql', 'index 1..2 100644', '--- a/q.sql', '+++ b/q.sql',
      '@@ -1,3 +1,2 @@', ' select 1;', '--- old comment', ' select 2;',
      '-- ', '2.39.2', '',
    ].join('\n');
    const out = await apply(sb, mail);
    expect(out).toMatchObject({ ok: true, content: 'applied the patch: 1 file changed, +0 -1 lines\nM q.sql (+0 -1)' });
    expect(sb.files.get('q.sql')).toBe('select 1;\nselect 2;\n');
  });

  it.each([
    ['no file headers', 'just some text\n', 'the patch names no files'],
    ['a hunk without a header', '@@ -1 +1 @@\n-a\n+b\n', 'the patch cannot be parsed: line 1: a hunk (@@ -1 +1 @@) before any "--- old" / "+++ new" file header'],
    ['a malformed hunk header', '--- a/x\n+++ b/x\n@@ one @@\n-a\n', 'the patch cannot be parsed: line 3: malformed hunk header "@@ one @@"'],
    ['a binary patch', 'diff --git a/x.png b/x.png\nindex 1..2 100644\nBinary files a/x.png and b/x.png differ\n', 'binary files are not supported by apply_patch'],
    ['a missing file', '--- a/nope.txt\n+++ b/nope.txt\n@@ -1 +1 @@\n-a\n+b\n', 'nope.txt does not exist'],
  ])('explains %s', async (_name, patch, message) => {
    const sb = workspace({ 'x': 'a\n' });
    const out = await apply(sb, patch);
    expect(out.ok).toBe(false);
    expect(out.content).toContain(message);
    expect(mutations(sb)).toEqual([]);
  });

  it('puts back the files already written when a later write is refused by the sandbox', async () => {
    class RefusingSandbox extends FakeSandbox {
      override async writeFile(path: string, content: string, opts?: WriteOptions): Promise<void> {
        if (path === 'link/b.txt') throw new SandboxError('path_refused', 'path refused: link is a symbolic link (to /etc); file tools do not follow symlinks, use the path it points to');
        return super.writeFile(path, content, opts);
      }
    }
    const sb: FakeSandbox = new RefusingSandbox({ files: { 'a.txt': 'a\n' } });
    const out = await apply(sb, '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1 @@\n+n\n--- /dev/null\n+++ b/link/b.txt\n@@ -0,0 +1 @@\n+b\n');
    expect(out.ok).toBe(false);
    expect(out.content).toBe('error: path refused: link is a symbolic link (to /etc); file tools do not follow symlinks, use the path it points to\nNo file was changed.');
    expect(Object.fromEntries(sb.files)).toEqual({ 'a.txt': 'a\n' });
  });

  it('refuses to clobber a file another process changed between the read and the write, and puts back what it wrote', async () => {
    // A background process in the sandbox rewrites b.txt after apply_patch read it.
    class RacingSandbox extends FakeSandbox {
      override async writeFile(path: string, content: string, opts?: WriteOptions): Promise<void> {
        if (path === 'b.txt') this.files.set('b.txt', 'rewritten by a background job\n');
        return super.writeFile(path, content, opts);
      }
    }
    const sb = new RacingSandbox({ files: { 'a.txt': 'a\n', 'b.txt': 'b\n' } });
    const out = await apply(sb, '--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-a\n+A\n--- a/b.txt\n+++ b/b.txt\n@@ -1 +1 @@\n-b\n+B\n');
    expect(out.ok).toBe(false);
    expect(out.content).toBe('error: b.txt changed since it was read (another process in the sandbox wrote it)\nNo file was changed.');
    expect(Object.fromEntries(sb.files)).toEqual({ 'a.txt': 'a\n', 'b.txt': 'rewritten by a background job\n' });
  });
});

describe('unified diff parsing and the policy view of its paths', () => {
  it('parses C-quoted names and takes /dev/null as absent', () => {
    const r = parseUnifiedDiff('--- /dev/null\n+++ "b/dir/caf\\303\\251 \\"x\\".txt"\n@@ -0,0 +1 @@\n+x\n');
    expect(r).toMatchObject({ ok: true, files: [{ oldPath: null, newPath: 'dir/café "x".txt' }] });
  });

  it('patchPaths lists every name a header could mean, with and without a/ b/ prefixes, never /dev/null', () => {
    expect(patchPaths(GIT_PATCH).sort()).toEqual(
      ['a.txt', 'a/a.txt', 'b/a.txt', 'new.txt', 'b/new.txt', 'a/new.txt', 'empty.txt', 'a/empty.txt', 'newempty', 'b/newempty', 'nonl.txt', 'a/nonl.txt', 'b/nonl.txt',
        'old.txt', 'a/old.txt', 'b/old.txt', 'ren.txt', 'a/ren.txt', 'renamed.txt', 'b/renamed.txt'].sort(),
    );
    // Every path the applier would touch is among them.
    const parsed = parseUnifiedDiff(GIT_PATCH);
    if (!parsed.ok) throw new Error(parsed.error);
    const touched = parsed.files.flatMap((f) => [f.oldPath, f.newPath]).filter((p): p is string => p !== null);
    expect(patchPaths(GIT_PATCH)).toEqual(expect.arrayContaining(touched));
  });
});
