/**
 * `corral verify RUN [--json]`: asks the API to recompute the hash chain of a finished run's stored
 * log (GET /v1/runs/RUN/verify) and prints whether it is the log the worker wrote, or the first line
 * where it differs and why. `corral verify --log FILE [--final-hash H --lines N]` checks a log file
 * offline: its chain from line to line, and its end against a seal taken from the run record or the
 * report. Exit 0 when verified, 1 when not (or the API failed).
 */
import { readFile } from 'node:fs/promises';
import { loadConfig } from '../config';
import { verifyChain } from '../report/log-chain';
import type { VerifyResult } from '../api/log-verify';
import { ApiClient } from './api-client';
import { parseArgs, positionals } from './cli-args';
import { terminalLine } from './terminal-text';

export async function run(argv: string[]): Promise<number> {
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', json: 'flag', log: 'string', 'final-hash': 'string', lines: 'string' });
  if (typeof opts.log === 'string') return offline(opts.log, opts['final-hash'] as string | undefined, opts.lines as string | undefined);
  const [id] = positionals(pos, ['RUN']) as [string];
  const client = ApiClient.from(opts, loadConfig());
  const r = await client.request<VerifyResult>('GET', `/v1/runs/${encodeURIComponent(id)}/verify`);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
    return r.verified ? 0 : 1;
  }
  const sig = r.signature === 'valid' ? `; signature valid (key ${r.signatureKeyId})`
    : r.signature === 'unchecked' ? `; signed by key ${r.signatureKeyId} (not checked: no CORRAL_LOG_VERIFY_KEY_FILE on the API)`
      : r.signature === 'absent' ? '; unsigned' : '';
  if (r.verified) {
    process.stdout.write(`verified ${id}: ${r.lines} lines from the ${r.source === 'object-store' ? 'object store' : 'data dir'}, final hash ${r.finalHash} as the run record keeps it${r.spec === 'checked' ? ', starting from the run\'s spec' : ' (the record keeps no spec: line 1 not checked against it)'}${sig}\n`);
    if (r.incomplete) process.stdout.write(`note: the worker could not write the whole log: ${terminalLine(r.incomplete)}\n`);
    return 0;
  }
  const b = r.firstBreak!;
  process.stdout.write(`NOT VERIFIED ${id}: line ${b.line}${b.seq !== undefined ? ` (seq ${b.seq})` : ''}: ${terminalLine(b.detail)}\n`);
  return 1;
}

async function offline(path: string, finalHash: string | undefined, lines: string | undefined): Promise<number> {
  if ((finalHash === undefined) !== (lines === undefined)) throw new Error('--final-hash and --lines go together (the seal from the run record or the report)');
  const n = lines === undefined ? undefined : Number(lines);
  if (n !== undefined && !(Number.isInteger(n) && n >= 0)) throw new Error(`--lines: "${lines}" is not a line count`);
  const r = verifyChain(await readFile(path), undefined, finalHash !== undefined && n !== undefined ? { finalHash, lines: n } : undefined);
  if (r.ok) {
    process.stdout.write(`chain intact: ${r.lines} lines, final hash ${r.finalHash}${finalHash ? ' as given' : ' (give --final-hash and --lines from the run record to check the end; line 1 is checked against the spec only through the API)'}\n`);
    return 0;
  }
  const b = r.firstBreak!;
  process.stdout.write(`NOT VERIFIED ${path}: line ${b.line}${b.seq !== undefined ? ` (seq ${b.seq})` : ''}: ${terminalLine(b.detail)}\n`);
  return 1;
}
