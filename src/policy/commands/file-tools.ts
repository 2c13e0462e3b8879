/**
 * Specs of the file tools: coreutils that read, write, copy, link, delete or change modes, plus
 * patch, dd, compressors, tar and unzip. Destinations, option values and modes are parsed the way
 * the tools parse them (a `cp` destination is a write, `uniq`'s second operand is its output,
 * `ln -s TARGET LINK` resolves TARGET from LINK's directory, every setuid/setgid spelling of a
 * chmod mode is found).
 */
import { grammar, parseArgs, type ParsedArgs } from './argv-parser';
import { simpleSpec, UseBuilder, type CommandSpec } from './command-spec';
import { escapeGlob, literalWord, type ShellWord } from '../shell-words';

const HV = '--help --version';
/** Files whose loss loses no work: scratch space, compiler and interpreter by-products, editor and patch leftovers. */
export const REGENERABLE = /^\/tmp\/|\.(o|obj|a|so|dylib|pyc|pyo|class|bak|orig|rej|tmp|swp|log|out)$|(^|\/)(__pycache__\/[^/]+|\.coverage|coverage\.out|\.DS_Store)$/;
/** Directory and file names whose deletion loses no work: build output, caches, virtual environments, scratch. */
const SCRATCH_NAME = /^(build|_build|dist|out|target|coverage|htmlcov|node_modules|__pycache__|\.pytest_cache|\.mypy_cache|\.ruff_cache|\.hypothesis|\.tox|\.nox|\.venv|venv|\.eggs|[^/]*\.egg-info|\.coverage|\.next|\.nuxt|\.turbo|\.parcel-cache|\.cache|\.gradle|\.DS_Store|a\.out|core|tmp|temp|\.tmp|pytest-[^/]*)$/;
/** A single file named as scratch (`tmp.txt`, `scratch.py`, `out.log`): removing it by name loses nothing. */
const SCRATCH_FILE = /^(tmp|temp|scratch|junk)([._-][\w.-]*)?$/i;
const BY_PRODUCT = /\.(o|obj|a|so|dylib|pyc|pyo|class|bak|orig|rej|tmp|swp|log|out|d|gcda|gcno)$/;

/**
 * Deleting `w` loses no work: it is a scratch or build directory by name (or, not recursively, lies
 * under one or under /tmp), or it names by-products (`*.pyc`, `x.o`), or (without `recursive`) one file
 * named as scratch (`tmp.txt`). Anything else, a project file by name included, asks. A path that
 * climbs (`..`) or is computed is never cheap. Protected paths are still judged by the path rules.
 */
export function cheapDelete(w: ShellWord, recursive: boolean): boolean {
  if (w.alternatives) return w.alternatives.every((x) => cheapDelete(x, recursive));
  const text = w.dynamic ? (w.confined ? w.pattern : undefined) : w.glob ? w.pattern : escapeGlob(w.value);
  if (text === undefined) return false;
  // A recursive delete resolves every directory on its way: `build/` with a trailing slash, or anything
  // below `build`, is wherever `build` points if it is a link (`ln -s . build`, planted by an earlier
  // call, a checked-out repository or an archive). Only the last name itself — which rm removes as a
  // link if it is one — can be scratch by its name; below /tmp, only a name directly in it.
  if (recursive && /\/$/.test(text) && !/^\/tmp\/?$/.test(text)) return false;
  const segs = text.replace(/\/+$/, '').split('/').map((x) => x.replace(/\\(.)/g, '$1'));
  if (segs.some((x) => x === '..') || segs.length === 0) return false;
  const base = segs[segs.length - 1]!;
  const dirs = segs.slice(0, -1);
  if (recursive ? /^\/tmp\/[^/]+$/.test(segs.join('/')) && !w.glob && !w.dynamic : /^\/tmp\/[^/]/.test(segs.join('/'))) return true;
  if (!recursive && dirs.some((x) => SCRATCH_NAME.test(x))) return true;
  if (SCRATCH_NAME.test(base) || (BY_PRODUCT.test(base) && !base.startsWith('*.*'))) return true;
  return !recursive && !w.dynamic && !w.glob && SCRATCH_FILE.test(base);
}

const read = (names: string | string[], opts: string, o: { numeric?: boolean } = {}) => simpleSpec(names, `${opts} ${HV}`, 'read*', o);

/** The directory part of a path word (`docs/README.md` → `docs`). */
function dirOf(w: ShellWord): ShellWord {
  if (w.dynamic) return w;
  return literalWord(w.value.replace(/\/+$/, '').split('/').slice(0, -1).join('/') || (w.value.startsWith('/') ? '/' : '.'));
}

/** Everything a path could become when a file is copied into it, if it is a directory. */
function intoDir(dest: ShellWord, src: ShellWord): ShellWord | undefined {
  if (dest.dynamic || src.dynamic) return undefined;
  const base = src.value.replace(/\/+$/, '').split('/').pop();
  if (!base || base === '.' || base === '..') return undefined;
  const dir = dest.value.replace(/\/+$/, '');
  const v = `${dir}/${base}`;
  if (!src.glob) return literalWord(v);
  // a glob source (`cp *.txt /tmp/b/`) lands as the names it matches: the destination is that glob under the directory
  const basePattern = src.pattern.replace(/\/+$/, '').split('/').pop() ?? '*';
  return { ...src, value: v, pattern: `${escapeGlob(dir)}/${basePattern}`, prefix: `${dir}/` };
}

function copyLike(name: string, p: ParsedArgs, b: UseBuilder, accessIn: 'read' | 'delete' | 'link'): void {
  let access: 'read' | 'delete' | 'link' | 'write' = accessIn;
  // cp -l / -s make links: a later write to the copy is a write to the source (srcAccess below)
  const target = p.values('-t')[0];
  const ops = p.operands;
  let sources = ops;
  let dest: ShellWord | undefined = target;
  if (!target) {
    if (ops.length < 2) { if (ops.length === 1 && name !== 'ln') b.problem(`${name} needs a source and a destination`); sources = ops.slice(0, 1); dest = ops.length === 1 && name === 'ln' ? literalWord('.') : undefined; }
    else { sources = ops.slice(0, -1); dest = ops[ops.length - 1]; }
  }
  const symbolic = name === 'ln' && p.has('-s') && !p.has('-r');
  if (sources.some((s) => !s.dynamic && /^\/dev\/(null|zero)$/.test(s.value)) && dest) b.effect('delete', `${name} from ${sources[0]!.value} empties "${dest.value || 'a computed path'}"`);
  // ln -f replaces the link name as cp overwrites its destination: a write, judged by the path rules
  const takesOut = name === 'mv' && (!dest || dest.dynamic || (dest.value.startsWith('/') && !dest.value.startsWith('/workspace')) || dest.value.startsWith('..') || dest.value.startsWith('~'));
  if (takesOut && dest) b.effect('delete', 'mv takes files out of the workspace');
  // a move inside the workspace keeps the files: its sources are written (renamed), not deleted
  if (name === 'mv' && !takesOut) access = 'write';
  const srcAccess = name === 'cp' && p.has('-l', '-s') ? 'link' : access;
  if ((name === 'cp' || name === 'mv') && p.has('-r', '-a') && dest && !dest.dynamic && /^(\.|\.\/|\/workspace\/?)$/.test(dest.value) && sources.some((s) => s.dynamic || s.value.startsWith('/') || s.value.startsWith('..'))) b.effect('delete', `${name} -r over the whole workspace overwrites its files`);
  if (name === 'cp' && p.has('-a', '-p', '--preserve') && sources.some((s) => s.dynamic || s.value.startsWith('/'))) b.problem('cp keeps the modes (setuid bits included) of files from outside the workspace');
  for (const s of sources) {
    if (srcAccess === 'link') b.path(s, 'link', `${name} target`, symbolic && dest && !target ? dirOf(dest) : undefined);
    else { b.path(s, 'read', `${name} source`); if (srcAccess === 'delete' || srcAccess === 'write') b.path(s, srcAccess, `${name} source`); }
  }
  if (!dest) return;
  b.path(dest, 'write', `${name} destination`);
  if (!p.has('-T')) for (const s of sources) b.path(intoDir(dest, s), 'write', `${name} destination`);
}

const CP_OPTS = '-a|--archive -b --backup?any -d -f|--force -i|--interactive -H -l|--link -L|--dereference -n|--no-clobber -P|--no-dereference -p --preserve?any --no-preserve=any --parents -R|-r|--recursive --reflink?any --remove-destination --sparse=any --strip-trailing-slashes -s|--symbolic-link -S|--suffix=any -t|--target-directory=any -T|--no-target-directory -u --update?any -v|--verbose -x|--one-file-system -Z --context?any --attributes-only --copy-contents --debug --keep-directory-symlink';
const MV_OPTS = '-b --backup?any -f|--force -i|--interactive -n|--no-clobber --strip-trailing-slashes -S|--suffix=any -t|--target-directory=any -T|--no-target-directory -u --update?any -v|--verbose -Z|--context --debug --exchange --no-copy';
const LN_OPTS = '-b --backup?any -d|-F|--directory -f|--force -i|--interactive -L|--logical -n|--no-dereference -P|--physical -r|--relative -s|--symbolic -S|--suffix=any -t|--target-directory=any -T|--no-target-directory -v|--verbose';

/** Does a chmod mode (octal or symbolic, every clause) set setuid, setgid or sticky? null = cannot parse. */
export function modeSetsId(mode: string): boolean | null {
  if (/^[0-7]+$/.test(mode)) {
    const v = parseInt(mode, 8);
    return (v & 0o7000) !== 0;
  }
  let sets = false;
  for (const clause of mode.split(',')) {
    const m = /^([ugoa]*)((?:[-+=](?:[rwxXst]*|[ugo]))+)$/.exec(clause);
    if (!m) return null;
    for (const op of m[2]!.matchAll(/([-+=])([rwxXst]*|[ugo])/g)) if (op[1] !== '-' && /[st]/.test(op[2]!)) sets = true;
  }
  return sets;
}

const chmod: CommandSpec = {
  names: ['chmod'],
  use(args, name) {
    const b = new UseBuilder(name);
    // chmod allows a mode like -w or -rwx where an option would be: treat a leading -[rwxXst]+ as the mode.
    const g = grammar(`-c|--changes -f|--silent|--quiet -v|--verbose -R|--recursive --no-preserve-root --preserve-root --reference=read ${HV}`);
    const modeIdx = args.findIndex((a) => !a.dynamic && /^-[rwxXst]/.test(a.value) && modeSetsId(a.value) !== null);
    const rest = modeIdx >= 0 ? args.filter((_, i) => i !== modeIdx) : args;
    const p = parseArgs(g, rest);
    b.options(p);
    const ops = [...p.operands];
    if (!p.has('--reference')) {
      const mode = modeIdx >= 0 ? args[modeIdx]! : ops.shift();
      if (!mode) return b.problem('chmod without a mode').use;
      if (mode.dynamic) {
        // A mode computed at run time is not understood; one whose possible values set an id bit is denied.
        const idCandidate = (mode.candidates ?? []).find((c) => !c.dynamic && modeSetsId(c.value) === true);
        if (idCandidate) b.effect('setuid', `chmod ${idCandidate.value} (a value the mode may take) sets a setuid, setgid or sticky bit`);
        else b.problem('chmod: the mode is computed at run time');
      }
      else {
        const s = modeSetsId(mode.value);
        if (s === null) b.problem(`chmod: mode "${mode.value}" is not understood`);
        else if (s) b.effect('setuid', `chmod ${mode.value} sets a setuid, setgid or sticky bit`);
      }
    } else b.effect('setuid', 'chmod --reference copies modes, setuid bits included');
    for (const f of ops) b.write(f);
    return b.use;
  },
};

const tar: CommandSpec = {
  names: ['tar'],
  use(args, name) {
    const b = new UseBuilder(name);
    // Old-style bundled letters (`tar xzf a.tgz`): each valued letter takes the next operand in turn.
    let argv = args;
    if (argv[0] && !argv[0].dynamic && /^[A-Za-z]+$/.test(argv[0].value)) {
      const letters = argv[0].value.split('');
      const valued = new Set(['f', 'C', 'T', 'X', 'b', 'K', 'N', 'L', 'V', 'g', 'H', 'I', 'F']);
      const out: ShellWord[] = [];
      let next = 1;
      for (const l of letters) {
        out.push(literalWord(`-${l}`));
        if (valued.has(l) && argv[next]) out.push(argv[next++]!);
      }
      argv = [...out, ...argv.slice(next)];
    }
    const g = grammar(
      '-c|--create -x|--extract|--get -t|--list -r|--append -u|--update -d|--diff|--compare -A|--catenate|--concatenate --delete --test-label ' +
      '-f|--file=any -C|--directory=dir -T|--files-from=read -X|--exclude-from=read --exclude=any --exclude-vcs --exclude-caches -z|--gzip|--gunzip -j|--bzip2 -J|--xz --zstd --lzma --lzip -a|--auto-compress ' +
      '-v|--verbose -k|--keep-old-files --keep-newer-files --skip-old-files -p|--preserve-permissions --same-permissions --no-same-owner --no-same-permissions -m|--touch -o|-O|--to-stdout ' +
      '--strip-components=any --wildcards --no-wildcards --anchored --null --numeric-owner --owner=any --group=any --mode=any --mtime=any --sort=any --transform=any --xform=any -h|--dereference -P|--absolute-names ' +
      '-b|--blocking-factor=any --format=any -H=any --totals?any -W|--verify -S|--sparse --overwrite --recursive --no-recursion --one-file-system -l --check-links --ignore-failed-read -w|--interactive!interactive --force-local ' +
      `-I|--use-compress-program=exec --to-command=exec --checkpoint?any --checkpoint-action=exec --info-script=exec -F|--new-volume-script=exec --rsh-command=exec --rmt-command=exec ${HV}`,
    );
    const p = parseArgs(g, argv);
    b.options(p);
    const archive = p.values('-f')[0];
    const creates = p.has('-c', '-r', '-u', '-A');
    // GNU tar takes `host:path` (a colon before any slash) for an archive on another host, reached with rsh/ssh
    if (archive && (archive.dynamic || /^[^/]*:/.test(archive.value)) && !p.has('--force-local')) {
      if (archive.dynamic) b.problem('tar: an archive name computed at run time may name another host (host:path)');
      else b.effect(creates ? 'upload' : 'network', `tar -f ${archive.value.slice(0, 40)} is an archive on another host`);
    }
    if (archive && archive.value !== '-') b.path(archive, creates ? 'write' : 'read', 'tar archive');
    const dir = p.values('-C')[0];
    if (creates) for (const o of p.operands) b.path(o, 'read', 'tar', dir);
    else if (p.has('-x') && !p.has('-o', '-O')) {
      b.problem('tar extracts files whose names the archive decides (they may land anywhere, .git/hooks included)');
      b.path(dir ?? literalWord('.'), 'write', 'tar -x into');
    }
    else if (p.has('--delete')) b.write(archive);
    else if (!p.has('-t', '-d', '-x')) b.problem('tar without a mode is not modelled');
    if (p.has('-P')) b.problem('tar -P keeps absolute names');
    for (const m of p.values('--mode')) if (m.dynamic || !/^[ugoa]*[-+=][rwxX]*(,[ugoa]*[-+=][rwxX]*)*$|^0?[0-7]{3}$/.test(m.value)) b.effect('setuid', `tar --mode=${m.value || '(computed)'} may set setuid, setgid or sticky bits`);
    if (p.has('-p') && p.has('-x')) b.problem('tar -p keeps the modes the archive names');
    return b.use;
  },
};

const unzip = simpleSpec('unzip', '-l -v -t -z -Z -p -c -q -qq -o -n -j -C -L -d=write -x=any -P=any -a -aa -b -X -K -U -u -f', (p, b) => {
  const [zip, ...members] = p.operands;
  b.read(zip);
  void members;
  if (!p.has('-l', '-v', '-t', '-z', '-Z', '-p', '-c')) b.problem('unzip extracts files whose names the archive decides');
});

/**
 * gzip, xz, bzip2, lzma (and zstd --rm) replace each file with its compressed copy: the original is
 * deleted, and `-r DIR` does so for every file below DIR (.git included). Decompressing replaces the
 * archive with its content. -c, -k, -t and -l leave the operands in place.
 */
const compressor = (names: string[]) => simpleSpec(names,
  `-c|--stdout|--to-stdout -d|--decompress|--uncompress -f|--force -k|--keep --rm -l|--list -n|--no-name -N|--name -q|--quiet -r|--recursive -t|--test -v|--verbose -z|--compress --fast --best -S|--suffix=any --rsyncable --synchronous -T|--threads=any -e|--extreme -F|--format=any -M|--memlimit=any -0 -1 -2 -3 -4 -5 -6 -7 -8 -9 ${HV}`,
  (p, b) => {
    const name = b.use.label;
    const keeps = p.has('-c', '-t', '-l', '-k') || (/zstd/.test(name) && !p.has('--rm'));
    const decompress = p.has('-d') || /^un|^gunzip/.test(name);
    for (const o of p.operands) b.path(o, keeps ? (p.has('-c', '-t', '-l') ? 'read' : 'write') : 'delete', name);
    if (keeps || decompress && !p.has('-r')) return;
    const few = !p.has('-r') && p.operands.length <= 2 && p.operands.every((o) => !o.dynamic && !o.glob);
    if (!few) b.effect('delete', `${name} replaces ${p.has('-r') ? 'every file below the directories' : 'each file'} it is given with a compressed copy`);
  });

const dd: CommandSpec = {
  names: ['dd'],
  use(args, name) {
    const b = new UseBuilder(name);
    for (const a of args) {
      if (a.dynamic) { b.problem('dd: an operand computed at run time'); continue; }
      const m = /^(if|of|bs|ibs|obs|cbs|count|skip|seek|iseek|oseek|conv|iflag|oflag|status)=(.*)$/s.exec(a.value);
      if (!m) { b.problem(`dd: operand ${a.value} is not modelled`); continue; }
      if (m[1] === 'if') b.read(literalWord(m[2]!));
      if (m[1] === 'of') b.write(literalWord(m[2]!));
    }
    if (args.some((a) => /^if=\/dev\/(null|zero)$/.test(a.value)) && args.some((a) => a.value.startsWith('of='))) b.effect('delete', 'dd from /dev/null or /dev/zero overwrites the output');
    return b.use;
  },
};

export const FILE_TOOL_SPECS: CommandSpec[] = [
  read('cat', '-A|--show-all -b|--number-nonblank -e -E|--show-ends -n|--number -s|--squeeze-blank -t -T|--show-tabs -u -v|--show-nonprinting'),
  read('head', '-c|--bytes=any -n|--lines=any -q|--quiet|--silent -v|--verbose -z|--zero-terminated', { numeric: true }),
  simpleSpec('tail', `-c|--bytes=any -n|--lines=any -q|--quiet|--silent -v|--verbose -z|--zero-terminated -f|--follow?any!never-ends -F!never-ends --retry --pid=any -s|--sleep-interval=any --max-unchanged-stats=any ${HV}`, 'read*', { numeric: true }),
  read('wc', '-c|--bytes -m|--chars -l|--lines -L|--max-line-length -w|--words --files0-from=read --total=any'),
  read('nl', '-b|--body-numbering=any -d|--section-delimiter=any -f|--footer-numbering=any -h|--header-numbering=any -i|--line-increment=any -l|--join-blank-lines=any -n|--number-format=any -p|--no-renumber -s|--number-separator=any -v|--starting-line-number=any -w|--number-width=any'),
  read('tac', '-b|--before -r|--regex -s|--separator=any'),
  read('rev', ''),
  read('file', '-b|--brief -i|--mime --mime-type --mime-encoding --extension -L|--dereference -h|--no-dereference -z|--uncompress -Z|--uncompress-noreport -s|--special-files -k|--keep-going -N|--no-pad -0|--print0 -r|--raw -e|--exclude=any --exclude-quiet=any -F|--separator=any -f|--files-from=read -E -S|--no-sandbox -P|--parameter=any'),
  read('stat', '-L|--dereference -f|--file-system -c|--format=any --printf=any -t|--terse --cached=any'),
  read('du', '-a|--all -b|--bytes -c|--total -d|--max-depth=any -h|--human-readable -k -m -s|--summarize -x|--one-file-system -L|--dereference -P|--no-dereference -H -D|--dereference-args --apparent-size --block-size=any -B=any --exclude=any -X|--exclude-from=read --time?any --time-style=any --threshold=any -t=any --inodes -l|--count-links -0|--null --si'),
  read(['md5sum', 'sha1sum', 'sha224sum', 'sha256sum', 'sha384sum', 'sha512sum', 'b2sum', 'cksum', 'sum'], '-b|--binary -c|--check -t|--text -z|--zero --tag --untagged --ignore-missing --quiet --status --strict -w|--warn -l|--length=any -a|--algorithm=any --base64 --raw -r -s|--sysv'),
  read('strings', '-a|--all -d|--data -f|--print-file-name -n|--bytes=any -t|--radix=any -e|--encoding=any -w|--include-all-whitespace -s|--output-separator=any -T|--target=any -U|--unicode=any', { numeric: true }),
  read('od', '-A|--address-radix=any -j|--skip-bytes=any -N|--read-bytes=any -t|--format=any -v|--output-duplicates -w|--width?any -S|--strings?any -a -b -c -d -f -i -l -o -s -x --endian=any --traditional'),
  read('hexdump', '-b -c -C|--canonical -d -o -x -e|--format=any -f|--format-file=read -n|--length=any -s|--skip=any -v|--no-squeezing -L|--color?any'),
  simpleSpec('xxd', `-a -autoskip -b -bits -c=any -cols=any -C -capitalize -E -EBCDIC -e -g=any -groupsize=any -i -include -l=any -len=any -n=any -name=any -o=any -offset=any -p -ps -postscript -plain -r -revert -s=any -seek=any -u -uppercase -d -R=any -h -help -v -version`, ['read', 'write'], { singleDashLong: true }),
  simpleSpec(['realpath', 'readlink'], `-e|--canonicalize-existing -f|--canonicalize -m|--canonicalize-missing -L|--logical -P|--physical -q|--quiet -s|--strip|--no-symlinks -z|--zero -n|--no-newline -v|--verbose --relative-to=any --relative-base=any ${HV}`, 'any*'),
  simpleSpec('basename', `-a|--multiple -s|--suffix=any -z|--zero ${HV}`, 'any*'),
  simpleSpec('dirname', `-z|--zero ${HV}`, 'any*'),
  read('tree', '-a -d -l -f -x -L=any -R -P=any -I=any --gitignore --gitfile=read --ignore-case --matchdirs --metafirst --prune --info --infofile=read --noreport --charset=any --filelimit=any --dirsfirst --filesfirst -i -q -N -Q -p -u -g -s -h --si --du -D --timefmt=any -F -v -t -c -U -r --sort=any -n -C -J -X -H=any -T=any --nolinks --hintro=any --houtro=any --fromfile --fromtabfile -S'),
  read('diff', '-q|--brief -s|--report-identical-files -c -C|--context?any -u -U|--unified?any -e|--ed -n|--rcs -y|--side-by-side -W|--width=any --left-column --suppress-common-lines -p|--show-c-function -F|--show-function-line=any --label=any -t|--expand-tabs -T|--initial-tab --tabsize=any --suppress-blank-empty -l|--paginate -r|--recursive --no-dereference -N|--new-file --unidirectional-new-file --ignore-file-name-case --no-ignore-file-name-case -x|--exclude=any -X|--exclude-from=read -S|--starting-file=any --from-file=read --to-file=read -i|--ignore-case -E|--ignore-tab-expansion -Z|--ignore-trailing-space -b|--ignore-space-change -w|--ignore-all-space -B|--ignore-blank-lines -I|--ignore-matching-lines=any -a|--text --strip-trailing-cr -D|--ifdef=any --line-format=any --old-line-format=any --new-line-format=any --unchanged-line-format=any --old-group-format=any --new-group-format=any --changed-group-format=any --unchanged-group-format=any -d|--minimal --horizon-lines=any --speed-large-files --color?any --palette=any --normal'),
  read('cmp', '-b|--print-bytes -i|--ignore-initial=any -l|--verbose -n|--bytes=any -s|--quiet|--silent'),
  read('comm', '-1 -2 -3 --check-order --nocheck-order --output-delimiter=any --total -z|--zero-terminated'),
  read('cut', '-b|--bytes=any -c|--characters=any -d|--delimiter=any -f|--fields=any -n --complement -s|--only-delimited --output-delimiter=any -z|--zero-terminated'),
  simpleSpec('tr', `-c|-C|--complement -d|--delete -s|--squeeze-repeats -t|--truncate-set1 ${HV}`, 'any*'),
  simpleSpec('uniq', `-c|--count -d|--repeated -D --all-repeated?any -f|--skip-fields=any -i|--ignore-case -s|--skip-chars=any -u|--unique -z|--zero-terminated -w|--check-chars=any --group?any ${HV}`, ['read', 'write']),
  read('column', '-t|--table -s|--separator=any -o|--output-separator=any -c|--output-width=any -x|--fillrows -n|--table-name=any -N|--table-columns=any -R|--table-right=any -T|--table-truncate=any -E|--table-noextreme=any -e|--table-header-repeat -H|--table-hide=any -W|--table-wrap=any -r|--tree=any -i|--tree-id=any -p|--tree-parent=any -J|--json -L|--keep-empty-lines -l|--table-columns-limit=any -d|--table-noheadings -O|--table-order=any'),
  read('fold', '-b|--bytes -s|--spaces -w|--width=any', { numeric: true }),
  read('fmt', '-c|--crown-margin -p|--prefix=any -s|--split-only -t|--tagged-paragraph -u|--uniform-spacing -w|--width=any -g|--goal=any', { numeric: true }),
  read('paste', '-d|--delimiters=any -s|--serial -z|--zero-terminated'),
  read('join', '-a=any -e=any -i|--ignore-case -j=any -o=any -t=any -v=any -1=any -2=any --check-order --nocheck-order --header -z|--zero-terminated'),
  read(['expand', 'unexpand'], '-i|--initial -t|--tabs=any -a|--all --first-only'),
  read(['base64', 'base32', 'basenc'], '-d|--decode -i|--ignore-garbage -w|--wrap=any --base64 --base64url --base32 --base32hex --base16 --base2msbf --base2lsbf --z85'),
  simpleSpec('iconv', `-f|--from-code=any -t|--to-code=any -c -s|--silent -o|--output=write -l|--list --verbose ${HV}`, 'read*'),
  read(['zcat', 'gzcat', 'bzcat', 'xzcat', 'zstdcat'], '-f|--force -q|--quiet -v|--verbose -l|--list -t|--test'),
  simpleSpec(['ls', 'dir', 'vdir'], `-a|--all -A|--almost-all -b|--escape -B|--ignore-backups -c -C -d|--directory -D|--dired -f -F --classify?any -g -G|--no-group -h|--human-readable -H|--dereference-command-line -i|--inode -k|--kibibytes -l -L|--dereference -m -n|--numeric-uid-gid -N|--literal -o -p -q|--hide-control-chars -Q|--quote-name -r|--reverse -R|--recursive -s|--size -S -t -T|--tabsize=any -u -U -v -w|--width=any -x -X -Z|--context -1 --author --block-size=any --color?any --file-type --format=any --full-time --group-directories-first --si --dereference-command-line-symlink-to-dir --hide=any --hyperlink?any --indicator-style=any -I|--ignore=any --show-control-chars --quoting-style=any --sort=any --time=any --time-style=any --zero ${HV}`, 'read*'),
  simpleSpec('sort', `-b|--ignore-leading-blanks -d|--dictionary-order -f|--ignore-case -g|--general-numeric-sort -i|--ignore-nonprinting -M|--month-sort -h|--human-numeric-sort -n|--numeric-sort -R|--random-sort -r|--reverse -V|--version-sort -c --check?any -C -k|--key=any -m|--merge -o|--output=write -s|--stable -S|--buffer-size=any -t|--field-separator=any -T|--temporary-directory=write -u|--unique -z|--zero-terminated --parallel=any --random-source=read --sort=any --files0-from=read --compress-program=exec --debug --batch-size=any ${HV}`, 'read*'),
  simpleSpec('mkdir', `-p|--parents -m|--mode=any -v|--verbose -Z --context?any ${HV}`, 'write*', {
    check: (p, b) => { for (const m of p.values('-m')) if (m.dynamic || modeSetsId(m.value) !== false) b.effect('setuid', 'mkdir -m sets a setuid or setgid bit, or a mode that cannot be read'); },
  }),
  simpleSpec('touch', `-a -c|--no-create -d|--date=any -f -h|--no-dereference -m -r|--reference=read -t=any --time=any ${HV}`, 'write*'),
  simpleSpec('cp', `${CP_OPTS} ${HV}`, (p, b) => copyLike('cp', p, b, 'read')),
  simpleSpec('mv', `${MV_OPTS} ${HV}`, (p, b) => copyLike('mv', p, b, 'delete')),
  simpleSpec('ln', `${LN_OPTS} ${HV}`, (p, b) => copyLike('ln', p, b, 'link')),
  simpleSpec('install', `-b --backup?any -C|--compare -c -d|--directory -D -g|--group=any -m|--mode=any -o|--owner=any -p|--preserve-timestamps -s|--strip --strip-program=exec -S|--suffix=any -t|--target-directory=any -T|--no-target-directory -v|--verbose -Z --context?any ${HV}`, (p, b) => {
    if (p.has('-d')) { for (const o of p.operands) b.write(o); } else copyLike('install', p, b, 'read');
    for (const m of p.values('-m')) if (m.dynamic || modeSetsId(m.value) !== false) b.effect('setuid', 'install -m sets a setuid or setgid bit, or a mode that cannot be read');
    if (p.has('-o', '-g')) b.effect('privilege', 'install -o/-g changes ownership');
  }),
  simpleSpec('tee', `-a|--append -i|--ignore-interrupts -p --output-error?any ${HV}`, 'write*', {
    // without -a tee empties each file first: a pattern or a computed list overwrites files that exist
    check: (p, b) => { if (!p.has('-a') && p.operands.some((o) => o.dynamic || o.glob)) b.effect('delete', 'tee overwrites every existing file a pattern or computed name matches'); },
  }),
  simpleSpec('truncate', `-c|--no-create -o|--io-blocks -r|--reference=read -s|--size=any ${HV}`, 'delete*', { effects: [['delete', 'truncate cuts files short']] }),
  simpleSpec('split', `-a|--suffix-length=any --additional-suffix=any -b|--bytes=any -C|--line-bytes=any -d --numeric-suffixes?any -x --hex-suffixes?any -e|--elide-empty-files --filter=exec -l|--lines=any -n|--number=any -t|--separator=any -u|--unbuffered --verbose ${HV}`, ['read', 'write']),
  simpleSpec(['rm'], `-f|--force -i -I --interactive?any --one-file-system --no-preserve-root --preserve-root?any -r|-R|--recursive -d|--dir -v|--verbose ${HV}`, 'delete*', {
    check: (p, b) => {
      // deleting scratch files and build by-products one by one loses no work; anything else asks
      // by-products and scratch by any number; one or two project files by name (a refactoring's `rm old.py`)
      const named = p.operands.filter((o) => !cheapDelete(o, true));
      const oneOrTwo = !p.has('-r', '-d') && named.length <= 2 && named.every((o) => !o.dynamic && !o.glob && !o.value.includes('..') && !/(^|\/)\.{0,2}\/?$/.test(o.value));
      const cheap = p.operands.length > 0 && (p.operands.every((o) => cheapDelete(o, p.has('-r'))) || oneOrTwo);
      const slashed = p.has('-r') && p.operands.some((o) => !o.dynamic && /[^/]\/+$/.test(o.value) && cheapDelete(literalWord(o.value.replace(/\/+$/, '')), true));
      if (!cheap) b.effect('delete', slashed ? 'rm -r NAME/ deletes what NAME points to when it is a link (write NAME without the trailing slash)' : 'rm deletes files');
    },
  }),
  // rmdir removes only empty directories: no file is lost (the paths are still checked as deletes)
  simpleSpec('rmdir', `--ignore-fail-on-non-empty -p|--parents -v|--verbose ${HV}`, 'delete*'),
  simpleSpec('unlink', HV, ['delete'], { effects: [['delete', 'unlink deletes a file']] }),
  simpleSpec('shred', `-f|--force -n|--iterations=any -s|--size=any -u --remove?any -v|--verbose -x|--exact -z|--zero --random-source=read ${HV}`, 'delete*', { effects: [['delete', 'shred destroys files']] }),
  chmod,
  simpleSpec('patch', `-p|--strip=any -i|--input=read -o|--output=write -d|--directory=dir -R|--reverse -N|--forward -f|--force -t|--batch -s|--silent|--quiet -E|--remove-empty-files -b|--backup -B|--prefix=any -z|--suffix=any --dry-run -F|--fuzz=any -l|--ignore-whitespace -u|--unified -c|--context -n|--normal -e|--ed -r|--reject-file=write --binary --posix --merge?any --no-backup-if-mismatch --backup-if-mismatch -V|--version-control=any --verbose -Y|--basename-prefix=any -g|--get=any --follow-symlinks --read-only=any -D|--ifdef=any --quoting-style=any ${HV}`, ['write', 'read'], {
    check: (p, b) => { if (!p.has('--dry-run') && !p.has('-o')) b.problem('patch writes the files its diff names, which the gate cannot see'); },
    cwd: { options: ['-d'], what: '-d works in', access: 'read' },
  }),
  dd,
  simpleSpec('mktemp', `-d|--directory -u|--dry-run -q|--quiet -p=any --tmpdir?any -t --suffix=any ${HV}`, 'any*'),
  compressor(['gzip', 'gunzip', 'bzip2', 'bunzip2', 'xz', 'unxz', 'zstd', 'unzstd', 'lzma']),
  tar,
  unzip,
];
