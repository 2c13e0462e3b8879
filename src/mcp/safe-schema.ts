/**
 * JSON Schemas an MCP server sends (a tool's input and output schema) are untrusted: bounded in size
 * and depth before anything compiles them, their descriptions capped (they are text aimed at the
 * model), and compiled by Ajv with RE2 (re2js) as its regular-expression engine, so a `pattern` the
 * server wrote cannot make matching the model's arguments take exponential time (a pattern RE2 cannot
 * run — a backreference, a lookaround — fails the compile, and the tool is not offered). Formats are
 * not checked (their regular expressions are Ajv's own, not needed for a gate that validates shape).
 *
 * `SafeJsonSchemaValidator` is the same for the SDK's Client, which compiles each tool's output schema
 * when it lists the tools: a schema it cannot take is skipped (the output is shown as text either way),
 * never a failed listing.
 */
import Ajv, { type ValidateFunction } from 'ajv';
import { RE2JS } from 're2js';
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js';

export interface SchemaLimits {
  /** Bytes of the schema as JSON. */
  maxSchemaBytes: number;
  /** Characters of each description or title inside it. */
  maxTextChars: number;
}

const MAX_DEPTH = 24;

/** Ajv's RegExp engine: RE2 (linear time), with RegExp's unanchored `test`. */
function re2Engine(pattern: string, flags: string): { test: (s: string) => boolean } {
  const re = RE2JS.compile(pattern, flags.includes('i') ? RE2JS.CASE_INSENSITIVE : 0);
  return { test: (s: string) => re.test(s) };
}
re2Engine.code = 're2';

export function newAjv(): Ajv {
  return new Ajv({
    strict: false, validateSchema: false, validateFormats: false, allErrors: false, logger: false,
    code: { regExp: re2Engine as never }, addUsedSchema: false, inlineRefs: true,
  });
}

/** Text as the model and the log may see it: control and bidi characters out, at most `max` characters. */
export function plainText(s: string, max: number): string {
  // eslint-disable-next-line no-control-regex -- removing control characters is the point
  const clean = s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g, '');
  return clean.length > max ? `${clean.slice(0, max)}… [cut: ${clean.length - max} more characters]` : clean;
}

/** A bounded copy: depth and size checked, `description`/`title` strings capped, `$id`/`$schema` dropped. */
export function boundSchema(raw: unknown, limits: SchemaLimits): { schema: Record<string, unknown> } | { error: string } {
  let json: string;
  try {
    json = JSON.stringify(raw) ?? '';
  } catch {
    return { error: 'its schema is not JSON' };
  }
  if (Buffer.byteLength(json) > limits.maxSchemaBytes) return { error: `its schema is larger than ${limits.maxSchemaBytes} bytes` };
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { error: 'its schema is not an object' };
  let tooDeep = false;
  const copy = (v: unknown, depth: number, key: string | null): unknown => {
    if (depth > MAX_DEPTH) { tooDeep = true; return null; }
    if (typeof v === 'string' && (key === 'description' || key === 'title')) return plainText(v, limits.maxTextChars);
    if (Array.isArray(v)) return v.map((x) => copy(x, depth + 1, null));
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) {
        if (k === '$id' || k === '$schema' || k === '__proto__') continue;
        // a property named "description" is a name, not text: only schema keywords' values are capped
        out[k] = copy(x, depth + 1, key === 'properties' || key === '$defs' || key === 'definitions' || key === 'patternProperties' ? null : k);
      }
      return out;
    }
    return v;
  };
  const schema = copy(raw, 0, null) as Record<string, unknown>;
  if (tooDeep) return { error: `its schema is nested deeper than ${MAX_DEPTH} levels` };
  return { schema };
}

/** An input schema as a tool offers it: bounded, an object at its root, compiled. */
export function compileInputSchema(ajv: Ajv, raw: unknown, limits: SchemaLimits): { schema: Record<string, unknown>; validate: ValidateFunction } | { error: string } {
  const b = boundSchema(raw, limits);
  if ('error' in b) return b;
  if (b.schema.type !== undefined && b.schema.type !== 'object') return { error: 'its input schema is not of type "object"' };
  const schema = { ...b.schema, type: 'object' };
  try {
    return { schema, validate: ajv.compile(schema) };
  } catch (e) {
    return { error: `its input schema cannot be used (${(e as Error).message.slice(0, 200)})` };
  }
}

/** The SDK Client's output-schema validator: bounded and on RE2; a schema it cannot take is not checked. */
export class SafeJsonSchemaValidator implements jsonSchemaValidator {
  private readonly ajv = newAjv();
  constructor(private readonly limits: SchemaLimits) {}

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const c = compileInputSchema(this.ajv, schema, this.limits);
    if ('error' in c) return (input) => ({ valid: true, data: input as T, errorMessage: undefined });
    const v = c.validate;
    return (input) => (v(input)
      ? { valid: true, data: input as T, errorMessage: undefined }
      : { valid: false, data: undefined, errorMessage: this.ajv.errorsText(v.errors).slice(0, 500) });
  }
}
