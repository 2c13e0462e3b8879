"""corral_export: `corral-fs export`, the workspace as a sorted PAX tar on stdout (see corral_fs.py).

Two passes: a listing (lstat only, through directory fds that are never symlinks) decides what is
exported — names with refused characters, links, special files and files over the apparent-size
caps are left out and recorded — then the picked entries are streamed, each file opened again
without following links and read for exactly the size its header says. A first entry
"\\x01corral-export-manifest" and a last "\\x01corral-export-trailer" (JSON) say what was left out.
The host checks the stream again (src/sandbox/workspace-export.ts).
"""
import os
import stat

from corral_fs import BAD_CHARS, CHUNK, DIR_FLAGS, ROOT, Fail, kind_of, open_dir_at, open_regular, shown

MANIFEST = '\x01corral-export-manifest'
TRAILER = '\x01corral-export-trailer'
MAX_LISTED_SKIPS = 1000


def name_problem(raw):
    """Why a name (bytes) cannot be exported, or None."""
    try:
        s = raw.decode('utf-8')
    except UnicodeDecodeError:
        return None, 'its name is not valid UTF-8'
    for c in s:
        if ord(c) in BAD_CHARS:
            return s, 'its name contains the control or bidi character U+%04X' % ord(c)
    return s, None


class Exporter:
    def __init__(self, max_file, max_total, max_entries):
        self.max_file, self.max_total, self.max_entries = max_file, max_total, max_entries
        self.out = os.fdopen(1, 'wb', buffering=CHUNK, closefd=False)
        self.skipped = []
        self.omitted = {}
        self.notes = []

    def skip(self, path, reason, code, size=None):
        if len(self.skipped) < MAX_LISTED_SKIPS:
            rec = {'path': path, 'reason': reason, 'code': code}
            if size is not None:
                rec['size'] = size
            self.skipped.append(rec)
        else:
            self.omitted[code] = self.omitted.get(code, 0) + 1

    def scan(self):
        """Lists /workspace (lstat only): (path, is_dir, st) for what will be exported, skips recorded."""
        picked = []
        total = 0
        root = os.open(ROOT, DIR_FLAGS)
        stack = [(root, '')]
        seen = 0
        while stack:
            dfd, pre = stack.pop()
            try:
                with os.scandir(dfd) as it:
                    items = sorted(it, key=lambda e: os.fsencode(e.name))
            except OSError as e:
                self.skip(pre.rstrip('/') or '.', 'its directory could not be read (%s)' % e.strerror, 'unreadable')
                items = []
            subdirs = []
            for e in items:
                raw = os.fsencode(e.name)
                text, problem = name_problem(raw)
                path = pre + (text if text is not None else raw.decode('utf-8', 'backslashreplace'))
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                is_dir = stat.S_ISDIR(st.st_mode)
                if problem:
                    self.skip(path, problem + ('; nothing inside it is exported either' if is_dir else ''), 'bad-name')
                    continue
                seen += 1
                if seen > self.max_entries:
                    self.skip(path, 'more than %d entries in the workspace' % self.max_entries, 'entry-cap')
                    continue
                if is_dir:
                    picked.append((path, True, st))
                    subdirs.append((e.name, path))
                elif stat.S_ISREG(st.st_mode):
                    if st.st_size > self.max_file:
                        self.skip(path, 'its size (%d bytes) is over the per-file cap (%d bytes)' % (st.st_size, self.max_file), 'too-large', st.st_size)
                    elif total + st.st_size > self.max_total:
                        self.skip(path, 'the export reached its total cap (%d bytes)' % self.max_total, 'total-cap', st.st_size)
                    else:
                        total += st.st_size
                        picked.append((path, False, st))
                elif stat.S_ISLNK(st.st_mode):
                    try:
                        target = os.readlink(e.name, dir_fd=dfd)
                    except OSError:
                        target = '?'
                    self.skip(path, 'a symbolic link (to %s); links are not exported' % shown(target)[:300], 'symlink')
                else:
                    self.skip(path, '%s; only regular files and directories are exported' % kind_of(st.st_mode), 'special')
            for name, path in reversed(subdirs):
                try:
                    stack.append((open_dir_at(dfd, name), path + '/'))
                except OSError as err:
                    self.skip(path, 'it could not be opened (%s)' % err.strerror, 'unreadable')
            os.close(dfd)
        picked.sort(key=lambda p: p[0].encode('utf-8'))
        return picked

    def write_json_entry(self, name, obj):
        import json
        data = json.dumps(obj, ensure_ascii=True).encode()
        import tarfile
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        ti.mode = 0o600
        self.out.write(ti.tobuf(tarfile.PAX_FORMAT, 'utf-8', 'strict'))
        self.out.write(data)
        self.out.write(b'\0' * (-len(data) % 512))

    def header(self, path, st, is_dir, size):
        import tarfile
        ti = tarfile.TarInfo(path)
        ti.type = tarfile.DIRTYPE if is_dir else tarfile.REGTYPE
        ti.mode = st.st_mode & 0o7777
        ti.mtime = max(0, int(st.st_mtime))
        ti.size = 0 if is_dir else size
        return ti.tobuf(tarfile.PAX_FORMAT, 'utf-8', 'strict')

    def run(self):
        picked = self.scan()
        self.root = os.open(ROOT, DIR_FLAGS)
        self.write_json_entry(MANIFEST, {'skipped': self.skipped, 'omitted': self.omitted})
        self.skipped = []
        self.omitted = {}
        dirs = []  # (path, fd) of the directories open along the current path
        written = 0
        for path, is_dir, st in picked:
            if is_dir:
                self.out.write(self.header(path, st, True, 0))
                continue
            parent, _, name = path.rpartition('/')
            dfd = self.enter(dirs, parent)
            if dfd is None:
                self.skip(path, 'its directory changed during the export', 'changed')
                continue
            try:
                fd, st2 = open_regular(dfd, name, path)
            except Fail as f:
                self.skip(path, 'it changed during the export (%s)' % f, 'changed')
                continue
            try:
                size = st2.st_size
                if st2.st_ino != st.st_ino:
                    self.skip(path, 'it was replaced during the export', 'changed')
                    continue
                if size > self.max_file or written + size > self.max_total:
                    self.skip(path, 'it grew past the caps during the export (%d bytes)' % size, 'changed', size)
                    continue
                self.out.write(self.header(path, st2, False, size))
                left = size
                while left > 0:
                    b = os.read(fd, min(CHUNK, left))
                    if not b:
                        self.notes.append('%s shrank while it was exported; padded with zeros' % path)
                        self.out.write(b'\0' * left)
                        break
                    self.out.write(b)
                    left -= len(b)
                self.out.write(b'\0' * (-size % 512))
                written += size
            finally:
                os.close(fd)
        self.write_json_entry(TRAILER, {'skipped': self.skipped, 'omitted': self.omitted, 'notes': self.notes[:100]})
        self.out.write(b'\0' * 1024)
        self.out.flush()

    def enter(self, dirs, parent):
        """The fd of directory `parent`, reusing the fds open along the previous file's path."""
        parts = parent.split('/') if parent else []
        keep = 0
        while keep < len(dirs) and keep < len(parts) and dirs[keep][0] == parts[keep]:
            keep += 1
        for _, fd in dirs[keep:]:
            os.close(fd)
        del dirs[keep:]
        for part in parts[keep:]:
            base = dirs[-1][1] if dirs else self.root
            try:
                nfd = open_dir_at(base, part)
            except OSError:
                return None
            dirs.append((part, nfd))
        return dirs[-1][1] if dirs else self.root
