/** read_file over the in-memory FakeSandbox: `cat -n` numbering, offset/limit, the 2000-line cap and its note. */
import type { FileContent } from '../../src/domain/sandbox';
import { readFileTool } from '../../src/tools/files';
import { FakeSandbox } from '../support/fake-ports';

function read(sandbox: FakeSandbox, args: { path: string; offset?: number; limit?: number }) {
  return readFileTool.execute(args, { sandbox, execTimeoutMs: 5_000, maxOutputBytes: 10_000 });
}

const numbered = (from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => `${String(from + i).padStart(6)}\tline ${from + i}`).join('\n');

const lines = (n: number) => Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n') + '\n';

describe('read_file', () => {
  it('numbers lines like cat -n: right-aligned number, a tab, the line', async () => {
    const sb = new FakeSandbox({ files: { 'a.txt': 'first\n\n\tindented\nlast' } });
    const out = await read(sb, { path: 'a.txt' });
    expect(out).toEqual({ ok: true, content: '     1\tfirst\n     2\t\n     3\t\tindented\n     4\tlast', summary: 'read a.txt (21 bytes)' });
  });

  it('keeps offset/limit semantics and says how to read on', async () => {
    const sb = new FakeSandbox({ files: { 'a.txt': lines(10) } });
    expect((await read(sb, { path: 'a.txt', offset: 3, limit: 2 })).content).toBe(`${numbered(3, 4)}\n[lines 3-4 of 10; use offset=5 to read on]`);
    expect((await read(sb, { path: 'a.txt', offset: 9 })).content).toBe(numbered(9, 10));
    expect((await read(sb, { path: 'a.txt', limit: 10 })).content).toBe(numbered(1, 10));
  });

  it('returns at most 2000 lines by default, with a note naming the next offset', async () => {
    const sb = new FakeSandbox({ files: { 'big.txt': lines(5321) } });
    const first = await read(sb, { path: 'big.txt' });
    expect(first.content.split('\n')).toHaveLength(2001);
    expect(first.content).toMatch(/^ {5}1\tline 1\n/);
    expect(first.content).toMatch(/\n {2}2000\tline 2000\n\[lines 1-2000 of 5321; use offset=2001 to read on\]$/);
    const next = await read(sb, { path: 'big.txt', offset: 2001 });
    expect(next.content).toMatch(/^ {2}2001\tline 2001\n[^]*\n {2}4000\tline 4000\n\[lines 2001-4000 of 5321; use offset=4001 to read on\]$/);
    const last = await read(sb, { path: 'big.txt', offset: 4001 });
    expect(last.content).toMatch(/\n {2}5321\tline 5321$/);
    // An explicit limit may ask for more than the default.
    expect((await read(sb, { path: 'big.txt', limit: 3000 })).content).toMatch(/\n {2}3000\tline 3000\n\[lines 1-3000 of 5321; use offset=3001 to read on\]$/);
  });

  it('an offset past the end is an error the model sees', async () => {
    const sb = new FakeSandbox({ files: { 'a.txt': lines(3) } });
    expect(await read(sb, { path: 'a.txt', offset: 4 })).toEqual({
      ok: false, content: 'error: offset 4 is past the end of a.txt, which has 3 lines', summary: 'read a.txt (21 bytes): offset past the end',
    });
  });

  it('says when a file is empty', async () => {
    const sb = new FakeSandbox({ files: { 'e.txt': '' } });
    expect(await read(sb, { path: 'e.txt' })).toMatchObject({ ok: true, content: '[e.txt is empty]' });
  });

  it('says when the byte cap cut the file, drops the partial last line, and how to get the rest', async () => {
    // 256 KiB of 100-byte lines: the read stops inside line 2622.
    class CappedSandbox extends FakeSandbox {
      override async readFile(path: string, opts?: { maxBytes?: number; signal?: AbortSignal }): Promise<FileContent> {
        const f = await super.readFile(path, opts);
        expect(opts?.maxBytes).toBe(256 * 1024);
        return f;
      }
    }
    const row = (i: number) => `${String(i).padStart(8, '0')} ${'x'.repeat(90)}`;
    const text = Array.from({ length: 4000 }, (_, i) => row(i + 1)).join('\n') + '\n';
    const sb = new CappedSandbox({ files: { 'big.log': text } });
    const out = await read(sb, { path: 'big.log', offset: 2001 });
    expect(out.ok).toBe(true);
    const shown = out.content.split('\n');
    expect(shown[shown.length - 2]).toBe(`  2621\t${row(2621)}`);
    expect(shown[shown.length - 1]).toBe(
      "[lines 2001-2621 shown; the file goes on (only the first 262144 of its 400000 bytes were read); use bash (e.g. sed -n '2622,4621p' big.log) for lines past 2621]",
    );
    const head = await read(sb, { path: 'big.log' });
    expect(head.content.split('\n').pop()).toBe('[lines 1-2000 of at least 2621 (only the first 262144 of its 400000 bytes were read); use offset=2001 to read on]');
  });

  it('a missing file or a refused path is an error result', async () => {
    const sb = new FakeSandbox({ files: {} });
    expect(await read(sb, { path: 'nope.txt' })).toMatchObject({ ok: false, content: 'error: no such file: nope.txt' });
    expect(await read(sb, { path: '../etc/passwd' })).toMatchObject({ ok: false, content: expect.stringContaining('path refused') });
  });
});
