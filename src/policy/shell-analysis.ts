/**
 * Bash analysis with a real parser (mvdan/sh via the `mvdan-sh` package). `analyzeShell` parses the
 * exact string that will run and returns every simple command — in lists, pipelines, subshells,
 * `$( )`, backticks, process substitution, here-docs, function bodies — each on its own, with
 * wrappers unwrapped (see unwrap-command.ts), plus every redirection and every `cd` target.
 * Anything it does not understand becomes a `deny` finding: a parse error, an unknown node type,
 * a dynamic command name, `eval`, too many commands or too deep `sh -c` nesting.
 */
import { syntax, type ShNode } from 'mvdan-sh';
import { resolveWord, type ShellWord } from './shell-words';
import { unwrapCommand } from './unwrap-command';

export interface ShellAssign { name: string; value: ShellWord | null }
export interface SimpleCommand {
  argv: ShellWord[];
  assigns: ShellAssign[];
  /** Wrappers this command was found inside, outermost first (e.g. ["timeout", "sh -c"]). */
  wrappers: string[];
  /** Extra arguments are appended at run time (xargs, find -exec {}). */
  dynamicTail: boolean;
}
export interface ShellRedirect { op: string; target: ShellWord; access: 'read' | 'write' | 'none' }
export interface ShellFinding { decision: 'ask' | 'deny'; reason: string; rule: string }
export interface ShellAnalysis {
  commands: SimpleCommand[];
  redirects: ShellRedirect[];
  /** Targets of cd/pushd anywhere in the command; null target = not known statically. */
  cdTargets: Array<ShellWord | null>;
  findings: ShellFinding[];
}
export interface AnalyzeOptions { home: string; maxCommands: number; maxLength: number }

const KNOWN = new Set([
  'File', 'Stmt', 'CallExpr', 'Word', 'Lit', 'SglQuoted', 'DblQuoted', 'ParamExp', 'CmdSubst', 'ArithmExp',
  'ProcSubst', 'Assign', 'Redirect', 'BinaryCmd', 'Subshell', 'Block', 'IfClause', 'WhileClause', 'ForClause',
  'WordIter', 'CStyleLoop', 'CaseClause', 'CaseItem', 'FuncDecl', 'ArithmCmd', 'BinaryArithm', 'UnaryArithm',
  'ParenArithm', 'TestClause', 'BinaryTest', 'UnaryTest', 'ParenTest', 'DeclClause', 'LetClause', 'TimeClause',
  'ArrayExpr', 'ArrayElem', 'ExtGlob', 'Comment', 'Expansion', 'Slice', 'Replace',
]);
const ARITH = new Set(['ArithmExp', 'ArithmCmd', 'LetClause', 'TestClause', 'CStyleLoop']);
const REDIR_OPS: Record<number, [string, 'read' | 'write' | 'none']> = {
  54: ['>', 'write'], 55: ['>>', 'write'], 56: ['<', 'read'], 57: ['<>', 'write'], 58: ['<&', 'none'],
  59: ['>&', 'write'], 60: ['>|', 'write'], 61: ['<<', 'none'], 62: ['<<-', 'none'], 63: ['<<<', 'none'],
  64: ['&>', 'write'], 65: ['&>>', 'write'],
};
const MAX_NESTING = 3;

export function analyzeShell(command: string, opts: AnalyzeOptions): ShellAnalysis {
  const out: ShellAnalysis = { commands: [], redirects: [], cdTargets: [], findings: [] };
  if (command.length > opts.maxLength) {
    out.findings.push({ decision: 'deny', rule: 'shell:too-long', reason: `the command is longer than ${opts.maxLength} characters` });
    return out;
  }
  analyzeInto(command, opts, out, [], 0);
  if (out.commands.length > opts.maxCommands) {
    out.findings.push({ decision: 'deny', rule: 'shell:too-many-commands', reason: `more than ${opts.maxCommands} simple commands` });
  }
  return out;
}

function parse(src: string): { file?: ShNode; error?: string } {
  try {
    const parser = syntax.NewParser(syntax.KeepComments(false), syntax.Variant(syntax.LangBash));
    return { file: parser.Parse(src, 'command') };
  } catch (e) {
    const err = e as { Error?: () => string; message?: string };
    return { error: typeof err?.Error === 'function' ? err.Error() : String(err?.message ?? e) };
  }
}

function analyzeInto(src: string, opts: AnalyzeOptions, out: ShellAnalysis, wrappers: string[], depth: number, inherited: ShellAssign[] = []): void {
  const deny = (rule: string, reason: string): void => {
    out.findings.push({ decision: 'deny', rule, reason });
  };
  if (depth > MAX_NESTING) return deny('shell:nesting', 'nested shell commands (sh -c) are too deep to analyse');
  const { file, error } = parse(src);
  if (!file) return deny('shell:parse-error', `the command does not parse as bash (${error})`);

  const calls: ShNode[] = [];
  const functions = new Set<string>();
  let hasArith = false;
  let suspiciousLiteral = false;
  syntax.Walk(file, (n) => {
    if (!n) return true;
    const t = syntax.NodeType(n);
    if (!KNOWN.has(t)) {
      deny('shell:unknown-node', `the analyser does not understand a ${t} here`);
      return false;
    }
    if (ARITH.has(t)) hasArith = true;
    if (t === 'Lit' || t === 'SglQuoted') {
      const v = String(n.Value);
      if (v.includes('$(') || v.includes('`')) suspiciousLiteral = true;
    }
    if (t === 'Stmt') {
      if (n.Background) out.findings.push({ decision: 'ask', rule: 'shell:background', reason: 'starts a background process that outlives the call' });
      if (n.Coprocess) deny('shell:coproc', 'coprocesses are not analysed');
      for (const r of n.Redirs ?? []) {
        const op = REDIR_OPS[r.Op as number];
        if (!op) {
          deny('shell:unknown-redirect', 'an unknown redirection operator');
          continue;
        }
        if (op[0] === '>&' || op[0] === '<&') {
          const w = resolveWord(r.Word, opts.home);
          if (!w.dynamic && /^(\d+-?|-)$/.test(w.value)) continue;
          if (op[0] === '<&') {
            deny('shell:redirect', 'a file-descriptor duplication the analyser does not understand');
            continue;
          }
        }
        if (op[1] !== 'none') out.redirects.push({ op: op[0], target: resolveWord(r.Word, opts.home), access: op[1] });
      }
    }
    if (t === 'FuncDecl') functions.add(String(n.Name?.Value ?? ''));
    if (t === 'CallExpr') calls.push(n);
    if (t === 'DeclClause') {
      const variant = String(n.Variant?.Value ?? '');
      const assigns: ShellAssign[] = [];
      for (const a of n.Args ?? []) {
        if (a.Name) assigns.push({ name: String(a.Name.Value), value: a.Value ? resolveWord(a.Value, opts.home) : null });
        else if (a.Value) {
          const w = resolveWord(a.Value, opts.home);
          if (w.dynamic || w.value.includes('[')) deny('shell:declare', `${variant} with an argument the analyser cannot read`);
        }
        if (a.Index || a.Array) hasArith = true;
      }
      out.commands.push({ argv: [{ value: variant, dynamic: false, glob: false }], assigns: [...inherited, ...assigns], wrappers, dynamicTail: false });
    }
    return true;
  });
  if (hasArith && suspiciousLiteral) {
    deny('shell:arith-injection', 'arithmetic evaluation together with a literal containing a command substitution');
  }
  for (const call of calls) {
    const assigns: ShellAssign[] = [...inherited, ...(call.Assigns ?? []).map((a: ShNode) => ({
      name: String(a.Name?.Value ?? ''),
      value: a.Array ? { value: '', dynamic: true, glob: false } : a.Value ? resolveWord(a.Value, opts.home) : null,
    }))];
    const argv: ShellWord[] = (call.Args ?? []).map((w: ShNode) => resolveWord(w, opts.home));
    if (argv.length === 0) {
      out.commands.push({ argv: [], assigns, wrappers, dynamicTail: false });
      continue;
    }
    if (argv[0]!.dynamic || argv[0]!.glob) {
      deny('shell:dynamic-command', 'the command name is computed at run time');
      continue;
    }
    if (functions.has(argv[0]!.value) && wrappers.length === 0) continue; // its body is analysed on its own
    const un = unwrapCommand(argv);
    for (const f of un.findings) out.findings.push(f);
    for (const inner of un.commands) {
      out.commands.push({ argv: inner.argv, assigns: [...assigns, ...inner.assigns], wrappers: [...wrappers, ...inner.wrappers], dynamicTail: inner.dynamicTail });
      const head = inner.argv[0]?.value;
      if (head === 'eval') deny('shell:eval', 'eval runs a string the analyser cannot see');
      if (head === 'cd' || head === 'pushd') {
        const target = inner.argv.slice(1).find((a) => !a.value.startsWith('-') || a.dynamic);
        out.cdTargets.push(target ? (target.dynamic ? null : target) : { value: opts.home, dynamic: false, glob: false });
      }
    }
    for (const script of un.scripts) {
      if (script.word.dynamic) deny('shell:dynamic-script', `${script.via} runs a string computed at run time`);
      else analyzeInto(script.word.value, opts, out, [...wrappers, ...script.wrappers, script.via], depth + 1, [...inherited, ...assigns, ...script.assigns]);
    }
    if (out.commands.length > opts.maxCommands * 4) return;
  }
}
