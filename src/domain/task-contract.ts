/**
 * The task contract: what the agent must do (`# Task`), which tools it is offered (`# Allowed tools`),
 * what it must not do (`# Cannot do`) and how "done" is judged (`# Done means`). It comes either as
 * Markdown in RunSpec.task or as JSON in RunSpec.contract; both are parsed into one TaskContract.
 *
 * `Done means` items written as `check: <shell command>` are run in the sandbox when the model says it
 * is done (src/run/done-checks.ts); the others are criteria shown to the model and listed in the report.
 *
 * Tool names are validated against `knownTools`, passed in by the caller (the tool registry's names),
 * so the domain does not depend on src/tools.
 */
import { z } from 'zod';
import { InvalidInputError, describeZodIssues } from './errors';
import { knownToolName } from './mcp';

export type DoneItem = { kind: 'check'; command: string } | { kind: 'criterion'; text: string };

export interface TaskContract {
  task: string;
  /** The tools the model is offered; null = every tool the run has. */
  allowedTools: string[] | null;
  cannotDo: string[];
  doneMeans: DoneItem[];
}

export const MAX_TASK_CHARS = 50_000;
export const MAX_ALLOWED_TOOLS = 100;
export const MAX_CANNOT_DO = 100;
export const MAX_DONE_MEANS = 50;

const CHECK_PREFIX = /^check:/i;

/** `check: cmd` → the command (one wrapping pair of backticks removed); anything else → null. */
function checkCommand(item: string): string | null {
  if (!CHECK_PREFIX.test(item)) return null;
  const cmd = item.replace(CHECK_PREFIX, '').trim();
  const quoted = /^`([^`]+)`$/.exec(cmd);
  return (quoted ? quoted[1]! : cmd).trim();
}

function doneItem(item: string): DoneItem {
  const command = checkCommand(item);
  return command === null ? { kind: 'criterion', text: item } : { kind: 'check', command };
}

/** A tool name as written in a list: `bash` or bash. */
function toolName(item: string): string {
  const quoted = /^`([^`]+)`$/.exec(item.trim());
  return (quoted ? quoted[1]! : item).trim();
}

function unknownToolMessage(name: string, knownTools: readonly string[], mcpServers: readonly string[] = []): string {
  const mcp = mcpServers.length ? `, and mcp__SERVER__TOOL or mcp__SERVER__* of this run's MCP servers: ${mcpServers.join(', ')}` : '';
  return `unknown tool "${name}" (known: ${knownTools.join(', ')}${mcp})`;
}

// ---------------------------------------------------------------- JSON form

/** The JSON form (RunSpec.contract). Only the shape is checked here; tool names by contractFromJson. */
export const TaskContractJson = z
  .object({
    task: z.string().trim().min(1, 'must not be empty').max(MAX_TASK_CHARS),
    /** Omitted = every tool; otherwise at least one name. */
    allowedTools: z.array(z.string().trim().min(1).max(100)).min(1, 'must name at least one tool (omit it to allow all)').max(MAX_ALLOWED_TOOLS).optional(),
    cannotDo: z.array(z.string().trim().min(1, 'must not be empty').max(2000)).max(MAX_CANNOT_DO).optional(),
    /** Items starting with `check:` are shell commands run in the sandbox; the rest are criteria. */
    doneMeans: z
      .array(
        z.string().trim().min(1, 'must not be empty').max(10_000)
          .refine((s) => checkCommand(s) !== '', '"check:" needs a shell command after it'),
      )
      .max(MAX_DONE_MEANS)
      .optional(),
  })
  .strict();
export type TaskContractJson = z.infer<typeof TaskContractJson>;
export type TaskContractJsonInput = z.input<typeof TaskContractJson>;

/**
 * Validates the JSON form (shape, then tool names) into a TaskContract. Errors are InvalidInputError
 * with field `contract.<path>`, matching where the JSON sits in a RunSpec.
 */
export function contractFromJson(json: unknown, knownTools: readonly string[], mcpServers: readonly string[] = []): TaskContract {
  const r = TaskContractJson.safeParse(json);
  if (!r.success) {
    const issues = r.error.issues.map((i) => ({ ...i, path: ['contract', ...i.path] }));
    const { message, field } = describeZodIssues(issues);
    throw new InvalidInputError(message, field);
  }
  const c = r.data;
  let allowedTools: string[] | null = null;
  if (c.allowedTools) {
    allowedTools = [];
    for (const [i, raw] of c.allowedTools.entries()) {
      const name = toolName(raw);
      if (!knownToolName(name, knownTools, mcpServers)) {
        throw new InvalidInputError(`contract.allowedTools.${i}: ${unknownToolMessage(name, knownTools, mcpServers)}`, `contract.allowedTools.${i}`);
      }
      if (!allowedTools.includes(name)) allowedTools.push(name);
    }
  }
  return { task: c.task, allowedTools, cannotDo: c.cannotDo ?? [], doneMeans: (c.doneMeans ?? []).map(doneItem) };
}

// ---------------------------------------------------------------- Markdown form

type SectionKey = 'task' | 'allowedTools' | 'cannotDo' | 'doneMeans';

const SECTIONS: ReadonlyArray<{ key: SectionKey; title: string }> = [
  { key: 'task', title: 'Task' },
  { key: 'allowedTools', title: 'Allowed tools' },
  { key: 'cannotDo', title: 'Cannot do' },
  { key: 'doneMeans', title: 'Done means' },
];
const KNOWN_SECTIONS = SECTIONS.map((s) => s.title).join(', ');

/** A level-1 ATX heading (`# Title`, up to 3 leading spaces, optional closing #s); the title, or null. */
function level1Heading(line: string): string | null {
  const m = /^ {0,3}#(?:[ \t]+(.*?))?[ \t]*$/.exec(line);
  if (!m) return null;
  return (m[1] ?? '').replace(/(?:^|[ \t]+)#+$/, '').trim();
}

const FENCE = /^ {0,3}(`{3,}|~{3,})/;

interface Line {
  no: number;
  text: string;
  /** Inside a fenced code block (its fence lines included). */
  fenced: boolean;
}

function splitLines(text: string): Line[] {
  const out: Line[] = [];
  let fence: string | null = null;
  text.split(/\r\n|\r|\n/).forEach((t, i) => {
    const f = FENCE.exec(t)?.[1];
    const opensOrCloses = f !== undefined && (fence === null || (f[0] === fence[0] && f.length >= fence.length && t.trim() === f));
    out.push({ no: i + 1, text: t, fenced: fence !== null || opensOrCloses });
    if (opensOrCloses) fence = fence === null ? f! : null;
  });
  return out;
}

function fail(line: number | null, problem: string): never {
  throw new InvalidInputError(`task: ${line === null ? '' : `line ${line}: `}${problem}`, 'task', line === null ? undefined : { line });
}

/** List items of a section: `- x` / `* x` lines; indented lines continue the previous item. */
function listItems(title: string, body: Line[]): Array<{ no: number; text: string }> {
  const items: Array<{ no: number; text: string }> = [];
  for (const l of body) {
    if (!l.text.trim()) continue;
    const m = /^ {0,3}[-*][ \t]+(.*)$/.exec(l.text);
    if (m && !l.fenced) {
      const text = m[1]!.trim();
      if (!text) fail(l.no, `empty list item in "# ${title}"`);
      items.push({ no: l.no, text });
    } else if (/^[ \t]/.test(l.text) && items.length && !l.fenced) {
      items[items.length - 1]!.text += ` ${l.text.trim()}`;
    } else {
      fail(l.no, `"# ${title}" takes a list: start each item with "- " or "* " (got "${l.text.trim().slice(0, 60)}")`);
    }
  }
  return items;
}

/**
 * Parses a task written in Markdown. Without any level-1 heading the whole text is the task. With
 * headings, only `# Task` (required, non-empty), `# Allowed tools`, `# Cannot do` and `# Done means`
 * are allowed (case-insensitive), each at most once, and nothing may come before the first one.
 * Headings inside fenced code blocks are task text. Errors are InvalidInputError(field "task") whose
 * message names the line and the problem.
 */
export function parseTaskMarkdown(text: string, knownTools: readonly string[], mcpServers: readonly string[] = []): TaskContract {
  const lines = splitLines(text);
  const headings = lines.filter((l) => !l.fenced && level1Heading(l.text) !== null);
  if (headings.length === 0) {
    const task = text.trim();
    if (!task) fail(null, 'the task is empty');
    return { task, allowedTools: null, cannotDo: [], doneMeans: [] };
  }

  const preamble = lines.slice(0, headings[0]!.no - 1).find((l) => l.text.trim());
  if (preamble) fail(preamble.no, `text before the first section; put it under "# Task"`);

  const seen = new Map<SectionKey, { no: number; title: string; body: Line[] }>();
  headings.forEach((h, i) => {
    const name = level1Heading(h.text)!;
    const section = SECTIONS.find((s) => s.title.toLowerCase() === name.toLowerCase().replace(/\s+/g, ' '));
    if (!section) fail(h.no, `unknown section "# ${name}" (known: ${KNOWN_SECTIONS})`);
    const first = seen.get(section.key);
    if (first) fail(h.no, `section "# ${section.title}" appears twice (first on line ${first.no})`);
    const end = headings[i + 1]?.no ?? lines.length + 1;
    seen.set(section.key, { no: h.no, title: section.title, body: lines.slice(h.no, end - 1) });
  });

  const taskSection = seen.get('task');
  if (!taskSection) fail(null, `no "# Task" section (known: ${KNOWN_SECTIONS}); a task with sections needs one`);
  const task = taskSection.body.map((l) => l.text).join('\n').trim();
  if (!task) fail(taskSection.no, `"# Task" is empty`);

  const itemsOf = (key: SectionKey, max: number) => {
    const s = seen.get(key);
    if (!s) return null;
    const items = listItems(s.title, s.body);
    if (items.length > max) fail(items[max]!.no, `"# ${s.title}" has more than ${max} items`);
    return { section: s, items };
  };

  let allowedTools: string[] | null = null;
  const tools = itemsOf('allowedTools', MAX_ALLOWED_TOOLS);
  if (tools) {
    if (!tools.items.length) fail(tools.section.no, `"# Allowed tools" lists no tools (omit the section to allow all: ${knownTools.join(', ')})`);
    allowedTools = [];
    for (const item of tools.items) {
      const name = toolName(item.text);
      if (!knownToolName(name, knownTools, mcpServers)) fail(item.no, unknownToolMessage(name, knownTools, mcpServers));
      if (!allowedTools.includes(name)) allowedTools.push(name);
    }
  }

  const cannotDo = (itemsOf('cannotDo', MAX_CANNOT_DO)?.items ?? []).map((i) => i.text);
  const doneMeans = (itemsOf('doneMeans', MAX_DONE_MEANS)?.items ?? []).map((i) => {
    const item = doneItem(i.text);
    if (item.kind === 'check' && !item.command) fail(i.no, `"check:" needs a shell command after it`);
    return item;
  });

  return { task, allowedTools, cannotDo, doneMeans };
}

/**
 * The contract for a run: RunSpec.contract when present (it wins over anything written in `task`),
 * otherwise `task` parsed as Markdown. Throws InvalidInputError (field "task" or "contract.…").
 */
export function contractForSpec(spec: { task: string; contract?: unknown }, knownTools: readonly string[], mcpServers: readonly string[] = []): TaskContract {
  return spec.contract !== undefined ? contractFromJson(spec.contract, knownTools, mcpServers) : parseTaskMarkdown(spec.task, knownTools, mcpServers);
}

// ---------------------------------------------------------------- for the model

/** The first user message: the task, then what the model must not do, then what "done" means. */
export function renderContractForModel(c: TaskContract): string {
  const parts = [c.task];
  if (c.cannotDo.length) parts.push(`You must not:\n${c.cannotDo.map((t) => `- ${t}`).join('\n')}`);
  if (c.doneMeans.length) {
    const items = c.doneMeans.map((d) =>
      d.kind === 'check' ? `- \`${d.command}\` must exit 0 — it will be run when you say you are done` : `- ${d.text}`,
    );
    parts.push(`Done means:\n${items.join('\n')}`);
  }
  return parts.join('\n\n');
}

/** The `check:` commands of a contract, in order. */
export function doneChecks(c: TaskContract): string[] {
  return c.doneMeans.flatMap((d) => (d.kind === 'check' ? [d.command] : []));
}

/** The criteria (non-check items) of a contract, for the report. */
export function doneCriteria(c: TaskContract): string[] {
  return c.doneMeans.flatMap((d) => (d.kind === 'criterion' ? [d.text] : []));
}
