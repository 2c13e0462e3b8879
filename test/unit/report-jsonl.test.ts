/** JsonlSink and readJsonl: one chained line per event, one async handle per run, failures kept, malformed lines named by number. */
import { execFileSync, spawnSync } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { InvalidInputError } from '../../src/domain/errors';
import type { RunEvent } from '../../src/domain/events';
import { JsonlSink, chainEnd, readJsonl } from '../../src/report/jsonl-sink';
import { verifyChain } from '../../src/report/log-chain';

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

  const GENESIS = 'a'.repeat(64);

  it('creates parent directories, writes one chained JSON line per event, and reads them back', async () => {
    const path = join(dir, 'runs', 'r1', 'events.jsonl');
    const sink = new JsonlSink(path, { genesis: GENESIS });
    for (const e of events) sink.write(e);
    expect(await sink.close()).toBeUndefined();
    const text = readFileSync(path, 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    expect(text.trimEnd().split('\n')).toHaveLength(2);
    expect(JSON.parse(text.split('\n')[0]!)).toEqual({ ...events[0], prev: GENESIS, hash: expect.stringMatching(/^[0-9a-f]{64}$/) });
    expect(readJsonl(path)).toEqual(events);
    expect(verifyChain(text, GENESIS, { finalHash: sink.lastHash, lines: 2 })).toMatchObject({ ok: true, lines: 2 });
  });

  it('a resumed log goes on from the last line of the file: the whole file is one chain', async () => {
    const path = join(dir, 'events.jsonl');
    const first = new JsonlSink(path, { genesis: GENESIS });
    first.write(events[0]!);
    await first.close();
    const end = chainEnd(path)!;
    expect(end).toEqual({ lastHash: first.lastHash, lines: 1 });
    const second = new JsonlSink(path, { genesis: GENESIS, resume: end });
    const { write } = second; // detached from the instance, as an EventRecorder holds it
    write(events[1]!);
    await second.close();
    expect(second.lines).toBe(2);
    expect(readJsonl(path).map((e) => e.seq)).toEqual([1, 2]);
    expect(verifyChain(readFileSync(path), GENESIS, { finalHash: second.lastHash, lines: 2 })).toMatchObject({ ok: true, lines: 2 });
  });

  // Issue 40, defect 8: the log was opened, appended and closed synchronously for every event, on the
  // worker's event loop. A FIFO shows both: a synchronous open of a FIFO with no reader blocks the whole
  // loop (this test would hang), and a reader sees EOF each time the writer closes (it would get one line).
  it('one file handle per run, opened and written off the event loop: a FIFO reader gets every line from one open', async () => {
    const path = join(dir, 'fifo.jsonl');
    execFileSync('mkfifo', [path]);
    const sink = new JsonlSink(path, { genesis: GENESIS });
    const many: RunEvent[] = Array.from({ length: 200 }, (_, i) => ({ runId: 'r', seq: i + 1, ts: 't', type: 'sandbox.removed', containerId: `c${i + 1}` }));
    for (const e of many) sink.write(e);
    // The loop is free although nobody reads the FIFO yet: the open waits in the thread pool.
    await new Promise((r) => setImmediate(r));
    const reader = createReadStream(path);
    const chunks: Buffer[] = [];
    reader.on('data', (c) => chunks.push(c as Buffer));
    const ended = new Promise<void>((r) => reader.on('end', () => r()));
    expect(await sink.close()).toBeUndefined();
    await ended;
    const text = Buffer.concat(chunks).toString('utf8');
    expect(text.trimEnd().split('\n')).toHaveLength(200);
    expect(verifyChain(text, GENESIS, { finalHash: sink.lastHash, lines: 200 })).toMatchObject({ ok: true });
  });

  it('a write that fails is kept as the log\'s failure, never thrown at the emitter; later lines are counted as lost', async () => {
    const path = join(dir, 'full.jsonl');
    symlinkSync('/dev/full', path);
    const sink = new JsonlSink(path, { genesis: GENESIS });
    expect(() => sink.write(events[0]!)).not.toThrow();
    await sink.flush();
    sink.write(events[1]!);
    expect(await sink.close()).toMatch(/full\.jsonl: .*ENOSPC.*; 2 of 2 lines are not in the file/);
    sink.write(events[0]!);
    expect(sink.failure).toMatch(/ENOSPC/);
  });

  it('an event after close is a failure of the log, not a silent loss', async () => {
    const path = join(dir, 'late.jsonl');
    const sink = new JsonlSink(path, { genesis: GENESIS });
    sink.write(events[0]!);
    expect(await sink.close()).toBeUndefined();
    sink.write(events[1]!);
    expect(sink.failure).toMatch(/came after the log was closed; 1 of 2 lines are not in the file/);
  });

  it('every line is on disk once close() resolves, even when the process exits right after', () => {
    const path = join(dir, 'child.jsonl');
    const script = join(dir, 'child.ts');
    writeFileSync(
      script,
      `import { JsonlSink } from ${JSON.stringify(join(repoRoot, 'src/report/jsonl-sink'))};\n` +
        `const sink = new JsonlSink(process.argv[2]!, { genesis: '${GENESIS}' });\n` +
        `for (let seq = 1; seq <= 50; seq++) sink.write({ runId: 'r', seq, ts: 't', type: 'sandbox.removed', containerId: 'c' + seq });\n` +
        `void sink.close().then(() => process.exit(0));\n`,
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
