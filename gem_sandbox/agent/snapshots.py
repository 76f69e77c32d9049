"""A sandbox's state as one tar stream, and that stream made live again in a clean sandbox.

Carried: the work dir and the tmp dir (directories, regular files, symbolic links, modes,
mtimes, ``user.*`` xattrs), every kernel's namespace (pickled inside the kernel itself by
:mod:`.kernelstate`: live objects, functions and classes defined in it, imported modules by
reference, open files reopened by name at their position) and every shell session's cwd, variables, functions, aliases and
options. Not carried, and refused rather than left behind: any other process (a run, a
spawned program, a shell's background job, a kernel's child), devices, fifos and sockets,
POSIX shared memory and message queues (the scratch dirs).

Trust: the kernels' and shells' state files are written by sandbox code and only ever read
back by sandbox code, by the restored kernel or shell as its own tenant; the agent copies
bytes and walks every directory with ``O_NOFOLLOW``, as :mod:`.files` does, so a link made by
code never sends a read or a write anywhere else. Files restored are group-owned and
group-writable, as files the host writes are (every tenant of the sandbox may change them).
"""

import errno
import io
import json
import os
import stat

from .files import _DIR_FLAGS, _walk
from .protocol import Refused
from .tenants import snapshot as process_table

MAX_SNAPSHOT_BYTES = 48 * 1024 * 1024  # the whole stream travels in one frame
STATE_TIMEOUT = 60.0  # seconds a kernel may take to pickle or unpickle its namespace
CLEAR_PATIENCE = 8.0  # seconds to empty the dirs before a restore, as a reset may take
FORMAT = 1
_SKIPPED = (".gem-home-", ".gem-snapshot-")  # the agent's own entries in the tmp dir
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC

# Run in the kernel, as expressions: the cell binds no name (see kernelstate).
KERNEL_DUMP = '__import__(%r, fromlist=["dump"]).dump(%%r)' % (__package__ + ".kernelstate")
KERNEL_LOAD = '__import__(%r, fromlist=["load"]).load(%%r)' % (__package__ + ".kernelstate")
# Every variable but bash's own and the driver's (see shells.DRIVER), by a loop whose own
# variable is the driver's kind; then functions, aliases and options. Sourced at top level.
SHELL_DUMP = (
    "{ builtin printf 'builtin cd -- %%q\\n' \"$PWD\";"
    " for __gem_v in $(builtin compgen -v); do case $__gem_v in"
    " BASH*|COMP_*|DIRSTACK|EPOCH*|EUID|FUNCNAME|GROUPS|HISTCMD|LINENO|OLDPWD|PIPESTATUS|PPID"
    "|PWD|RANDOM|SECONDS|SHELLOPTS|SHLVL|SRANDOM|UID|_|__gem_*) ;;"
    ' *) builtin declare -p "$__gem_v";; esac; done;'
    " builtin declare -f; builtin alias -p; builtin shopt -p; builtin set +o; } > %s"
)
SHELL_LOAD = "builtin source %s 2>/dev/null; builtin true"


class Snapshots:
    """Takes and restores snapshots with the agent's kernels, shells, tenants and dirs."""

    def __init__(self, kernels, shells, tenants, workspace):
        self.kernels = kernels
        self.shells = shells
        self.tenants = tenants
        self.workspace = workspace

    async def take(self):
        """``(manifest, tar stream)`` of the sandbox as it is now."""
        import tarfile

        kernels, shells = self.kernels.names(), self.shells.names()
        self._refuse_what_cannot_be_carried(kernels, shells)
        manifest = {"format": FORMAT, "kernels": kernels, "shells": shells}
        state = self._state_dir()
        try:
            for index, name in enumerate(kernels):
                await self._command(self.kernels, name, KERNEL_DUMP % _in(state, "k%d" % index))
            for index, name in enumerate(shells):
                await self._command(self.shells, name, SHELL_DUMP % _quoted(_in(state, "s%d" % index)))
            out = io.BytesIO()
            budget = _Budget()
            with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
                data = json.dumps(manifest).encode()
                _add_bytes(tar, "manifest.json", data, budget)
                _pack(tar, self.workspace.workdir, "work", budget)
                _pack(tar, self.workspace.tmpdir, "tmp", budget)
                _pack(tar, state, "state", budget)
        finally:
            await self.workspace.sweep([state])
        manifest["bytes"] = out.tell()
        return manifest, out.getvalue()

    async def restore(self, data):
        """Make ``data`` (a stream :meth:`take` made) this sandbox's state, in place of its
        files. It must have no kernel, shell or process; a restore that fails leaves it for
        the host to reset or retire."""
        import tarfile

        if self.kernels.names() or self.shells.names() or self.tenants.busy():
            raise Refused(
                "not_clean", "a snapshot is restored only into a sandbox with no kernel, shell or process"
            )
        if self.workspace.leftovers():  # e.g. a new e2b sandbox's /tmp: its files give way
            await self.workspace.clear(CLEAR_PATIENCE)
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
                manifest = _manifest(tar)
                state = self._state_dir()
                roots = {"work": self.workspace.workdir, "tmp": self.workspace.tmpdir, "state": state}
                for member in tar:
                    if member.name != "manifest.json":
                        _unpack(tar, member, roots, self.tenants.gid)
        except (tarfile.TarError, ValueError, KeyError) as exc:
            raise Refused("bad_request", "not a snapshot this agent made: %s" % exc) from None
        except OSError as exc:
            raise Refused("file_error", "restoring files failed: %s" % exc) from None
        try:
            for index, name in enumerate(manifest["kernels"]):
                await self._command(self.kernels, name, KERNEL_LOAD % _in(state, "k%d" % index))
            for index, name in enumerate(manifest["shells"]):
                await self._command(self.shells, name, SHELL_LOAD % _quoted(_in(state, "s%d" % index)))
        finally:
            await self.workspace.sweep([state])
        return manifest

    def _refuse_what_cannot_be_carried(self, kernels, shells):
        shared = [path for path in self.workspace.leftovers() if path in self.workspace.scratch]
        if shared:
            raise Refused(
                "snapshot_unsupported",
                "%s holds shared memory or message queues, which a snapshot cannot carry" % shared[0],
            )
        for kind, parts, names in (("kernel", self.kernels, kernels), ("shell session", self.shells, shells)):
            busy = [name for name in names if parts.locks[name].locked()]
            if busy:
                raise Refused(
                    "snapshot_unsupported",
                    "%s %r is running a command: a snapshot is taken between commands" % (kind, busy[0]),
                )
        sessions = [self.kernels.live[name] for name in kernels] + [self.shells.live[name] for name in shells]
        if len(self.tenants.in_use) > len(sessions):
            raise Refused(
                "snapshot_unsupported",
                "a run or spawned program is still going: a snapshot carries files, kernels and "
                "shells, not other processes",
            )
        table = process_table()
        for session in sessions:
            others = self.tenants.members(session.tenant, table) - {session.pid}
            if others:
                raise Refused(
                    "snapshot_unsupported",
                    "process %d, started by a kernel or shell, is still running: a snapshot "
                    "carries files, kernels and shells, not other processes" % min(others),
                )

    def _state_dir(self):
        path = os.path.join(self.workspace.tmpdir, ".gem-snapshot-" + os.urandom(8).hex())
        os.mkdir(path, 0o700)
        if self.tenants.gid is not None:  # every kernel and shell tenant writes its file here
            os.chown(path, -1, self.tenants.gid)
            os.chmod(path, 0o2770)
        return path

    async def _command(self, sessions, name, text):
        fields, payload = await sessions.execute(name, text, {"timeout": STATE_TIMEOUT})
        if fields["status"] != "ok":
            stderr = payload[fields["stdout_len"] :].decode("utf-8", "replace").strip()
            why = stderr.splitlines()[-1] if stderr else fields["status"]
            kind = "kernel" if sessions is self.kernels else "shell session"
            raise Refused("snapshot_unsupported", "%s %r: %s" % (kind, name, why))


class _Budget:
    left = MAX_SNAPSHOT_BYTES

    def take(self, size):
        self.left -= size
        if self.left < 0:
            raise Refused(
                "snapshot_too_large", "the snapshot passes its %d byte limit" % MAX_SNAPSHOT_BYTES
            )


def _in(directory, name):
    return os.path.join(directory, name)


def _quoted(path):
    return "'" + path.replace("'", "'\\''") + "'"


def _add_bytes(tar, name, data, budget):
    import tarfile

    budget.take(len(data) + 1024)
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _pack(tar, root, prefix, budget):
    """Everything under ``root`` into ``tar`` as ``prefix/...``, parents before children,
    walked from directory fds without following a link."""
    import tarfile

    stack = [(os.open(root, _DIR_FLAGS), prefix)]
    while stack:
        dir_fd, path = stack.pop()
        try:
            for entry in sorted(os.listdir(dir_fd)):
                if path == "tmp" and entry.startswith(_SKIPPED):
                    continue
                name = path + "/" + entry
                info = tarfile.TarInfo(name)
                st = os.stat(entry, dir_fd=dir_fd, follow_symlinks=False)
                info.mode, info.mtime = stat.S_IMODE(st.st_mode), int(st.st_mtime)
                budget.take(1024)
                if stat.S_ISDIR(st.st_mode):
                    info.type = tarfile.DIRTYPE
                    tar.addfile(info)
                    stack.append((os.open(entry, _DIR_FLAGS, dir_fd=dir_fd), name))
                elif stat.S_ISLNK(st.st_mode):
                    info.type, info.linkname = tarfile.SYMTYPE, os.readlink(entry, dir_fd=dir_fd)
                    tar.addfile(info)
                elif stat.S_ISREG(st.st_mode):
                    _pack_file(tar, dir_fd, entry, info, budget)
                else:
                    raise Refused(
                        "snapshot_unsupported", "%s is a device, fifo or socket, which a snapshot cannot carry" % name
                    )
        finally:
            os.close(dir_fd)


def _pack_file(tar, dir_fd, entry, info, budget):
    fd = os.open(entry, _FILE_FLAGS, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(budget.left + 1)
        budget.take(len(data))
        info.size = len(data)
        names = [n for n in os.listxattr(fd) if n.startswith("user.")]
        if names:
            info.pax_headers = {"SCHILY.xattr." + n: os.getxattr(fd, n).decode("utf-8", "surrogateescape") for n in names}
    finally:
        os.close(fd)
    tar.addfile(info, io.BytesIO(data))


def _manifest(tar):
    first = tar.next()
    if first is None or first.name != "manifest.json":
        raise ValueError("it does not start with a manifest")
    manifest = json.loads(tar.extractfile(first).read())
    if manifest.get("format") != FORMAT:
        raise ValueError("format %r, not %d" % (manifest.get("format"), FORMAT))
    return manifest


def _unpack(tar, member, roots, gid):
    """One member, created afresh (never over something already there) in a directory
    reached without following a link."""
    top, *parts = member.name.split("/")
    if top not in roots or not parts or any(p in ("", ".", "..") for p in parts):
        raise ValueError("member %r is outside the snapshot's dirs" % member.name)
    root_fd = os.open(roots[top], _DIR_FLAGS)
    parent = None
    try:
        parent = _walk(root_fd, parts[:-1], member.name, create=False)
        if parent is None:
            raise ValueError("member %r comes before its directory" % member.name)
        name, mode = parts[-1], member.mode | (member.mode & 0o700) >> 3
        if member.isdir() and gid is not None:
            mode |= stat.S_ISGID  # as the work dir: what code makes in it is the group's
        if member.isdir():
            os.mkdir(name, 0o700, dir_fd=parent)
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        elif member.issym():
            os.symlink(member.linkname, name, dir_fd=parent)
            return
        elif member.isfile():
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
            view = memoryview(tar.extractfile(member).read())
            while view:
                view = view[os.write(fd, view) :]
            for key, value in member.pax_headers.items():
                if key.startswith("SCHILY.xattr.user."):
                    os.setxattr(fd, key[len("SCHILY.xattr.") :], value.encode("utf-8", "surrogateescape"))
        else:
            raise ValueError("member %r is neither a file, a directory nor a link" % member.name)
        try:
            if gid is not None:
                os.fchown(fd, -1, gid)
            os.fchmod(fd, mode)
            os.utime(fd, (member.mtime, member.mtime))
        finally:
            os.close(fd)
    except FileExistsError:
        raise ValueError("member %r is there twice" % member.name) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError("member %r passes through a link" % member.name) from None
        raise
    finally:
        if parent is not None and parent != root_fd:
            os.close(parent)
        os.close(root_fd)
