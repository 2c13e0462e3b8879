/**
 * Argument parsing shared by the `corral` subcommands: `--name value`, `--name=value`, boolean
 * flags, repeatable options, `--` to end options. Bad usage throws UsageError, which the dispatcher
 * (index.ts) prints as one line pointing at `corral CMD --help` and turns into exit code 2.
 */

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
 * `aliases`, e.g. `{ o: 'output' }`). Throws UsageError for unknown options, a missing value, or a
 * value given to a flag.
 */
export function parseArgs<S extends Record<string, OptionKind>>(
  argv: readonly string[],
  spec: S,
  aliases: Record<string, keyof S & string> = {},
): ParsedArgs<S> {
  const opts: Record<string, string | string[] | boolean | undefined> = {};
  for (const [name, kind] of Object.entries(spec)) opts[name] = kind === 'list' ? [] : kind === 'flag' ? false : undefined;
  const positionals: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (a === '-' || !a.startsWith('-')) {
      positionals.push(a);
      continue;
    }
    const eq = a.indexOf('=');
    const rawName = a.startsWith('--') ? a.slice(2, eq > 0 ? eq : undefined) : a.slice(1);
    const name = a.startsWith('--') ? rawName : aliases[rawName];
    const kind = name === undefined ? undefined : spec[name];
    if (name === undefined || kind === undefined) throw new UsageError(`unknown option "${a.startsWith('--') && eq > 0 ? a.slice(0, eq) : a}"`);
    if (kind === 'flag') {
      if (a.startsWith('--') && eq > 0) throw new UsageError(`--${name} takes no value`);
      opts[name] = true;
      continue;
    }
    let value: string | undefined;
    if (a.startsWith('--') && eq > 0) value = a.slice(eq + 1);
    else {
      value = argv[i + 1];
      if (value === undefined || (value.startsWith('--') && value.length > 2)) throw new UsageError(`--${name} needs a value`);
      i++;
    }
    if (kind === 'list') (opts[name] as string[]).push(value);
    else opts[name] = value;
  }
  return { opts: opts as ParsedOptions<S>, positionals };
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
