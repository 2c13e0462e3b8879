/** JsonlSink and readJsonl: one line per event, nothing lost on exit, malformed lines named by number. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidInputError } from '../../src/domain/errors';
import type { RunEvent } from '../../src/domain/events';
import { JsonlSink, readJsonl } from '../../src/report/jsonl-sink';

const repoRoot = resolve(__dirname, '../..');

const events: RunEvent[] = [
  { runId: 'r1', seq: 1, ts: '2025-01-01T00:00:00.000Z', type: 'tool.call', callId: 'c1', tool: 'bash', args: { command: 'echo "a\nb" | wc -l' } },
  { runId: 'r1', seq: 2, ts: '2025-01-01T00:00:01.000Z', type: 'sandbox.removed', containerId: 'abc' },
];

describe('JsonlSink / readJsonl', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'corral-report-jsonl-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('creates parent directories, writes one JSON line per event, and reads them back', () => {
    const path = join(dir, 'runs', 'r1', 'events.jsonl');
    const sink = new JsonlSink(path);
    for (const e of events) sink.write(e);
    const text = readFileSync(path, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(text.trimEnd().split('\n')).toHaveLength(2);
    expect(JSON.parse(text.split('\n')[0]!)).toEqual(events[0]);
    expect(readJsonl(path)).toEqual(events);
  });

  it('appends to an existing log and `write` works detached from the instance', () => {
    const path = join(dir, 'events.jsonl');
    new JsonlSink(path).write(events[0]!);
    const { write } = new JsonlSink(path);
    write(events[1]!);
    expect(readJsonl(path).map((e) => e.seq)).toEqual([1, 2]);
  });

  it('the last line is on disk when a process exits right after writing it', () => {
    const path = join(dir, 'child.jsonl');
    const script = join(dir, 'child.ts');
    writeFileSync(
      script,
      `import { JsonlSink } from ${JSON.stringify(join(repoRoot, 'src/report/jsonl-sink'))};\n` +
        `const sink = new JsonlSink(process.argv[2]!);\n` +
        `for (let seq = 1; seq <= 50; seq++) sink.write({ runId: 'r', seq, ts: 't', type: 'sandbox.removed', containerId: 'c' + seq });\n` +
        `process.exit(0);\n`,
    );
    const child = spawnSync(process.execPath, ['--import', 'tsx', script, path], { cwd: repoRoot, encoding: 'utf8', timeout: 30_000 });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
    const read = readJsonl(path);
    expect(read).toHaveLength(50);
    expect(read.at(-1)).toMatchObject({ seq: 50, containerId: 'c50' });
  });

  it('skips blank lines', () => {
    const path = join(dir, 'blank.jsonl');
    writeFileSync(path, `${JSON.stringify(events[0])}\n\n   \n${JSON.stringify(events[1])}\n\n`);
    expect(readJsonl(path)).toEqual(events);
  });

  it('a malformed line throws an InvalidInputError naming the file and its line number', () => {
    const path = join(dir, 'bad.jsonl');
    writeFileSync(path, `${JSON.stringify(events[0])}\n\n{"runId":"r1","seq":3,"type":"tool.c\n${JSON.stringify(events[1])}\n`);
    expect(() => readJsonl(path)).toThrow(InvalidInputError);
    expect(() => readJsonl(path)).toThrow(/bad\.jsonl:3: malformed JSONL line 3/);
    try {
      readJsonl(path);
    } catch (err) {
      expect((err as InvalidInputError).code).toBe('invalid_input');
      expect((err as InvalidInputError).details).toMatchObject({ line: 3 });
    }
  });

  it('valid JSON that is not a run event is refused with its line number', () => {
    const path = join(dir, 'shape.jsonl');
    writeFileSync(path, `${JSON.stringify(events[0])}\n[1,2,3]\n`);
    expect(() => readJsonl(path)).toThrow(/shape\.jsonl:2: line 2 is not a run event/);
    writeFileSync(path, `{"type":"artifact","runId":"r1","seq":"1"}\n`);
    expect(() => readJsonl(path)).toThrow(/line 1 is not a run event/);
  });

  it('a missing file is an error, not an empty log', () => {
    expect(() => readJsonl(join(dir, 'nope.jsonl'))).toThrow(/ENOENT/);
  });
});
