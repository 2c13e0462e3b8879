/**
 * The bash parser behind the gate: mvdan/sh (LangBash) as compiled to JavaScript by GopherJS
 * (`mvdan-sh`, deprecated upstream). Kept over the maintained alternatives after measuring them here:
 * `sh-syntax` 0.7.0 (mvdan/sh v3 in WASM, its successor) takes ≈ 4.8 ms a parse (a fresh Go runtime
 * per call) against ≈ 0.25 ms here, and its JSON tree drops the contents of every interface-typed node
 * — a statement's `Cmd` and a word's `Parts` come back as `{Pos, End}` only (un-ts/sh-syntax#123) —
 * so there is nothing to analyse; `tree-sitter-bash` is an error-recovering grammar that accepts what
 * bash refuses, where mvdan/sh refuses what it does not parse exactly. It runs in the analysis threads
 * (analysis-pool.ts), so a parse that recurses or allocates without end costs a thread, not the worker.
 *
 * `parseBash` never throws: a syntax error, or input so deeply nested that the parser runs out of
 * stack, comes back as an error with a reason. Operator codes are not hard-coded: `OPS` maps each
 * code to its text by parsing one sample per operator when this module loads, so a change of the
 * parser's numbering cannot silently change what the analyser sees (test/unit/policy-shell-parse).
 */
import { syntax, type ShNode } from 'mvdan-sh';

export type ParseResult = { file: ShNode; error?: undefined } | { file?: undefined; error: string; tooDeep: boolean };

let parser = newParser();

function newParser() {
  return syntax.NewParser(syntax.KeepComments(false), syntax.Variant(syntax.LangBash));
}

/** The Go type of a node of the plain tree (`CallExpr`, `Word`, …). */
export function nodeType(n: ShNode): string {
  return n?.$type ?? 'nil';
}

const MAX_TREE_DEPTH = 2_000;
const SKIP_FIELD = /^(\$val|Pos|End|Position|Semicolon|Left|Right|Lparen|Rparen|Lbrace|Rbrace|Rbrack|Lbrack|OpPos|ValuePos|ValueEnd|ThenPos|FiPos|ElsePos|DoPos|DonePos|WhilePos|ForPos|InPos|Case|Esac|Let|Time|Coproc|Dollar|Comments|Last|CondLast|ThenLast|DoLast|Name_?Pos)$/;

class TreeTooDeep extends Error {}

/**
 * Copies GopherJS's Go values into plain objects, once: reading the externalised JS API's getters
 * re-converts a subtree on every access (≈30 µs each), which made analysis cost milliseconds. Slices
 * become arrays, nil pointers and interfaces null, Go's UTF-8 strings JS strings, every node gets
 * `$type`; position fields are dropped. The `Dollar` flag of quotes is kept.
 */
function fromGo(v: ShNode, depth: number): ShNode {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return /[\x80-\xff]/.test(v) ? Buffer.from(v, 'latin1').toString('utf8') : v;
  if (typeof v !== 'object') return v;
  if (depth > MAX_TREE_DEPTH) throw new TreeTooDeep();
  if (v.$array !== undefined && typeof v.$length === 'number') {
    const out = new Array(v.$length);
    for (let i = 0; i < v.$length; i++) out[i] = fromGo(v.$array[v.$offset + i], depth + 1);
    return out;
  }
  const type: unknown = v.constructor?.string;
  if (typeof type !== 'string') return null; // a nil interface
  if (v === v.constructor.nil) return null; // a nil pointer
  if (!type.startsWith('*syntax.')) return null; // positions and other value structs
  const out: Record<string, unknown> = { $type: type.slice(8) };
  for (const k of Object.keys(v)) {
    if (k === 'Dollar') { if (typeof v.Dollar === 'boolean') out.Dollar = v.Dollar; continue; }
    if (SKIP_FIELD.test(k)) continue;
    out[k] = fromGo(v[k], depth + 1);
  }
  return out;
}

export function parseBash(src: string): ParseResult {
  try {
    const f = parser.Parse(src, 'command');
    return { file: fromGo(f.__internal_object__ ?? f, 0) };
  } catch (e) {
    if (e instanceof TreeTooDeep) return { error: 'it is nested too deeply to analyse', tooDeep: true };
    if (e instanceof RangeError) {
      parser = newParser(); // its state is not trusted after an overflow
      return { error: 'it is nested too deeply for the parser', tooDeep: true };
    }
    const err = e as { Error?: () => string; message?: string };
    return { error: typeof err?.Error === 'function' ? err.Error() : String(err?.message ?? e), tooDeep: false };
  }
}

/** Operator code → its text, for each operator family, learnt from samples at load. */
export interface OperatorTables {
  redirect: Map<number, string>;
  binaryCmd: Map<number, string>;
  paramExp: Map<number, string>;
  procSubst: Map<number, string>;
  binaryTest: Map<number, string>;
  unaryTest: Map<number, string>;
  caseItem: Map<number, string>;
  globOp: Map<number, string>;
}

function first(src: string): ShNode {
  const r = parseBash(src);
  if (!r.file) throw new Error(`operator sample "${src}" does not parse: ${r.error}`);
  return r.file.Stmts[0];
}

function learn<T>(samples: Array<[string, string]>, pick: (stmt: ShNode) => T): Map<number, string> {
  const m = new Map<number, string>();
  for (const [text, src] of samples) {
    const code = Number(pick(first(src)));
    if (!Number.isInteger(code)) throw new Error(`operator sample "${src}" gave no code`);
    if (m.has(code) && m.get(code) !== text) throw new Error(`operators "${m.get(code)}" and "${text}" share code ${code}`);
    m.set(code, text);
  }
  return m;
}

export const REDIRECT_OPS = ['>', '>>', '<', '<>', '<&', '>&', '>|', '<<', '<<-', '<<<', '&>', '&>>'] as const;
export const PARAM_EXP_OPS = [':-', '-', ':=', '=', ':?', '?', ':+', '+', '#', '##', '%', '%%', '^', '^^', ',', ',,', '@'] as const;
const UNARY_TESTS = ['-e', '-f', '-d', '-c', '-b', '-p', '-S', '-L', '-k', '-g', '-u', '-G', '-O', '-N', '-r', '-w', '-x', '-s', '-t', '-z', '-n', '-o', '-v', '-R'] // -h and -a share the codes of -L and -e;
const BINARY_TESTS = ['=~', '-nt', '-ot', '-ef', '-eq', '-ne', '-le', '-ge', '-lt', '-gt', '&&', '||', '==', '!=', '<', '>', '='];

export const OPS: OperatorTables = {
  redirect: learn(REDIRECT_OPS.map((op) => [op, op.startsWith('<<') && op !== '<<<' ? `cat ${op}E\nx\nE` : `cat ${op} f`]), (s) => s.Redirs[0].Op),
  binaryCmd: learn([['&&', 'a && b'], ['||', 'a || b'], ['|', 'a | b'], ['|&', 'a |& b']], (s) => s.Cmd.Op),
  paramExp: learn(PARAM_EXP_OPS.map((op) => [op, `echo \${x${op}${op === "@" ? "Q" : "y"}}`]), (s) => s.Cmd.Args[1].Parts[0].Exp.Op),
  procSubst: learn([['<(', 'cat <(a)'], ['>(', 'cat >(a)']], (s) => s.Cmd.Args[1].Parts[0].Op),
  binaryTest: learn(BINARY_TESTS.map((op) => [op, op === '&&' || op === '||' ? `[[ a ${op} b ]]` : `[[ a ${op} b ]]`]), (s) => s.Cmd.X.Op),
  unaryTest: learn([...UNARY_TESTS.map((op): [string, string] => [op, `[[ ${op} a ]]`]), ['!', '[[ ! a ]]']], (s) => s.Cmd.X.Op),
  caseItem: learn([[';;', 'case x in a) b;; esac'], [';&', 'case x in a) b;& esac'], [';;&', 'case x in a) b;;& esac']], (s) => s.Cmd.Items[0].Op),
  globOp: learn([['?(', 'echo ?(a)'], ['*(', 'echo *(a)'], ['+(', 'echo +(a)'], ['@(', 'echo @(a)'], ['!(', 'echo !(a)']], (s) => s.Cmd.Args[1].Parts[0].Op),
};

/** The text of an operator code, or undefined for a code no sample produced (the analyser then refuses it). */
export function opText(table: keyof OperatorTables, code: unknown): string | undefined {
  return OPS[table].get(Number(code));
}
