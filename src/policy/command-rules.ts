/**
 * Whether a bash command rule fires on one simple command: name, subcommand, flags present or
 * absent (GNU long-option abbreviations and short-flag clusters included), facts, argument regexes.
 * A rule with `unless_flags`/`unless_facts`/`subcommands` never fires on a command with a dynamic
 * argument, since that argument could be exactly the flag the rule excludes.
 */
import { awkFacts, sedFacts } from './command-facts';
import { globToRegExp } from './path-glob';
import type { CommandRule, Policy } from './policy-schema';
import type { SimpleCommand } from './shell-analysis';
import { commandName } from './unwrap-command';

export function hasFlag(args: string[], spec: string): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (!arg.startsWith('-') || arg === '-') continue;
    if (spec.startsWith('--')) {
      const name = arg.split('=')[0]!;
      if (name === spec || (name.startsWith('--') && name.length >= 4 && spec.startsWith(name))) return true;
    } else if (spec.length === 2) {
      if (arg === spec || (!arg.startsWith('--') && /^-[A-Za-z0-9]/.test(arg) && arg.slice(1).includes(spec[1]!))) return true;
    } else if (arg === spec || arg.startsWith(spec + '=')) return true;
  }
  return false;
}

const AWKS = new Set(['awk', 'gawk', 'mawk', 'nawk', 'busybox-awk']);

export function commandFacts(c: SimpleCommand): Set<string> {
  const head = c.argv[0] ? commandName(c.argv[0]) : '';
  if (head === 'sed' || head === 'gsed') return sedFacts(c.argv.slice(1));
  if (AWKS.has(head)) return awkFacts(c.argv.slice(1));
  return new Set();
}

export interface Positionals { list: string[]; subcommand?: string; afterSubcommand: string[] }

export function positionals(rule: CommandRule, args: string[]): Positionals {
  const list: string[] = [];
  let sub: string | undefined;
  const after: string[] = [];
  let endOfFlags = false;
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!endOfFlags && a === '--') { endOfFlags = true; continue; }
    if (!endOfFlags && a.startsWith('-') && a !== '-') {
      if (sub === undefined && rule.global_value_flags.includes(a)) i++;
      continue;
    }
    if (a.startsWith('\u0000')) continue;
    list.push(a);
    if (sub === undefined) sub = a;
    else after.push(a);
  }
  return { list, subcommand: sub, afterSubcommand: after };
}

export function nameMatches(rule: CommandRule, c: SimpleCommand): boolean {
  const w = c.argv[0];
  if (!w) return false;
  const head = commandName(w);
  return rule.commands.some((n) => (n.includes('/') || n.includes('*') ? globToRegExp(n).test(w.value) : n === head));
}

export function ruleFires(policy: Policy, rule: CommandRule, c: SimpleCommand, facts: Set<string>): boolean {
  if (!nameMatches(rule, c)) return false;
  const argWords = c.argv.slice(1);
  const args = argWords.map((a) => a.value);
  const dynamic = c.dynamicTail || argWords.some((a) => a.dynamic);
  const pos = positionals(rule, args);
  if (rule.subcommands) {
    if (dynamic && argWords.findIndex((a) => a.dynamic) <= args.indexOf(pos.subcommand ?? '\u0001')) return false;
    if (!pos.subcommand || !rule.subcommands.includes(pos.subcommand)) return false;
  }
  if (dynamic && (rule.unless_flags.length > 0 || rule.unless_facts.length > 0 || rule.max_positionals !== undefined)) return false;
  if (rule.unless_flags.some((f) => hasFlag(args, f))) return false;
  if (rule.flags && !rule.flags.some((f) => hasFlag(args, f))) return false;
  if (rule.facts && !rule.facts.some((f) => facts.has(f))) return false;
  if (rule.unless_facts.some((f) => facts.has(f))) return false;
  const rx = policy.compiled.argsRegex.get(rule.name);
  const joined = args.join(' ');
  if (rx?.args && !rx.args.test(joined)) return false;
  if (rx?.unless && rx.unless.test(joined)) return false;
  if (rule.max_positionals !== undefined) {
    const n = rule.subcommands ? pos.afterSubcommand.length : pos.list.length;
    if (n > rule.max_positionals) return false;
  }
  return true;
}

/** The arguments a firing rule treats as paths. */
export function pathArguments(rule: CommandRule, c: SimpleCommand): number[] {
  if (rule.paths === 'none') return [];
  const idx: number[] = [];
  let endOfFlags = false;
  let seenFirst = false;
  for (let i = 1; i < c.argv.length; i++) {
    const a = c.argv[i]!;
    if (!a.dynamic && !endOfFlags && a.value === '--') { endOfFlags = true; continue; }
    if (!a.dynamic && !endOfFlags && a.value.startsWith('-') && a.value !== '-') continue;
    if (a.value.startsWith('\u0000')) continue;
    if (rule.paths === 'after_first' && !seenFirst) { seenFirst = true; continue; }
    if (rule.paths === 'first' && seenFirst) break;
    seenFirst = true;
    if (!a.dynamic && rule.global_value_flags.includes(c.argv[i - 1]?.value ?? '')) continue;
    idx.push(i);
  }
  return idx;
}
