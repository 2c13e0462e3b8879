"""corral-fs: the file tools' and the workspace export's hands inside the sandbox.

Installed as /usr/local/lib/corral/corral_fs.py, byte-compiled when the image is built, and run by
the /usr/local/bin/corral-fs launcher (a script run directly would be compiled again on every call).

Every path is walked from an fd of /workspace one component at a time with O_NOFOLLOW (openat with
dir_fd), so no symlink is followed at any component, whatever the agent swaps in meanwhile: a
directory fd, once open, is an inode on the workspace filesystem, and everything done through it
stays there. Files are opened O_NONBLOCK and refused unless fstat says they are regular, so a fifo,
socket or device never blocks. Writes go to a fresh name in the same directory (O_CREAT|O_EXCL) and
are renamed over the target with directory fds; an existing symlink, fifo or directory at the target
is refused before anything is written.

    corral-fs read REL MAXBYTES               stdout: "<size> <sha256 or ->\\n" then at most MAXBYTES bytes
    corral-fs write REL [--expect SHA|absent] content on stdin; parent directories are created
    corral-fs remove REL [--expect SHA]       unlinks a regular file
    corral-fs list REL MAXENTRIES             stdout: "<type>\\t<size>\\t<path>\\0" records (.git is not descended)
    corral-fs export MAXFILE MAXTOTAL MAXENTRIES
        stdout: an uncompressed PAX tar of /workspace, sorted by path bytes, regular files and
        directories only (hard links as content), apparent sizes checked before any byte is read;
        a first entry named "\\x01corral-export-manifest" and a last one "\\x01corral-export-trailer"
        (JSON) list what was left out and why.

Exit status: 0 ok, 90 refused (symlink, bad path), 91 missing, 92 wrong type, 93 the file changed
(--expect failed), 94 no space left, 2 usage, 1 anything else. The message is one line on stderr.
The host checks everything it receives again; this helper only keeps honest runs fast and exact.
"""
import errno
import os
import stat
import sys

try:  # the builtin module imports in a fraction of hashlib's time (OpenSSL); every call pays the import
    from _sha256 import sha256
except ImportError:
    from hashlib import sha256
# json and tarfile are imported by the calls that need them (startup time is most of a call's cost).

ROOT = '/workspace'
REFUSED, MISSING, WRONG_TYPE, CONFLICT, NOSPACE = 90, 91, 92, 93, 94
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
CHUNK = 1 << 20
# Characters a name may not contain (the host refuses the same set, src/sandbox/export-names.ts):
# C0 controls, DEL, C1 controls, line/paragraph separators, bidi marks, embeddings and isolates.
BAD_CHARS = set(range(0x00, 0x20)) | {0x7F} | set(range(0x80, 0xA0)) | {0x2028, 0x2029, 0x200E, 0x200F, 0x061C} \
    | set(range(0x202A, 0x202F)) | set(range(0x2066, 0x206A))


_root_dev = None


def root_dev():
    """st_dev of the workspace filesystem: every directory and file used must be on it."""
    global _root_dev
    if _root_dev is None:
        _root_dev = os.stat(ROOT).st_dev
    return _root_dev


def verified(dfd, name, fd, want):
    """Checks that `fd`, just opened as `name` in dfd, is that entry itself and not what a link
    points to: same device and inode as lstat(name), of type `want`, on the workspace filesystem.
    (Needed: gVisor 2022's openat follows a final symlink under O_DIRECTORY|O_NOFOLLOW.) Raises
    OSError(ELOOP) otherwise, which the callers turn into a refusal or a conflict."""
    try:
        st = os.fstat(fd)
        lst = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        os.close(fd)
        raise
    if st.st_dev != root_dev() or (lst.st_dev, lst.st_ino) != (st.st_dev, st.st_ino) or not want(lst.st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, 'not the entry that was opened')
    return fd


def open_dir_at(dfd, name):
    """A verified fd of the subdirectory `name` of dfd, never through a symlink."""
    return verified(dfd, name, os.open(name, DIR_FLAGS, dir_fd=dfd), stat.S_ISDIR)


class Fail(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def kind_of(mode):
    if stat.S_ISREG(mode):
        return 'a regular file'
    if stat.S_ISDIR(mode):
        return 'a directory'
    if stat.S_ISLNK(mode):
        return 'a symbolic link'
    if stat.S_ISFIFO(mode):
        return 'a fifo (named pipe)'
    if stat.S_ISSOCK(mode):
        return 'a socket'
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return 'a device'
    return 'a special file'


def shown(rel):
    if not any(ord(c) in BAD_CHARS for c in rel):
        return rel
    import json
    return json.dumps(rel, ensure_ascii=False)


def split(rel):
    parts = rel.split('/')
    if rel == '' or rel.startswith('/') or any(p in ('', '.', '..') for p in parts) or '\0' in rel:
        raise Fail(REFUSED, 'path refused: %s is not a plain path relative to %s' % (shown(rel), ROOT))
    return parts


# Errors that, once the path was walked, mean another process renamed or removed part of it meanwhile.
RACED = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENOTEMPTY, errno.EISDIR)


def os_fail(err, rel, what):
    if err.errno in (errno.ENOSPC, errno.EDQUOT):
        return Fail(NOSPACE, '%s %s: no space left on device (the workspace is full)' % (what, shown(rel)))
    if err.errno in RACED:
        return Fail(CONFLICT, '%s %s: part of the path changed meanwhile (%s; another process in the sandbox is '
                    'renaming or removing it)' % (what, shown(rel), err.strerror))
    return Fail(1, '%s %s failed: %s' % (what, shown(rel), err.strerror))


def refuse_link(dfd, name, rel, shown_part, wanted=None):
    """Called when opening `name` without following failed: says what it is instead. `wanted` is
    the type test the open needed; if `name` passes it now, it was swapped while it was opened."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        raise Fail(MISSING, 'no such file or directory: %s' % shown(rel))
    if wanted is not None and wanted(st.st_mode):
        raise Fail(CONFLICT, '%s changed while it was opened (another process in the sandbox is swapping it)' % shown(shown_part))
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(name, dir_fd=dfd)
        except OSError:
            target = '?'
        raise Fail(REFUSED, 'path refused: %s is a symbolic link (to %s); file tools do not follow symlinks, '
                   'use the path it points to' % (shown(shown_part), shown(target)))
    raise Fail(WRONG_TYPE, 'not usable: %s is %s' % (shown(shown_part), kind_of(st.st_mode)))


def open_dirs(parts, rel, create=False):
    """An fd of the directory parts[0]/…/parts[-1] under /workspace, walked without following links."""
    fd = os.open(ROOT, DIR_FLAGS)
    for i, name in enumerate(parts):
        here = '/'.join(parts[:i + 1])
        try:
            nfd = open_dir_at(fd, name)
        except FileNotFoundError:
            if not create:
                os.close(fd)
                raise Fail(MISSING, 'no such file or directory: %s (%s does not exist)' % (shown(rel), shown(here)))
            try:
                os.mkdir(name, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            except OSError as e:
                os.close(fd)
                raise os_fail(e, rel, 'mkdir for')
            try:
                nfd = open_dir_at(fd, name)
            except OSError:
                try:
                    refuse_link(fd, name, rel, here, stat.S_ISDIR)
                finally:
                    os.close(fd)
                raise
        except OSError as e:
            if e.errno in (errno.ENOTDIR, errno.ELOOP):
                try:
                    refuse_link(fd, name, rel, here, stat.S_ISDIR)
                finally:
                    os.close(fd)
            os.close(fd)
            raise os_fail(e, rel, 'open')
        os.close(fd)
        fd = nfd
    return fd


def open_regular(dfd, name, rel):
    """An fd of the regular file `name` in dfd, opened without following a link or blocking."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dfd)
    except FileNotFoundError:
        raise Fail(MISSING, 'no such file: %s' % shown(rel))
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.ENOTDIR):
            refuse_link(dfd, name, rel, rel, stat.S_ISREG if e.errno == errno.ELOOP else None)
        raise os_fail(e, rel, 'open')
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise Fail(WRONG_TYPE, 'not a regular file: %s is %s' % (shown(rel), kind_of(st.st_mode)))
    try:
        verified(dfd, name, fd, stat.S_ISREG)
    except FileNotFoundError:
        raise Fail(CONFLICT, '%s was removed while it was opened (by another process in the sandbox)' % shown(rel))
    except OSError:
        refuse_link(dfd, name, rel, rel, stat.S_ISREG)
        raise Fail(CONFLICT, '%s changed while it was opened (another process in the sandbox is swapping it)' % shown(rel))
    return fd, st


def read_all(fd, limit):
    out = []
    n = 0
    while n < limit:
        b = os.read(fd, min(CHUNK, limit - n))
        if not b:
            break
        out.append(b)
        n += len(b)
    return b''.join(out)


def sha_of(fd):
    h = sha256()
    os.lseek(fd, 0, os.SEEK_SET)
    while True:
        b = os.read(fd, CHUNK)
        if not b:
            return h.hexdigest()
        h.update(b)


def cmd_read(rel, maxbytes):
    parts = split(rel)
    dfd = open_dirs(parts[:-1], rel)
    fd, st = open_regular(dfd, parts[-1], rel)
    data = read_all(fd, maxbytes + 1)
    whole = len(data) <= maxbytes
    data = data[:maxbytes]
    digest = sha256(data).hexdigest() if whole else '-'
    size = max(st.st_size, len(data))
    sys.stdout.buffer.write(b'%d %s\n' % (size, digest.encode()))
    sys.stdout.buffer.write(data)


def check_expect(dfd, name, rel, expect):
    """Refuses unless the target is as the caller last saw it (sha256 of its content, or absent)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        if stat.S_ISLNK(st.st_mode):
            refuse_link(dfd, name, rel, rel)
        raise Fail(WRONG_TYPE, 'not a regular file: %s is %s' % (shown(rel), kind_of(st.st_mode)))
    if expect is None:
        return st
    if expect == 'absent':
        if st is not None:
            raise Fail(CONFLICT, '%s was created meanwhile (by another process in the sandbox)' % shown(rel))
        return st
    if st is None:
        raise Fail(CONFLICT, '%s was removed meanwhile (by another process in the sandbox)' % shown(rel))
    fd, _ = open_regular(dfd, name, rel)
    try:
        if sha_of(fd) != expect:
            raise Fail(CONFLICT, '%s changed since it was read (another process in the sandbox wrote it)' % shown(rel))
    finally:
        os.close(fd)
    return st


def cmd_write(rel, expect):
    parts = split(rel)
    dfd = open_dirs(parts[:-1], rel, create=True)
    name = parts[-1]
    st = check_expect(dfd, name, rel, expect)
    mode = (st.st_mode & 0o777) if st is not None else 0o644
    tmp = '.corral-tmp-%s' % os.urandom(8).hex()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
    except OSError as e:
        raise os_fail(e, rel, 'write')
    try:
        try:
            while True:
                b = sys.stdin.buffer.read(CHUNK)
                if not b:
                    break
                view = memoryview(b)
                while view:
                    view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except OSError as e:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        if e.errno == errno.EISDIR:
            raise Fail(WRONG_TYPE, 'is a directory: %s' % shown(rel))
        raise os_fail(e, rel, 'write')
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise


def cmd_remove(rel, expect):
    parts = split(rel)
    dfd = open_dirs(parts[:-1], rel)
    name = parts[-1]
    st = check_expect(dfd, name, rel, expect)
    if st is None:
        raise Fail(MISSING, 'no such file: %s' % shown(rel))
    try:
        os.unlink(name, dir_fd=dfd)
    except OSError as e:
        raise os_fail(e, rel, 'remove')


TYPE_CHARS = ((stat.S_ISREG, 'f'), (stat.S_ISDIR, 'd'), (stat.S_ISLNK, 'l'), (stat.S_ISFIFO, 'p'),
              (stat.S_ISSOCK, 's'), (stat.S_ISCHR, 'c'), (stat.S_ISBLK, 'b'))


def type_char(mode):
    for test, c in TYPE_CHARS:
        if test(mode):
            return c
    return '?'


def cmd_list(rel, maxentries):
    if rel in ('', '.'):
        fd, prefix = os.open(ROOT, DIR_FLAGS), ''
    else:
        parts = split(rel)
        fd, prefix = open_dirs(parts, rel), rel + '/'
    out = sys.stdout.buffer
    count = 0
    stack = [(fd, prefix)]
    while stack and count < maxentries:
        dfd, pre = stack.pop()
        try:
            with os.scandir(dfd) as it:
                items = sorted(it, key=lambda e: e.name, reverse=True)
        except OSError:
            items = []
        subdirs = []
        for e in reversed(items):
            if count >= maxentries:
                break
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            path = pre + e.name
            out.write(b'%s\t%d\t%s\0' % (type_char(st.st_mode).encode(), st.st_size, os.fsencode(path)))
            count += 1
            if stat.S_ISDIR(st.st_mode) and e.name != '.git':
                subdirs.append((e.name, path))
        for name, path in reversed(subdirs):
            try:
                stack.append((open_dir_at(dfd, name), path + '/'))
            except OSError:
                pass
        os.close(dfd)


def main(argv):
    try:
        op = argv[1] if len(argv) > 1 else ''
        if op == 'read' and len(argv) == 4:
            cmd_read(argv[2], int(argv[3]))
        elif op in ('write', 'remove') and len(argv) in (3, 5) and (len(argv) == 3 or argv[3] == '--expect'):
            expect = argv[4] if len(argv) == 5 else None
            (cmd_write if op == 'write' else cmd_remove)(argv[2], expect)
        elif op == 'list' and len(argv) == 4:
            cmd_list(argv[2], int(argv[3]))
        elif op == 'export' and len(argv) == 5:
            from corral_export import Exporter
            Exporter(int(argv[2]), int(argv[3]), int(argv[4])).run()
        else:
            sys.stderr.write('usage: corral-fs read|write|remove|list|export ... (see the header of this file)\n')
            return 2
        sys.stdout.flush()
        return 0
    except Fail as f:
        sys.stderr.write('%s\n' % f)
        return f.code
    except BrokenPipeError:
        return 1
    except OSError as e:
        sys.stderr.write('corral-fs %s: %s\n' % (argv[1] if len(argv) > 1 else '', e))
        return 94 if e.errno in (errno.ENOSPC, errno.EDQUOT) else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
