/**
 * The hash chain of events.jsonl: an untouched log verifies; every kind of tampering is reported at
 * the line where the log first differs from what the worker wrote — a changed byte anywhere in a line
 * (its body, its link, its own hash), a removed line, an inserted one, a reordered pair, a cut tail, a
 * cut last line, a log of another run, a log rewritten with fresh hashes, lines added after the end —
 * however the bytes arrive (streamed in chunks of any size).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunEvent } from '../../src/domain/events';
import { JsonlSink } from '../../src/report/jsonl-sink';
import { ChainVerifier, canonicalJson, logGenesis, sealLine, verifyChain, type ChainReport } from '../../src/report/log-chain';

const RUN = 'run_chain_test';
const SPEC = { task: 'écrire le rapport ✓ — with a "quote" and a \\ backslash', workspace: { files: { 'a.txt': 'x\ny' } }, budgets: { llmCalls: 3 } };
const GENESIS = logGenesis(RUN, SPEC);

function events(n: number): RunEvent[] {
  return Array.from({ length: n }, (_, i): RunEvent => i % 2 === 0
    ? { runId: RUN, seq: i + 1, ts: `2025-01-01T00:00:${String(i).padStart(2, '0')}.000Z`, type: 'tool.call', callId: `c${i}`, tool: 'bash', args: { command: `echo "ünïcödé 🚀 ${i}"\nexit 0` } }
    : { runId: RUN, seq: i + 1, ts: `2025-01-01T00:00:${String(i).padStart(2, '0')}.000Z`, type: 'sandbox.removed', containerId: `ctr${i}` });
}

let dir: string;
let log: Buffer;
let expected: { finalHash: string; lines: number };
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'corral-chain-'));
  const sink = new JsonlSink(join(dir, 'events.jsonl'), { genesis: GENESIS });
  for (const e of events(12)) sink.write(e);
  expect(await sink.close()).toBeUndefined();
  log = readFileSync(sink.path);
  expected = { finalHash: sink.lastHash, lines: sink.lines };
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const lines = (b: Buffer | string) => b.toString().split('\n').slice(0, -1);
const join_ = (ls: string[]) => `${ls.join('\n')}\n`;
const check = (text: string | Buffer, genesis: string | undefined = GENESIS): ChainReport => verifyChain(text, genesis, expected);

test('an untouched log verifies, and its final hash and line count are the writer\'s', () => {
  expect(check(log)).toEqual({ ok: true, lines: 12, finalHash: expected.finalHash });
});

test('streamed in chunks of any size (multi-byte characters split across chunks) it verifies the same', () => {
  for (const size of [1, 2, 3, 7, 64, 1000]) {
    const v = new ChainVerifier(GENESIS);
    for (let i = 0; i < log.length; i += size) v.push(log.subarray(i, i + size));
    expect(v.end(expected)).toMatchObject({ ok: true, lines: 12 });
  }
});

test('one changed byte anywhere in a line — body, link or hash — is reported at that line', () => {
  const ls = lines(log);
  let tried = 0;
  for (let li = 0; li < ls.length; li++) {
    const bytes = Buffer.from(ls[li]!);
    // positions spread over the whole line, including the last 150 bytes (the chain's fields)
    for (const pos of [0, 5, Math.floor(bytes.length / 2), bytes.length - 140, bytes.length - 100, bytes.length - 30, bytes.length - 2]) {
      const changed = Buffer.from(bytes);
      changed[pos] = changed[pos]! ^ 0x01;
      const tampered = [...ls];
      tampered[li] = changed.toString();
      const r = check(join_(tampered));
      expect({ li, pos, ok: r.ok, line: r.firstBreak?.line }).toEqual({ li, pos, ok: false, line: li + 1 });
      tried++;
    }
  }
  expect(tried).toBe(12 * 7);
});

test('a removed line is reported where the chain breaks, naming the seq that follows the wrong one', () => {
  for (const gone of [0, 1, 5, 10]) {
    const ls = lines(log);
    ls.splice(gone, 1);
    const r = check(join_(ls));
    expect(r.ok).toBe(false);
    expect(r.firstBreak!.line).toBe(gone + 1);
    if (gone === 0) expect(r.firstBreak!.problem).toBe('wrong-start');
    else expect(r.firstBreak).toMatchObject({ problem: 'out-of-order', detail: `line ${gone + 1} does not follow line ${gone} (seq ${gone + 2} after seq ${gone}): a line was removed, inserted or moved here` });
  }
});

test('a reordered pair is reported at the first of the two', () => {
  for (const at of [0, 3, 10]) {
    const ls = lines(log);
    [ls[at], ls[at + 1]] = [ls[at + 1]!, ls[at]!];
    const r = check(join_(ls));
    expect(r).toMatchObject({ ok: false, firstBreak: { line: at + 1 } });
  }
});

test('an inserted line — a copy of another, or a well-formed line of its own — is reported where it stands', () => {
  const ls = lines(log);
  const copy = [...ls];
  copy.splice(4, 0, ls[2]!);
  expect(check(join_(copy)).firstBreak).toMatchObject({ line: 5, problem: 'out-of-order' });
  // A forger who knows the scheme can seal a line onto line 4; then line 6 no longer follows it.
  const forged = [...ls];
  const prevHash = /"hash":"([0-9a-f]{64})"\}$/.exec(ls[3]!)![1]!;
  forged.splice(4, 0, sealLine(prevHash, { runId: RUN, seq: 5, ts: 't', type: 'sandbox.removed', containerId: 'forged' }).line);
  expect(check(join_(forged)).firstBreak).toMatchObject({ line: 6, problem: 'out-of-order' });
});

test('a truncated tail is reported against the run record: the first missing line', () => {
  const ls = lines(log);
  expect(check(join_(ls.slice(0, 9)))).toMatchObject({ ok: false, lines: 9, firstBreak: { line: 10, problem: 'missing-tail', detail: expect.stringContaining('lines 10–12 are missing') } });
  expect(check('')).toMatchObject({ ok: false, firstBreak: { line: 1, problem: 'missing-tail' } });
  // Without a record to compare with, the cut log is still a consistent chain: that is what the record is for.
  expect(verifyChain(join_(ls.slice(0, 9)), GENESIS).ok).toBe(true);
});

test('a log cut inside a line, or right before its newline, is reported at that line', () => {
  const text = log.toString();
  const end8 = text.split('\n').slice(0, 8).join('\n').length;
  expect(check(text.slice(0, end8 + 40))).toMatchObject({ ok: false, firstBreak: { line: 9, problem: 'cut-short' } });
  expect(check(text.slice(0, end8))).toMatchObject({ ok: false, firstBreak: { line: 8, problem: 'cut-short', detail: expect.stringContaining('no newline') } });
});

test('another run\'s log, or this log under another spec, does not start from this run\'s genesis', () => {
  expect(check(log, logGenesis('run_other', SPEC)).firstBreak).toMatchObject({ line: 1, problem: 'wrong-start' });
  expect(check(log, logGenesis(RUN, { ...SPEC, task: 'something else' })).firstBreak).toMatchObject({ line: 1, problem: 'wrong-start' });
});

test('a log rewritten from some line on with fresh hashes fails on the final hash the run record keeps', () => {
  const ls = lines(log);
  let prev = /"hash":"([0-9a-f]{64})"\}$/.exec(ls[6]!)![1]!;
  for (let i = 7; i < ls.length; i++) {
    const ev = JSON.parse(ls[i]!) as RunEvent & { containerId?: string };
    if (ev.type === 'sandbox.removed') ev.containerId = 'rewritten';
    const s = sealLine(prev, ev);
    ls[i] = s.line;
    prev = s.hash;
  }
  expect(check(join_(ls))).toMatchObject({ ok: false, firstBreak: { line: 12, problem: 'final-hash' } });
});

test('lines added after the end are reported at the first of them; a blank line or a line without the chain\'s fields where it stands', () => {
  const ls = lines(log);
  const sealedNext = sealLine(expected.finalHash, { runId: RUN, seq: 13, ts: 't', type: 'sandbox.removed', containerId: 'late' }).line;
  expect(check(join_([...ls, sealedNext]))).toMatchObject({ ok: false, firstBreak: { line: 13, problem: 'extra-lines' } });
  const blank = [...ls];
  blank.splice(3, 0, '');
  expect(check(join_(blank)).firstBreak).toMatchObject({ line: 4, problem: 'not-chained' });
  const plain = [...ls];
  plain[5] = JSON.stringify({ runId: RUN, seq: 6, ts: 't', type: 'sandbox.removed', containerId: 'x' });
  expect(check(join_(plain)).firstBreak).toMatchObject({ line: 6, seq: 6, problem: 'not-chained' });
});

test('the genesis is independent of key order: the same spec always gives the same start', () => {
  expect(canonicalJson({ b: 1, a: { d: [1, { y: 2, x: 1 }], c: null } })).toBe('{"a":{"c":null,"d":[1,{"x":1,"y":2}]},"b":1}');
  expect(logGenesis(RUN, { budgets: SPEC.budgets, workspace: SPEC.workspace, task: SPEC.task })).toBe(GENESIS);
});
