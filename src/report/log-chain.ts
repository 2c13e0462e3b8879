/**
 * The hash chain that makes a run's events.jsonl tamper-evident. Every line is the event's JSON with
 * two fields added at its end: `prev`, the hash of the line before it (for the first line: the
 * genesis, a hash of the run id and the admitted spec), and `hash`, the SHA-256 of the line's own
 * bytes up to and including `prev` (the line with `,"hash":"…"` taken out). The hash of the last line
 * is the log's final hash: the worker records it in the run record and the report, and may sign it.
 *
 * Checking needs no parser of ours beyond one fixed suffix: a line is `{…,"prev":"<64 hex>","hash":
 * "<64 hex>"}`; its hash is recomputed from its bytes, its `prev` compared with the recomputed hash
 * of the line before. So a changed byte is caught at its own line, a removed, inserted or reordered
 * line at the first line that no longer follows its predecessor, and a cut tail by the final hash
 * and line count the run record keeps.
 */
import { createHash } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import type { RunEvent } from '../domain/events';

const HEX64 = /^[0-9a-f]{64}$/;
/** The fixed end of a chained line: its link and its own hash. */
const SUFFIX = /,"prev":"([0-9a-f]{64})","hash":"([0-9a-f]{64})"\}$/;

const sha256 = (s: string | Buffer): string => createHash('sha256').update(s).digest('hex');

/** JSON with object keys sorted at every level: the same value always gives the same text. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
}

/** The `prev` of a run's first line: binds the log to the run id and the spec the worker admitted. */
export function logGenesis(runId: string, spec: unknown): string {
  return sha256(`corral-log-v1\n${runId}\n${canonicalJson(spec)}`);
}

/** One event as a chained line (no newline) and that line's hash, the next line's `prev`. */
export function sealLine(prev: string, event: RunEvent): { line: string; hash: string } {
  const { prev: _p, hash: _h, ...plain } = event as RunEvent & { prev?: unknown; hash?: unknown };
  const body = `${JSON.stringify(plain).slice(0, -1)},"prev":"${prev}"}`;
  const hash = sha256(body);
  return { line: `${body.slice(0, -1)},"hash":"${hash}"}`, hash };
}

/** A line's chain fields, or null when it carries none (not written by a chaining writer). */
export function chainFields(line: string): { prev: string; hash: string } | null {
  const m = SUFFIX.exec(line);
  return m ? { prev: m[1]!, hash: m[2]! } : null;
}

/** An event read back from a chained line, without the chain's two fields. */
export function stripChain<T extends object>(value: T): T {
  if (!('prev' in value) && !('hash' in value)) return value;
  const { prev: _p, hash: _h, ...rest } = value as T & { prev?: unknown; hash?: unknown };
  return rest as T;
}

/** What the run record says the log should end with. */
export interface ExpectedEnd {
  finalHash: string;
  lines: number;
}

/** The first place where a log differs from what its writer wrote. */
export interface ChainBreak {
  /** 1-based line number in the file. */
  line: number;
  /** The event's seq on that line when it could be read. */
  seq?: number;
  problem: 'no-log' | 'not-chained' | 'cut-short' | 'altered' | 'out-of-order' | 'wrong-start' | 'missing-tail' | 'extra-lines' | 'final-hash' | 'too-large' | 'signature';
  detail: string;
}

export interface ChainReport {
  ok: boolean;
  /** Lines read (a torn last line counts). */
  lines: number;
  /** The recomputed hash of the last line that checked out (the genesis when none did). */
  finalHash: string;
  firstBreak?: ChainBreak;
}

/**
 * Checks a log line by line as it streams in (bounded memory: one line at a time). `genesis`: the
 * first line's expected `prev` (absent: not checked). Feed it chunks with push(), then call end().
 */
export class ChainVerifier {
  private carry = '';
  private readonly decoder = new StringDecoder('utf8');
  private lineNo = 0;
  private last: string;
  private lastSeq: number | undefined;
  private broken: ChainBreak | undefined;

  /** `maxLineChars`: a longer line is not one a worker wrote (its events are capped far below). */
  constructor(private readonly genesis?: string, private readonly maxLineChars = 32 * 1024 * 1024) {
    this.last = genesis ?? '';
  }

  push(chunk: Buffer | string): void {
    if (this.broken) return;
    const text = this.carry + (typeof chunk === 'string' ? chunk : this.decoder.write(chunk));
    const parts = text.split('\n');
    this.carry = parts.pop() ?? '';
    for (const p of parts) this.check(p, true);
    if (!this.broken && this.carry.length > this.maxLineChars) {
      this.fail({ line: this.lineNo + 1, problem: 'altered', detail: `line ${this.lineNo + 1} is longer than any line a worker writes (${this.maxLineChars.toLocaleString('en-US')} characters)` });
    }
  }

  end(expected?: ExpectedEnd): ChainReport {
    this.carry += this.decoder.end();
    if (!this.broken && this.carry !== '') this.check(this.carry, false);
    this.carry = '';
    if (!this.broken && expected) this.checkEnd(expected);
    return { ok: !this.broken, lines: this.lineNo, finalHash: this.last, ...(this.broken ? { firstBreak: this.broken } : {}) };
  }

  private fail(b: ChainBreak): void {
    this.broken ??= b;
  }

  private check(raw: string, terminated: boolean): void {
    if (this.broken) return;
    this.lineNo += 1;
    const line = this.lineNo;
    const seq = seqOf(raw);
    const at = seq === undefined ? '' : ` (seq ${seq})`;
    const fields = chainFields(raw);
    if (!fields) {
      this.fail(terminated
        ? { line, ...(seq !== undefined ? { seq } : {}), problem: 'not-chained', detail: `line ${line}${at} does not end with the chain's "prev" and "hash" fields: it was changed, or not written by a chaining worker` }
        : { line, ...(seq !== undefined ? { seq } : {}), problem: 'cut-short', detail: `line ${line}${at} is cut short (no newline, no chain fields): the log was truncated inside it` });
      return;
    }
    const body = `${raw.slice(0, raw.length - `,"hash":"${fields.hash}"}`.length)}}`;
    const recomputed = sha256(body);
    if (recomputed !== fields.hash) {
      this.fail({ line, ...(seq !== undefined ? { seq } : {}), problem: 'altered', detail: `line ${line}${at} was altered: its bytes hash to ${recomputed.slice(0, 16)}…, it says ${fields.hash.slice(0, 16)}…` });
      return;
    }
    if (line === 1 && this.genesis !== undefined && fields.prev !== this.genesis) {
      this.fail({ line, ...(seq !== undefined ? { seq } : {}), problem: 'wrong-start', detail: `line 1${at} does not start from this run's spec: its "prev" is not the hash of the run id and the admitted spec (a log of another run, or lines removed from the start)` });
      return;
    }
    if (line > 1 && fields.prev !== this.last) {
      const order = seq !== undefined && this.lastSeq !== undefined ? ` (seq ${seq} after seq ${this.lastSeq})` : '';
      this.fail({ line, ...(seq !== undefined ? { seq } : {}), problem: 'out-of-order', detail: `line ${line} does not follow line ${line - 1}${order}: a line was removed, inserted or moved here` });
      return;
    }
    if (!terminated) {
      this.fail({ line, ...(seq !== undefined ? { seq } : {}), problem: 'cut-short', detail: `line ${line}${at} has no newline: the log was truncated after it` });
      return;
    }
    this.last = recomputed;
    this.lastSeq = seq;
  }

  private checkEnd(e: ExpectedEnd): void {
    const n = this.lineNo;
    if (n < e.lines) {
      this.fail({ line: n + 1, problem: 'missing-tail', detail: `the log ends after line ${n}; the run record says it has ${e.lines} lines: lines ${n + 1}–${e.lines} are missing` });
    } else if (n > e.lines) {
      this.fail({ line: e.lines + 1, problem: 'extra-lines', detail: `the log has ${n} lines; the run record says ${e.lines}: line ${e.lines + 1} on was added after the run ended` });
    } else if (this.last !== e.finalHash) {
      this.fail({ line: n, problem: 'final-hash', detail: `every line links to the one before, but the last line's hash is not the final hash the run record keeps: the log was rewritten from some line on` });
    }
  }
}

/** Checks a whole log held in memory. */
export function verifyChain(text: string | Buffer, genesis?: string, expected?: ExpectedEnd): ChainReport {
  const v = new ChainVerifier(genesis);
  v.push(text);
  return v.end(expected);
}

/** The seq field of a line, read without trusting the rest of it. */
function seqOf(raw: string): number | undefined {
  const m = /"seq":(\d{1,15})[,}]/.exec(raw.slice(0, 200));
  return m ? Number(m[1]) : undefined;
}

/** Whether `s` is a SHA-256 hex digest as the chain writes it. */
export const isChainHash = (s: unknown): s is string => typeof s === 'string' && HEX64.test(s);
