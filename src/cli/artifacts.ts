/**
 * `corral artifacts RUN [patch|tar|bundle|log|report] [-o FILE]`: a run's files from the API. Without
 * a kind it lists them (name, size, link); with one it streams that file to FILE (never the whole
 * file in memory), or to stdout — text only: the tar and the bundle are binary, so on a terminal they
 * need -o. `corral artifacts migrate` is the operator's command that moves run files from this host's
 * data dir into the object store (artifacts-migrate.ts).
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { loadConfig } from '../config';
import { ApiClient, ApiError } from './api-client';
import { parseArgs, UsageError } from './cli-args';
import { terminalSafe } from './terminal-text';

/** What each kind is called, where the API serves it, and whether it is text. */
export const ARTIFACT_KINDS = {
  patch: { file: 'workspace.patch', path: 'artifacts/patch', text: true },
  tar: { file: 'workspace.tar', path: 'artifacts/workspace.tar', text: false },
  bundle: { file: 'agent.bundle', path: 'artifacts/agent.bundle', text: false },
  log: { file: 'events.jsonl', path: 'logs', text: true },
  report: { file: 'report.md', path: 'report', text: true },
} as const;
type Kind = keyof typeof ARTIFACT_KINDS;

export async function run(argv: string[]): Promise<number> {
  if (argv[0] === 'migrate') return (await import('./artifacts-migrate')).run(argv.slice(1));
  const { opts, positionals: pos } = parseArgs(argv, { api: 'string', token: 'string', output: 'string' }, { o: 'output' });
  const [id, kind, extra] = pos;
  if (!id) throw new UsageError('give the run: corral artifacts RUN [patch|tar|bundle|log|report] [-o FILE]');
  if (extra !== undefined) throw new UsageError(`unexpected argument "${extra}"`);
  if (kind !== undefined && !(kind in ARTIFACT_KINDS)) throw new UsageError(`unknown artifact "${kind}": give one of ${Object.keys(ARTIFACT_KINDS).join(', ')}`);
  if (kind === undefined && opts.output) throw new UsageError('-o needs an artifact: corral artifacts RUN patch -o FILE');
  const client = ApiClient.from(opts, loadConfig());
  const base = `/v1/runs/${encodeURIComponent(id)}`;
  if (kind === undefined) return list(client, id);
  const a = ARTIFACT_KINDS[kind as Kind];
  if (!opts.output && !a.text && process.stdout.isTTY) throw new UsageError(`${a.file} is binary: give -o FILE (or redirect stdout)`);
  let got;
  try {
    got = await client.download(`${base}/${a.path}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && kind === 'bundle') throw new Error(`${err.message}; a bundle is made only for a workspace.git run with "bundle": true (corral submit --git URL --bundle)`, { cause: err });
    throw err;
  }
  const source = Readable.fromWeb(got.body as import('node:stream/web').ReadableStream<Uint8Array>);
  if (!opts.output) {
    // Text on a terminal is made safe (control and bidi characters as escapes); piped, it is byte for byte.
    if (process.stdout.isTTY) {
      for await (const chunk of source) process.stdout.write(terminalSafe(Buffer.from(chunk as Uint8Array).toString('utf8')));
    } else {
      await pipeline(source, process.stdout as unknown as Writable, { end: false });
    }
    return 0;
  }
  // Written under a temporary name, renamed when complete: a broken download never looks whole.
  const tmp = `${opts.output}.corral-${process.pid}.part`;
  try {
    await pipeline(source, createWriteStream(tmp, { flags: 'wx' }));
    await rename(tmp, opts.output);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  process.stdout.write(`wrote ${a.file} of ${id} to ${opts.output}${got.bytes !== null ? ` (${got.bytes} bytes)` : ''}\n`);
  return 0;
}

/** The run's files: what it recorded (name and size) and the command that fetches each. */
async function list(client: ApiClient, id: string): Promise<number> {
  const run = await client.get(id);
  const recorded = new Map(((run.artifacts ?? []) as Array<{ name: string; bytes: number }>).map((a) => [a.name, a.bytes]));
  const lines = [`${id} (${run.status})`];
  for (const [kind, a] of Object.entries(ARTIFACT_KINDS)) {
    const bytes = recorded.get(a.file);
    const there = bytes !== undefined ? `${bytes} bytes` : kind === 'log' ? 'grows while the run goes' : kind === 'report' ? (run.finishedAt ? 'written' : 'when the run ends') : 'none';
    lines.push(`  ${kind.padEnd(7)} ${a.file.padEnd(16)} ${there.padEnd(24)} corral artifacts ${id} ${kind} -o ${id}-${a.file}`);
  }
  process.stdout.write(`${lines.map((l) => terminalSafe(l)).join('\n')}\n`);
  return 0;
}
