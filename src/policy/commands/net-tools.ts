/**
 * Specs of network clients. Every use is `network`; on top of it curl and wget are parsed so that an
 * upload of local data (`-d @file`, `-F f=@file`, `-T`, `--post-file`) is `upload`, an output file
 * is a write and a config file a read; rsync copies locally (a destination write, `--delete`) or to
 * a host; `-e`/`--rsh`/ProxyCommand-style options name programs to run.
 */
import { simpleSpec, UseBuilder, type CommandSpec } from './command-spec';
import { literalWord } from '../shell-words';

const CURL_UPLOAD = '-d|--data|--data-ascii|--data-binary|--data-raw|--data-urlencode|--json=any -F|--form|--form-string=any -T|--upload-file=read';
const curl = simpleSpec('curl', `${CURL_UPLOAD} -o|--output=write -O|--remote-name --remote-name-all -J|--remote-header-name --output-dir=write -K|--config=read -D|--dump-header=write -c|--cookie-jar=write -b|--cookie=any --trace=write --trace-ascii=write --stderr=write --libcurl=write -w|--write-out=any -s|--silent -S|--show-error -f|--fail --fail-with-body -L|--location -I|--head -i|--include -v|--verbose -k|--insecure -X|--request=any -H|--header=any -A|--user-agent=any -e|--referer=any -u|--user=any -m|--max-time=any --connect-timeout=any --retry=any --retry-delay=any --retry-max-time=any --compressed -x|--proxy=any --noproxy=any -G|--get -#|--progress-bar --no-progress-meter -r|--range=any -C|--continue-at=any --limit-rate=any --http1.1 --http2 --tlsv1.2 --cacert=read --capath=read -E|--cert=read --key=read --netrc --netrc-file=read -n -Z|--parallel -q|--disable -h|--help -V|--version --url=any --create-dirs -z|--time-cond=any --resolve=any --interface=any -4 -6 --unix-socket=read --abstract-unix-socket=any`, 'any*', {
  effects: [['network', 'curl talks to the network']],
  check: (p, b) => {
    hostTargets(b, [...p.operands, ...p.values('--url')], 'curl');
    for (const o of p.opts) {
      if (!o.value) continue;
      if (['-d', '-F'].includes(o.name) && (o.value.dynamic || /(^|=)@/.test(o.value.value) || /(^|=)</.test(o.value.value))) {
        b.effect('upload', `curl ${o.name} ${o.value.value || '(computed)'} sends local data`);
        const m = /(?:^|=)[@<](.*)$/.exec(o.value.value);
        if (m && !o.value.dynamic) b.read(literalWord(m[1]!.split(';')[0]!));
      }
      if (o.name === '-T') b.effect('upload', 'curl -T uploads a file');
    }
  },
});
const wget = simpleSpec('wget', '-O|--output-document=write -o|--output-file=write -a|--append-output=write -P|--directory-prefix=write -q|--quiet -v|--verbose -nv|--no-verbose -c|--continue -N|--timestamping -r|--recursive -l|--level=any -np|--no-parent -nc|--no-clobber -nd|--no-directories -x|--force-directories -t|--tries=any -T|--timeout=any -U|--user-agent=any --header=any --post-data=any --post-file=read --body-file=read --body-data=any --method=any -i|--input-file=read -e|--execute=any --no-check-certificate --ca-certificate=read --user=any --password=any --spider -S|--server-response --show-progress --progress=any -h|--help -V|--version -4 -6 --limit-rate=any -k|--convert-links -m|--mirror -p|--page-requisites', 'any*', {
  abbrev: true,
  effects: [['network', 'wget talks to the network']],
  check: (p, b) => {
    hostTargets(b, p.operands, 'wget');
    if (p.has('--post-file', '--body-file')) b.effect('upload', 'wget --post-file/--body-file uploads a file');
    if (p.has('-e')) b.problem('wget -e runs wgetrc commands that are not modelled');
  },
});
/** Addresses no sandbox has business with: cloud metadata services and the Docker engine's API. */
const HOST_TARGETS = /(^|[/@])(169\.254\.\d+\.\d+|\[?fd00:ec2::254\]?|metadata\.google\.internal|metadata\.azure\.com|100\.100\.100\.200|[^/:]+:(2375|2376|10250|2379))([:/]|$)|docker\.sock/i;
function hostTargets(b: UseBuilder, words: Array<{ value: string; dynamic: boolean }>, tool: string): void {
  for (const w of words) if (!w.dynamic && HOST_TARGETS.test(w.value)) b.effect('privilege', `${tool} ${w.value} reaches a cloud metadata service or a container engine's API`);
}

const rsync = simpleSpec('rsync', '-a|--archive -v|--verbose -q|--quiet -r|--recursive -l|--links -L|--copy-links -p|--perms -t|--times -g|--group -o|--owner -D -z|--compress -u|--update -n|--dry-run -h|--human-readable -P --progress --partial -c|--checksum -R|--relative -x|--one-file-system -H|--hard-links -S|--sparse -W|--whole-file -i|--itemize-changes --stats --delete!delete --delete-after!delete --delete-before!delete --delete-during!delete --delete-excluded!delete --remove-source-files!delete --exclude=any --include=any --exclude-from=read --include-from=read --files-from=read -e|--rsh=exec --rsync-path=exec --chmod=any --chown=any --backup -b --backup-dir=write --suffix=any --info=any --mkpath --ignore-existing --existing --size-only --modify-window=any --version --help', (p, b) => {
  const ops = p.operands;
  const isRemote = (o: { value: string; dynamic: boolean }) => o.dynamic || /^[^/]*:/.test(o.value) || o.value.startsWith('rsync://');
  if (ops.some(isRemote)) b.effect('network', 'rsync copies to or from another host');
  const last = ops[ops.length - 1];
  if (last && ops.length > 1 && isRemote(last) && !last.dynamic) b.effect('upload', 'rsync sends local files to another host');
  if (p.has('--chmod') && p.values('--chmod').some((m) => m.dynamic || /s/.test(m.value))) b.effect('setuid', 'rsync --chmod may set setuid or setgid bits');
  const dest = ops[ops.length - 1];
  for (const s of ops.slice(0, -1)) b.read(s);
  if (dest && ops.length > 1) b.write(dest);
  if (p.has('--delete', '--delete-after', '--delete-before', '--delete-during', '--delete-excluded') && dest) b.path(dest, 'clear', 'rsync --delete');
});
const other = (names: string[], why: string): CommandSpec => ({ names, use: (_a, name) => new UseBuilder(name).effect('network', `${name} ${why}`).use });

/** ssh and scp: port forwards are tunnels out of the sandbox; copying local files to a host is an upload. */
const ssh: CommandSpec = {
  names: ['ssh', 'scp', 'sftp'],
  use(args, name) {
    const b = new UseBuilder(name).effect('network', `${name} connects to another host`);
    for (let i = 0; i < args.length; i++) {
      const v = args[i]!.value;
      if (/^-[a-zA-Z]*[RLDw]/.test(v) && name === 'ssh') b.effect('tunnel', `ssh ${v} forwards ports through the connection`);
      if (/^-o/.test(v) && /ProxyCommand|LocalCommand|PermitLocalCommand|RemoteForward|LocalForward|DynamicForward/i.test(v + (args[i + 1]?.value ?? ''))) b.effect('exec-hidden', `${name} -o names a command or a forward`);
    }
    if (name === 'scp') {
      const ops = args.filter((a) => !a.value.startsWith('-'));
      const last = ops[ops.length - 1];
      if (last && ops.length > 1 && (last.dynamic || /^[^/]*:/.test(last.value))) b.effect('upload', 'scp sends local files to another host');
    }
    return b.use;
  },
};

/** gh, glab: releases, gists, repository creation and secrets publish; the rest talks to the forge. */
const forge: CommandSpec = {
  names: ['gh', 'glab', 'hub'],
  use(args, name) {
    const b = new UseBuilder(name).effect('network', `${name} talks to the code forge`);
    const [a, c] = args.map((x) => x.value);
    if (['release', 'gist', 'repo', 'secret', 'variable', 'workflow', 'ssh-key', 'gpg-key', 'api', 'auth'].includes(a ?? '') && !['list', 'view', 'status'].includes(c ?? '')) b.effect('publish', `${name} ${a} ${c ?? ''} publishes or changes the forge`);
    return b.use;
  },
};

const gem: CommandSpec = {
  names: ['gem'],
  use(args, name) {
    const b = new UseBuilder(name);
    const sub = args[0]?.value;
    if (sub === 'push' || sub === 'yank' || sub === 'owner' || sub === 'signin') b.effect('publish', `gem ${sub} publishes to a registry`);
    else if (sub === 'install' || sub === 'update' || sub === 'uninstall') b.effect('install', `gem ${sub} changes installed gems`);
    else if (!['list', 'env', 'help', 'which', 'contents', 'specification', '--version', '-v'].includes(sub ?? '')) b.problem(`gem ${sub ?? ''} is not modelled`);
    return b.use;
  },
};

/** netcat and socat: a command they run for the peer is a reverse shell; listening makes a server. */
const netcat: CommandSpec = {
  names: ['nc', 'ncat', 'netcat', 'socat'],
  use(args, name) {
    const b = new UseBuilder(name).effect('network', `${name} opens network connections`);
    for (const a of args) {
      const v = a.value;
      if (a.dynamic) { b.problem(`${name}: an argument computed at run time`); continue; }
      if (/^-[a-zA-Z]*[ec]$/.test(v) || /^--(exec|sh-exec|lua-exec)\b/.test(v) || /^(exec|system):/i.test(v) || /,(exec|system)[:=]/i.test(v)) b.effect('exec-hidden', `${name} ${v} runs a program for the remote peer`);
      if (/^-[a-zA-Z]*l/.test(v) || /^--listen/.test(v) || /^(tcp|udp|tcp4|tcp6)-listen:/i.test(v)) b.effect('server', `${name} ${v} listens for connections`);
    }
    return b.use;
  },
};

export const NET_TOOL_SPECS: CommandSpec[] = [
  curl, wget, rsync, netcat, ssh, forge, gem,
  other(['ftp', 'telnet', 'aria2c', 'http', 'https', 'httpie', 'xh', 'dig', 'nslookup', 'host', 'ping', 'traceroute', 'openssl', 'kubectl', 'helm', 'docker', 'podman'], 'talks to the network or to remote services'),
];
