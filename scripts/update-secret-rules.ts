/**
 * Regenerates src/policy/secret-rules.json — the secret scanner's rules — from gitleaks' default
 * configuration (config/gitleaks.toml of https://github.com/gitleaks/gitleaks, MIT licence; its
 * copyright notice is kept in src/policy/secret-rules.LICENSE). Rules that match by file path only
 * are left out (tool output has no path), and so are the path parts of allowlists.
 *
 *   npx tsx scripts/update-secret-rules.ts path/to/gitleaks.toml COMMIT
 *
 * Every regex is compiled with re2js before it is written, so a rule the engine cannot take stops
 * the update instead of the scanner.
 */
/* eslint-disable no-restricted-properties -- a command-line script */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RE2JS } from 're2js';
import { parse } from 'smol-toml';

interface TomlAllow { regexes?: string[]; stopwords?: string[]; regexTarget?: string; condition?: string; paths?: string[] }
interface TomlRule { id: string; regex?: string; secretGroup?: number; entropy?: number; keywords?: string[]; allowlists?: TomlAllow[]; path?: string }

const [file, commit] = process.argv.slice(2);
if (!file || !commit) {
  process.stderr.write('usage: tsx scripts/update-secret-rules.ts gitleaks.toml COMMIT\n');
  process.exit(2);
}
const toml = parse(readFileSync(file, 'utf8')) as unknown as { allowlist?: TomlAllow; rules: TomlRule[] };
const check = (re: string, where: string) => {
  try {
    RE2JS.compile(re);
  } catch (e) {
    throw new Error(`${where}: ${(e as Error).message}`, { cause: e });
  }
  return re;
};
const allow = (a: TomlAllow, where: string) => {
  // an allowlist that also needs a path (condition AND) can never hold for tool output
  if (a.paths?.length && a.condition === 'AND') return null;
  if (!a.regexes?.length && !a.stopwords?.length) return null;
  return {
    ...(a.regexes?.length ? { regexes: a.regexes.map((r, i) => check(r, `${where} allowlist regex ${i}`)) } : {}),
    ...(a.stopwords?.length ? { stopwords: a.stopwords.map((s) => s.toLowerCase()) } : {}),
    ...(a.regexTarget ? { target: a.regexTarget } : {}),
  };
};
const rules = toml.rules.filter((r) => r.regex).map((r) => ({
  id: r.id,
  regex: check(r.regex!, r.id),
  ...(r.secretGroup ? { secretGroup: r.secretGroup } : {}),
  ...(r.entropy ? { entropy: r.entropy } : {}),
  keywords: (r.keywords ?? []).map((k) => k.toLowerCase()),
  allowlists: (r.allowlists ?? []).map((a, i) => allow(a, `${r.id} allowlist ${i}`)).filter((a) => a !== null),
}));
const g = toml.allowlist ?? {};
const out = {
  source: `gitleaks config/gitleaks.toml at ${commit}`,
  licence: 'MIT (see secret-rules.LICENSE)',
  global: { regexes: (g.regexes ?? []).map((r, i) => check(r, `global allowlist regex ${i}`)), stopwords: (g.stopwords ?? []).map((s) => s.toLowerCase()) },
  rules,
};
writeFileSync(join(__dirname, '../src/policy/secret-rules.json'), `${JSON.stringify(out, null, 1)}\n`);
process.stdout.write(`${rules.length} rules written (${toml.rules.length - rules.length} path-only rules left out)\n`);
