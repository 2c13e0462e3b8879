/**
 * Loads the environment catalogue (CORRAL_ENVIRONMENT_DIR, default ./environments: every NAME.yaml)
 * at start-up: YAML with line numbers → the EnvironmentFile schema → the image on the server's
 * sandbox-image allowlist → every example checked against its phase's allowlist. Any failure throws
 * EnvironmentError naming `file:LINE`, so a wrong catalogue stops start-up. `default` (today's image,
 * no setup, no egress) exists even without a file; a default.yaml replaces it.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { LineCounter, parseDocument } from 'yaml';
import { allowsUrl, nameMatches, portMatches, parseEgressEntry } from '../domain/egress-rules';
import { remoteUrl } from '../domain/mcp';
import { allowedImages, builtInDefault, DEFAULT_ENVIRONMENT, digestOf, ENVIRONMENT_NAME, EnvironmentFile, type Environment, type ImageConfig } from '../domain/environment';
import { CorralError, type CorralErrorOptions } from '../domain/errors';
import { lineOf } from '../domain/yaml-lines';
import { parseAuthority } from '../sandbox/egress-target';

const MAX_ENVIRONMENTS = 200;
const MAX_FILE_BYTES = 256 * 1024;

export class EnvironmentError extends CorralError {
  constructor(message: string, readonly file: string, readonly line?: number, options?: CorralErrorOptions) {
    super('invalid_input', message, { file, ...(line ? { line } : {}) }, options);
  }
}

export function loadEnvironments(dir: string, config: ImageConfig): Map<string, Environment> {
  const out = new Map<string, Environment>([[DEFAULT_ENVIRONMENT, builtInDefault(config)]]);
  if (!existsSync(dir)) return out;
  if (!statSync(dir).isDirectory()) throw new EnvironmentError(`CORRAL_ENVIRONMENT_DIR ${dir} is not a directory`, dir);
  const files = readdirSync(dir).filter((f) => /\.ya?ml$/.test(f)).sort();
  if (files.length > MAX_ENVIRONMENTS) throw new EnvironmentError(`${dir}: more than ${MAX_ENVIRONMENTS} environments`, dir);
  const seen = new Map<string, string>();
  for (const f of files) {
    const file = join(dir, f);
    const name = basename(f).replace(/\.ya?ml$/, '');
    if (!ENVIRONMENT_NAME.test(name)) throw new EnvironmentError(`${file}: the file name must be an environment name (lower case letters, digits, - and _, at most 64)`, file);
    if (seen.has(name)) throw new EnvironmentError(`${file}: environment "${name}" is also defined by ${seen.get(name)}`, file);
    seen.set(name, file);
    if (statSync(file).size > MAX_FILE_BYTES) throw new EnvironmentError(`${file}: larger than ${MAX_FILE_BYTES} bytes`, file);
    out.set(name, parseEnvironment(readFileSync(file, 'utf8'), file, name, config));
  }
  return out;
}

export function parseEnvironment(text: string, file: string, name: string, config: ImageConfig): Environment {
  const lc = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lc, prettyErrors: false, uniqueKeys: true });
  const at = (line: number | undefined) => `${file}${line ? `:${line}` : ''}`;
  if (doc.errors.length > 0) {
    const e = doc.errors[0]!;
    const line = e.linePos?.[0]?.line ?? lc.linePos(e.pos[0]).line;
    throw new EnvironmentError(`${at(line)}: YAML: ${e.message.split('\n')[0]}`, file, line);
  }
  const fail = (path: ReadonlyArray<PropertyKey>, msg: string): never => {
    const line = lineOf(doc, lc, path);
    throw new EnvironmentError(`${at(line)}: ${path.map(String).join('.')}${path.length ? ': ' : ''}${msg}`, file, line);
  };
  const parsed = EnvironmentFile.safeParse(doc.toJS());
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    // The line of the key itself, and the reason a key was refused (zod says only "Invalid key in record").
    if (issue.code === 'unrecognized_keys') return fail([...issue.path, issue.keys[0]!], `unknown field (this version knows: ${Object.keys(EnvironmentFile.shape).join(', ')})`);
    if (issue.code === 'invalid_key') return fail(issue.path, issue.issues[0]?.message ?? issue.message);
    return fail(issue.path, issue.message);
  }
  const def = parsed.data;
  const images = allowedImages(config);
  if (!images.includes(def.image)) fail(['image'], `"${def.image}" is not one of this server's sandbox images (CORRAL_SANDBOX_IMAGE, CORRAL_SANDBOX_IMAGES: ${images.join(', ')})`);
  if (def.cache !== false && def.setup.commands.length === 0) fail(['cache'], 'an environment without setup commands has nothing to cache');
  for (const [i, ex] of def.examples.entries()) {
    const t = parseAuthority(ex.target, 443);
    if (!t.ok) fail(['examples', i, 'target'], `${JSON.stringify(ex.target)}: ${t.reason}`);
    const { host, port } = (t as Extract<typeof t, { ok: true }>).value;
    const list = ex.phase === 'setup' ? def.setup.egress : def.egress;
    const allowed = list.some((text) => {
      const e = parseEgressEntry(text);
      return typeof e !== 'string' && nameMatches(host, e) && portMatches(port, e, 'connect');
    });
    if (allowed !== (ex.expect === 'allow')) {
      fail(['examples', i], `${ex.target} is ${allowed ? 'allowed' : 'refused'} in the ${ex.phase} phase, the example expects ${ex.expect} (${ex.phase === 'setup' ? 'setup.egress' : 'egress'}: ${list.join(', ') || 'none'})`);
    }
  }
  for (const [server, m] of Object.entries(def.mcp)) {
    const u = m.url === undefined ? null : remoteUrl(m.url);
    if (m.default && u !== null && typeof u !== 'string' && !allowsUrl(def.egress, u)) {
      fail(['mcp', server, 'url'], `a remote server started by default must be reachable with the agent's egress (egress: ${def.egress.join(', ') || 'none'}): add ${u.port ? u.host : u.hostname} to egress, or set default: false`);
    }
  }
  return { ...def, name, file, digest: digestOf(def) };
}
