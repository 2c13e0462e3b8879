/**
 * Argument parsing shared by the `corral` subcommands (Node's util.parseArgs underneath): `--name value`, `--name=value`, boolean
 * flags, repeatable options, `--` to end options. Bad usage throws UsageError, which the dispatcher
 * (index.ts) prints as one line pointing at `corral CMD --help` and turns into exit code 2.
 */

import { parseArgs as nodeParseArgs } from 'node:util';

/** A mistake in how the command was called (exit 2). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  constructor(
    message: string,
    /** false when the message already says what to do and `--help` would not add to it. */
    readonly pointToHelp = true,
  ) {
    super(message);
  }
}

/** How an option takes its value: `string` (last one wins), `list` (repeatable), `flag` (no value). */
export type OptionKind = 'string' | 'list' | 'flag';

export type ParsedOptions<S extends Record<string, OptionKind>> = {
  [K in keyof S]: S[K] extends 'list' ? string[] : S[K] extends 'flag' ? boolean : string | undefined;
};

export interface ParsedArgs<S extends Record<string, OptionKind>> {
  opts: ParsedOptions<S>;
  positionals: string[];
}

/**
 * Parses argv against `spec` (option names without the leading `--`; single-letter aliases in
 * `aliases`, e.g. `{ o: 'output' }`) with Node's util.parseArgs (strict). Throws UsageError for
 * unknown options, a missing value, or a value given to a flag. A value that starts with `-` is
 * given as `--name=-value`.
 */
export function parseArgs<S extends Record<string, OptionKind>>(
  argv: readonly string[],
  spec: S,
  aliases: Record<string, keyof S & string> = {},
): ParsedArgs<S> {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean; short?: string }> = {};
  for (const [name, kind] of Object.entries(spec)) options[name] = { type: kind === 'flag' ? 'boolean' : 'string', ...(kind === 'list' ? { multiple: true } : {}) };
  for (const [short, name] of Object.entries(aliases)) options[name] = { ...options[name]!, short };
  let parsed: { values: Record<string, string | boolean | Array<string | boolean> | undefined>; positionals: string[] };
  try {
    parsed = nodeParseArgs({ args: [...argv], options, strict: true, allowPositionals: true });
  } catch (err) {
    throw new UsageError(usageOf(err as Error & { code?: string }, spec, aliases));
  }
  const opts: Record<string, string | string[] | boolean | undefined> = {};
  for (const [name, kind] of Object.entries(spec)) {
    const v = parsed.values[name];
    opts[name] = kind === 'list' ? ((v as string[] | undefined) ?? []) : kind === 'flag' ? v === true : (v as string | undefined);
  }
  return { opts: opts as ParsedOptions<S>, positionals: parsed.positionals };
}

/** util.parseArgs's error as our one-line usage message (it names the option in quotes). */
function usageOf(err: Error & { code?: string }, spec: Record<string, OptionKind>, aliases: Record<string, string>): string {
  const quoted = /'(-[^' ]*)/.exec(err.message)?.[1];
  const name = quoted?.startsWith('--') ? quoted.slice(2) : quoted ? aliases[quoted.slice(1)] : undefined;
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') return `unknown option "${quoted ?? '?'}"`;
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && name !== undefined) {
    if (spec[name] === 'flag') return `--${name} takes no value`;
    if (/ambiguous/.test(err.message)) return `--${name} needs a value (to give one that starts with "-", write --${name}=VALUE)`;
    return `--${name} needs a value`;
  }
  return err.message;
}

/** Whether argv asks for help (`--help` or `-h` before any `--`). */
export function wantsHelp(argv: readonly string[]): boolean {
  for (const a of argv) {
    if (a === '--') return false;
    if (a === '--help' || a === '-h') return true;
  }
  return false;
}

/** Exactly `n` positionals named `names` (for the message), else UsageError. */
export function positionals(got: readonly string[], names: readonly string[]): string[] {
  if (got.length < names.length) throw new UsageError(`missing ${names.slice(got.length).join(' and ')}`);
  if (got.length > names.length) throw new UsageError(`unexpected argument "${got[names.length]}"`);
  return [...got];
}
