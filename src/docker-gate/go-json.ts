/**
 * JSON as the Docker engine's decoder (Go's encoding/json) reads it, for the docker gate. JSON.parse
 * hides two things the engine acts on: keys that repeat (Go keeps the last) and keys that differ only
 * in case (Go matches a struct field case-insensitively, with Unicode simple folding: 'ſ' (U+017F) is
 * an 's', the Kelvin sign (U+212A) a 'k'). So the gate parses bodies itself, keeping every object's
 * entries in order, and matches keys to field names with the engine's own rule (goFoldEquals).
 *
 * Go's rule (encoding/json, fold.go as shipped with Go 1.19, which built Docker 20.10.24 here, and
 * fold.go since Go 1.21 which spells it as foldName = bytes.EqualFold): an exact match wins, else the
 * first field whose name equals the key under bytes.EqualFold. Every engine field name is ASCII, and
 * for an ASCII name the only non-ASCII runes that fold onto it are U+017F (s, S) and U+212A (k, K): the
 * simple-fold orbits of the other ASCII letters are ASCII only. goFoldEquals implements exactly that.
 */

export type JValue = null | boolean | number | string | JValue[] | JObject;

/** An object with every entry as written (duplicates included), in order. */
export interface JObject {
  readonly kind: 'object';
  readonly entries: ReadonlyArray<readonly [string, JValue]>;
}

export function isObject(v: JValue | undefined): v is JObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export class JsonSyntaxError extends Error {}

const MAX_DEPTH = 64;
const LONG_S = 0x17f;
const KELVIN = 0x212a;

/**
 * Whether a JSON key (as decoded) selects the ASCII field `name` in Go's encoding/json: equal under
 * bytes.EqualFold. Non-ASCII names are not supported (no engine field has one).
 */
export function goFoldEquals(name: string, key: string): boolean {
  let i = 0;
  for (const ch of key) {
    if (i >= name.length) return false;
    const n = name.charCodeAt(i);
    if (n > 0x7f) throw new Error(`goFoldEquals: field name ${JSON.stringify(name)} is not ASCII`);
    const c = ch.codePointAt(0)!;
    const nl = n | 0x20;
    const isLetter = nl >= 0x61 && nl <= 0x7a;
    if (c === n) {
      // the same byte
    } else if (c <= 0x7f) {
      if (!isLetter || (c | 0x20) !== nl) return false;
    } else if (!((nl === 0x73 && c === LONG_S) || (nl === 0x6b && c === KELVIN))) {
      return false;
    }
    i++;
  }
  return i === name.length;
}

/** Parses one JSON text (RFC 8259, nothing after it but whitespace), keeping objects' entries. */
export function parseGoJson(text: string): JValue {
  let pos = 0;
  const ws = () => {
    while (pos < text.length) {
      const c = text.charCodeAt(pos);
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) pos++;
      else break;
    }
  };
  const fail = (what: string): never => {
    throw new JsonSyntaxError(`${what} at offset ${pos}`);
  };
  const str = (): string => {
    const start = pos;
    pos++; // the opening quote
    for (;;) {
      if (pos >= text.length) fail('unterminated string');
      const c = text.charCodeAt(pos);
      if (c === 0x22) break;
      if (c === 0x5c) pos += 2;
      else if (c < 0x20) fail('control character in a string');
      else pos++;
    }
    pos++;
    let s: string;
    try {
      s = JSON.parse(text.slice(start, pos)) as string;
    } catch {
      return fail('bad string escape');
    }
    // Go decodes a lone surrogate escape as U+FFFD: what the gate checked would not be what the engine reads.
    if (!s.isWellFormed()) fail('a lone surrogate in a string');
    return s;
  };
  const value = (depth: number): JValue => {
    if (depth > MAX_DEPTH) fail(`nesting deeper than ${MAX_DEPTH}`);
    ws();
    const c = text[pos];
    if (c === '{') {
      pos++;
      const entries: Array<readonly [string, JValue]> = [];
      ws();
      if (text[pos] === '}') {
        pos++;
        return { kind: 'object', entries };
      }
      for (;;) {
        ws();
        if (text[pos] !== '"') fail('expected a key');
        const k = str();
        ws();
        if (text[pos] !== ':') fail('expected ":"');
        pos++;
        entries.push([k, value(depth + 1)]);
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === '}') {
          pos++;
          return { kind: 'object', entries };
        }
        fail('expected "," or "}"');
      }
    }
    if (c === '[') {
      pos++;
      const items: JValue[] = [];
      ws();
      if (text[pos] === ']') {
        pos++;
        return items;
      }
      for (;;) {
        items.push(value(depth + 1));
        ws();
        if (text[pos] === ',') {
          pos++;
          continue;
        }
        if (text[pos] === ']') {
          pos++;
          return items;
        }
        fail('expected "," or "]"');
      }
    }
    if (c === '"') return str();
    for (const [word, v] of [['true', true], ['false', false], ['null', null]] as const) {
      if (text.startsWith(word, pos)) {
        pos += word.length;
        return v;
      }
    }
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/.exec(text.slice(pos, pos + 400));
    if (!m) return fail('unexpected character');
    pos += m[0].length;
    return Number(m[0]);
  };
  const v = value(0);
  ws();
  if (pos !== text.length) fail('data after the JSON value');
  return v;
}

/** The plain JavaScript value (objects keep the last of repeated keys, as JSON.parse would). */
export function toPlain(v: JValue): unknown {
  if (Array.isArray(v)) return v.map(toPlain);
  if (isObject(v)) {
    const o: Record<string, unknown> = Object.create(null) as Record<string, unknown>;
    for (const [k, x] of v.entries) o[k] = toPlain(x);
    return o;
  }
  return v;
}
