/**
 * Specs of the Go and Rust toolchains. go: build/test/vet/run of local packages are project code;
 * `-o` writes, `-exec`/`-toolexec`/`-vettool` and linker overrides run hidden programs, `pkg@version`
 * and get/install/mod download/tidy reach the network, `go env -w` changes configuration. cargo:
 * build/test/check/clippy/run/bench/doc are project code; install/add/update/fetch reach the network;
 * publish/yank/owner publish; `--config` and `-Z` change how it builds (not modelled); rustc's
 * `-C linker=` runs a hidden program.
 */
import { grammar, parseArgs, type ParsedArgs } from './argv-parser';
import { simpleSpec, UseBuilder, type CommandSpec, type CommandUse } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';

const GO_BUILD = '-a -n -p=any -race -msan -asan -cover -covermode=any -coverpkg=any -v -work -x -asmflags=any -buildmode=any -buildvcs?any -compiler=any -gccgoflags=any -gcflags=any -installsuffix=any -ldflags=any -linkshared -mod=any -modcacherw -modfile=read -overlay=read -pgo=read -pkgdir=write -tags=any -trimpath -toolexec=exec -C=dir -o=write -json';
const GO_TEST = '-args -c -exec=exec -i -bench=any -benchmem -benchtime=any -blockprofile=write -blockprofilerate=any -count=any -coverprofile=write -cpu=any -cpuprofile=write -failfast -fullpath -fuzz=any -fuzzminimizetime=any -fuzztime=any -list=any -memprofile=write -memprofilerate=any -mutexprofile=write -mutexprofilefraction=any -outputdir=write -parallel=any -run=any -short -shuffle=any -skip=any -timeout=any -trace=write -vet=any -test.v?any -test.run=any -test.count=any -test.timeout=any';
const g = (t: string) => grammar(t, { singleDashLong: true, abbrev: false });
const GO_VET_KNOWN = /^-(a|n|p|race|msan|asan|cover|covermode|coverpkg|v|work|x|asmflags|buildmode|buildvcs|compiler|gccgoflags|gcflags|installsuffix|ldflags|linkshared|mod|modcacherw|modfile|overlay|pgo|pkgdir|tags|trimpath|toolexec|C|o|json|vettool)(=|$)/;

function goPackages(p: ParsedArgs, b: UseBuilder, label: string): void {
  for (const o of p.operands) {
    if (!o.dynamic && /@/.test(o.value)) b.effect('install', `${label} ${o.value} downloads a module version`);
    else if (!o.dynamic && /^[a-z0-9-]+(\.[a-z0-9-]+)+\//i.test(o.value) && !o.value.startsWith('.')) b.effect('network', `${label} ${o.value} may fetch a remote module`);
    // a local package is code the command builds (and may run): from outside the workspace it asks
    else if (!o.dynamic && (o.value.startsWith('./') || o.value.startsWith('../') || o.value === '.' || o.value.startsWith('/'))) b.path({ ...o, value: o.value.replace(/\/\.\.\.$/, '') || '.' }, 'exec', `${label} builds the package`);
  }
  for (const f of p.values('-ldflags', '-gcflags', '-asmflags', '-gccgoflags')) {
    if (f.dynamic || /-(extld|extldflags|linkmode)\b|-toolexec/.test(f.value)) b.effect('exec-hidden', `${label}: the compiler/linker flags name another program`);
  }
}

function goUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const [sub, ...rest] = args;
  if (!sub || sub.dynamic) return b.problem('go: the subcommand is missing or computed').use;
  const s = sub.value;
  const label = `go ${s}`;
  const parse = (opts: string) => { const p = parseArgs(g(opts), s === 'test' ? argsBeforeTestArgs(rest) : rest); b.options(p); return p; };
  switch (s) {
    case 'build': { const p = parse(GO_BUILD); goPackages(p, b, label); return b.use; }
    case 'vet': {
      // analyzer flags (-composites=false, -printf.funcs=…) are data; -vettool names a program
      const own = rest.filter((a) => a.dynamic || !/^-[a-z][a-z0-9.]*(=(true|false|[A-Za-z0-9_.,:-]*))?$/.test(a.value) || GO_VET_KNOWN.test(a.value));
      const p = parseArgs(g(`${GO_BUILD} -vettool=exec`), own);
      b.options(p);
      goPackages(p, b, label);
      return b.use;
    }
    case 'test': { const p = parse(`${GO_BUILD} ${GO_TEST}`); goPackages(p, b, label); return b.project().use; }
    case 'run': {
      const p = parseArgs(grammar(`${GO_BUILD} -exec=exec`, { singleDashLong: true, abbrev: false, stopAtOperand: true }), rest);
      b.options(p);
      const target = p.operands[0];
      if (target && !target.dynamic && target.value.includes('@')) return b.effect('install', `${label} ${target.value} downloads and runs a module`).use;
      if (target && !target.dynamic && /^[a-z0-9-]+(\.[a-z0-9-]+)+\//i.test(target.value)) return b.effect('network', `${label} ${target.value} may fetch a remote module`).use;
      return b.project().use;
    }
    case 'fmt': { const p = parse('-n -x -mod=any'); for (const o of p.operands) if (!o.value.includes('...')) b.write(o); return b.use; }
    case 'generate': parse(`${GO_BUILD} -run=any -skip=any`); return b.project().use;
    case 'mod': {
      const verb = rest[0]?.value;
      if (verb === 'graph' || verb === 'why' || verb === 'verify' || (verb === 'edit' && rest.slice(1).every((a) => /^-(json|print|fmt)$/.test(a.value)))) return b.use;
      if (verb === 'init' || verb === 'edit') return b.write(literalWord('go.mod')).use;
      return b.effect('network', `go mod ${verb ?? ''} downloads modules`).use;
    }
    case 'get': case 'install': return b.effect('install', `${label} downloads and installs modules`).use;
    case 'env': {
      const p = parse('-json -u=any -w=any -changed');
      if (p.has('-w')) {
        // `go env -w K=V …` stores variables every later go command uses: judged by the policy's env rules, like a prefix
        for (const w of [...p.values('-w'), ...p.operands]) {
          const m = /^([A-Z][A-Z0-9_]*)=(.*)$/s.exec(w.value);
          if (w.dynamic || !m) { b.problem(`go env -w ${w.value || '(computed)'}: not a NAME=VALUE the gate can read`); continue; }
          // only settings that cannot name a program, a proxy or a toolchain; the env rules then judge their values
          if (!/^(GOPRIVATE|GONOSUMDB|GONOPROXY|GOFLAGS|GO111MODULE|CGO_ENABLED|GOOS|GOARCH|GOAMD64|GOARM|GOARM64|GOEXPERIMENT|GOTELEMETRY)$/.test(m[1]!) || m[1] === 'GOFLAGS' && /-(toolexec|exec|overlay|modfile|pgo|ldflags|gcflags|asmflags|gccgoflags|pkgdir|o)\b/.test(m[2]!)) {
            b.effect('config-code', `go env -w ${m[1]} changes the toolchain's configuration for every later go command (programs, proxies, flags)`);
            continue;
          }
          b.env(m[1]!, literalWord(m[2]!));
        }
      }
      return b.use;
    }
    case 'list': { const p = parse(`${GO_BUILD} -f=any -m -e -deps -export -find -test -u -versions -retracted -reuse=read -compiled`); if (p.has('-u', '-versions', '-retracted')) b.effect('network', 'go list -u/-versions queries module proxies'); return b.use; }
    case 'version': case 'help': case 'doc': return b.use;
    case 'clean': { parse('-i -n -r -x -cache -testcache -modcache -fuzzcache'); return b.use; }
    case 'work': { const verb = rest[0]?.value; if (verb === 'sync') b.effect('network', 'go work sync downloads modules'); return b.use; }
    case 'tool': {
      const [tool, ...targs] = rest;
      if (tool?.value === 'cover') {
        const p = parseArgs(g('-func=read -html=read -o=write -mode=any -var=any'), targs);
        b.options(p);
        if (p.has('-html') && !p.has('-o')) b.effect('interactive', 'go tool cover -html opens a browser');
        return b.use;
      }
      if (tool && ['nm', 'objdump', 'addr2line', 'buildid', 'dist'].includes(tool.value) && (tool.value !== 'dist' || targs[0]?.value === 'list')) { for (const t of targs) if (!t.value.startsWith('-')) b.read(t); return b.use; }
      return b.problem(`go tool ${tool?.value ?? ''} is not modelled`).use;
    }
    default: return b.problem(`${label} is not modelled`).use;
  }
}

/** `go test PKGS -args X…`: what follows -args belongs to the test binary. */
function argsBeforeTestArgs(args: ShellWord[]): ShellWord[] {
  const i = args.findIndex((a) => !a.dynamic && a.value === '-args');
  return i >= 0 ? args.slice(0, i) : args;
}

const CARGO_GLOBAL = '-v|--verbose -q|--quiet --color=any --locked --offline --frozen --config=any -Z=any -C=dir -h|--help -V|--version --list --explain=any';
const CARGO_BUILD = '--manifest-path=read --target-dir=write -j|--jobs=any -r|--release --profile=any -F|--features=any --all-features --no-default-features --target=any -p|--package=any --workspace|--all --exclude=any --lib --bin=any --bins --example=any --examples --test=any --tests --bench=any --benches --all-targets --message-format=any --timings?any --keep-going --ignore-rust-version --unit-graph --future-incompat-report --artifact-dir=write --out-dir=write';
const CARGO_PROJECT = new Set(['build', 'b', 'check', 'c', 'test', 't', 'bench', 'run', 'r', 'clippy', 'doc', 'd', 'rustc', 'rustdoc', 'fix', 'miri', 'nextest', 'llvm-cov', 'tarpaulin', 'expand']);
const CARGO_READ = new Set(['tree', 'metadata', 'verify-project', 'locate-project', 'pkgid', 'version', 'help', 'read-manifest', 'outdated-local']);
const CARGO_NET = new Set(['search', 'fetch', 'update', 'generate-lockfile', 'vendor', 'outdated', 'audit', 'report', 'info']);
const CARGO_INSTALL = new Set(['install', 'uninstall', 'add', 'remove', 'rm', 'upgrade', 'binstall']);
const CARGO_PUBLISH = new Set(['publish', 'yank', 'owner', 'login', 'logout']);

/** `--config KEY=VALUE` can set wrappers, runners, linkers, aliases and registries: those run programs. */
function cargoConfig(p: ParsedArgs, b: UseBuilder): void {
  for (const c of p.values('--config')) {
    if (c.dynamic || /runner|wrapper|linker|rustc|alias\.|credential|registry|build\.|target\.|env\./.test(c.value)) b.effect('exec-hidden', `cargo --config ${c.value || '(computed)'} names a program, an alias or a registry cargo uses`);
    else b.problem('cargo --config changes build settings that are not modelled');
  }
}

function cargoUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const rest0 = args[0] && !args[0].dynamic && args[0].value.startsWith('+') ? args.slice(1) : args; // +toolchain
  const gp = parseArgs(grammar(CARGO_GLOBAL, { stopAtOperand: true, abbrev: false }), rest0);
  b.options(gp);
  cargoConfig(gp, b);
  if (gp.has('-Z')) b.problem('cargo -Z enables unstable features that are not modelled');
  const [sub, ...rest] = gp.operands;
  if (!sub) return b.use;
  if (sub.dynamic) return b.problem('cargo: the subcommand is computed at run time').use;
  const s = sub.value;
  const label = `cargo ${s}`;
  const dd = rest.findIndex((a) => !a.dynamic && a.value === '--');
  const own = dd >= 0 ? rest.slice(0, dd) : rest;
  if (CARGO_PROJECT.has(s)) {
    const opts = `${CARGO_GLOBAL} ${CARGO_BUILD} --no-run --no-fail-fast --doc --open --document-private-items --no-deps --fix --allow-dirty --allow-staged --allow-no-vcs --broken-code --edition --edition-idioms`;
    const p = parseArgs(grammar(opts, { abbrev: false, lenient: s === 'clippy' || s === 'nextest' || s === 'llvm-cov' }), own);
    b.options(p);
    cargoConfig(p, b);
    if (p.has('--open')) b.effect('interactive', `${label} --open starts a browser`);
    if (p.has('--fix') || s === 'fix') b.write(literalWord('.'));
    for (const o of p.operands) if (!['test', 't', 'bench', 'nextest', 'expand', 'run', 'r'].includes(s)) b.problem(`${label}: operand ${o.value || '(computed)'} is not modelled`);
    // the manifest's crate (its build.rs, its tests) is the code that runs
    for (const m of p.values('--manifest-path')) b.path(m, 'exec', `${label} --manifest-path builds the crate of`);
    return b.project().use;
  }
  if (s === 'fmt') {
    const p = parseArgs(grammar(`${CARGO_GLOBAL} --check --all -p|--package=any --manifest-path=read --message-format=any`, { abbrev: false }), own);
    b.options(p);
    if (!p.has('--check')) b.write(literalWord('.'));
    return b.use;
  }
  if (s === 'clean') { const p = parseArgs(grammar(`${CARGO_GLOBAL} ${CARGO_BUILD} --doc -n|--dry-run`, { abbrev: false }), own); b.options(p); return b.use; }
  if (s === 'new' || s === 'init') { for (const o of own.filter((a) => !a.value.startsWith('-'))) b.write(o); return b.use; }
  if (s === 'package') return b.project().use;
  if (CARGO_READ.has(s)) return b.use;
  if (CARGO_NET.has(s)) return b.effect('network', `${label} talks to the registry`).use;
  if (CARGO_INSTALL.has(s)) return b.effect('install', `${label} downloads and installs crates`).use;
  if (CARGO_PUBLISH.has(s)) return b.effect('publish', `${label} publishes to or changes a registry`).use;
  return b.problem(`${label} is not modelled`).use;
}

const rustc = simpleSpec('rustc', '-o=write --out-dir=write -C|--codegen=any --crate-type=any --crate-name=any --edition=any -O -g --emit=any -L=any -l=any --cfg=any --check-cfg=any --extern=any --target=any -W|--warn=any -A|--allow=any -D|--deny=any -F|--forbid=any --cap-lints=any --explain=any -V|--version -v|--verbose -h|--help --test --print=any --sysroot=read -Z=any --error-format=any --json=any --color=any', 'read*', {
  abbrev: false,
  check: (p, b) => {
    for (const c of p.values('-C')) if (c.dynamic || /^(linker|link-arg|link-args|llvm-args|pre-link-arg|pre-link-args|linker-flavor|link-self-contained|passes|remark|profile-generate|profile-use)\b/.test(c.value)) b.effect('exec-hidden', `rustc -C ${c.value || '(computed)'} runs or configures another program`);
    if (p.has('-Z')) b.problem('rustc -Z unstable options are not modelled');
    for (const e of p.values('--emit')) { const eq = e.value.indexOf('='); if (eq >= 0) b.write({ ...e, value: e.value.slice(eq + 1), pattern: e.value.slice(eq + 1), prefix: '' }); }
  },
});

export const GO_RUST_SPECS: CommandSpec[] = [
  { names: ['go'], use: goUse },
  simpleSpec('golangci-lint', '--fix -c|--config=read --no-config --timeout=any -v|--verbose -j|--concurrency=any --out-format=any --output.text.path=write --new --new-from-rev=any --fast --enable-all --disable-all -E|--enable=any -D|--disable=any --tests --build-tags=any --skip-dirs=any --print-issued-lines --print-linter-name --max-issues-per-linter=any --max-same-issues=any -h|--help --version', (p, b) => {
    const [sub, ...rest] = p.operands;
    if (sub && !['run', 'linters', 'version', 'help', 'config', 'fmt', 'cache'].includes(sub.value)) b.problem(`golangci-lint ${sub.value} is not modelled`);
    if (sub?.value === 'cache') b.effect('delete', 'golangci-lint cache clean removes its cache');
    for (const o of rest) if (!o.value.includes('...')) b.path(o, p.has('--fix') || sub?.value === 'fmt' ? 'write' : 'read');
  }, { lenient: true }),
  simpleSpec(['staticcheck', 'govulncheck', 'errcheck', 'ineffassign'], '-checks=any -f=any -tags=any -tests?any -go=any -show-ignored -fail=any -debug.version -version -h -help -json -mode=any -scan=any -test', 'any*', { singleDashLong: true, abbrev: false, check: (_p, b) => { if (b.use.label === 'govulncheck') b.effect('network', 'govulncheck queries the vulnerability database'); } }),
  simpleSpec('gofmt', '-l -d -s -e -w -r=any -cpuprofile=write', (p, b) => { for (const o of p.operands) b.path(o, p.has('-w') ? 'write' : 'read'); }, { singleDashLong: true, abbrev: false }),
  { names: ['cargo'], use: cargoUse },
  rustc,
  simpleSpec('rustfmt', '--check --edition=any --config-path=read --config=any --emit=any --backup -l|--files-with-diff -q|--quiet -v|--verbose -h|--help -V|--version --print-config=any', (p, b) => { for (const o of p.operands) b.path(o, p.has('--check') ? 'read' : 'write'); }, { abbrev: false }),
  simpleSpec('rustup', '-h|--help -V|--version -v|--verbose -q|--quiet', (p, b) => {
    const [sub, verb] = p.operands.map((o) => o.value);
    if (sub === 'show' || sub === 'which' || sub === 'doc' || sub === 'help') return;
    if ((sub === 'component' || sub === 'target' || sub === 'toolchain') && verb === 'list') return;
    if (sub === 'run') { b.problem('rustup run is not modelled'); return; }
    b.effect('install', `rustup ${sub ?? ''} downloads or changes toolchains`);
  }, { abbrev: false }),
];
