/**
 * Specs of the Node.js toolchain: node (a script is project code; -e/-p inline; -r/--import of a
 * path outside the workspace is hidden code), npm/yarn/pnpm/bun (the project's scripts vs installs,
 * publishing, configuration), npx and `npm exec` (a locally installed dev tool runs as that tool;
 * anything else may download a package), and tsc, jest, vitest, mocha, eslint, prettier, tsx.
 */
import { grammar, parseArgs } from './argv-parser';
import { inlineCodeEffect, simpleSpec, UseBuilder, type CommandSpec, type CommandUse } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';
import { scriptNameEffects } from './build-tools';

const NODE = grammar(
  '-e|--eval=any -p|--print=any -c|--check -i|--interactive -r|--require=any --import=any --loader|--experimental-loader=any --inspect?any --inspect-brk?any --inspect-wait?any ' +
  '--inspect-port|--debug-port=any --test --test-reporter=any --test-reporter-destination=write --test-name-pattern=any --test-skip-pattern=any --test-only --test-concurrency=any --test-timeout=any ' +
  '--watch!never-ends --watch-path=read --env-file=read --env-file-if-exists=read --run=any --input-type=any -C|--conditions=any -v|--version -h|--help --v8-options ' +
  '--max-old-space-size=any --stack-size=any --enable-source-maps --no-warnings --trace-warnings --trace-uncaught --trace-deprecation --throw-deprecation --no-deprecation --pending-deprecation ' +
  '--unhandled-rejections=any --expose-gc --experimental-vm-modules --experimental-strip-types --experimental-transform-types --no-experimental-strip-types --experimental-test-coverage ' +
  '--title=any --openssl-legacy-provider --preserve-symlinks --diagnostic-dir=write --report-dir|--report-directory=write --redirect-warnings=write --prof --cpu-prof --heap-prof --frozen-intrinsics',
  { stopAtOperand: true, lenient: true },
);

function loadedModule(b: UseBuilder, w: ShellWord, what: string): void {
  if (w.dynamic || /^[./~]/.test(w.value)) b.path(w, 'exec', what);
  // a URL (data:, http:, file:, node:) is code or a file the gate does not read; a bare name is a package in node_modules
  else if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(w.value)) b.effect('exec-inline', `${what} from a URL (${w.value.slice(0, 40)})`);
  else if (!/^(@[A-Za-z0-9._-]+\/)?[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/.test(w.value)) b.problem(`${what}: "${w.value.slice(0, 40)}" is not a package name`);
}

export function nodeUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const p = parseArgs(NODE, args);
  b.options(p);
  for (const r of p.values('-r', '--import', '--loader')) loadedModule(b, r, `${name} preloads a module`);
  if (p.has('--inspect', '--inspect-brk', '--inspect-wait')) b.effect('server', `${name} --inspect opens a debugger port`);
  if (p.has('-i')) b.effect('interactive', `${name} -i starts a prompt`);
  if (p.has('-e', '-p')) {
    const codes = p.values('-e', '-p');
    return b.effect(codes.length > 0 && codes.every((c) => inlineCodeEffect(c) === 'exec-code-arg') ? 'exec-code-arg' : 'exec-inline', `${name} -e/-p runs code given on the command line`).use;
  }
  if (p.has('-v', '-h', '--v8-options') && !p.operands.length) return b.use;
  if (p.has('--run')) return b.project().use;
  const script = p.operands[0];
  if (!script) {
    if (p.has('--test')) return b.project().use;
    return b.effect('exec-stdin', `${name} reads a program from standard input`).use;
  }
  if (!script.dynamic && script.value === '-') return b.effect('exec-stdin', `${name} reads a program from standard input`).use;
  if (p.has('-c')) return b.read(script).use;
  b.path(script, 'exec', `${name} runs a script`).project();
  return b.use;
}

/** Tools a project installs as dev dependencies: `npx X` runs the local copy (no download). */
export const LOCAL_DEV_TOOLS = new Set(['tsc', 'jest', 'vitest', 'mocha', 'eslint', 'prettier', 'tsx', 'ts-node', 'node', 'webpack', 'vite', 'rollup', 'esbuild', 'nyc', 'c8', 'ava', 'tap', 'standard', 'xo', 'biome', 'oxlint', 'stylelint', 'markdownlint', 'vue-tsc', 'tsup', 'turbo', 'nx', 'lerna', 'playwright', 'cypress', 'karma', 'jasmine', 'uvu', 'babel', 'swc', 'ncc', 'nodemon', 'concurrently', 'rimraf', 'cross-env', 'husky', 'lint-staged', 'semantic-release', 'changeset', 'typedoc', 'api-extractor', 'depcheck', 'knip', 'madge', 'next', 'nuxt', 'astro', 'svelte-kit', 'svelte-check', 'ng', 'react-scripts', 'storybook', 'wrangler', 'serverless', 'prisma', 'drizzle-kit', 'knex', 'sequelize', 'typeorm', 'graphql-codegen', 'openapi-typescript']);

/** husky writes git hooks (`husky add .husky/pre-push CMD`) and points git's hooksPath at them (`husky`, `husky install`). */
function huskyUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const [verb, file] = args;
  if (verb && ['add', 'set'].includes(verb.value)) return b.write(file).use;
  if (!verb || verb.value === 'install' || verb.value === 'init') return b.effect('config-code', `${name} ${verb?.value ?? ''} sets git's hooksPath so hooks run on later git commands`).use;
  if (verb.value === 'uninstall') return b.effect('config-code', `${name} uninstall changes git's hooksPath`).use;
  return b.problem(`${name} ${verb.value} is not modelled`).use;
}

function npxUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const p = parseArgs(grammar('-y|--yes --no --no-install -q|--quiet -p|--package=any -c|--call=exec --prefer-offline --offline --ignore-existing -w|--workspace=any --workspaces', { stopAtOperand: true }), args);
  b.options(p);
  if (p.has('-p', '-c')) return b.effect('install', `${name} --package/--call downloads and runs a package`).use;
  const [tool, ...rest] = p.operands;
  if (!tool) return b.problem(`${name} without a command`).use;
  if (tool.dynamic) return b.problem(`${name}: the package is computed at run time`).use;
  if (tool.value === 'husky') return mergeInto(b, huskyUse(rest, 'husky'));
  // the project's own copy: node_modules/.bin under the directory it runs in — outside the workspace
  // (`cd /tmp && npx tsc`) there is none, and npx downloads the package and runs it
  if (LOCAL_DEV_TOOLS.has(tool.value)) return b.path(literalWord(`node_modules/.bin/${tool.value}`), 'exec', `${name} runs the project's own ${tool.value}`).inner([tool, ...rest]).use;
  return b.effect('install', `${name} ${tool.value} may download and run a package that is not a known dev tool`).use;
}

const NPM_GLOBAL = '-w|--workspace=any --workspaces --include-workspace-root --if-present -s|--silent --loglevel=any -d|--verbose -q|--quiet --json --parseable --yes|-y --no-audit --no-fund --ignore-scripts --legacy-peer-deps --foreground-scripts --offline --prefer-offline --color=any --no-color --progress --no-progress --timing --no-update-notifier -l|--long -a|--all --depth=any --omit=any --include=any --production --dev -D|--save-dev -E|--save-exact -P|--save-prod -O|--save-optional --no-save -B|--save-bundle --save-peer -f|--force --strict-peer-deps --prefix=dir -C=dir -g|--global --registry=any --userconfig=read --globalconfig=read --script-shell=exec --node-options=exec --cache=write --tag=any --access=any --otp=any --dry-run --package-lock-only --no-package-lock -h|--help -v|--version';
const NPM_SCRIPT_CMDS = new Set(['test', 't', 'tst', 'start', 'stop', 'restart', 'run', 'run-script', 'rum', 'urn']);
const NPM_INSTALL = new Set(['install', 'i', 'in', 'ins', 'inst', 'insta', 'instal', 'isnt', 'isnta', 'isntal', 'add', 'ci', 'clean-install', 'ic', 'install-clean', 'isntall-clean', 'install-test', 'it', 'install-ci-test', 'cit', 'uninstall', 'remove', 'rm', 'r', 'un', 'unlink', 'update', 'up', 'upgrade', 'udpate', 'dedupe', 'ddp', 'prune', 'rebuild', 'rb', 'link', 'ln', 'init', 'create', 'innit']);
const NPM_READ = new Set(['ls', 'list', 'la', 'll', 'explain', 'why', 'help', 'root', 'prefix', 'bin', 'fund', 'query', 'sbom', 'help-search', 'completion', 'config-list']);
const NPM_NET = new Set(['outdated', 'view', 'info', 'show', 'v', 'search', 's', 'se', 'find', 'doctor', 'ping', 'whoami', 'audit-signatures']);
const NPM_PUBLISH = new Set(['publish', 'unpublish', 'deprecate', 'dist-tag', 'dist-tags', 'owner', 'author', 'access', 'team', 'token', 'login', 'logout', 'adduser', 'add-user', 'star', 'unstar', 'org', 'hook', 'profile', 'stars']);

/**
 * `npm --prefix DIR` / `-C DIR`, `yarn --cwd DIR`, `pnpm -C DIR`: the package.json (and its scripts)
 * in DIR is what runs, and relative paths resolve from there.
 */
function inPrefix(spec: (args: ShellWord[], name: string) => CommandUse, options: string[]): (args: ShellWord[], name: string) => CommandUse {
  return (args, name) => {
    const u = spec(args, name);
    const dd = args.findIndex((a) => !a.dynamic && a.value === '--');
    const p = parseArgs(grammar(`${NPM_GLOBAL} --cwd=dir --frozen-lockfile --immutable --prefer-frozen-lockfile -F|--filter=any -r|--recursive --stream --parallel`, { lenient: true }), dd >= 0 ? args.slice(0, dd) : args);
    const dirs = p.values(...options);
    if (!dirs.length) return u;
    const b = new UseBuilder(u.label);
    Object.assign(b.use, u, { paths: u.paths.filter((x) => !dirs.includes(x.word)) });
    if (dirs.length > 1) b.problem(`${name}: more than one working directory option`);
    return b.within(dirs[0], `${name} runs the package.json scripts in`).use;
  };
}

function npmUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const dd = args.findIndex((a) => !a.dynamic && a.value === '--');
  const own = dd >= 0 ? args.slice(0, dd) : args;
  const p = parseArgs(grammar(NPM_GLOBAL), own);
  b.options(p);
  if (p.has('-g')) b.effect('install', `${name} --global changes the installation outside the project`);
  if (p.has('--registry')) b.effect('network', `${name} --registry talks to another registry`);
  const [sub, ...rest] = p.operands;
  if (!sub) { if (!p.has('-h', '-v')) b.problem(`${name} without a command`); return b.use; }
  if (sub.dynamic) return b.problem(`${name}: the command is computed at run time`).use;
  const s = sub.value;
  const label = `${name} ${s}`;
  if (NPM_SCRIPT_CMDS.has(s)) {
    const isRun = ['run', 'run-script', 'rum', 'urn'].includes(s);
    if (!(isRun && rest.length === 0)) b.project();
    scriptNameEffects(b, name, isRun ? rest[0] ?? sub : sub);
    return b.use;
  }
  const full = NPM_COMMANDS.filter((c) => c.startsWith(s));
  if (!NPM_ALL.has(s) && full.length >= 1) {
    const kinds = new Set(full.map((c) => (NPM_PUBLISH.has(c) ? 'publish' : NPM_INSTALL.has(c) ? 'install' : 'other')));
    if (kinds.has('publish')) return b.effect('publish', `${label} may be an abbreviation of npm ${full.join('/')}, which publishes`).use;
    if (kinds.has('install')) return b.effect('install', `${label} may be an abbreviation of npm ${full.join('/')}, which installs`).use;
    return b.problem(`${label} abbreviates npm ${full.join('/')}, which is not modelled`).use;
  }
  if (s === 'exec' || s === 'x') return mergeInto(b, npxUse(args.slice(args.indexOf(sub) + 1), label));
  if (s === 'audit') {
    if (rest[0]?.value === 'fix') b.effect('install', `${label} fix changes installed packages`);
    return b.effect('network', `${label} queries the registry`).use;
  }
  if (NPM_INSTALL.has(s)) return b.effect('install', `${label} installs packages (network, install scripts)`).use;
  if (NPM_READ.has(s)) return b.use;
  if (NPM_NET.has(s)) return b.effect('network', `${label} queries the registry`).use;
  if (NPM_PUBLISH.has(s)) return b.effect('publish', `${label} publishes or changes a registry account`).use;
  if (s === 'pack') return b.project().write(literalWord('.')).use;
  if (s === 'version') return b.effect('discard-work', `${label} rewrites package.json and creates a git commit and tag`).use;
  if (s === 'config' || s === 'c' || s === 'get' || s === 'set') {
    const verb = s === 'config' || s === 'c' ? rest[0]?.value : s;
    if (verb === 'get' || verb === 'list' || verb === 'ls') return b.use;
    return b.effect('config-code', `${label} changes npm configuration (script shells, registries, hooks)`).use;
  }
  if (s === 'pkg') {
    const verb = rest[0]?.value;
    if (verb === 'get') return b.use;
    // package.json is a workspace file: its scripts are the project's code, run (and judged) when npm runs them
    if (rest.some((a) => a.dynamic)) return b.problem(`${label}: arguments computed at run time`).use;
    if (!['set', 'delete', 'fix'].includes(verb ?? '')) return b.problem(`${label} ${verb ?? ''} is not modelled`).use;
    // a script set here runs as `sh -c VALUE` on the next npm run: judged now as that command
    for (const a of rest.slice(1)) { const m = /^scripts\.[^=]+=(.*)$/s.exec(a.value); if (verb === 'set' && m) b.inner([literalWord('sh'), literalWord('-c'), literalWord(m[1]!)]); }
    return b.write(literalWord('package.json')).use;
  }
  if (s === 'cache') { const verb = rest[0]?.value; if (verb === 'ls' || verb === 'verify') return b.use; return b.effect('delete', `${label} ${verb ?? ''} changes the npm cache`).use; }
  if (['docs', 'home', 'bugs', 'repo', 'issues', 'edit', 'explore', 'shrinkwrap', 'set-script', 'diff', 'repo'].includes(s)) return b.problem(`${label} is not modelled`).use;
  // `npm <script>` is not how npm runs scripts: anything else is not modelled
  return b.problem(`${label} is not modelled`).use;
}

const NPM_COMMANDS = ['access', 'adduser', 'audit', 'bugs', 'cache', 'ci', 'completion', 'config', 'dedupe', 'deprecate', 'diff', 'dist-tag', 'docs', 'doctor', 'edit', 'exec', 'explain', 'explore', 'find-dupes', 'fund', 'get', 'help', 'help-search', 'hook', 'init', 'install', 'install-ci-test', 'install-test', 'link', 'login', 'logout', 'ls', 'org', 'outdated', 'owner', 'pack', 'ping', 'pkg', 'prefix', 'profile', 'prune', 'publish', 'query', 'rebuild', 'repo', 'restart', 'root', 'run', 'run-script', 'sbom', 'search', 'set', 'shrinkwrap', 'star', 'stars', 'start', 'stop', 'team', 'test', 'token', 'undeprecate', 'uninstall', 'unpublish', 'unstar', 'update', 'version', 'view', 'whoami'];
const NPM_ALL = new Set([...NPM_COMMANDS, ...NPM_SCRIPT_CMDS, ...NPM_INSTALL, ...NPM_READ, ...NPM_NET, ...NPM_PUBLISH, 'exec', 'x', 'audit', 'pack', 'version', 'config', 'c', 'get', 'set', 'pkg', 'cache']);

function mergeInto(b: UseBuilder, inner: CommandUse): CommandUse {
  const u = b.use;
  return { ...inner, problems: [...u.problems, ...inner.problems], paths: [...u.paths, ...inner.paths], effects: [...u.effects, ...inner.effects] };
}

const YARN_SCRIPTS = new Set(['test', 'build', 'lint', 'start', 'dev', 'typecheck', 'type-check', 'format', 'fmt', 'check', 'compile', 'e2e', 'coverage', 'prettier', 'tsc', 'jest', 'vitest', 'eslint', 'clean', 'watch', 'serve', 'preview', 'prepare', 'ci', 'validate', 'verify', 'unit', 'integration']);

function yarnLike(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const p = parseArgs(grammar(`${NPM_GLOBAL} --frozen-lockfile --immutable --prefer-frozen-lockfile -F|--filter=any -r|--recursive --cwd=dir --stream --parallel`), args.filter((a, i) => !(i > 0 && args[i - 1]!.value === '--')));
  b.options(p);
  const [sub, ...rest] = p.operands;
  if (!sub) { if (!p.has('-h', '-v')) b.effect('install', `${name} installs the project's dependencies`); return b.use; }
  if (sub.dynamic) return b.problem(`${name}: the command is computed at run time`).use;
  const s = sub.value;
  if (s === 'run' || s === 'run-script') { if (rest.length) { b.project(); scriptNameEffects(b, name, rest[0]!); } return b.use; }
  if (YARN_SCRIPTS.has(s) || s === 'test' || s === 't') { scriptNameEffects(b, name, sub); return b.project().use; }
  if (s === 'exec' || s === 'dlx' || s === 'x') return mergeInto(b, npxUse(rest, `${name} ${s}`));
  if (['install', 'i', 'add', 'remove', 'rm', 'upgrade', 'up', 'update', 'uninstall', 'link', 'unlink', 'import', 'rebuild', 'prune', 'dedupe', 'init', 'create', 'patch', 'patch-commit', 'unplug', 'setup'].includes(s)) return b.effect('install', `${name} ${s} changes installed packages`).use;
  if (['list', 'ls', 'why', 'bin', 'licenses', 'help', 'root', 'store', 'config-get'].includes(s) && !(s === 'store' && rest[0]?.value !== 'path')) return b.use;
  if (s === 'npm' && ['publish', 'login', 'logout', 'tag'].includes(rest[0]?.value ?? '')) return b.effect('publish', `${name} npm ${rest[0]!.value} publishes or changes a registry account`).use;
  if (['outdated', 'info', 'view', 'audit', 'npm', 'search'].includes(s)) return b.effect('network', `${name} ${s} queries the registry`).use;
  if (['publish', 'login', 'logout', 'owner', 'tag', 'team', 'access', 'deprecate', 'unpublish', 'version'].includes(s)) return b.effect('publish', `${name} ${s} publishes or changes a registry account`).use;
  return b.problem(`${name} ${s} is not modelled`).use;
}

const LINT = { lenient: true } as const;
/** Framework CLIs run through npx: builds and code generation are project code; dev servers never end; database commands talk to a database. */
function frameworkSpec(name: string, project: string[], servers: string[], network: string[] = [], discard: string[] = []): CommandSpec {
  return simpleSpec(name, '-h|--help -v|--version', (p, b) => {
    const verbs = p.operands.filter((o) => !o.dynamic).map((o) => o.value);
    const verb = verbs.slice(0, 2).join(' ');
    const first = verbs[0] ?? '';
    if (p.operands.some((o) => o.dynamic)) b.problem(`${name}: arguments computed at run time`);
    if (discard.includes(verb)) b.effect('discard-work', `${name} ${verb} drops data`);
    if (network.includes(first) || network.includes(verb)) b.effect('network', `${name} ${verb} talks to a database or service`);
    else if (servers.includes(first) || p.operands.length === 0 && servers.includes('')) { b.effect('server', `${name} ${first} starts a server`); b.effect('never-ends', 'a server runs until stopped'); }
    else if (!project.includes(first)) b.problem(`${name} ${first} is not modelled`);
    b.project();
  }, { lenient: true });
}

export const NODE_SPECS: CommandSpec[] = [
  frameworkSpec('vite', ['build', 'optimize'], ['', 'dev', 'serve', 'preview']),
  frameworkSpec('next', ['build', 'lint', 'info', 'export'], ['dev', 'start']),
  frameworkSpec('prisma', ['generate', 'format', 'validate', 'version', 'init'], ['studio'], ['migrate', 'db', 'introspect', 'pull', 'push'], ['migrate reset', 'db push']),
  { names: ['node', 'nodejs'], use: nodeUse },
  { names: ['npm'], use: inPrefix(npmUse, ['--prefix', '-C']) },
  { names: ['npx', 'bunx'], use: npxUse },
  { names: ['husky'], use: huskyUse },
  simpleSpec('playwright', '-c|--config=read --project=any -g|--grep=any --grep-invert=any --list --reporter=any --workers|-j=any --retries=any --timeout=any --headed --debug!interactive --ui!server --trace=any --output=write --update-snapshots|-u --shard=any -x --max-failures=any --forbid-only --pass-with-no-tests -h|--help --version', (p, b) => {
    const sub = p.operands[0]?.value;
    if (sub === 'install' || sub === 'install-deps') b.effect('install', 'playwright install downloads browsers');
    else if (sub === 'show-report' || sub === 'show-trace' || sub === 'codegen' || sub === 'open') b.effect('server', `playwright ${sub} starts a viewer`);
    else if (sub === 'test' || sub === undefined) b.project();
    else b.problem(`playwright ${sub} is not modelled`);
  }, { lenient: true }),
  { names: ['yarn', 'pnpm'], use: inPrefix(yarnLike, ['--prefix', '-C', '--cwd']) },
  simpleSpec('tsc', '-p|--project=read -b|--build --outDir=write --outFile=write --declarationDir=write --tsBuildInfoFile=write --rootDir=read --baseUrl=read -w|--watch!never-ends --init -v|--version -h|--help --all --listFiles --showConfig --noEmit --pretty --incremental --composite --declaration -d --sourceMap --strict --skipLibCheck --noImplicitAny --target=any -t=any --module=any -m=any --lib=any --jsx=any --moduleResolution=any --types=any --generateTrace=write --extendedDiagnostics --diagnostics --locale=any', 'read*', LINT),
  simpleSpec(['jest'], '-c|--config=read --rootDir=read --roots=read --watch!never-ends --watchAll!never-ends --outputFile=write --coverageDirectory=write --cacheDirectory=write -i|--runInBand -t|--testNamePattern=any --testPathPattern|--testPathPatterns=any --coverage --ci --silent --verbose --bail?any -b -u|--updateSnapshot -o|--onlyChanged --passWithNoTests --detectOpenHandles --forceExit --json --listTests --clearCache --maxWorkers|-w=any --selectProjects=any --shard=any --testTimeout=any --colors --no-cache --showConfig -h|--help -v|--version', 'read*', { ...LINT, project: true }),
  simpleSpec(['vitest'], '-c|--config=read -r|--root=read --dir=read -w|--watch!never-ends -u|--update -t|--testNamePattern=any --coverage --reporter=any --outputFile=write --run --silent --passWithNoTests --bail=any --threads --no-threads --isolate --no-isolate --environment=any --globals --ui!server --open --api!server --browser?any -h|--help -v|--version', (p, b) => {
    const [first] = p.operands;
    if (first?.value === 'watch' || first?.value === 'dev') b.effect('never-ends', 'vitest watch runs until stopped');
    for (const o of p.operands.slice(first && ['run', 'watch', 'dev', 'related', 'bench', 'list'].includes(first.value) ? 1 : 0)) b.read(o);
  }, { ...LINT, project: true }),
  simpleSpec(['mocha'], '-w|--watch!never-ends --config=read --package=read -r|--require=any --reporter|-R=any --reporter-option|-O=any -g|--grep=any -f|--fgrep=any -t|--timeout=any --recursive --exit --bail|-b --forbid-only --parallel|-p -j|--jobs=any --spec=read --extension=any --file=read -u|--ui=any -h|--help -V|--version', 'read*', { ...LINT, project: true }),
  simpleSpec(['eslint'], '--fix --fix-dry-run --fix-type=any -c|--config=read -o|--output-file=write --rulesdir=read --resolve-plugins-relative-to=read --cache --cache-location=write --cache-strategy=any -f|--format=any --ext=any --no-eslintrc --env=any --global=any --parser=any --parser-options=any --plugin=any --rule=any --ignore-path=read --no-ignore --ignore-pattern=any --max-warnings=any --quiet --debug -h|--help -v|--version --init --print-config=read --stdin --stdin-filename=any --color --no-color --report-unused-disable-directives --no-inline-config --no-error-on-unmatched-pattern --exit-on-fatal-error --flag=any', (p, b) => {
    for (const o of p.operands) b.path(o, p.has('--fix') ? 'write' : 'read');
    if (p.has('--init')) b.effect('install', 'eslint --init installs packages');
  }, LINT),
  simpleSpec(['prettier'], '-w|--write -c|--check -l|--list-different --config=read --no-config --ignore-path=read --plugin=any --cache --cache-location=write --cache-strategy=any --log-level|--loglevel=any -u|--ignore-unknown --no-error-on-unmatched-pattern --stdin-filepath=any --parser=any --print-width=any --tab-width=any --use-tabs --semi --no-semi --single-quote --jsx-single-quote --quote-props=any --trailing-comma=any --bracket-spacing --no-bracket-spacing --arrow-parens=any --prose-wrap=any --end-of-line=any -h|--help -v|--version', (p, b) => {
    for (const o of p.operands) b.path(o, p.has('-w') ? 'write' : 'read');
  }, LINT),
  { names: ['tsx', 'ts-node', 'ts-node-esm'], use: (args, name) => {
    if (args[0]?.value === 'watch') { const u = nodeUse(args.slice(1), name); u.effects.push({ effect: 'never-ends', why: `${name} watch runs until stopped` }); return u; }
    return nodeUse(args, name);
  } },
  simpleSpec('rimraf', '-v --verbose --preserve-root --no-preserve-root -g --glob -h --help', 'delete*', { effects: [['delete', 'rimraf deletes files']] }),
  { names: ['bun'], use: (args, name) => {
    const sub = args[0];
    if (sub && !sub.dynamic && ['test', 'run'].includes(sub.value)) { const b = new UseBuilder(name).project(); return b.use; }
    if (sub && !sub.dynamic && ['x'].includes(sub.value)) return npxUse(args.slice(1), name);
    if (sub && !sub.dynamic && ['install', 'i', 'add', 'remove', 'rm', 'update', 'link', 'create', 'init', 'upgrade', 'pm'].includes(sub.value)) return new UseBuilder(name).effect('install', `${name} ${sub.value} changes installed packages`).use;
    if (sub && !sub.dynamic && ['publish'].includes(sub.value)) return new UseBuilder(name).effect('publish', `${name} publish publishes a package`).use;
    if (sub && !sub.dynamic && ['--version', '-v', '--help', '-h'].includes(sub.value)) return new UseBuilder(name).use;
    return nodeUse(args, name);
  } },
];
