/**
 * The docker gate's rules beyond create (create-rules.ts): exec bodies, exec start bodies, query
 * strings, and who owns a container. An exec runs only as the uid the gate recorded for that container
 * when it created it (its slot's agent uid, bound to its name, which the ownership tag covers): the
 * body the engine gets carries that uid whatever the client wrote. Each refusal names its rule.
 */
import { createHmac } from 'node:crypto';
import { LABELS } from '../sandbox/container-spec';
import { droppedFields, EXEC_CONFIG_FIELDS, EXEC_START_FIELDS } from './engine-fields';
import { stringify } from 'node:querystring';
import { isObject, toPlain, type JValue } from './go-json';
import { bool, empty, readObject, refuse, str, strList, type ObjectShape } from './shape';
import type { GatePolicy } from './create-rules';

export { Refusal } from './shape';
export { checkCreate, type CheckedCreate, type GatePolicy } from './create-rules';

/** The label the gate stamps on every container it creates: HMAC(key, name, run id). */
export const GATE_LABEL = 'corral.gate';

export function ownershipTag(key: Buffer, name: string, runId: string): string {
  return createHmac('sha256', key).update(`${name}\0${runId}`).digest('hex');
}

/** The agent uid a container's name records (`corral-u<uid>`), when its label says the same. */
export function recordedUid(name: string, labels: Record<string, string>): number | undefined {
  const m = /^\/?corral-u(\d{1,10})$/.exec(name);
  return m && labels[LABELS.uid] === m[1] ? Number(m[1]) : undefined;
}

/** Whether an inspected container is this deployment's, created through the gate. */
export function owned(name: string, labels: Record<string, string> | undefined, p: GatePolicy): boolean {
  if (!labels || labels[LABELS.corral] !== '1' || labels[LABELS.queue] !== p.queue) return false;
  const tag = labels[GATE_LABEL];
  const runId = labels[LABELS.runId];
  if (recordedUid(name, labels) === undefined) return false;
  return typeof tag === 'string' && typeof runId === 'string' && tag === ownershipTag(p.key, name.replace(/^\//, ''), runId);
}

const execFields: ObjectShape['fields'] = {
  User: str('exec-user', { max: 64 }),
  Privileged: bool('exec-not-privileged', { only: false }),
  Tty: bool('exec-body', { only: false }),
  DetachKeys: empty('exec-body'),
  AttachStdin: bool('exec-body'),
  AttachStdout: bool('exec-body'),
  AttachStderr: bool('exec-body'),
  Detach: bool('exec-body'),
  Env: strList('exec-body', { maxItems: 512, maxLen: 32 * 1024, re: /^[A-Za-z_][A-Za-z0-9_]{0,255}=[^\0]*$/s }),
  WorkingDir: str('exec-body', { re: /^\/[^\0]{0,4095}$/ }),
  Cmd: strList('exec-body', { nonEmpty: true, maxItems: 4096, maxLen: 1024 * 1024 }),
};
const execShape: ObjectShape = { fields: execFields, dropped: droppedFields(EXEC_CONFIG_FIELDS, Object.keys(execFields), {}, 'exec-body'), rule: 'exec-body' };

/**
 * Checks a POST /containers/{id}/exec body against the uid the gate recorded for the container;
 * returns the body the engine gets (User is the recorded uid, always).
 */
export function checkExec(body: JValue, agentUid: number): Record<string, unknown> {
  if (!isObject(body)) refuse('exec-body', 'the body must be a JSON object');
  const b = readObject(body, '', execShape);
  const want = `${agentUid}:${agentUid}`;
  if (b.User !== want) refuse('exec-user', `exec must run as the sandbox's agent ${want} (got ${JSON.stringify(b.User ?? '')})`);
  return { ...b, User: want, Privileged: false, Tty: false };
}

const execStartShape: ObjectShape = {
  fields: { Detach: bool('exec-body'), Tty: bool('exec-body', { only: false }) },
  dropped: droppedFields(EXEC_START_FIELDS, ['Detach', 'Tty'], {}, 'exec-body'), rule: 'exec-body',
  // dockerode's exec.start() options, sent in its body too
  client: { hijack: bool('exec-body'), stdin: bool('exec-body') },
};

/** Checks a POST /exec/{id}/start body; returns the one the engine gets. */
export function checkExecStart(body: JValue): { Detach: boolean; Tty: false } {
  const b = readObject(body, '', execStartShape, {});
  return { Detach: b.Detach === true, Tty: false };
}

/**
 * Whether `query` is exactly what dockerode writes for a request whose options are `body` (it sends
 * a create's whole spec as the query too: objects as JSON, lists as repeated keys); such a query says
 * nothing the checked body does not, and is never forwarded.
 */
export function queryMirrorsBody(query: URLSearchParams, body: JValue): boolean {
  if (!isObject(body)) return false;
  const plain = toPlain(body) as Record<string, unknown>;
  const clone: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(plain)) clone[k] = v && typeof v === 'object' && !Array.isArray(v) ? JSON.stringify(v) : v;
  const want = [...new URLSearchParams(stringify(clone as Record<string, string>))];
  const got = [...query];
  return want.length === got.length && want.every(([k, v], i) => got[i]![0] === k && got[i]![1] === v);
}

/** A query parameter's check: returns the value forwarded (or refuses). */
export type QueryParam = (value: string, name: string) => string;

/** Go's httputils.BoolValue reads "", 0, no, false, none as false: forwarded as 0 or 1. */
export const boolParam: QueryParam = (v, n) => {
  if (v.length > 8) refuse('query', `${n} must be a boolean`);
  const s = v.trim().toLowerCase();
  return s === '' || s === '0' || s === 'no' || s === 'false' || s === 'none' ? '0' : '1';
};
export const intParam = (min: number, max: number): QueryParam => (v, n) => {
  if (!/^-?\d{1,10}$/.test(v) || Number(v) < min || Number(v) > max) refuse('query', `${n} must be an integer in ${min}…${max}`);
  return String(Number(v));
};
export const matchParam = (re: RegExp): QueryParam => (v, n) => {
  if (!re.test(v)) refuse('query', `${n} ${JSON.stringify(v).slice(0, 80)} is not allowed`);
  return v;
};

/**
 * Reads a query string by its table: each key exactly as the engine reads it (Go's url.Values is
 * case-sensitive), at most once; any other key, in any spelling, is refused. Returns the query the
 * engine gets, rebuilt from the checked values.
 */
export function checkQuery(query: URLSearchParams, allowed: Record<string, QueryParam>, required: string[] = [], o: { keepOthers?: boolean } = {}): URLSearchParams {
  const out = new URLSearchParams();
  const seen = new Set<string>();
  for (const [k, v] of query) {
    const check = Object.hasOwn(allowed, k) ? allowed[k] : undefined;
    if (!check && o.keepOthers) continue;
    if (!check) refuse('query', `the query parameter ${JSON.stringify(k).slice(0, 60)} is not one this endpoint takes (${Object.keys(allowed).join(', ') || 'none'})`);
    if (seen.has(k)) refuse('query', `the query parameter ${k} is given twice`);
    seen.add(k);
    out.set(k, check(v, k));
  }
  for (const k of required) if (!seen.has(k)) refuse('query', `the query parameter ${k} is required`);
  return out;
}
