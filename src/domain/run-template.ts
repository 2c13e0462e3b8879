/**
 * Run templates: the tasks a team runs again and again (a dependency audit, a failing-test pass), kept
 * as files — `templates/NAME.md` — and submitted with parameters (`corral submit --template NAME --set
 * repo=api`, `POST /v1/templates/NAME/runs`).
 *
 * A template is YAML front matter between `---` lines, then the task: the same Markdown task contract
 * RunSpec.task takes (`# Task`, `# Allowed tools`, `# Done means` …), with `{{name}}` placeholders.
 * The front matter holds `description`, `params` (each with a description and an optional default and
 * pattern), `spec` (any other RunSpec fields: budgets, egress, limits, policy, labels) and `examples`
 * (parameter sets). `{{name}}` may appear in the task and in any string of `spec`.
 *
 * A parameter value is one line of plain text (≤ 200 characters, no control or invisible characters,
 * matching the parameter's pattern when it has one), so a value can never start a heading and add
 * `# Allowed tools` to the contract, nor break out of the line it is put in.
 *
 * Parsing here is pure; the caller validates each rendered example as a RunSpec (so a wrong template
 * fails at start-up with the file and the reason, never at its first use).
 */
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { describeZodIssues, InvalidInputError } from './errors';

export const TEMPLATE_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
const PARAM_NAME = /^[a-z][a-zA-Z0-9_]{0,31}$/;
const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
export const MAX_PARAM_CHARS = 200;
const MAX_PARAMS = 32;
const MAX_TEMPLATE_BYTES = 64 * 1024;
/** C0/C1 controls, DEL, zero-width and bidi controls, line and paragraph separators. */
// eslint-disable-next-line no-control-regex
const FORBIDDEN_IN_VALUE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/u;

const ParamDef = z.strictObject({
  description: z.string().min(1).max(500),
  default: z.string().max(MAX_PARAM_CHARS).optional(),
  /** A regular expression the whole value must match (anchored for you). */
  pattern: z.string().max(200).optional(),
});

const FrontMatter = z.strictObject({
  description: z.string().min(1, 'must not be empty').max(1000),
  params: z.record(z.string().regex(PARAM_NAME, 'a parameter name is a letter then letters, digits or _ (at most 32)'), ParamDef).default({}),
  spec: z.record(z.string(), z.unknown()).default({}),
  examples: z.array(z.record(z.string(), z.string())).min(1, 'give at least one example parameter set (each is checked at start-up)').max(20),
});

export interface TemplateParam { name: string; description: string; default?: string; pattern?: string }

export interface RunTemplate {
  name: string;
  description: string;
  params: TemplateParam[];
  /** The task text with its placeholders. */
  task: string;
  /** Other RunSpec fields, with placeholders in their strings. */
  spec: Record<string, unknown>;
  examples: Array<Record<string, string>>;
  /** Where it was read from, for error messages. */
  source: string;
}

/** A template that cannot be used: names the file (and line, when known) and what is wrong. */
export class TemplateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateError';
  }
}

function lineOf(text: string, index: number): number {
  return text.slice(0, index).split('\n').length;
}

/** Parses one template file's text; TemplateError (with `source:line`) for anything wrong. */
export function parseTemplate(name: string, text: string, source: string): RunTemplate {
  if (!TEMPLATE_NAME.test(name)) throw new TemplateError(`${source}: the file name must be NAME.md with NAME in lower case letters, digits and - (at most 64)`);
  if (Buffer.byteLength(text) > MAX_TEMPLATE_BYTES) throw new TemplateError(`${source}: larger than ${MAX_TEMPLATE_BYTES} bytes`);
  const m = /^---\r?\n([\s\S]*?)\r?\n---\r?\n([\s\S]*)$/.exec(text);
  if (!m) throw new TemplateError(`${source}:1: a template starts with YAML front matter between two "---" lines, then the task`);
  const doc = parseDocument(m[1]!, { prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length) {
    const e = doc.errors[0]!;
    throw new TemplateError(`${source}:${(e.linePos?.[0]?.line ?? 0) + 1}: front matter: ${e.message.split('\n')[0]}`);
  }
  const fm = FrontMatter.safeParse(doc.toJS() ?? {});
  if (!fm.success) throw new TemplateError(`${source}: front matter: ${describeZodIssues(fm.error.issues).message}`);
  const bodyStart = m[0].length - m[2]!.length;
  const task = m[2]!;
  if (!task.trim()) throw new TemplateError(`${source}: the task after the front matter is empty`);
  const params: TemplateParam[] = Object.entries(fm.data.params).map(([n, d]) => ({ name: n, ...d }));
  if (params.length > MAX_PARAMS) throw new TemplateError(`${source}: more than ${MAX_PARAMS} parameters`);
  for (const p of params) {
    if (p.pattern !== undefined) {
      try {
        new RegExp(`^(?:${p.pattern})$`, 'u');
      } catch (err) {
        throw new TemplateError(`${source}: params.${p.name}.pattern is not a regular expression (${(err as Error).message})`);
      }
    }
    if (p.default !== undefined) {
      const bad = valueProblem(p, p.default);
      if (bad) throw new TemplateError(`${source}: params.${p.name}.default: ${bad}`);
    }
  }
  const known = new Set(params.map((p) => p.name));
  const used = new Set<string>();
  for (const hit of task.matchAll(PLACEHOLDER)) {
    const n = hit[1]!;
    if (!known.has(n)) throw new TemplateError(`${source}:${lineOf(text, bodyStart + hit.index)}: {{${n}}} is not a declared parameter (declared: ${[...known].join(', ') || 'none'})`);
    used.add(n);
  }
  for (const s of strings(fm.data.spec)) {
    for (const hit of s.matchAll(PLACEHOLDER)) {
      if (!known.has(hit[1]!)) throw new TemplateError(`${source}: spec: {{${hit[1]}}} is not a declared parameter`);
      used.add(hit[1]!);
    }
  }
  const unused = params.filter((p) => !used.has(p.name));
  if (unused.length) throw new TemplateError(`${source}: parameter ${unused.map((p) => p.name).join(', ')} is declared but never used`);
  if ('task' in fm.data.spec || 'contract' in fm.data.spec) throw new TemplateError(`${source}: spec: the task is the text after the front matter; spec may not set task or contract`);
  return { name, description: fm.data.description, params, task, spec: fm.data.spec, examples: fm.data.examples, source };
}

function* strings(v: unknown): Generator<string> {
  if (typeof v === 'string') yield v;
  else if (Array.isArray(v)) for (const x of v) yield* strings(x);
  else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) { yield k; yield* strings(x); }
}

function valueProblem(p: TemplateParam, value: string): string | null {
  if (value.length === 0) return 'is empty';
  if (value.length > MAX_PARAM_CHARS) return `is longer than ${MAX_PARAM_CHARS} characters`;
  if (!value.isWellFormed()) return 'is not well-formed text (a lone surrogate)';
  if (FORBIDDEN_IN_VALUE.test(value)) return 'holds a line break, control or invisible character (a value is one line of text)';
  if (p.pattern !== undefined && !new RegExp(`^(?:${p.pattern})$`, 'u').test(value)) return `does not match ${p.pattern}`;
  return null;
}

function fill(s: string, values: Record<string, string>): string {
  return s.replace(PLACEHOLDER, (_, n: string) => values[n]!);
}

function fillDeep(v: unknown, values: Record<string, string>): unknown {
  if (typeof v === 'string') return fill(v, values);
  if (Array.isArray(v)) return v.map((x) => fillDeep(x, values));
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [fill(k, values), fillDeep(x, values)]));
  return v;
}

/**
 * The RunSpec body a template makes with these parameter values (not yet validated as a RunSpec:
 * the caller admits it like any submitted body). InvalidInputError naming `params.NAME` for a
 * missing, unknown or malformed value. The run is labelled with the template's name.
 */
export function renderTemplate(t: RunTemplate, given: Record<string, unknown>): Record<string, unknown> {
  const values: Record<string, string> = {};
  for (const k of Object.keys(given)) {
    if (!t.params.some((p) => p.name === k)) {
      throw new InvalidInputError(`params.${k}: template ${t.name} has no parameter "${k}" (it has: ${t.params.map((p) => p.name).join(', ') || 'none'})`, `params.${k}`);
    }
  }
  for (const p of t.params) {
    const v = Object.hasOwn(given, p.name) ? given[p.name] : p.default;
    if (v === undefined) throw new InvalidInputError(`params.${p.name}: required by template ${t.name} (${p.description})`, `params.${p.name}`);
    if (typeof v !== 'string') throw new InvalidInputError(`params.${p.name}: must be a string`, `params.${p.name}`);
    const bad = valueProblem(p, v);
    if (bad) throw new InvalidInputError(`params.${p.name}: ${bad}`, `params.${p.name}`);
    values[p.name] = v;
  }
  const spec = fillDeep(t.spec, values) as Record<string, unknown>;
  const labels = spec.labels && typeof spec.labels === 'object' ? (spec.labels as Record<string, unknown>) : {};
  return { ...spec, task: fill(t.task, values), labels: { ...labels, template: t.name } };
}

/** What GET /v1/templates shows of a template. */
export function describeTemplate(t: RunTemplate): { name: string; description: string; params: TemplateParam[]; examples: Array<Record<string, string>> } {
  return { name: t.name, description: t.description, params: t.params, examples: t.examples };
}
