/**
 * Specs of the Python toolchain: the interpreter (a script is project code, `-c` inline code, no
 * script reads standard input, `-m MOD` hands over to MOD's own spec), pip (reads vs installs), pytest
 * (`--basetemp` deletes its directory, `--junitxml`/`--log-file` write, `--pastebin` uploads),
 * linters and type checkers, venv, and the runners that run another command (poetry/uv/pipenv run).
 */
import { grammar, parseArgs, type ParsedArgs } from './argv-parser';
import { inlineCodeEffect, simpleSpec, subcommandSpec, UseBuilder, type CommandSpec, type CommandUse } from './command-spec';
import { literalWord, type ShellWord } from '../shell-words';

const PY = grammar('-b -bb -B -d -E -h -i -I -O -OO -P -q -R -s -S -u -v -vv -V -x -X=any -W=any -c=any -m=any --version --help --help-env --help-xoptions --help-all --check-hash-based-pycs=any', { stopAtOperand: true, abbrev: false });

/** `python -m X …` for modules whose spec is that of a command. */
const MODULE_AS_COMMAND: Record<string, string> = {
  pytest: 'pytest', pip: 'pip', mypy: 'mypy', black: 'black', ruff: 'ruff', flake8: 'flake8', pylint: 'pylint', isort: 'isort',
  coverage: 'coverage', pyflakes: 'pyflakes', pycodestyle: 'pycodestyle', bandit: 'bandit', tox: 'tox', nox: 'nox', venv: 'venv', virtualenv: 'venv',
  unittest: 'python-unittest', doctest: 'python-doctest', py_compile: 'python-script-module', compileall: 'python-script-module', 'json.tool': 'python-json-tool',
  timeit: 'python-timeit', platform: 'python-info-module', site: 'python-info-module', sysconfig: 'python-info-module', tabnanny: 'python-script-module',
  pydoc: 'python-pydoc', pdb: 'python-pdb', cProfile: 'python-profile', profile: 'python-profile', trace: 'python-trace',
  'http.server': 'python-http-server', ensurepip: 'pip-install-module', build: 'python-build', twine: 'twine', pip_audit: 'pip-audit', pipx: 'pipx',
};

/** Modules of the standard library (and friends) that serve, fetch, open a prompt or install; anything else `-m` runs is treated as project code. */
const RISKY_MODULES: Record<string, [string, string]> = {
  'http.server': ['server', 'serves files'], SimpleHTTPServer: ['server', 'serves files'], smtpd: ['server', 'runs a mail server'], 'xmlrpc.server': ['server', 'serves RPC'],
  socketserver: ['server', 'serves connections'], webbrowser: ['interactive', 'opens a browser'], antigravity: ['interactive', 'opens a browser'], code: ['interactive', 'starts a prompt'],
  idlelib: ['interactive', 'starts IDLE'], asyncio: ['interactive', 'starts a prompt'], ftplib: ['network', 'talks to FTP'], smtplib: ['network', 'sends mail'], 'urllib.request': ['network', 'fetches URLs'],
  telnetlib: ['network', 'talks to telnet'], poplib: ['network', 'reads mail'], imaplib: ['network', 'reads mail'], nntplib: ['network', 'reads news'], 'pip._internal': ['install', 'runs pip'],
  mimetypes: ['', ''], zipapp: ['', ''],
};

/** The standard library's top-level modules (Python 3.11 `sys.stdlib_module_names`): their command lines are not the project's code. */
const STDLIB = new Set('abc aifc antigravity argparse array ast asynchat asyncio asyncore atexit audioop base64 bdb binascii bisect builtins bz2 cProfile calendar cgi cgitb chunk cmath cmd code codecs codeop collections colorsys compileall concurrent configparser contextlib contextvars copy copyreg crypt csv ctypes curses dataclasses datetime dbm decimal difflib dis distutils doctest email encodings ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch fractions ftplib functools gc genericpath getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html http idlelib imaplib imghdr imp importlib inspect io ipaddress itertools json keyword lib2to3 linecache locale logging lzma mailbox mailcap marshal math mimetypes mmap modulefinder msilib msvcrt multiprocessing netrc nis nntplib nt ntpath nturl2path numbers opcode operator optparse os ossaudiodev pathlib pdb pickle pickletools pipes pkgutil platform plistlib poplib posix posixpath pprint profile pstats pty pwd py_compile pyclbr pydoc pydoc_data pyexpat queue quopri random re readline reprlib resource rlcompleter runpy sched secrets select selectors shelve shlex shutil signal site smtpd smtplib sndhdr socket socketserver spwd sqlite3 sre_compile sre_constants sre_parse ssl stat statistics string stringprep struct subprocess sunau symtable sys sysconfig syslog tabnanny tarfile telnetlib tempfile termios textwrap this threading time timeit tkinter token tokenize tomllib trace traceback tracemalloc tty turtle turtledemo types typing unicodedata unittest urllib uu uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xdrlib xml xmlrpc zipapp zipfile zipimport zlib zoneinfo'.split(' '));

/** Splits python's own options from what follows `-c CODE`, `-m MOD` or the script (the program's arguments). */
function splitPythonArgs(args: ShellWord[]): { own: ShellWord[]; rest: ShellWord[] } {
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a.dynamic || !a.value.startsWith('-') || a.value === '-' || a.value === '--') return { own: args.slice(0, a.value === '--' ? i + 1 : i + 1), rest: args.slice(i + 1) };
    const cluster = a.value.startsWith('--') ? '' : a.value.slice(1);
    const cm = cluster.search(/[cm]/);
    if (cm >= 0) {
      const attached = cluster.length > cm + 1;
      const end = attached ? i + 1 : i + 2;
      return { own: args.slice(0, end), rest: args.slice(end) };
    }
    if (['-X', '-W', '--check-hash-based-pycs'].includes(a.value)) i++;
  }
  return { own: args, rest: [] };
}

export function pythonUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const split = splitPythonArgs(args);
  const p = parseArgs(PY, split.own);
  p.operands.push(...split.rest.filter(() => !p.has('-c', '-m')));
  const progArgs = p.has('-c', '-m') ? split.rest : [];
  b.options(p);
  if (p.has('-h', '--help', '-V', '--version', '--help-env', '--help-xoptions', '--help-all') && p.operands.length === 0 && !p.has('-c', '-m')) return b.use;
  if (p.has('-i')) b.effect('interactive', `${name} -i starts an interactive prompt`);
  const code = p.values('-c')[0];
  if (code) return b.effect(inlineCodeEffect(code), `${name} -c runs code given on the command line`).use;
  const mod = p.values('-m')[0];
  if (mod) {
    if (mod.dynamic) return b.problem(`${name} -m: the module is computed at run time`).use;
    const as = MODULE_AS_COMMAND[mod.value];
    if (as) { b.inner([literalWord(as), ...progArgs]); return b.use; }
    const risky = RISKY_MODULES[mod.value] ?? RISKY_MODULES[mod.value.split('.')[0]!];
    if (risky && risky[0]) return b.effect(risky[0] as 'server', `${name} -m ${mod.value} ${risky[1]}`).use;
    if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(mod.value)) return b.problem(`${name} -m ${mod.value}: not a module name`).use;
    if (STDLIB.has(mod.value.split('.')[0]!)) return b.problem(`${name} -m ${mod.value}: the standard library module's command line is not modelled`).use;
    return b.project().use; // a module of the project (or an installed package) runs like a script
  }
  const script = p.operands[0];
  if (!script || (!script.dynamic && script.value === '-')) return b.effect('exec-stdin', `${name} reads a program from standard input`).use;
  b.path(script, 'exec', `${name} runs a script`).project();
  if (!script.dynamic && /(^|\/)manage\.py$/.test(script.value)) djangoEffects(b, p.operands.slice(1).find((a) => a.dynamic || !a.value.startsWith('-')), 'manage.py');
  if (!script.dynamic && /(^|\/)setup\.py$/.test(script.value)) {
    for (const a of p.operands.slice(1)) {
      if (a.dynamic) continue;
      if (/^(upload|register|upload_docs)$/.test(a.value)) b.effect('publish', `setup.py ${a.value} publishes the package`);
      if (/^(install|develop|easy_install)$/.test(a.value)) b.effect('install', `setup.py ${a.value} installs the package`);
    }
  }
  return b.use;
}

const python: CommandSpec = {
  names: ['python', 'python3', 'python2', 'pypy', 'pypy3', ...['8', '9', '10', '11', '12', '13', '14'].map((v) => `python3.${v}`)],
  use: pythonUse,
};

/**
 * The modules that run a program they are given (cProfile, profile, trace, doctest, pdb, unittest):
 * that program is code run — a path to it is `exec` (from /tmp, from home: code the gate has not
 * seen, as `python3 /tmp/x.py` is), a module name is the project's code. What follows the script
 * is its own arguments.
 */
function runsProgram(spec: string): (p: ParsedArgs, b: UseBuilder) => void {
  return (p, b) => {
    const [target, ...rest] = p.operands;
    if (!p.has('-m', '--module') && target) b.path(target, 'exec', `python -m ${spec} runs`);
    for (const a of rest) if (!a.dynamic && /^[/~]|^\.\.\//.test(a.value)) b.path(a, 'read', `the program run by python -m ${spec} is given`);
  };
}

const moduleSpecs: CommandSpec[] = [
  // `unittest discover -s DIR -t DIR` imports the tests it finds there; `unittest path/test_x.py` runs the file
  simpleSpec('python-unittest', '-v|--verbose -q|--quiet --locals --durations=any -f|--failfast -c|--catch -b|--buffer -k=any -s|--start-directory=any -p|--pattern=any -t|--top-level-directory=any -h|--help', (p, b) => {
    for (const d of p.values('-s', '-t')) b.path(d, 'exec', 'python -m unittest discover imports the tests under');
    const ops = p.operands[0]?.value === 'discover' ? p.operands.slice(1) : p.operands;
    ops.forEach((o, i) => {
      const discover = p.operands[0]?.value === 'discover';
      if (discover ? i === 0 || i === 2 : o.dynamic || /[/\\]|\.py$/.test(o.value)) b.path(o, 'exec', 'python -m unittest runs the tests in');
    });
  }, { project: true }),
  simpleSpec('python-script-module', '-q -v -f -l -r=any -d=any -x=any -j=any -o=write -b -i=any -s=any -p=any -n=any -c -t -m -h --help', 'read*', { project: true }),
  simpleSpec('python-profile', '-o|--outfile=write -s|--sort=any -m|--module -h|--help', runsProgram('cProfile'), { project: true, stopAtOperand: true }),
  simpleSpec('python-trace', '-c|--count -t|--trace -l|--listfuncs -r|--report -T|--trackcalls -s|--summary -m|--missing -g|--timing -R|--no-report -f|--file=write -C|--coverdir=write --ignore-module=any --ignore-dir=any --module -h|--help --version', runsProgram('trace'), { project: true, stopAtOperand: true }),
  // doctest imports every file it is given and runs its examples
  simpleSpec('python-doctest', '-v|--verbose -o|--option=any -f|--fail-fast -h|--help', (p, b) => { for (const o of p.operands) b.path(o, 'exec', 'python -m doctest runs the examples in'); }, { project: true }),
  simpleSpec('python-info-module', '-n=any -r=any -s -u -p -c=any -v -h --help -k=any -w', 'any*'),
  // timeit's statements and its -s setup are Python code
  simpleSpec('python-timeit', '-n|--number=any -r|--repeat=any -s|--setup=any -p|--process -t|--time -c|--clock -u|--unit=any -v|--verbose -h|--help', 'any*', { effects: [['exec-inline', 'python -m timeit runs the statements given on the command line']] }),
  // pydoc imports what it documents: a path is run as a script; -p/-b serve; -w writes NAME.html
  simpleSpec('python-pydoc', '-k=any -n=any -p=any -b -w -h --help', (p, b) => {
    if (p.has('-p', '-b')) { b.effect('server', 'python -m pydoc -p/-b serves documentation'); b.effect('never-ends', 'a server runs until stopped'); }
    for (const o of p.operands) {
      if (o.dynamic || /[/\\]|\.py$/.test(o.value)) b.path(o, 'exec', 'python -m pydoc imports the file');
      else if (!/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(o.value)) b.problem(`python -m pydoc ${o.value}: not a module name`);
      if (p.has('-w')) b.write(literalWord(`${o.value.split('/').pop()!.replace(/\.py$/, '')}.html`));
    }
    if (p.operands.length) b.project();
  }),
  simpleSpec('python-json-tool', '--sort-keys --no-ensure-ascii --json-lines --indent=any --tab --no-indent --compact -h --help', ['read', 'write']),
  simpleSpec('python-pdb', '-c=any -m=any -h --help', (p, b) => { if (!p.has('-m') && p.operands[0]) b.path(p.operands[0], 'exec', 'python -m pdb runs'); }, { project: true, stopAtOperand: true, effects: [['interactive', 'pdb waits for debugger commands']] }),
  simpleSpec('python-http-server', '-b|--bind=any -d|--directory=dir -p|--protocol=any --cgi -h|--help', 'any*', { effects: [['server', 'http.server listens for connections'], ['never-ends', 'a server runs until stopped']] }),
  simpleSpec('pip-install-module', '--upgrade --default-pip --user --root=write --altinstall -v -h --help', 'none', { effects: [['install', 'installs pip']] }),
  simpleSpec('python-build', '-s|--sdist -w|--wheel -o|--outdir=write -n|--no-isolation -x|--skip-dependency-check -C|--config-setting=any -h|--help', 'read*', { project: true, effects: [['network', 'python -m build fetches build dependencies']] }),
  simpleSpec('venv', '--system-site-packages --symlinks --copies --clear --upgrade --without-pip --prompt=any --upgrade-deps --without-scm-ignore-files -h|--help', 'write*'),
  simpleSpec('twine', '-h --help --version -r|--repository=any --repository-url=any', 'any*', { effects: [['publish', 'twine uploads packages']] }),
  simpleSpec('pip-audit', '-h --help -r|--requirement=read --desc?any -f|--format=any -s|--vulnerability-service=any --fix!install --dry-run -o|--output=write', 'read*', { effects: [['network', 'pip-audit queries a vulnerability database']] }),
  simpleSpec('pipx', '-h --help --version', 'any*', { effects: [['install', 'pipx installs and runs packages']] }),
];

// ---- pip -------------------------------------------------------------------------------------

const PIP_GLOBAL = '-h|--help -V|--version -v|--verbose -q|--quiet --isolated --require-virtualenv --python=exec --log=write --no-input --proxy=any --retries=any --timeout=any --exists-action=any --trusted-host=any --cert=read --client-cert=read --cache-dir=write --no-cache-dir --disable-pip-version-check --no-color --no-python-version-warning --use-feature=any --use-deprecated=any --root-user-action=any --break-system-packages';
const pipRead = (opts = '') => simpleSpec('pip', `${PIP_GLOBAL} ${opts}`, 'any*');
const pipNet = (effect: 'install' | 'network', why: string, opts = '') => simpleSpec('pip', `${PIP_GLOBAL} -r|--requirement=read -c|--constraint=read -e|--editable=read -i|--index-url=any --extra-index-url=any --no-index -f|--find-links=any -U|--upgrade --upgrade-strategy=any --force-reinstall -I|--ignore-installed --no-deps --pre --user --target=write -t=write --prefix=write --root=write --no-build-isolation --no-binary=any --only-binary=any --prefer-binary --require-hashes --dry-run --report=write --no-warn-script-location --no-compile --compile -d|--dest=write --progress-bar=any --config-settings=any -y|--yes --ignore-requires-python --check-build-dependencies --no-clean -w|--wheel-dir=write ${opts}`, 'any*', { effects: [[effect, why]] });

const pip = subcommandSpec(['pip', 'pip3', ...['8', '9', '10', '11', '12', '13'].map((v) => `pip3.${v}`)], PIP_GLOBAL, {
  list: pipRead('-o|--outdated!network -u|--uptodate!network -e|--editable -l|--local --user --path=any --pre --format=any --not-required --exclude-editable --include-editable --exclude=any'),
  freeze: pipRead('-r|--requirement=read -l|--local --user --path=any --all --exclude-editable --exclude=any'),
  show: pipRead('-f|--files'),
  check: pipRead(''),
  help: pipRead(''),
  debug: pipRead('--platform=any --python-version=any --implementation=any --abi=any'),
  inspect: pipRead('--local --user --path=any'),
  hash: simpleSpec('pip', `${PIP_GLOBAL} -a|--algorithm=any`, 'read*'),
  cache: simpleSpec('pip', PIP_GLOBAL, (p, b) => { const sub = p.operands[0]?.value; if (sub !== 'dir' && sub !== 'info' && sub !== 'list') b.problem(`pip cache ${sub ?? ''} is not modelled`); }),
  config: simpleSpec('pip', `${PIP_GLOBAL} --editor=exec --global --user --site`, (p, b) => { const sub = p.operands[0]?.value; if (!['list', 'get', 'debug'].includes(sub ?? '')) b.effect('config-code', `pip config ${sub ?? ''} changes where pip installs from`); }),
  install: pipNet('install', 'pip install downloads packages and runs their build scripts'),
  download: pipNet('network', 'pip download fetches packages'),
  wheel: pipNet('install', 'pip wheel builds packages (and runs their build scripts)'),
  uninstall: simpleSpec('pip', `${PIP_GLOBAL} -r|--requirement=read -y|--yes`, 'any*', { effects: [['install', 'pip uninstall removes installed packages']] }),
  index: simpleSpec('pip', `${PIP_GLOBAL} -i|--index-url=any --pre`, 'any*', { effects: [['network', 'pip index queries a package index']] }),
  search: simpleSpec('pip', `${PIP_GLOBAL} -i|--index=any`, 'any*', { effects: [['network', 'pip search queries a package index']] }),
}, { bare: (b) => b.problem('pip without a subcommand') });

// ---- pytest ----------------------------------------------------------------------------------

const PYTEST_OPTS = [
  '-q|--quiet -v|--verbose -s -x|--exitfirst -l|--showlocals --lf|--last-failed --ff|--failed-first --nf|--new-first --sw|--stepwise --sw-skip|--stepwise-skip',
  '--co|--collect-only|--collectonly --strict-markers --strict-config --strict --runxfail --cache-show?any --cache-clear --noconftest --doctest-modules --doctest-glob=any',
  '--doctest-continue-on-failure --doctest-report=any --no-header --no-summary --durations=any --durations-min=any --disable-warnings|--disable-pytest-warnings -W|--pythonwarnings=any',
  '--maxfail=any -k=any -m=any -r=any --deselect=any --ignore=read --ignore-glob=any --continue-on-collection-errors --rootdir=read -c|--config-file=read --confcutdir=read',
  '--import-mode=any --trace --setup-only --setup-show --setup-plan --fixtures|--funcargs --fixtures-per-test --markers -V|--version -h|--help --color=any --code-highlight=any',
  '--tb=any --full-trace --capture=any --show-capture=any --log-level=any --log-cli-level=any --log-format=any --log-date-format=any --log-cli-format=any --log-cli-date-format=any',
  '--log-file=write --log-file-level=any --log-file-format=any --log-file-date-format=any --log-auto-indent=any --log-disable=any --junitxml|--junit-xml=write --junit-prefix=any',
  '--basetemp=clear --assert=any --debug?write -o|--override-ini=any -p=any --pastebin=any!upload --pdb!interactive --pdbcls=exec -n|--numprocesses=any --maxprocesses=any --dist=any',
  '--cov?any --cov-report=any --cov-fail-under=any --no-cov --no-cov-on-fail --cov-append --cov-branch --cov-config=read --cov-context=any --reruns=any --reruns-delay=any --timeout=any',
  '--benchmark-skip --benchmark-only --benchmark-disable --asyncio-mode=any --randomly-seed=any -p=any --tx=exec --rsyncdir=any --looponfail|-f!never-ends --lfnf|--last-failed-no-failures=any',
  '--ds=any --reuse-db --create-db --nomigrations --hypothesis-show-statistics --hypothesis-seed=any --hypothesis-profile=any --doctest-ignore-import-errors --keep-duplicates --verbosity=any',
].join(' ').replace(' -p=any --tx', ' --tx');
const SAFE_INI = new Set(['console_output_style', 'log_cli', 'log_cli_level', 'addopts', 'python_files', 'python_classes', 'python_functions', 'testpaths', 'markers', 'filterwarnings', 'xfail_strict', 'asyncio_mode', 'junit_family', 'junit_logging', 'cache_dir', 'empty_parameter_set_mark', 'faulthandler_timeout', 'log_level', 'minversion', 'norecursedirs', 'pythonpath', 'required_plugins', 'usefixtures', 'verbosity_assertions']);

const pytest = simpleSpec(['pytest', 'py.test'], PYTEST_OPTS, (p, b) => {
  for (const o of p.operands) b.path(o.dynamic ? o : literalWord(o.value.split('::')[0]!), 'exec', 'pytest runs the tests in');
  // -p NAME imports an installed plugin module (or one of the project's) by name, like any test run; a path is not a module name
  for (const v of p.values('-p')) if (v.dynamic || !/^(no:)?[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$/.test(v.value)) b.problem(`pytest -p ${v.value || '(computed)'} loads a plugin the gate cannot name`);
  for (const v of p.values('-o')) {
    const key = v.value.split('=')[0]!;
    const val = v.value.slice(key.length + 1);
    // cache_dir is a directory pytest writes, and --cache-clear empties it first.
    if (!v.dynamic && key === 'cache_dir' && val) { b.path(literalWord(val), p.has('--cache-clear') ? 'clear' : 'write', 'pytest -o cache_dir'); continue; }
    if (!v.dynamic && key === 'pythonpath' && val) { for (const d of val.split(/\s+/).filter(Boolean)) b.read(literalWord(d)); continue; }
    if (v.dynamic || !SAFE_INI.has(key) || key === 'addopts' || key === 'cache_dir' || key === 'pythonpath') b.problem(`pytest -o ${v.value || '(computed)'} overrides a setting that is not modelled`);
  }
  for (const v of p.values('--cov-report')) if (v.value.includes(':')) b.path(literalWord(v.value.slice(v.value.indexOf(':') + 1)), 'write', 'pytest --cov-report');
}, { project: true, lenient: true });

const LINT = { lenient: true } as const;
const linters: CommandSpec[] = [
  simpleSpec('mypy', '-h|--help -V|--version -v|--verbose -p|--package=any -m|--module=any -c|--command=exec --config-file=read --cache-dir=write --junit-xml=write --html-report=write --txt-report=write --xml-report=write --linecount-report=write --linecoverage-report=write --cobertura-xml-report=write --lineprecision-report=write --any-exprs-report=write --install-types!install --non-interactive --python-version=any --python-executable=exec --exclude=any', 'read*', { ...LINT, project: false }),
  simpleSpec('ruff', '-h|--help -V|--version -v|--verbose -q|--quiet -s|--silent -e|--exit-zero --fix --no-fix --unsafe-fixes --diff --check --show-fixes --statistics --watch!never-ends --config=any --select=any --ignore=any --extend-select=any --line-length=any --target-version=any --output-format=any -o|--output-file=write --cache-dir=write --no-cache -n', (p, b) => {
    const [first, ...rest] = p.operands;
    const subs = new Set(['check', 'format', 'rule', 'config', 'linter', 'clean', 'version', 'help', 'analyze', 'server']);
    const files = first && !first.dynamic && subs.has(first.value) ? rest : p.operands;
    if (first?.value === 'server') b.effect('never-ends', 'ruff server runs until stopped');
    const writes = p.has('--fix') || first?.value === 'format' && !p.has('--check', '--diff');
    for (const f of files) b.path(f, writes ? 'write' : 'read');
  }, LINT),
  simpleSpec('black', '-h|--help --version -v|--verbose -q|--quiet --check --diff --color --no-color --fast --safe -l|--line-length=any -t|--target-version=any -S|--skip-string-normalization -C|--skip-magic-trailing-comma --preview --include=any --exclude=any --extend-exclude=any --force-exclude=any --config=read -c|--code=any --pyi --ipynb -W|--workers=any --required-version=any', (p, b) => {
    for (const f of p.operands) b.path(f, p.has('--check', '--diff') ? 'read' : 'write');
  }, LINT),
  simpleSpec('isort', '-h|--help -V|--version -v|--verbose -q|--quiet -c|--check-only|--check --diff --profile=any -l|--line-length=any --settings-path|--settings-file|--sp=read --skip=any --skip-glob=any --filter-files --atomic --force-single-line-imports --sl --gitignore', (p, b) => {
    for (const f of p.operands) b.path(f, p.has('-c', '--diff') ? 'read' : 'write');
  }, LINT),
  simpleSpec(['flake8', 'pyflakes', 'pycodestyle', 'pydocstyle', 'bandit', 'vulture'], '-h|--help --version -v|--verbose -q|--quiet --count --statistics --show-source --max-line-length=any --max-complexity=any --select=any --ignore=any --extend-ignore=any --exclude=any --config=read --output-file=write -r|--recursive -f|--format=any', 'read*', LINT),
  simpleSpec('pylint', '-h|--help --version -v|--verbose -j|--jobs=any --rcfile=read --output=write --output-format=any --disable=any --enable=any --errors-only -E --exit-zero --fail-under=any --load-plugins=any --ignore=any --ignore-patterns=any -r|--reports=any -s|--score=any --recursive=any --py-version=any', 'read*', LINT),
  { names: ['coverage'], use: coverageUse },
  simpleSpec(['tox', 'nox'], '-h|--help --version -e=any -s|--sessions=any -p|--parallel?any -r|--recreate -v -q --notest -c=read --conf=read --installpkg=read --develop --skip-missing-interpreters?any -x|--override=any --no-venv -R|--reuse-existing-virtualenvs -l|--listenvs|--list-sessions -a|--listenvs-all', (p, b) => {
    if (p.has('-l', '-a')) return;
    b.project().effect('install', 'tox and nox install each environment\'s dependencies');
  }, { lenient: true }),
  simpleSpec(['pyright', 'basedpyright', 'pyre', 'pytype'], '-p|--project=read -w|--watch!never-ends --outputjson --verbose --stats --level=any --pythonversion=any --pythonpath=any -h|--help --version --venvpath=read --warnings --skipunannotated --createstub=any', 'read*', LINT),
];

const COVERAGE_REPORT = grammar('-h|--help --version -m|--show-missing -i|--ignore-errors -a|--append --rcfile=read --data-file=write --include=any --omit=any --fail-under=any -d|--directory=write -o=write --skip-covered --no-skip-covered --skip-empty --precision=any --format=any --sort=any --title=any --contexts=any -q|--quiet --keep --show-contexts', { lenient: true });
const COVERAGE_RUN = grammar('-a|--append --branch --concurrency=any --context=any --data-file=write --include=any --omit=any -L|--pylib -p|--parallel-mode --rcfile=read --source=any --timid -m|--module -h|--help', { stopAtOperand: true });

/** `coverage run [-m] PROGRAM …` runs the program (or module) as `python` would; the other subcommands read and report. */
function coverageUse(args: ShellWord[], name: string): CommandUse {
  const b = new UseBuilder(name);
  const [sub, ...rest] = args;
  if (!sub || sub.dynamic) return b.problem('coverage: a subcommand is needed').use;
  if (sub.value === 'run') {
    const p = parseArgs(COVERAGE_RUN, rest);
    b.options(p);
    b.inner(p.has('-m') ? [literalWord('python3'), literalWord('-m'), ...p.operands] : [literalWord('python3'), ...p.operands]);
    return b.use;
  }
  if (['report', 'html', 'xml', 'json', 'lcov', 'combine', 'erase', 'annotate', 'debug', 'help'].includes(sub.value)) { b.options(parseArgs(COVERAGE_REPORT, rest)); return b.use; }
  if (['--version', '-h', '--help'].includes(sub.value)) return b.use;
  return b.problem(`coverage ${sub.value} is not modelled`).use;
}

/** `poetry run X`, `uv run X`, `pipenv run X`, `pdm run X`, `hatch run X`: X runs as a command of its own. */
const RUNNER_SUBS = new Set(['run']);
function runnerSpec(names: string[], installs: string[]): CommandSpec {
  return {
    names,
    use(args, name) {
      const b = new UseBuilder(name);
      const idx = args.findIndex((a) => a.dynamic || !a.value.startsWith('-'));
      const sub = args[idx];
      if (!sub || sub.dynamic) return b.problem(`${name}: the subcommand is not known`).use;
      for (const a of args.slice(0, idx)) if (!['-q', '--quiet', '-v', '--verbose', '--no-ansi', '--no-interaction', '-n'].includes(a.value)) b.problem(`${name} ${a.value} is not modelled`);
      const rest = args.slice(idx + 1);
      if (RUNNER_SUBS.has(sub.value)) {
        const start = rest.findIndex((a) => a.dynamic || !a.value.startsWith('-') || a.value === '--');
        const inner = rest.slice(start >= 0 && rest[start]!.value === '--' ? start + 1 : Math.max(start, 0));
        if (!inner.length) return b.problem(`${name} run without a command`).use;
        if (start > 0) for (const a of rest.slice(0, start)) if (!['--no-sync', '--frozen', '--locked', '--offline', '-q', '--quiet'].includes(a.value)) b.problem(`${name} run ${a.value} is not modelled`);
        b.inner(inner);
        return b.use;
      }
      if (['--version', 'version', 'show', 'list', 'tree', 'check', 'env', 'config', 'help'].includes(sub.value) && !(sub.value === 'config' && rest.length > 1)) return b.use;
      if (installs.includes(sub.value)) return b.effect('install', `${name} ${sub.value} installs packages`).use;
      if (['publish', 'upload'].includes(sub.value)) return b.effect('publish', `${name} ${sub.value} publishes packages`).use;
      return b.problem(`${name} ${sub.value} is not modelled`).use;
    },
  };
}

/**
 * Django's manage.py / django-admin: a subcommand over the project's settings (project code);
 * runserver/testserver serve, shell/dbshell open a prompt. The other commands run and end.
 */
function djangoEffects(b: UseBuilder, sub: ShellWord | undefined, label: string): void {
  if (!sub || sub.dynamic) return;
  if (sub.value === 'runserver' || sub.value === 'testserver') { b.effect('server', `${label} ${sub.value} serves the site`); b.effect('never-ends', 'a server runs until stopped'); }
  if (sub.value === 'shell' || sub.value === 'dbshell') b.effect('interactive', `${label} ${sub.value} opens a prompt`);
}

const djangoAdmin: CommandSpec = {
  names: ['django-admin'],
  use(args, name) {
    const b = new UseBuilder(name).project();
    const sub = args.find((a) => a.dynamic || !a.value.startsWith('-'));
    djangoEffects(b, sub, name);
    return b.use;
  },
};

/** sphinx-build: conf.py and the extensions it names are the project's code; -d, -w and the output directory are written. */
const sphinxBuild = simpleSpec(['sphinx-build'], '-b|--builder=any -M=any -a|--write-all -E|--fresh-env -d|--doctree-dir=write -j|--jobs=any -c|--conf-dir=any -C|--isolated -D|--define=any -A|--html-define=any -t|--tag=any -n|--nitpicky -N|--no-color --color -v|--verbose -q|--quiet -Q|--silent -w|--warning-file=write -W|--fail-on-warning --keep-going -T|--show-traceback -P|--pdb!interactive --exception-on-warning -h|--help --version', (p, b) => {
  const [src, out, ...files] = p.operands;
  if (src) b.read(src);
  if (out) b.write(out);
  for (const f of files) b.read(f);
}, { project: true });

export const PYTHON_SPECS: CommandSpec[] = [
  python, pip, pytest, ...moduleSpecs, ...linters, djangoAdmin, sphinxBuild,
  runnerSpec(['poetry'], ['install', 'add', 'remove', 'update', 'lock', 'sync', 'build', 'new', 'init', 'self', 'source']),
  runnerSpec(['uv'], ['pip', 'add', 'remove', 'sync', 'lock', 'tool', 'python', 'venv', 'init', 'build']),
  runnerSpec(['pipenv'], ['install', 'uninstall', 'update', 'lock', 'sync', 'clean']),
  runnerSpec(['pdm', 'hatch', 'rye'], ['install', 'add', 'remove', 'update', 'lock', 'sync', 'build', 'init', 'new', 'env']),
  simpleSpec('virtualenv', '--python|-p=any --system-site-packages --clear --no-pip --no-setuptools --no-wheel --prompt=any -q -v --symlinks --copies', 'write*'),
];
