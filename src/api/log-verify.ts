/**
 * GET /v1/runs/{id}/verify: recomputes the hash chain of a finished run's stored events.jsonl (the
 * object store's copy, or the data dir's) and checks it against the run record: the first line must
 * start from the run id and the spec the record keeps, every line must link to the one before, and
 * the last line's hash and the line count must be the seal the worker recorded at the run's end (and
 * its signature valid under the operator's public key, when one is configured). The answer names the
 * first line that differs. The log streams through the check, never read whole; a log larger than
 * any a worker writes is refused as such.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import type { Readable } from 'node:stream';
import type { KeyObject } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { CorralError, NotFoundError } from '../domain/errors';
import type { RunView } from '../queue/run-store';
import { ChainVerifier, logGenesis, type ChainBreak } from '../report/log-chain';
import { checkSignature } from '../report/log-signature';
import type { ApiDeps } from './api-deps';
import { parseInput } from './http-errors';
import { route, type RouteDoc } from './openapi';
import { ownRun } from './run-routes';
import { ErrorBody, RunParams } from './schemas';

/** The operator's public key for log signatures (CORRAL_LOG_VERIFY_KEY_FILE, or the signing key's public half). */
export interface LogVerifyKey {
  key: KeyObject;
  keyId: string;
}

export const VerifyResult = z.object({
  id: z.string(),
  verified: z.boolean().meta({ description: 'true when every check passed' }),
  source: z.enum(['object-store', 'data-dir']).meta({ description: 'where the log was read' }),
  lines: z.number().meta({ description: 'lines read from the stored log' }),
  finalHash: z.string().meta({ description: 'the recomputed hash of the last line that checked out' }),
  expected: z.object({ finalHash: z.string(), lines: z.number() }).meta({ description: 'the seal the worker recorded in the run record at the run\'s end' }),
  spec: z.enum(['checked', 'unavailable']).meta({ description: 'whether line 1 was checked against the run\'s spec (unavailable: the record keeps no spec)' }),
  signature: z.enum(['valid', 'invalid', 'absent', 'unchecked']).meta({ description: 'the seal\'s Ed25519 signature: valid or invalid under the configured key; absent: the worker signed nothing; unchecked: no verify key here (CORRAL_LOG_VERIFY_KEY_FILE)' }),
  signatureKeyId: z.string().optional(),
  incomplete: z.string().optional().meta({ description: 'the worker could not write the whole log: why' }),
  firstBreak: z.object({
    line: z.number().meta({ description: '1-based line of the stored log where it first differs from what the worker wrote' }),
    seq: z.number().optional(),
    problem: z.enum(['no-log', 'not-chained', 'cut-short', 'altered', 'out-of-order', 'wrong-start', 'missing-tail', 'extra-lines', 'final-hash', 'too-large', 'signature']),
    detail: z.string(),
  }).optional(),
});
export type VerifyResult = z.infer<typeof VerifyResult>;

export function registerVerifyRoute(app: FastifyInstance, deps: ApiDeps & { logVerifyKey?: LogVerifyKey }, docs: RouteDoc[]): void {
  route(app, docs, {
    method: 'GET', url: '/v1/runs/:id/verify', tag: 'runs', summary: 'Check that a finished run\'s stored log is the one its worker wrote',
    description: 'Recomputes the hash chain of the stored events.jsonl (each line carries the hash of the line before; the first a hash of the run id and its admitted spec) and compares its end with the seal in the run record (final hash, line count, and the Ed25519 signature when the operator signs logs). 200 with `verified` and, when false, the first line that differs and why.',
    params: RunParams,
    responses: {
      200: { description: 'the check\'s result (verified true or false)', schema: VerifyResult },
      400: { description: 'not a run id', schema: ErrorBody },
      404: { description: 'no such run (or another tenant\'s), or the run never had a log', schema: ErrorBody },
      409: { description: 'the run has not ended: its log is still being written', schema: ErrorBody },
    },
  }, async (req) => {
    const { id } = parseInput(RunParams, req.params, 'path');
    const run = await ownRun(deps, req, id);
    return verifyRunLog(deps, run);
  });
}

export async function verifyRunLog(deps: ApiDeps & { logVerifyKey?: LogVerifyKey }, run: RunView): Promise<VerifyResult> {
  if (!run.finishedAt) throw new CorralError('conflict', `run ${run.id} has not ended (${run.status}): its log is still being written; verify it once it has ended`);
  const seal = run.logSeal;
  if (!seal) throw new NotFoundError(`run ${run.id} has no sealed log: it ended before it ran (${run.reason ?? run.status}), or was written by a version that did not chain its log`);
  const spec = await deps.store.getSpec(run.id);
  const verifier = new ChainVerifier(spec ? logGenesis(run.id, spec) : undefined);
  const opened = await openLog(deps, run);
  const base = {
    id: run.id, expected: { finalHash: seal.finalHash, lines: seal.lines }, spec: spec ? 'checked' as const : 'unavailable' as const,
    ...(seal.incomplete ? { incomplete: seal.incomplete } : {}),
  };
  if (!opened) {
    const firstBreak: ChainBreak = { line: 1, problem: 'no-log', detail: `the run's events.jsonl is not in ${deps.artifacts && deps.artifacts.kind !== 'local' ? 'the object store' : 'the data dir'}: it was removed` };
    return { ...base, verified: false, source: deps.artifacts && deps.artifacts.kind !== 'local' ? 'object-store' : 'data-dir', lines: 0, finalHash: '', signature: sigState(deps, run).state, firstBreak };
  }
  // Chain fields add ~160 bytes a line to the events the worker caps; more than that is no log of ours.
  const maxBytes = deps.config.CORRAL_LOG_MAX_BYTES + 200 * (deps.config.CORRAL_LOG_MAX_EVENTS + 16) + 2 * 1024 * 1024;
  let bytes = 0;
  let tooLarge = false;
  try {
    for await (const chunk of opened.body as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        tooLarge = true;
        break;
      }
      verifier.push(chunk);
    }
  } finally {
    opened.body.destroy();
  }
  const report = verifier.end(tooLarge ? undefined : { finalHash: seal.finalHash, lines: seal.lines });
  let firstBreak = report.firstBreak;
  if (tooLarge && !firstBreak) firstBreak = { line: report.lines + 1, problem: 'too-large', detail: `the stored log is larger than any log a worker writes (${maxBytes.toLocaleString('en-US')} bytes): something was added` };
  const sig = sigState(deps, run);
  if (!firstBreak && sig.state === 'invalid') firstBreak = { line: report.lines, problem: 'signature', detail: `the seal's signature is not valid under key ${sig.keyId}: the run record's seal was changed, or signed by another key` };
  return {
    ...base, verified: !firstBreak, source: opened.source, lines: report.lines, finalHash: report.finalHash,
    signature: sig.state, ...(sig.keyId ? { signatureKeyId: sig.keyId } : {}), ...(firstBreak ? { firstBreak } : {}),
  };
}

function sigState(deps: { logVerifyKey?: LogVerifyKey }, run: RunView): { state: VerifyResult['signature']; keyId?: string } {
  const sig = run.logSeal?.signature;
  if (!sig) return { state: 'absent' };
  if (!deps.logVerifyKey) return { state: 'unchecked', keyId: sig.keyId };
  return { state: checkSignature(deps.logVerifyKey.key, run.id, run.logSeal!.lines, run.logSeal!.finalHash, sig) ? 'valid' : 'invalid', keyId: sig.keyId };
}

/** The stored log as a stream: the object store's copy, else this host's data dir (or the recorded path on a shared volume). */
async function openLog(deps: ApiDeps, run: RunView): Promise<{ body: Readable; source: VerifyResult['source'] } | null> {
  const store = deps.artifacts;
  if (store && store.kind !== 'local' && /^s3:\/\//.test(run.logPath ?? 's3://')) {
    const obj = await store.get(store.runFileKey(run.tenant, run.id, 'events.jsonl'));
    return obj ? { body: obj.body, source: 'object-store' } : null;
  }
  const local = join(resolve(deps.config.CORRAL_DATA_DIR), 'runs', run.id, 'events.jsonl');
  const candidates = [local];
  const recorded = run.logPath;
  if (recorded && recorded !== local && basename(recorded) === 'events.jsonl' && basename(dirname(recorded)) === run.id) candidates.push(recorded);
  for (const path of candidates) {
    const st = await stat(path).catch(() => null);
    if (st?.isFile()) return { body: createReadStream(path), source: 'data-dir' };
  }
  return null;
}
