/**
 * Shapes: the docker gate's data-driven reading of a request body. A shape takes the parsed body
 * (go-json.ts, entries kept) and returns the value the gate forwards, built only from what it checked:
 * the engine never sees the client's object. An object shape knows every field of the engine's Go
 * struct at that place (engine-fields.ts), matches each key as the engine does (exact, else Go's case
 * folding) and refuses:
 * - a key that is no field of the struct, in any spelling (`unknown-field`): the engine would ignore
 *   it today, and a future engine might not;
 * - two keys that select the same field (`duplicate-field`): `User` and `user`, or `User` twice — the
 *   engine keeps the last, a checker that reads the first is fooled;
 * - a field the sandbox does not use, unless it is empty, by the rule that field belongs to; such a
 *   field is then dropped (the engine applies its default, which the rules rely on).
 * The fields the gate uses are checked by their own spec, in table order (the sharpest rule first), and
 * forwarded in their canonical spelling.
 */
import { goFoldEquals, isObject, type JObject, type JValue } from './go-json';

export class Refusal extends Error {
  constructor(readonly rule: string, detail: string) {
    super(`docker-gate refused (rule ${rule}): ${detail}`);
  }
}

export function refuse(rule: string, detail: string): never {
  throw new Refusal(rule, detail);
}

/** Reads one value (undefined = absent) at `at` (a path for messages); throws a Refusal. */
export type Spec<T> = (v: JValue | undefined, at: string) => T;

/** How a field the sandbox does not use is judged: a rule (refused unless empty), or refused unless absent, or also passed when equal to one of `also` (a client's default such as MemorySwappiness -1). */
export type Dropped = string | { rule: string; absent?: true; also?: JValue[] };

export interface ObjectShape {
  /** The fields the gate checks and forwards, in the order they are checked. */
  fields: Record<string, Spec<unknown>>;
  /**
   * Every other field of the engine's struct here, with the rule that refuses it when not empty
   * (`{ rule, absent: true }`: refused unless absent or null — for fields where an empty list means
   * something to the engine, such as ReadonlyPaths: [] = none).
   */
  dropped: Record<string, Dropped>;
  /** Rule for a key that is no field here, and for a repeated one. */
  rule: string;
  /**
   * Keys a client library adds that are no field of the engine's struct (dockerode sends its own
   * options in the body: `hijack`, `stdin`, a create's `name`): accepted in this exact spelling only
   * (no engine field folds to them, so the engine ignores them), checked, and never forwarded. Their
   * values are returned under `client`.
   */
  client?: Record<string, Spec<unknown>>;
}

/** Empty in the engine's sense: absent, null, false, 0, '', and lists or objects of only such (Go's [2]uint{0, 0}). */
export function isEmptyJson(v: JValue | undefined): boolean {
  if (v === undefined || v === null || v === false || v === 0 || v === '') return true;
  if (Array.isArray(v)) return v.every(isEmptyJson);
  if (isObject(v)) return v.entries.every(([, x]) => isEmptyJson(x));
  return false;
}

/** The field `key` selects among `names` as Go's decoder picks it: an exact name, else the first that folds equal. */
export function fieldOf(names: readonly string[], key: string): string | undefined {
  if (names.includes(key)) return key;
  return names.find((n) => goFoldEquals(n, key));
}

const show = (k: string) => JSON.stringify(k.length > 60 ? `${k.slice(0, 60)}…` : k);

/**
 * Reads an object by `shape` and returns the forwarded object: the checked fields (present ones, in
 * table order and canonical spelling) — values as their specs returned them, `undefined` left out.
 */
export function readObject(v: JValue | undefined, at: string, shape: ObjectShape, client?: Record<string, unknown>): Record<string, unknown> {
  if (v === undefined || v === null) v = { kind: 'object', entries: [] };
  if (!isObject(v)) refuse(shape.rule, `${at || 'the body'} must be a JSON object`);
  const names = [...Object.keys(shape.fields), ...Object.keys(shape.dropped)];
  const seen = new Map<string, JValue>();
  for (const [key, value] of (v as JObject).entries) {
    if (shape.client && Object.hasOwn(shape.client, key) && fieldOf(names, key) === undefined) {
      if (client && Object.hasOwn(client, key)) refuse('duplicate-field', `${at}${key} is given twice`);
      const r = shape.client[key]!(value, `${at}${key}`);
      if (client) client[key] = r;
      continue;
    }
    const name = fieldOf(names, key);
    if (name === undefined) refuse('unknown-field', `${at}${show(key)} is not a field the docker gate knows here (refused in any spelling)`);
    if (seen.has(name)) refuse('duplicate-field', `${at}${name} is given twice (as ${show(key)} too): the engine would read the last one`);
    seen.set(name, value);
  }
  for (const [name, d] of Object.entries(shape.dropped)) {
    const x = seen.get(name);
    const ok = typeof d === 'string' ? isEmptyJson(x)
      : d.absent ? x === undefined || x === null
        : isEmptyJson(x) || (d.also ?? []).some((a) => a === x);
    if (!ok) refuse(typeof d === 'string' ? d : d.rule, `${at}${name} is not part of a sandbox (must be ${typeof d !== 'string' && d.absent ? 'absent' : 'empty'})`);
  }
  const out: Record<string, unknown> = {};
  for (const [name, spec] of Object.entries(shape.fields)) {
    const r = spec(seen.get(name), `${at}${name}`);
    if (r !== undefined) out[name] = r;
  }
  return out;
}

/** The entries of a JSON object used as a Go map (keys exact; a repeated key is refused). */
export function readMap(v: JValue | undefined, at: string, rule: string, max = 256): Map<string, JValue> {
  const m = new Map<string, JValue>();
  if (v === undefined || v === null) return m;
  if (!isObject(v)) refuse(rule, `${at} must be an object`);
  if (v.entries.length > max) refuse(rule, `${at} has more than ${max} entries`);
  for (const [k, x] of v.entries) {
    if (m.has(k)) refuse('duplicate-field', `${at} names ${show(k)} twice: the engine would keep the last one`);
    m.set(k, x);
  }
  return m;
}

// Spec builders. Each names the rule its refusal carries.

export const str = (rule: string, o: { max?: number; re?: RegExp; required?: boolean } = {}): Spec<string | undefined> => (v, at) => {
  if (v === undefined || v === null || (v === '' && !o.required)) {
    if (o.required) refuse(rule, `${at} is required`);
    return undefined;
  }
  if (typeof v !== 'string') refuse(rule, `${at} must be a string`);
  if (v.length > (o.max ?? 4096)) refuse(rule, `${at} is longer than ${o.max ?? 4096} characters`);
  if (o.re && !o.re.test(v)) refuse(rule, `${at} ${show(v)} is not allowed`);
  return v;
};

/** A value that must be exactly `want` (or absent/empty when `optional`); forwarded as `want`. */
export const exactly = <T extends JValue>(rule: string, want: T, o: { optional?: boolean; alsoEmpty?: boolean } = {}): Spec<T | undefined> => (v, at) => {
  if (v === undefined || v === null) {
    if (o.optional) return o.alsoEmpty ? want : undefined;
    refuse(rule, `${at} must be ${JSON.stringify(want)}`);
  }
  if (o.alsoEmpty && isEmptyJson(v)) return want;
  if (JSON.stringify(v) !== JSON.stringify(want)) refuse(rule, `${at} must be ${JSON.stringify(want)} (got ${JSON.stringify(v).slice(0, 80)})`);
  return want;
};

export const bool = (rule: string, o: { only?: boolean } = {}): Spec<boolean | undefined> => (v, at) => {
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') refuse(rule, `${at} must be true or false`);
  if (o.only !== undefined && v !== o.only) refuse(rule, `${at} must be ${o.only}`);
  return v;
};

export const int = (rule: string, o: { min?: number; max?: number; required?: boolean } = {}): Spec<number | undefined> => (v, at) => {
  if (v === undefined || v === null) {
    if (o.required) refuse(rule, `${at} must be set`);
    return undefined;
  }
  if (typeof v !== 'number' || !Number.isSafeInteger(v)) refuse(rule, `${at} must be an integer`);
  if (o.min !== undefined && v < o.min) refuse(rule, `${at} must be ≥ ${o.min} (got ${v})`);
  if (o.max !== undefined && v > o.max) refuse(rule, `${at} must be ≤ ${o.max} (got ${v})`);
  return v;
};

export const strList = (rule: string, o: { maxItems?: number; maxLen?: number; re?: RegExp; nonEmpty?: boolean } = {}): Spec<string[] | undefined> => (v, at) => {
  if (v === undefined || v === null) {
    if (o.nonEmpty) refuse(rule, `${at} must be a non-empty list`);
    return undefined;
  }
  if (!Array.isArray(v)) refuse(rule, `${at} must be a list of strings`);
  if (v.length > (o.maxItems ?? 256)) refuse(rule, `${at} has more than ${o.maxItems ?? 256} items`);
  if (o.nonEmpty && v.length === 0) refuse(rule, `${at} must be a non-empty list`);
  return v.map((x, i) => {
    if (typeof x !== 'string') refuse(rule, `${at}[${i}] must be a string`);
    if (x.length > (o.maxLen ?? 32 * 1024)) refuse(rule, `${at}[${i}] is too long`);
    if (o.re && !o.re.test(x)) refuse(rule, `${at}[${i}] ${show(x)} is not allowed`);
    return x;
  });
};

/** A list that must be empty (forwarded as absent). */
export const empty = (rule: string): Spec<undefined> => (v, at) => {
  if (!isEmptyJson(v)) refuse(rule, `${at} must be empty`);
  return undefined;
};
